"""Audit soundness: refit every interval-endpoint trial of an X-hacking report from its stored configuration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import InstanceOf, Interval
from trustlab.methods.xhacking._problem import EvalSettings, SearchContext
from trustlab.methods.xhacking._report import XHackingReport
from trustlab.methods.xhacking._space import spec_hash

__all__ = ["verify_report", "SoundnessCheck"]


@dataclass(frozen=True)
class SoundnessCheck:
    """What :func:`verify_report` found: ``ok`` (no problem and every endpoint defensible), ``n_endpoints``
    refitted, the largest difference between stored and recomputed score/shares, ``all_defensible`` and
    the list of ``problems``."""

    ok: bool
    n_endpoints: int
    max_abs_diff: float
    all_defensible: bool
    problems: list[str] = field(default_factory=list)


def _example_report() -> dict[str, Any]:
    rep = XHackingReport(features=[], reference={}, eps=0.01, score_floor=0.0, top_k=3, negligible=0.01, n_trials=0,
                         n_defensible=0, trials=[], spec={}, spec_hash="")
    return {"report": rep}


@validate_args(_example=_example_report, report=[InstanceOf(XHackingReport)], X=[ArrayLike(ndim=2)],
               y=[ArrayLike(ndim=1, dtype="any")], tol=[Interval(float, 0, None)])
def verify_report(report: XHackingReport, X: Any, y: Any, *, tol: float = 1e-6) -> SoundnessCheck:
    """Audit soundness: refit every interval-endpoint trial from its stored configuration.

    Checks that each endpoint trial is in the log, is defensible, attains the reported value, and that
    recomputing it from scratch (fresh split, fresh fit, fresh explainer) on ``(X, y)`` reproduces its
    score and shares to within ``tol``. A report whose specification does not match its hash fails.
    """
    if report.spec_hash != spec_hash(report.spec):
        return SoundnessCheck(False, 0, float("inf"), False, ["the stored specification does not match its hash"])
    s = report.spec["settings"]
    names = report.spec["feature_names"]
    ctx = SearchContext(X, y, EvalSettings(**s), feature_names=names, reference=report.spec["reference"],
                        owner="verify_report")
    by_number = {t["number"]: t for t in report.trials}
    problems: list[str] = []
    max_diff, all_def, n = 0.0, True, 0
    for f in report.features:
        for attr, value, kind in (("argmin_share_trial", f.min_share, "share"), ("argmax_share_trial", f.max_share, "share"),
                                  ("best_rank_trial", f.min_rank, "rank"), ("worst_rank_trial", f.max_rank, "rank")):
            n += 1
            t = by_number.get(getattr(f, attr))
            if t is None:
                problems.append(f"{f.name}: {attr} not in the log")
                continue
            all_def &= bool(t["defensible"] and t["score"] >= report.score_floor)
            if t[kind][f.index] != value:
                problems.append(f"{f.name}: trial {t['number']} does not attain the reported {kind}")
            fresh = ctx.evaluate(t["config"])
            diff = max(abs(fresh["score"] - t["score"]), float(np.max(np.abs(np.subtract(fresh["share"], t["share"])))))
            max_diff = max(max_diff, diff)
            if diff > tol:
                problems.append(f"{f.name}: trial {t['number']} recomputes with difference {diff:.2e}")
    return SoundnessCheck(ok=not problems and all_def, n_endpoints=n, max_abs_diff=float(max_diff),
                          all_defensible=bool(all_def), problems=problems)
