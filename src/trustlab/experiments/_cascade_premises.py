"""Premises of experiment ``cascade``: the estimates' per-query signal, the pool's spread, and the KNOCKOUT's
uninformative estimates (each model's mean estimate for every query)."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.experiments.base import CheckResult
from trustlab.results.result import Result


def _flatten(est: Any) -> Any:
    """The KNOCKOUT's estimates: every query gets each model's mean estimate (per run-set), truth unchanged."""
    from dataclasses import replace

    def flat(a: np.ndarray, axis: int) -> np.ndarray:
        return np.broadcast_to(a.mean(axis=axis, keepdims=True), a.shape).copy()

    if est.mean is not None:
        return replace(est, mean=flat(est.mean, 1))
    return replace(est, ante=flat(est.ante, 0), post=flat(est.post, 0))


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    return 0.0 if a.std() < 1e-12 or b.std() < 1e-12 else float(np.corrcoef(a, b)[0, 1])


def _mechanism_stats(e_test: Any) -> dict[str, float]:
    """Signal of the estimates and the pool's spread on the test rows.

    ``signal``: mean over models j of corr(j's quality estimate once j ran, j's true quality) -- the post-hoc
    estimate every cascade decides on (the classifier pool's ex-ante estimate is a per-model constant, so it
    carries no per-query signal by design); ``signal_ante``: the same with the ex-ante estimates (what routing
    uses); 0 for a constant estimate. ``oracle_gain``: the per-query best model's mean quality minus the best
    single model's, x100."""
    q = e_test.quality
    ante = e_test.mean_for(0)
    post = [_corr(e_test.mean_for(1 << j)[:, j], q[:, j]) for j in range(q.shape[1]) if e_test.has_set(1 << j)]
    return {"signal": float(np.mean(post)) if post else 0.0,
            "signal_ante": float(np.mean([_corr(ante[:, j], q[:, j]) for j in range(q.shape[1])])),
            "oracle_gain": float(100 * (q.max(axis=1).mean() - q.mean(axis=0).max()))}


#: pre-registered premise thresholds (docs/papers/cascade.md, "Premises, knockout and quick gate"): a correlation
#: of 0.3 is a weak but clearly non-zero signal (a constant or random estimate gives 0); an oracle gain of 2 points
#: is the least room for a per-query policy to beat the best single model
PRE_SIGNAL, PRE_ORACLE = 0.3, 2.0


def _mech(result: Result, bench: str) -> dict[str, float] | None:
    if bench in ("B1", "B1T"):
        e = result.summary.get("b1" if bench == "B1" else "b1t", {}).get("5-low")
        return None if e is None or "signal" not in e else e
    rows = result.summary.get("mechanism", {}).get(bench)
    return None if not rows else {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}


def _check_signal(bench: str) -> Any:
    def check(result: Result) -> CheckResult:
        m = _mech(result, bench)
        if m is None:
            return CheckResult(None, None, f">= {PRE_SIGNAL:g}")
        return CheckResult(m["signal"] >= PRE_SIGNAL, round(m["signal"], 3), f">= {PRE_SIGNAL:g}", baseline=0.0,
                           detail="mean over models of Pearson corr(a model's estimate once it ran, its true quality), "
                                  f"test rows; ex-ante estimates: {m.get('signal_ante', float('nan')):.3f}")

    return check


def _check_pool(bench: str) -> Any:
    def check(result: Result) -> CheckResult:
        m = _mech(result, bench)
        if m is None:
            return CheckResult(None, None, f">= {PRE_ORACLE:g}", unit="points")
        return CheckResult(m["oracle_gain"] >= PRE_ORACLE, round(m["oracle_gain"], 2), f">= {PRE_ORACLE:g}",
                           unit="points", detail="per-query oracle mean quality - best single model's (x100)")

    return check
