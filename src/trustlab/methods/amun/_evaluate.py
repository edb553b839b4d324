"""Unlearning evaluation: RMIA (online, reference models on random halves), a logit-margin / loss threshold
attack, SVC-MIA (Song & Mittal), and the UA / RA / TA / forget-vs-test AUC metrics with the "Avg Gap".

Score direction, everywhere: a **higher** membership score means "more likely a member" (trained on), and an
AUC is reported in percent for members = forget set, non-members = test set. 50 is chance; both > 50
(under-forgetting) and < 50 (over-forgetting) differ from a retrained model, so compare |AUC - AUC_retrain|.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import factorial
from typing import Any

import numpy as np

from trustlab.core.exceptions import InputError
from trustlab.methods.amun._data import (
    SGDSpec,
    UnlearningData,
    as_unlearning_data,
    check_forget_idx,
    logits_of,
    sgd_train,
)

__all__ = ["ReferenceModels", "fit_reference_models", "taylor_soft_margin", "rmia_scores", "mia_auc",
           "threshold_scores", "svc_mia", "evaluate_unlearning", "avg_gap", "METRIC_KEYS"]

METRIC_KEYS = ("UA", "RA", "TA", "AUC")


def taylor_soft_margin(logits: Any, labels: Any, *, temperature: float = 2.0, margin: float = 0.6,
                       order: int = 4) -> tuple[np.ndarray, int]:
    """RMIA's "taylor-soft-margin" probability of the true class.

    z = logits / T; tay(v) = sum_{k<order} v^k / k!; p = tay(z_y - m) / (sum_{j!=y} tay(z_j) + tay(z_y - m)).
    The truncated series can be <= 0 for very negative arguments (faithful to the official code); such
    probabilities (true term or denominator <= 0) are floored at 1e-12. Returns (p, number of floored entries).
    """
    z = np.asarray(logits, dtype=np.float64) / float(temperature)
    labels = np.asarray(labels, dtype=np.int64)

    def tay(v: np.ndarray) -> np.ndarray:
        return sum(v ** k / factorial(k) for k in range(order))

    rows = np.arange(z.shape[-2])
    true = tay(z[..., rows, labels] - margin)
    all_t = tay(z)
    others = all_t.sum(-1) - all_t[..., rows, labels]
    den = others + true
    bad = (true <= 0) | (den <= 1e-300) | ~np.isfinite(true) | ~np.isfinite(den)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(bad, 1e-12, true / np.where(bad, 1.0, den))
    return p, int(bad.sum())


@dataclass
class ReferenceModels:
    """Logits of reference models on every pool point and which points each was trained on.

    ``logits``: (n_models, n_pool, n_classes); ``in_mask``: (n_models, n_pool) booleans.
    """

    logits: np.ndarray
    in_mask: np.ndarray
    wall_time_s: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.logits = np.asarray(self.logits, dtype=np.float64)
        self.in_mask = np.asarray(self.in_mask, dtype=bool)
        if self.logits.ndim != 3:
            raise InputError(f"ReferenceModels.logits must be (n_models, n_pool, n_classes). Got {self.logits.shape}.")
        if len(self.logits) < 2:
            raise InputError(f"RMIA needs at least 2 reference models. Got {len(self.logits)}.")
        if self.in_mask.shape != self.logits.shape[:2]:
            raise InputError(f"ReferenceModels.in_mask must have shape {self.logits.shape[:2]}. Got {self.in_mask.shape}.")
        frac = self.in_mask.mean(0)
        off = int(((frac < 0.25) | (frac > 0.75)).sum())
        if off:
            warnings.warn(f"{off} pool points are IN for < 25 % or > 75 % of the reference models; RMIA's "
                          "online average is then biased for them.", UserWarning, stacklevel=2)

    @property
    def n_models(self) -> int:
        return int(len(self.logits))

    @property
    def per_model_s(self) -> float:
        return self.wall_time_s / max(self.n_models, 1)


def fit_reference_models(make_model: Callable[[], Any], X: Any, y: Any, n_models: int, *,
                         spec: SGDSpec | None = None, seed: int = 0,
                         progress: Callable[[Any], Any] | None = None) -> ReferenceModels:
    """Train ``n_models`` reference models, each on a random half of the pool (X, y), in complementary
    pairs so that every point is IN for exactly half of them (``n_models`` must be even and >= 2)."""
    if isinstance(n_models, bool) or not isinstance(n_models, int | np.integer) or n_models < 2:
        raise InputError(f"RMIA needs at least 2 reference models. Got n_models={n_models!r}.")
    if n_models % 2:
        raise InputError(f"n_models must be even (complementary halves). Got {n_models}.")
    X = np.asarray(X, np.float32)
    y = np.asarray(y, np.int64)
    n = len(X)
    rng = np.random.default_rng(seed)
    masks = []
    for _ in range(n_models // 2):
        m = np.zeros(n, bool)
        m[rng.permutation(n)[: n // 2]] = True
        masks += [m, ~m]
    t0 = time.perf_counter()
    logits = []
    it = range(n_models) if progress is None else progress(range(n_models))
    for i in it:
        import torch

        torch.manual_seed(seed * 1000 + i)
        model = make_model()
        sgd_train(model, X[masks[i]], y[masks[i]], spec, seed=seed * 1000 + i)
        logits.append(logits_of(model, X))
    return ReferenceModels(np.stack(logits), np.stack(masks), time.perf_counter() - t0)


def rmia_scores(target_logits: Any, refs: ReferenceModels, labels: Any, candidates: Any, population: Any = None, *,
                gamma: float = 2.0, temperature: float = 2.0, margin: float = 0.6, order: int = 4) -> np.ndarray:
    """Online RMIA (Zarifzadeh et al. 2024) as used by AMUN.

    ``target_logits`` and ``refs.logits`` cover the whole pool; ``candidates``/``population`` index it.
    ratio(x) = p_target(x) / mean_k p_k(x) (all reference models); score(x) = fraction of population points
    z != x with ratio(x) / ratio(z) > gamma. Higher = more likely a member.
    """
    if refs.n_models < 2:
        raise InputError(f"RMIA needs at least 2 reference models. Got {refs.n_models}.")
    tl = np.asarray(target_logits, dtype=np.float64)
    if tl.shape != refs.logits.shape[1:]:
        raise InputError(f"target_logits must have shape {refs.logits.shape[1:]}. Got {tl.shape}.")
    labels = np.asarray(labels, np.int64)
    p_t, _ = taylor_soft_margin(tl, labels, temperature=temperature, margin=margin, order=order)
    p_r, _ = taylor_soft_margin(refs.logits, labels, temperature=temperature, margin=margin, order=order)
    ratio = p_t / np.maximum(p_r.mean(0), 1e-12)
    cand = np.asarray(candidates, np.int64)
    pop = np.arange(len(tl)) if population is None else np.asarray(population, np.int64)
    rz = np.sort(ratio[pop])
    rx = ratio[cand]
    count = np.searchsorted(rz, rx / gamma, side="left")  # z with ratio(z) < ratio(x) / gamma
    # x itself is never counted (ratio(x)/ratio(x) = 1 <= gamma); exclude it from the denominator
    in_pop = np.isin(cand, pop)
    return count / (len(pop) - in_pop.astype(float))


def mia_auc(member_scores: Any, nonmember_scores: Any, *, balanced: bool = True, n_rep: int = 3,
            seed: int = 0) -> float:
    """ROC AUC in percent (members positive). ``balanced`` subsamples the larger side to the smaller one's size
    ``n_rep`` times and averages (as in AMUN's evaluation)."""
    from sklearn.metrics import roc_auc_score

    a, b = np.asarray(member_scores, float), np.asarray(nonmember_scores, float)
    if len(a) == 0 or len(b) == 0:
        raise InputError("mia_auc needs at least one member and one non-member score.")
    if not balanced:
        return 100.0 * float(roc_auc_score(np.r_[np.ones(len(a)), np.zeros(len(b))], np.r_[a, b]))
    rng = np.random.default_rng(seed)
    k = min(len(a), len(b))
    out = []
    for _ in range(n_rep):
        aa = a[rng.choice(len(a), k, replace=False)]
        bb = b[rng.choice(len(b), k, replace=False)]
        out.append(roc_auc_score(np.r_[np.ones(k), np.zeros(k)], np.r_[aa, bb]))
    return 100.0 * float(np.mean(out))


def threshold_scores(logits: Any, labels: Any, kind: str = "margin") -> np.ndarray:
    """Threshold-attack membership scores: ``"margin"`` = l_y - max_{j!=y} l_j, ``"loss"`` = -CE."""
    lg = np.asarray(logits, np.float64)
    labels = np.asarray(labels, np.int64)
    rows = np.arange(len(lg))
    if kind == "margin":
        other = lg.copy()
        other[rows, labels] = -np.inf
        return lg[rows, labels] - other.max(1)
    if kind == "loss":
        z = lg - lg.max(1, keepdims=True)
        return z[rows, labels] - np.log(np.exp(z).sum(1))
    raise InputError(f"threshold_scores kind must be 'margin' or 'loss'. Got {kind!r}.")


def _svc_features(logits: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    z = logits - logits.max(1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    rows = np.arange(len(p))
    py = p[rows, labels]
    logp = np.log(np.clip(p, 1e-30, None))
    ent = -(p * logp).sum(1)
    # modified entropy (Song & Mittal): -(1-p_y) log p_y - sum_{j!=y} p_j log(1-p_j)
    log1m = np.log(np.clip(1 - p, 1e-30, None))
    m_ent = -(1 - py) * np.log(np.clip(py, 1e-30, None)) - ((p * log1m).sum(1) - py * log1m[rows, labels])
    return {"confidence": py[:, None], "entropy": ent[:, None], "m_entropy": m_ent[:, None], "prob": p}


def svc_mia(logits: Any, labels: Any, retain_idx: Any, forget_idx: Any, test_idx: Any, *,
            seed: int = 0) -> dict[str, float]:
    """SVC-MIA "MIA-efficacy" (SalUn / l1-sparse papers): an SVC(C=3, rbf) fit on retain (member) vs test
    (non-member) features, balanced; returns, per feature, the percent of the forget set predicted
    *non-member* (higher = more forgotten)."""
    from sklearn.svm import SVC

    lg, lab = np.asarray(logits, np.float64), np.asarray(labels, np.int64)
    r, f, t = (np.asarray(i, np.int64) for i in (retain_idx, forget_idx, test_idx))
    rng = np.random.default_rng(seed)
    k = min(len(r), len(t))
    r_s, t_s = rng.choice(r, k, replace=False), rng.choice(t, k, replace=False)
    feats = _svc_features(lg, lab)
    out = {}
    for name, F in feats.items():
        clf = SVC(C=3, gamma="auto", kernel="rbf")
        clf.fit(np.r_[F[r_s], F[t_s]], np.r_[np.ones(k), np.zeros(k)])
        out[name] = 100.0 * float(1.0 - clf.predict(F[f]).mean())
    return out


def evaluate_unlearning(model: Any, data: UnlearningData, forget_idx: Any, refs: ReferenceModels | None = None, *,
                        balanced: bool = True, n_rep: int = 3, seed: int = 0, gamma: float = 2.0,
                        svc: bool = False) -> dict[str, float]:
    """UA / RA / TA (accuracy in percent on forget / retain / test), ``AUC`` = RMIA forget-vs-test AUC (if
    ``refs``), ``AUC_margin`` = logit-margin threshold AUC, and optionally ``SVC_<feature>`` MIA-efficacy."""
    data = as_unlearning_data(data, "evaluate_unlearning")
    f = check_forget_idx(forget_idx, data, "evaluate_unlearning")
    r, t = data.retain_idx(f), data.test_idx
    if len(t) == 0:
        raise InputError("evaluate_unlearning needs a non-empty test_idx (the non-members).")
    lg = logits_of(model, data.X)
    pred = lg.argmax(1)
    acc = lambda idx: 100.0 * float(np.mean(pred[idx] == data.y[idx]))  # noqa: E731
    out = {"UA": acc(f), "RA": acc(r), "TA": acc(t)}
    if refs is not None:
        if refs.logits.shape[1] != len(data.X):
            raise InputError(f"The reference models cover {refs.logits.shape[1]} points; the data has {len(data.X)}.")
        cand = np.r_[f, t]
        s = rmia_scores(lg, refs, data.y, cand, gamma=gamma)
        out["AUC"] = mia_auc(s[: len(f)], s[len(f):], balanced=balanced, n_rep=n_rep, seed=seed)
    m = threshold_scores(lg, data.y, "margin")
    out["AUC_margin"] = mia_auc(m[f], m[t], balanced=balanced, n_rep=n_rep, seed=seed)
    if svc:
        for k, v in svc_mia(lg, data.y, r, f, t, seed=seed).items():
            out[f"SVC_{k}"] = v
    return out


def avg_gap(metrics: dict[str, float], reference: dict[str, float], keys: Sequence[str] = METRIC_KEYS) -> float:
    """Mean over ``keys`` of |metric - reference metric| (AMUN's "Avg Gap" to the retrained model)."""
    missing = [k for k in keys if k not in metrics or k not in reference]
    if missing:
        raise InputError(f"avg_gap: metrics {missing} are missing.")
    return float(np.mean([abs(metrics[k] - reference[k]) for k in keys]))
