"""Premises of experiment ``split``: the data have signal above the majority class, and greedy is not optimal."""

from __future__ import annotations

from trustlab.experiments.base import CheckResult
from trustlab.results.result import Result

#: pre-registered premise thresholds (docs/papers/split.md, "Premises, knockout and quick gate"): 10 points above the
#: majority class is a clear signal on these sets (greedy depth-5 trees reach 85-95 %); a greedy excess of one
#: leaf's penalty (reg) is the least room a lookahead can gain
PRE_SIGNAL = 10.0


def check_pre_signal(result: Result, bundled: tuple[str, ...]) -> CheckResult:
    """The greedy tree's test accuracy above the majority class, worst bundled set."""
    per = {k: v for k, v in result.summary.get("per_dataset", {}).items() if k in bundled}
    if not per:
        return CheckResult(None, None, f">= {PRE_SIGNAL:g}", unit="points", detail="no bundled data set ran")
    gains = {k: 100 * (v["greedy"]["acc"] - v["majority_acc"]) for k, v in per.items()}
    worst = min(gains, key=gains.get)
    return CheckResult(gains[worst] >= PRE_SIGNAL, round(gains[worst], 2), f">= {PRE_SIGNAL:g}", unit="points",
                       baseline=round(100 * per[worst]["majority_acc"], 2),
                       detail="greedy tree's test accuracy - majority class: " + ", ".join(
                           f"{k} {v:+.1f}" for k, v in gains.items()))


def check_pre_greedy(result: Result, bundled: tuple[str, ...]) -> CheckResult:
    """R(greedy) - R(optimal reference), best bundled set."""
    per = {k: v for k, v in result.summary.get("per_dataset", {}).items() if k in bundled}
    ref = {k: v["GOSDT"]["R"] if "GOSDT" in v else v.get("exact (ours)", {}).get("R") for k, v in per.items()}
    ex = {k: per[k]["greedy"]["R"] - r for k, r in ref.items() if r is not None}
    lam = result.config.get("reg", 0.005)
    if not ex:
        return CheckResult(None, None, f">= {lam:g}", unit="objective", detail="no optimal reference ran")
    best = max(ex, key=ex.get)
    return CheckResult(ex[best] >= lam, round(ex[best], 5), f">= reg = {lam:g}", unit="objective",
                       detail="R(greedy) - R(GOSDT, or the exact solver) per set: " + ", ".join(
                           f"{k} {v:+.4f}" for k, v in ex.items()))
