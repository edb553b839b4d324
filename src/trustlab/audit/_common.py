"""What every audit check shares: titles, outcome constructors, row caps and the histogram plot."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from trustlab.audit._report import CheckOutcome

__all__ = ["TITLES", "outcome", "skip", "cap_rows", "bar_hist", "quiet_feature_names"]

TITLES = {"data_quality": "Data quality (duplicates, conflicting labels, label issues)", "leakage": "Target leakage",
          "membership": "Membership-inference risk", "multiplicity": "Prediction multiplicity",
          "explanation_stability": "Explanation stability (X-hacking)",
          "explanation_controls": "Explanation controls (placebo, randomisation)",
          "interpretability_gap": "Interpretability gap (sparse tree)",
          "calibration": "Calibration (reliability, ECE, Brier)", "drift": "Train/test drift and overlap",
          "fairness": "Subgroup performance and fairness"}


@contextlib.contextmanager
def quiet_feature_names() -> Iterator[None]:
    """The checks hand the user's model its table as an array (the audit's own encoding keeps the column order);
    scikit-learn's feature-name warnings then say nothing the user can act on. Entered where the work runs, so a
    process or Ray worker is as quiet as the local executor."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        warnings.filterwarnings("ignore", message="X has feature names")
        yield


def outcome(name: str, status: str, headline: str, **kw: Any) -> CheckOutcome:
    return CheckOutcome(name=name, title=TITLES[name], status=status, headline=headline, **kw)


def skip(name: str, reason: str, settings: dict[str, Any]) -> CheckOutcome:
    return outcome(name, "skipped", "", reason=reason, settings=settings)


def cap_rows(n: int, cap: int, seed: int, salt: int = 0) -> tuple[np.ndarray, str]:
    """At most ``cap`` of ``n`` row positions (sorted, a seeded random subsample when ``n > cap``) and the note the
    report states for it ("" when every row is used)."""
    if n <= cap:
        return np.arange(n), ""
    pick = np.sort(np.random.default_rng([seed, salt]).permutation(n)[:cap])
    return pick, f"subsampled: {cap} of {n} rows (seeded; raise the check's row cap to use more)"


def bar_hist(values: np.ndarray, mark: np.ndarray, xlabel: str, ylabel: str) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 2.8), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    bins = np.histogram_bin_edges(values, bins=40)
    ax.hist(values[~mark], bins=bins, color="#90a4ae", label="other rows")
    ax.hist(values[mark], bins=bins, color="#c62828", label="flagged")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    return fig
