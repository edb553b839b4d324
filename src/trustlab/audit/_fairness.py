"""Subgroup performance and fairness slices through fairlearn's ``MetricFrame`` (the audit's ``fairness`` check)."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.audit._common import outcome
from trustlab.audit._report import CheckOutcome, figure_png

__all__ = ["fairness_slices"]


def _metrics(binary: bool) -> dict[str, Any]:
    from fairlearn.metrics import count, false_positive_rate, selection_rate, true_positive_rate
    from sklearn.metrics import accuracy_score

    out = {"accuracy": accuracy_score, "count": count}
    if binary:
        out |= {"selection_rate": selection_rate, "tpr": true_positive_rate, "fpr": false_positive_rate}
    return out


def _slice(col: str, groups: np.ndarray, y: np.ndarray, pred: np.ndarray, binary: bool, s: dict[str, Any],
           seed: int) -> tuple[dict[str, float], Any]:
    """One sensitive column: fairlearn's differences and the lower ends of their 95 % bootstrap intervals."""
    from fairlearn.metrics import MetricFrame, demographic_parity_difference, equalized_odds_difference

    mf = MetricFrame(metrics=_metrics(binary), y_true=y, y_pred=pred, sensitive_features=groups,
                     n_boot=int(s["n_boot"]), ci_quantiles=[0.025, 0.975], random_state=seed % 2**31)
    low = mf.difference_ci()[0]
    out = {f"fairness_{col}_accuracy_difference": float(mf.difference()["accuracy"])}
    lows = [float(low["accuracy"])]
    if binary:
        out[f"fairness_{col}_demographic_parity_difference"] = float(
            demographic_parity_difference(y, pred, sensitive_features=groups))
        out[f"fairness_{col}_equalized_odds_difference"] = float(
            equalized_odds_difference(y, pred, sensitive_features=groups))
        lows += [float(low["selection_rate"]), float(max(low["tpr"], low["fpr"]))]
    out[f"fairness_{col}_lower_bound"] = max(lows)
    return out, mf


def fairness_slices(a: Any, s: dict[str, Any]) -> CheckOutcome:
    """See :func:`trustlab.audit._model_checks.fairness`."""
    from matplotlib.figure import Figure

    pred = a.proba(a.R_test).argmax(1)
    binary = len(a.classes) == 2
    metrics: dict[str, float] = {}
    details, frames = [], {}
    for col, groups in a.sensitive.items():
        m, mf = _slice(col, np.asarray(groups, dtype=str), a.y_test, pred, binary, s, a.seed)
        metrics |= m
        frames[col] = mf
        ci = mf.by_group_ci
        for g, row in mf.by_group.iterrows():
            details.append(f"{col}={g}: n {int(row['count'])}, accuracy {row['accuracy']:.3f} [{ci[0].loc[g, 'accuracy']:.3f}, "
                           f"{ci[1].loc[g, 'accuracy']:.3f}]" + (f", selection rate {row['selection_rate']:.3f}" if binary
                                                                else ""))
    worst = max(v for k, v in metrics.items() if k.endswith("_lower_bound"))
    flagged = worst > float(s["max_difference"])
    fig = Figure(figsize=(6.4, 0.8 + 0.3 * sum(len(mf.by_group) for mf in frames.values())), dpi=100,
                 layout="constrained")
    ax = fig.add_subplot()
    labels, acc, lo, hi = [], [], [], []
    for col, mf in frames.items():
        for g, row in mf.by_group.iterrows():
            labels.append(f"{col}={g}")
            acc.append(row["accuracy"])
            lo.append(row["accuracy"] - mf.by_group_ci[0].loc[g, "accuracy"])
            hi.append(mf.by_group_ci[1].loc[g, "accuracy"] - row["accuracy"])
    ax.barh(labels, acc, xerr=[lo, hi], color="#90a4ae")
    ax.set_xlabel("held-out accuracy per group (95 % bootstrap interval)")
    ax.invert_yaxis()
    gaps = ", ".join(f"{k.removeprefix('fairness_')} {v:.3f}" for k, v in metrics.items() if k.endswith("difference"))
    headline = (f"{gaps}; the largest lower 95 % bound of a difference is {worst:.3f} "
                f"({'>' if flagged else '<='} {s['max_difference']})")
    return outcome("fairness", "flag" if flagged else "ok", headline, metrics={"fairness_worst_lower_bound": worst,
                                                                             **metrics},
                   details=details[:40], settings=s, plots={"groups": figure_png(fig)})
