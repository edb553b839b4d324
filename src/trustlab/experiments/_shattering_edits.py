"""shattering's synthetic edits as executor tasks (issue 46): one planned edit with every editor, measured and
restored (a task of ``RunContext.map``; the model, evaluator and covariance travel once per map)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from trustlab.experiments._shattering_months import NoEdit
from trustlab.results.result import Result

__all__ = ["edit_job"]


def edit_job(cfg: Any, ev: Any, base: dict[str, np.ndarray], reps0: np.ndarray, stats: Any, seed: int,
             item: tuple[int, tuple[int, int, int, int]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                                   list[dict[str, Any]], dict[str, Any] | None]:
    """One planned edit with every editor, each restored after it is measured (a task of ``ctx.map``): the rows,
    the records, the refused edits, and the ring example (a ROME edit at the largest distance) or None."""
    from trustlab.core.exceptions import TrustlabError
    from trustlab.experiments.shattering import _editors
    from trustlab.methods import shattering as sh

    ei, (x, r, new, d) = item
    kg, model = ev.kg, ev.model
    res = Result("shattering", "", {})
    rows: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    example = None
    req = sh.kg_request(kg, x, r, new, key=cfg.key, context_hops=cfg.context_hops, n_contexts=cfg.n_contexts,
                        random_state=seed)
    for name, editor in _editors(cfg).items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                handle = editor.apply(model, req, stats=stats) if cfg.edit else NoEdit()
        except TrustlabError as exc:  # a refused edit (e.g. AlphaEdit's key in the preserved span) is recorded
            refused.append({"method": name, "edit": ei, "error": str(exc)})
            continue
        try:
            row = _measure(ev, base, reps0, x, r, new, d, name, ei, handle.info)
            if name == "ROME" and d == max(cfg.distances) and example is None:
                example = {"reps_after": ev.reps().tolist(), "edit": [x, kg.relation_names[r], new, d]}
        finally:
            handle.restore()
        rows.append(row)
        for metric in ("R", "efficacy", "drop_other", "drop_I", "drop_II", "drop_III"):
            res.add(method=name, dataset="cyclic_kg", seed=seed, metric=metric, value=row[metric], d=d, edit=ei)
    return rows, res.records, refused, example


def _measure(ev: Any, base: dict[str, np.ndarray], reps0: np.ndarray, x: int, r: int, new: int, d: int,
             name: str, ei: int, info: Any) -> dict[str, Any]:
    from trustlab.methods import shattering as sh

    after = ev.correct()
    f = np.array([[x, r, new]])
    q = sh.query_tokens(ev.kg, f, **ev.kw)
    eff = float(sh.fact_accuracy(ev.model, ev.kg, f, tokens=q, **ev.kw).correct.mean())
    row: dict[str, Any] = {"method": name, "edit": ei, "d": d, "subject": x, "relation": r, "new": new,
                           "efficacy": eff, "R": sh.shattering(reps0, ev.reps()),
                           "target_prob": info.target_prob, "update_norm": info.update_norm}
    other = {s: ev.facts[s][:, 0] != x for s in ev.facts}
    drop_all = np.concatenate([(base[s] - after[s])[other[s]] for s in ev.facts])
    row["drop_other"] = float(drop_all.mean())
    for o, tag in enumerate(("I", "II", "III")):
        parts = [(base[s] - after[s])[other[s] & (ev.order[s] == o)] for s in ev.facts]
        row[f"drop_{tag}"] = float(np.concatenate(parts).mean())
    row["drop_logical"] = float((base["heldout"] - after["heldout"])[other["heldout"]].mean()) \
        if other["heldout"].any() else float("nan")
    return row


# -- claims ------------------------------------------------------------------------------------------------
