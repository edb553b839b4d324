"""The signature experiment: topological-contrastive losses as a function of the adversarial proportion.

For each proportion p of a grid, ``n_batches`` batches of ``batch_size`` pairs are drawn; a fraction p of
each batch's images is replaced by adversarial versions, each image paired with the text embedding of its
*predicted* class. :func:`signature_sweep` averages every loss of :func:`topo_losses` per p and reports the
Spearman correlation of p with each mean loss (the paper: monotone change).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import Boolean, Interval, Options
from trustlab.core.exceptions import InputError
from trustlab.core.seeding import check_random_state
from trustlab.methods.topodetect._persistence import TopoLosses, topo_losses

__all__ = ["SignatureSweep", "signature_sweep"]

MEASURES = tuple(f.name for f in fields(TopoLosses))


@dataclass(frozen=True)
class SignatureSweep:
    """Mean loss per proportion (``means[measure]`` aligned with ``proportions``), per-batch values and the
    Spearman rho of proportion vs mean loss per measure."""

    proportions: tuple[float, ...]
    means: dict[str, tuple[float, ...]]
    values: dict[str, np.ndarray]
    spearman: dict[str, float]


def _sweep_example() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    z = rng.normal(size=(12, 3))
    return {"clean_image": z, "clean_text": z, "adv_image": z + 1, "adv_text": z, "batch_size": 6, "n_batches": 1,
            "h1": False}


@validate_args(_sweep_example, clean_image=[ArrayLike(ndim=2)], clean_text=[ArrayLike(ndim=2)],
               adv_image=[ArrayLike(ndim=2)], adv_text=[ArrayLike(ndim=2)],
               proportions=[SequenceOf(Interval(float, 0, 1), min_len=3)], n_batches=[Interval(int, 1, None)],
               batch_size=[Interval(int, 4, None)], view=[Options(("embedding", "logits"))],
               alpha=[Interval(float, 0, None, closed="neither")], sigmas=[SequenceOf(Interval(float, 0, None,
                                                                                             closed="neither"))],
               h1=[Boolean()], random_state=["random_state"])
def signature_sweep(clean_image: Any, clean_text: Any, adv_image: Any, adv_text: Any,
                    proportions: Sequence[float] = tuple(np.round(np.linspace(0, 1, 11), 2)), *, n_batches: int = 20,
                    batch_size: int = 64, view: str = "embedding", alpha: float = 1.0,
                    sigmas: Sequence[float] = (1e-3, 1e-2, 1e-1), h1: bool = True, random_state: Any = None
                    ) -> SignatureSweep:
    """Losses vs adversarial proportion. Row i of ``adv_image`` is the adversarial version of row i of
    ``clean_image``; ``clean_text``/``adv_text`` are the text embeddings of each image's predicted class."""
    from scipy.stats import spearmanr

    ci, ct, ai, at = (np.asarray(a, dtype=np.float64) for a in (clean_image, clean_text, adv_image, adv_text))
    n = len(ci)
    if not (len(ct) == len(ai) == len(at) == n) or ai.shape[1] != ci.shape[1] or at.shape[1] != ct.shape[1]:
        raise InputError(f"The clean/adversarial image and text arguments of signature_sweep must be aligned: "
                         f"{n} rows each, images {ci.shape[1]}-d, texts {ct.shape[1]}-d. Got {ct.shape}, "
                         f"{ai.shape}, {at.shape} instead.")
    if batch_size > n:
        raise InputError(f"The 'batch_size' argument of signature_sweep must be <= the number of pairs ({n}). Got "
                         f"{batch_size} instead.")
    rng = check_random_state(random_state, owner="signature_sweep")
    vals: dict[str, list[list[float]]] = {m: [] for m in MEASURES}
    for p in proportions:
        k = int(round(p * batch_size))
        rows: dict[str, list[float]] = {m: [] for m in MEASURES}
        for _ in range(n_batches):
            idx = rng.choice(n, batch_size, replace=False)
            adv = np.zeros(batch_size, bool)
            adv[rng.choice(batch_size, k, replace=False)] = True
            img = np.where(adv[:, None], ai[idx], ci[idx])
            txt = np.where(adv[:, None], at[idx], ct[idx])
            tl = topo_losses(img, txt, view=view, alpha=alpha, sigmas=tuple(sigmas), h1=h1)
            for m in MEASURES:
                rows[m].append(getattr(tl, m))
        for m in MEASURES:
            vals[m].append(rows[m])
    arr = {m: np.asarray(v) for m, v in vals.items()}
    means = {m: tuple(float(x) for x in a.mean(1)) for m, a in arr.items()}
    rho = {}
    for m, mu in means.items():
        r = spearmanr(list(proportions), mu).statistic if np.ptp(mu) > 0 else 0.0
        rho[m] = float(r)
    return SignatureSweep(tuple(float(p) for p in proportions), means, arr, rho)
