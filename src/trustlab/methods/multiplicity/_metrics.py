"""Ground-truth multiplicity over m models, the delta-Rashomon filter and the competing measures.

Probabilities are ``P [m, n, C]`` (or ``[m, n]``: the positive-class probability of a binary task).
Per point: prediction variance / std / range of the probability of the majority label, pairwise label
disagreement, agreement with the majority label, and whether any model's label differs (arbitrariness is
the share of such points).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval
from trustlab.core.exceptions import InputError

__all__ = ["MultiplicityMetrics", "RashomonSet", "multiplicity_metrics", "rashomon_filter", "confidence_score",
           "entropy_score", "tercile_gap"]


def _as_probs(P: Any, owner: str, name: str = "P") -> np.ndarray:
    P = np.asarray(P, dtype=np.float64)
    if P.ndim == 2:
        P = np.stack([1.0 - P, P], axis=-1)
    if P.ndim != 3 or P.shape[-1] < 2:
        raise InputError(f"The '{name}' argument of {owner} must be [m, n] or [m, n, C] probabilities. "
                         f"Got shape {P.shape}.")
    if not np.isfinite(P).all() or P.min() < -1e-6 or P.max() > 1 + 1e-6:
        raise InputError(f"The '{name}' argument of {owner} must hold probabilities in [0, 1].")
    if not np.allclose(P.sum(-1), 1.0, atol=1e-4):
        raise InputError(f"The rows of '{name}' passed to {owner} must sum to 1 over the classes.")
    return P


@dataclass
class MultiplicityMetrics:
    """Ground truth over ``m`` models for ``n`` points (arrays are per point)."""

    std: np.ndarray
    variance: np.ndarray
    range: np.ndarray
    pairwise_disagreement: np.ndarray
    majority_agreement: np.ndarray
    flips: np.ndarray
    majority_label: np.ndarray
    m: int
    accuracies: list[float] = field(default_factory=list)
    positive_rates: list[float] = field(default_factory=list)

    @property
    def arbitrariness(self) -> float:
        """Share of points whose label differs for at least one model."""
        return float(self.flips.mean())

    @property
    def mean_std(self) -> float:
        return float(self.std.mean())

    @property
    def mean_pairwise_disagreement(self) -> float:
        return float(self.pairwise_disagreement.mean())

    def summary(self) -> dict[str, Any]:
        acc = self.accuracies
        return {"m": self.m, "arbitrariness": self.arbitrariness, "mean_std": self.mean_std,
                "mean_range": float(self.range.mean()), "pairwise_disagreement": self.mean_pairwise_disagreement,
                "accuracy_spread": float(max(acc) - min(acc)) if acc else None, "accuracies": acc,
                "positive_rates": self.positive_rates}


@validate_args(P=[ArrayLike(ndim=(2, 3))], y=[None, ArrayLike(ndim=1, dtype="integer")])
def multiplicity_metrics(P: Any, y: Any = None) -> MultiplicityMetrics:
    """Prediction variance, range, pairwise disagreement, majority agreement and flips over the models.

    ``y`` (true labels) adds each model's accuracy; the positive rate is the share of points each model
    labels as the last class.

    Examples
    --------
    >>> mm = multiplicity_metrics([[0.9, 0.2], [0.6, 0.4], [0.4, 0.1]])
    >>> mm.flips.tolist(), round(mm.arbitrariness, 2)
    ([True, False], 0.5)
    """
    P = _as_probs(P, "multiplicity_metrics")
    m, n, C = P.shape
    if m < 2:
        raise InputError(f"multiplicity_metrics needs at least 2 models (P has m={m}): multiplicity is a property "
                         "of a set of models.")
    labels = P.argmax(-1)  # [m, n]
    counts = np.stack([(labels == c).sum(0) for c in range(C)], axis=-1)  # [n, C]
    maj = counts.argmax(-1)
    pm = P[:, np.arange(n), maj]  # [m, n] prob of the majority label
    same_pairs = (counts * (counts - 1)).sum(-1) / 2.0
    pairs = m * (m - 1) / 2.0
    accs: list[float] = []
    if y is not None:
        y = np.asarray(y)
        if len(y) != n:
            raise InputError(f"multiplicity_metrics: y has {len(y)} labels for {n} points.")
        accs = [float((labels[j] == y).mean()) for j in range(m)]
    return MultiplicityMetrics(
        std=pm.std(0), variance=pm.var(0), range=pm.max(0) - pm.min(0),
        pairwise_disagreement=1.0 - same_pairs / pairs, majority_agreement=counts.max(-1) / m,
        flips=(labels != labels[:1]).any(0), majority_label=maj, m=m, accuracies=accs,
        positive_rates=[float((labels[j] == C - 1).mean()) for j in range(m)])


@dataclass
class RashomonSet:
    """Which models the delta-Rashomon filter keeps, and why the others were dropped."""

    kept: np.ndarray
    scores: np.ndarray
    positive_rates: np.ndarray
    reference_score: float
    median_rate: float
    delta: float
    rate_tolerance: float
    reasons: dict[int, str] = field(default_factory=dict)


@validate_args(scores=[ArrayLike(ndim=1, min_len=1)], positive_rates=[ArrayLike(ndim=1, low=0, high=1)],
               delta=[Interval(float, 0, None)], rate_tolerance=[Interval(float, 0, 1)])
def rashomon_filter(scores: Any, positive_rates: Any, delta: float = 0.03, rate_tolerance: float = 0.15
                    ) -> RashomonSet:
    """Keep models whose validation score is within ``delta`` of the best and whose positive-prediction rate
    is within ``rate_tolerance`` of the median rate (a global class-bias shift is not local multiplicity).

    Examples
    --------
    >>> rashomon_filter([0.80, 0.79, 0.70], [0.5, 0.52, 0.5], delta=0.03).kept.tolist()
    [0, 1]
    """
    s, r = np.asarray(scores, dtype=np.float64), np.asarray(positive_rates, dtype=np.float64)
    if len(s) != len(r):
        raise InputError(f"rashomon_filter: {len(s)} scores but {len(r)} positive rates.")
    best, med = float(s.max()), float(np.median(r))
    reasons: dict[int, str] = {}
    for j in range(len(s)):
        if s[j] < best - delta:
            reasons[j] = f"score {s[j]:.3f} < best {best:.3f} - delta {delta}"
        elif abs(r[j] - med) > rate_tolerance:
            reasons[j] = f"positive rate {r[j]:.3f} is {abs(r[j] - med):.3f} from the median {med:.3f}"
    kept = np.asarray([j for j in range(len(s)) if j not in reasons], dtype=np.int64)
    return RashomonSet(kept, s, r, best, med, float(delta), float(rate_tolerance), reasons)


@validate_args(P=[ArrayLike(ndim=(1, 2))])
def confidence_score(P: Any) -> np.ndarray:
    """Probability of the predicted class (``[n]`` binary positive probabilities or ``[n, C]``)."""
    P = _as_probs(np.asarray(P)[None], "confidence_score")[0]
    return P.max(-1)


@validate_args(P=[ArrayLike(ndim=(1, 2))])
def entropy_score(P: Any) -> np.ndarray:
    """Negative predictive entropy (higher = more certain), in nats."""
    P = _as_probs(np.asarray(P)[None], "entropy_score")[0]
    return (P * np.log(np.clip(P, 1e-12, 1.0))).sum(-1)


@validate_args(score=[ArrayLike(ndim=1, min_len=3)], target=[ArrayLike(ndim=1, min_len=3)])
def tercile_gap(score: Any, target: Any) -> tuple[float, float]:
    """Mean ``target`` in the top and bottom terciles of ``score`` (ties broken by position)."""
    s, t = np.asarray(score, dtype=np.float64), np.asarray(target, dtype=np.float64)
    if len(s) != len(t):
        raise InputError(f"tercile_gap: {len(s)} scores but {len(t)} targets.")
    order = np.argsort(s, kind="stable")
    k = len(s) // 3
    return float(t[order[-k:]].mean()), float(t[order[:k]].mean())
