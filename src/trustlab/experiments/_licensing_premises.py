"""Licensing's premises (issue 39): the valuation's model learned, and the payouts are not constant."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.experiments.base import CheckResult
from trustlab.results.result import Result


def _premise_stats(cfg: Any, d: dict[str, Any], res: Result) -> None:
    """The premise's numbers: the k-NN model's validation accuracy on all owners' data and the majority class's."""
    from sklearn.neighbors import KNeighborsClassifier

    knn = KNeighborsClassifier(n_neighbors=cfg.k).fit(d["X"], d["y"])
    res.summary["knn_val_acc"] = 100 * float((knn.predict(d["X_val"]) == d["y_val"]).mean())
    res.summary["majority_val_acc"] = 100 * float(np.bincount(d["y_val"]).max() / len(d["y_val"]))


#: pre-registered premise thresholds (docs/papers/licensing.md, "Premises, knockout and quick gate"): k-NN on digits
#: is far above the majority class (~11 %), so 30 points separates a model that learned from one at chance; a
#: share range of 2 pp is a fifth of an equal share (10 %) with 10 owners
PRE_LEARNED, PRE_RANGE = 30.0, 2.0


def _pre_learned(r: Result) -> CheckResult:
    s = r.summary
    gain = s["knn_val_acc"] - s["majority_val_acc"]
    return CheckResult(gain >= PRE_LEARNED, gain, f">= {PRE_LEARNED:g}", unit="points",
                       baseline=f"majority class {s['majority_val_acc']:.1f} %",
                       detail=f"k-NN (k={r.config.get('k')}) validation accuracy {s['knn_val_acc']:.1f} %")


def _pre_values_vary(r: Result) -> CheckResult:
    v = r.summary["demo_share_range_pp"]
    return CheckResult(v >= PRE_RANGE, v, f">= {PRE_RANGE:g}", unit="pp", detail="max - min final share in the demo")
