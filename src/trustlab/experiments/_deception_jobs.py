"""Executor tasks of experiment ``deception`` (issue 46): one probe layer of the sweep, one shuffled-label probe.

They read activations the driver extracted (one layer's slice travels with each task), never the model, and
do not touch the run context; the driver adds what they return in item order, as the serial loops did.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.results.result import Result

#: the activation sets a layer task fits on or scores
LAYER_SETS = ("train", "val", "test", "roleplay", "sandbagging", "mistake", "sandbag_deceptive", "control")


def at_layer(acts: Any, layer: int) -> Any:
    """``acts`` with only ``layer``'s activations (what one task needs; the other layers stay on the driver)."""
    from trustlab.methods.deception import DialogueActivations

    return DialogueActivations({layer: acts.acts[layer]}, acts.dialogue, acts.labels, acts.meta)


def layer_items(layers: Any, data: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """One item per sweep layer: the layer and its slice of every set in :data:`LAYER_SETS`."""
    return [(int(la), {k: at_layer(data[k], la) for k in LAYER_SETS}) for la in layers]


def _ab(s: np.ndarray, labels: Any) -> float:
    from trustlab.methods.deception import auroc, label_masks

    h, d = label_masks(labels)
    return auroc(s[h], s[d])


def layer_job(reg_coeff: float, y: np.ndarray, seed: int, item: tuple[int, dict[str, Any]]) -> tuple[list, Any]:
    """One layer: an LR probe fitted on the training pairs (labels ``y``), its validation separation and its
    AUROCs; returns the records (in the serial loop's order) and the fitted probe (a direction and a scaler)."""
    from trustlab.methods.deception import DeceptionProbe, auroc

    layer, d = item
    res = Result("deception", "", {})
    val = d["val"]
    p = DeceptionProbe(layer=layer, reg_coeff=reg_coeff).fit(d["train"], y)
    sv, lv = p.score_samples(val), np.asarray(val.labels)
    gap = (sv[lv == "deceptive"].mean() - sv[lv == "honest"].mean()) / (sv.std() + 1e-12)
    res.add(method="lr", dataset="val", seed=seed, layer=int(layer), metric="separation", value=float(gap))
    rp_dec = d["roleplay"].with_labels("deceptive")
    row = {"val": _ab(sv, lv), "instructed_test": _ab(p.score_samples(d["test"]), d["test"].labels),
           "roleplay": _ab(p.score_samples(d["roleplay"]), d["roleplay"].labels),
           "sandbagging": _ab(p.score_samples(d["sandbagging"]), d["sandbagging"].labels),
           "sandbag_vs_mistake": auroc(p.score_samples(d["mistake"]), p.score_samples(d["sandbag_deceptive"])),
           "roleplay_vs_control": auroc(p.score_samples(d["control"]), p.score_samples(rp_dec))}
    for ds, v in row.items():
        res.add(method="lr", dataset=ds, seed=seed, layer=int(layer), metric="auroc", value=v)
    return res.records, p


def shuffle_job(train: Any, held: Any, seed: int, layer: int, reg_coeff: float, s: int) -> float:
    """Shuffled-label probe ``s`` (labels permuted with seed ``seed * 1000 + s``): its held-out AUROC."""
    from trustlab.methods.deception import shuffled_label_probe

    p = shuffled_label_probe(train, train.labels, random_state=seed * 1000 + s, layer=layer, reg_coeff=reg_coeff)
    return _ab(p.score_samples(held), held.labels)
