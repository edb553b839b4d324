"""Part B of experiment ``shattering`` (reported, secondary): ROME on SmolLM2-135M's "The month after {M} is"
facts, edits to months d further on; month-ring Spearman, R(D*) over the 12 months (weekdays as an unedited
control structure) and country-capital retention. ``cfg`` is :class:`trustlab.experiments.shattering.Config`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from trustlab.experiments.base import RunContext
from trustlab.results.result import Result

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
CAPITALS = (("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"),
            ("Japan", "Tokyo"), ("Russia", "Moscow"), ("England", "London"), ("Egypt", "Cairo"),
            ("Greece", "Athens"), ("China", "Beijing"), ("Austria", "Vienna"), ("Ireland", "Dublin"),
            ("Portugal", "Lisbon"), ("Norway", "Oslo"), ("Poland", "Warsaw"), ("Hungary", "Budapest"),
            ("Cuba", "Havana"), ("Peru", "Lima"), ("Kenya", "Nairobi"), ("Thailand", "Bangkok"),
            ("Sweden", "Stockholm"), ("Denmark", "Copenhagen"), ("Finland", "Helsinki"), ("Canada", "Ottawa"),
            ("Turkey", "Ankara"), ("Iran", "Tehran"), ("Iraq", "Baghdad"), ("Belgium", "Brussels"),
            ("Argentina", "Buenos"), ("India", "New"))
_V_PREFIXES = ("{}", "Because of this, {}", "I think {}", "Here is a fact: {}", "You know, {}")
#: contexts the month (weekday) representations are read in, averaged; never a bare "{}", which would put the
#: name at the first token (issue 40: the attention sink; extract_representations refuses it)
_REP_TEMPLATES = ("In {}", "The month of {}", "It happened in {}")
_TWO_SHOT = "The month after January is February. The month after July is August. The month after {} is"


class NoEdit:
    """The knockout's stand-in for an edit handle (``edit=False``): nothing is written, nothing to restore."""

    class _Info:
        wall_time_s, target_prob, update_norm = 0.0, float("nan"), 0.0

    info = _Info()

    def restore(self) -> None:
        return None



def _month_reps(model: Any, tok: Any, names: tuple[str, ...], layers: tuple[int, ...]) -> dict[int, np.ndarray]:
    from trustlab.methods import shattering as sh

    seqs, pos = [], []
    for n in names:
        for t in _REP_TEMPLATES:
            req = sh.text_request(tok, [t], n, "is")
            seqs.append(req.prompts[0])
            pos.append(req.key_positions[0])
    return {layer: sh.extract_representations(model, seqs, site=f"blocks.{layer}.resid_post", positions=pos,
                                              n_contexts=len(_REP_TEMPLATES)) for layer in layers}


def _next_logprobs(model: Any, tok: Any, prompts: list[str], targets: list[str]) -> np.ndarray:
    import torch

    from trustlab.methods.shattering._requests import padded

    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    tgt = [tok(" " + t, add_special_tokens=False)["input_ids"][0] for t in targets]
    i, m, pid = padded(ids)
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=i, attention_mask=m, position_ids=pid).logits[:, -1].float(), -1)
    return lp, np.array([float(lp[j, t]) for j, t in enumerate(tgt)])


def _capitals_ok(model: Any, tok: Any) -> np.ndarray:
    lp, _ = _next_logprobs(model, tok, [f"The capital of {c} is" for c, _ in CAPITALS], [a for _, a in CAPITALS])
    first = [tok(" " + a, add_special_tokens=False)["input_ids"][0] for _, a in CAPITALS]
    return (lp.argmax(-1).numpy() == np.array(first)).astype(float)


def _month_state(model: Any, tok: Any, cfg: Any) -> dict[str, Any]:
    succ = [MONTHS[(i + 1) % 12] for i in range(12)]
    _, lp = _next_logprobs(model, tok, [_TWO_SHOT.format(m) for m in MONTHS], succ)
    return {"reps": _month_reps(model, tok, MONTHS, cfg.llm_rep_layers),
            "week": _month_reps(model, tok, WEEKDAYS, cfg.llm_rep_layers[-1:]), "succ_lp": lp,
            "capitals": _capitals_ok(model, tok)}


def months(cfg: Any, ctx: RunContext, res: Result) -> None:
    from trustlab.llm import load_model
    from trustlab.methods import shattering as sh

    with ctx.untimed("load SmolLM2"):
        model, tok = load_model(cfg.llm_model)
    cyc = np.array([[min(abs(i - j), 12 - abs(i - j)) for j in range(12)] for i in range(12)])
    s0 = _month_state(model, tok, cfg)
    top = cfg.llm_rep_layers[-1]
    out: dict[str, Any] = {"ring_before": {str(L): sh.ring_spearman(s0["reps"][L], cyc) for L in cfg.llm_rep_layers},
                           "succ_lp_before": float(s0["succ_lp"].mean()),
                           "capitals_before": float(s0["capitals"].mean()), "edits": []}
    editor = sh.ROME(layer=cfg.llm_layer, mom2_adjustment=False, v_steps=cfg.llm_v_steps)
    plan = [(m, d) for m in cfg.llm_sources for d in cfg.llm_distances]
    for m, d in ctx.progress(plan, desc="month edits"):
        i = MONTHS.index(m)
        old, new = MONTHS[(i + 1) % 12], MONTHS[(i + 1 + d) % 12]
        req = sh.text_request(tok, [p.format("The month after {} is") for p in _V_PREFIXES], m, new,
                              kl_prompts=["{} is a"], current=old)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            handle = editor.apply(model, req) if cfg.edit else NoEdit()
        try:
            s1 = _month_state(model, tok, cfg)
            lp2, _ = _next_logprobs(model, tok, [_TWO_SHOT.format(m), f"Next month after {m} comes"], [new, new])
        finally:
            handle.restore()
        ids = [tok(" " + w, add_special_tokens=False)["input_ids"][0] for w in (new, old)]
        others = np.arange(12) != i
        row = {"source": m, "d": d, "new": new, "wall_s": handle.info.wall_time_s,
               "p_new": float(lp2[0, ids[0]].exp()), "p_old": float(lp2[0, ids[1]].exp()),
               "efficacy": bool(lp2[0, ids[0]] > lp2[0, ids[1]]), "paraphrase": bool(lp2[1, ids[0]] > lp2[1, ids[1]]),
               "R": {str(L): sh.shattering(s0["reps"][L], s1["reps"][L]) for L in cfg.llm_rep_layers},
               "R_weekdays": sh.shattering(s0["week"][top], s1["week"][top]),
               "ring_after": {str(L): sh.ring_spearman(s1["reps"][L], cyc) for L in cfg.llm_rep_layers},
               "succ_lp_change_others": float((s1["succ_lp"] - s0["succ_lp"])[others].mean()),
               "capitals_retained": float((s1["capitals"] * s0["capitals"]).sum() / max(s0["capitals"].sum(), 1))}
        if d == max(cfg.llm_distances) and "example" not in out:
            out["example"] = {"reps_after": s1["reps"][top].tolist(), "edit": [m, new, d]}
        out["edits"].append(row)
        res.add(method="ROME", dataset="smollm2_months", seed=cfg.seeds[0], metric="R", value=row["R"][str(top)], d=d,
                edit=len(out["edits"]) - 1)
        ctx.check_budget(f"month edit {m}+{d}")
    out["reps_before"] = s0["reps"][top].tolist()
    res.summary["months"] = out
