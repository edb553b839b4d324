"""Unlearning evaluation: RMIA (online, reference models on random halves), a logit-margin / loss threshold
attack, SVC-MIA (Song & Mittal), and the UA / RA / TA / forget-vs-test AUC metrics with the "Avg Gap".

Score direction, everywhere: a **higher** membership score means "more likely a member" (trained on), and an
AUC is reported in percent for members = forget set, non-members = test set. 50 is chance; both > 50
(under-forgetting) and < 50 (over-forgetting) differ from a retrained model, so compare |AUC - AUC_retrain|.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import factorial
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.executor import Executor, map_items
from trustlab.core.seeding import as_seed, isolated_global_rng, seed_alias
from trustlab.methods.amun._data import (
    MODEL_RULE,
    POSITIVE_FINITE,
    SGDSpec,
    UnlearningData,
    as_unlearning_data,
    check_forget_idx,
    logits_of,
    sgd_train,
)
from trustlab.models import MLP

__all__ = ["ReferenceModels", "fit_reference_models", "fit_reference_estimators", "taylor_soft_margin", "rmia_scores", "mia_auc",
           "threshold_scores", "svc_mia", "evaluate_unlearning", "UnlearningMetrics", "avg_gap", "METRIC_KEYS",
           "SmallSampleWarning"]

METRIC_KEYS = ("UA", "RA", "TA", "AUC")
#: below this many members (or non-members) an AUC has a standard deviation of about 4 points or more
MIN_POINTS = 50


class SmallSampleWarning(UserWarning):
    """A membership AUC computed on fewer than ~50 points per side: valid, but mostly noise."""


_INDEX = ArrayLike(ndim=1, dtype="integer", low=0)
_LABELS = [ArrayLike(ndim=1, dtype="integer", low=0)]
#: the seed of every function here: an int is used as given, a Generator or None becomes one int first
_SEED = ["random_state"]
_REAL = [Interval("real", None, None)]


def _check_labels(labels: np.ndarray, n_rows: int, n_classes: int, owner: str, name: str = "labels") -> np.ndarray:
    """Labels as int64, one per row, each indexing one of ``n_classes`` outputs."""
    labels = np.asarray(labels).astype(np.int64)
    if len(labels) != n_rows:
        raise InputError(f"The '{name}' argument of {owner} must have {n_rows} entries (one per row of the logits). "
                         f"Got {len(labels)} instead.")
    if labels.size and labels.max() >= n_classes:
        raise InputError(f"The '{name}' argument of {owner} holds the label {int(labels.max())}, but the logits "
                         f"have {n_classes} classes: labels must lie in [0, {n_classes}).")
    return labels


def _check_index(idx: Any, n: int, owner: str, name: str) -> np.ndarray:
    arr = np.asarray(idx).astype(np.int64)
    if arr.size and arr.max() >= n:
        raise InputError(f"The '{name}' argument of {owner} holds the index {int(arr.max())}, outside the pool of "
                         f"{n} points.")
    return arr


def _logit_example() -> dict[str, Any]:
    return {"logits": np.zeros((2, 3)), "labels": np.array([0, 2])}


@validate_args(_logit_example, logits=[ArrayLike(ndim=(2, 3))], labels=_LABELS, temperature=[POSITIVE_FINITE],
               margin=_REAL, order=[Interval(int, 1, None)])
def taylor_soft_margin(logits: Any, labels: Any, *, temperature: float = 2.0, margin: float = 0.6,
                       order: int = 4) -> tuple[np.ndarray, int]:
    """RMIA's "taylor-soft-margin" probability of the true class.

    z = logits / T; tay(v) = sum_{k<order} v^k / k!; p = tay(z_y - m) / (sum_{j!=y} tay(z_j) + tay(z_y - m)).
    The truncated series can be <= 0 for very negative arguments (faithful to the official code); such
    probabilities (true term or denominator <= 0) are floored at 1e-12. ``logits`` may carry a leading
    model axis (n_models, n, k). Returns (p, number of floored entries).
    """
    z = np.asarray(logits, dtype=np.float64) / float(temperature)
    labels = _check_labels(labels, z.shape[-2], z.shape[-1], "taylor_soft_margin")

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

    ``logits``: (n_models, n_pool, n_classes), finite; ``in_mask``: (n_models, n_pool) booleans.
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
        if not np.isfinite(self.logits).all():
            raise InputError(f"ReferenceModels.logits holds {int((~np.isfinite(self.logits)).sum())} NaN or infinite "
                             "value(s); a reference model diverged or its inputs were not finite.")
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


def _refs_example() -> dict[str, Any]:
    return {"make_model": lambda: MLP(2, 2, hidden=(2,)), "X": np.zeros((4, 2)), "y": np.array([0, 1, 0, 1]),
            "spec": SGDSpec(epochs=1)}


@seed_alias
@validate_args(_refs_example, make_model=["callable"], X=[ArrayLike(ndim=(2, 3, 4))], y=_LABELS,
               n_models=[Interval(int, 2, None)], spec=[InstanceOf(SGDSpec), None], random_state=_SEED,
               progress=["callable", None], executor=[InstanceOf(Executor), None])
def fit_reference_models(make_model: Callable[[], Any], X: Any, y: Any, n_models: int, *,
                         spec: SGDSpec | None = None, random_state: Any = 0,
                         progress: Callable[[Any], Any] | None = None,
                         executor: Executor | None = None) -> ReferenceModels:
    """Train ``n_models`` reference models, each on a random half of the pool (X, y), in complementary
    pairs so that every point is IN for exactly half of them (``n_models`` must be even and >= 2).

    ``make_model()`` is called inside an isolated global RNG seeded with ``seed * 1000 + i`` (torch module
    initialisation draws from it); the caller's global RNG state is unchanged afterwards. With an
    ``executor`` (:mod:`trustlab.core.executor`: a process pool or Ray) the models train as parallel tasks
    (same logits as the same executor's local run); ``progress`` then is ignored (the executor shows one bar).
    """
    seed = as_seed(random_state)
    X, y = _reference_pool("fit_reference_models", X, y, n_models, np.float32)
    masks = _half_masks(len(X), n_models, seed)
    t0 = time.perf_counter()
    task = functools.partial(_fit_reference, make_model, X, y, masks, spec, seed)
    if executor is None:
        logits = [task(i) for i in (range(n_models) if progress is None else progress(range(n_models)))]
    else:
        logits = executor.map(task, range(n_models), seed=seed, desc="reference models",
                              show_progress=progress is not None)
    return ReferenceModels(np.stack(logits), np.stack(masks), time.perf_counter() - t0)


def _reference_pool(fn: str, X: Any, y: Any, n_models: int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """The pool of a reference-model fit as arrays, after the checks both fitters share."""
    if n_models % 2:
        raise InputError(f"The 'n_models' argument of {fn} must be even (complementary halves). "
                         f"Got {n_models} instead.")
    X = np.asarray(X, dtype)
    y = np.asarray(y, np.int64)
    if len(y) != len(X):
        raise InputError(f"The 'y' argument of {fn} must have {len(X)} labels. Got {len(y)}.")
    return X, y


def _half_masks(n: int, n_models: int, seed: int) -> list[np.ndarray]:
    """``n_models`` membership masks over ``n`` pool points in complementary pairs (each point IN for half)."""
    rng = np.random.default_rng(seed)
    masks = []
    for _ in range(n_models // 2):
        m = np.zeros(n, bool)
        m[rng.permutation(n)[: n // 2]] = True
        masks += [m, ~m]
    return masks


_CLASSIFIER = Satisfies(lambda e: not isinstance(e, type) and hasattr(e, "fit") and hasattr(e, "predict_proba"),
                        "a scikit-learn classifier (fit and predict_proba)", invalid=[None, "rf", 3])


def _estimator_example() -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression

    return {"estimator": LogisticRegression(), "X": np.array([[0.0], [1.0], [2.0], [3.0]]),
            "y": np.array([0, 1, 0, 1])}


@seed_alias
@validate_args(_estimator_example, estimator=[_CLASSIFIER],
               X=[ArrayLike(ndim=2)], y=_LABELS, n_models=[Interval(int, 2, None)], random_state=_SEED,
               executor=[InstanceOf(Executor), None], show_progress=["boolean"])
def fit_reference_estimators(estimator: Any, X: Any, y: Any, n_models: int, *, random_state: Any = 0,
                             executor: Executor | None = None, show_progress: bool = False) -> ReferenceModels:
    """:func:`fit_reference_models` for a scikit-learn classifier: ``n_models`` clones of ``estimator``, each fitted
    on a random half of the pool (the same complementary pairs), their logits ``log(predict_proba)`` (clipped at
    1e-6) on every pool point. Clones with a ``random_state`` get ``seed * 1000 + i``. Used by ``trustlab audit``
    to measure the membership risk of a user's own (non-torch) model with RMIA.
    """
    seed = as_seed(random_state)
    X, y = _reference_pool("fit_reference_estimators", X, y, n_models, np.float64)
    n_classes = int(y.max()) + 1
    masks = _half_masks(len(X), n_models, seed)
    t0 = time.perf_counter()
    task = functools.partial(_fit_reference_estimator, estimator, X, y, masks, seed, n_classes)
    logits = map_items(executor, task, list(range(n_models)), seed=seed, desc="reference models",
                       show_progress=show_progress)
    return ReferenceModels(np.stack(logits), np.stack(masks), time.perf_counter() - t0,
                           info={"estimator": type(estimator).__name__})


def _fit_reference_estimator(estimator: Any, X: np.ndarray, y: np.ndarray, masks: list[np.ndarray], seed: int,
                             n_classes: int, i: int) -> np.ndarray:
    from sklearn.base import clone

    model = clone(estimator)
    if "random_state" in model.get_params():
        model.set_params(random_state=seed * 1000 + i)
    model.fit(X[masks[i]], y[masks[i]])
    proba = np.zeros((len(X), n_classes))
    proba[:, np.asarray(model.classes_, int)] = model.predict_proba(X)  # a half may miss a rare class
    return np.log(np.clip(proba, 1e-6, 1.0))


def _fit_reference(make_model: Callable[[], Any], X: np.ndarray, y: np.ndarray, masks: list[np.ndarray],
                   spec: SGDSpec | None, seed: int, i: int) -> np.ndarray:
    """Reference model ``i``: trained on ``masks[i]``, its logits on every pool point (one executor task)."""
    with isolated_global_rng(seed * 1000 + i):
        model = make_model()
    sgd_train(model, X[masks[i]], y[masks[i]], spec, random_state=seed * 1000 + i)
    return logits_of(model, X)


def _rmia_example() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    refs = ReferenceModels(rng.normal(size=(2, 4, 3)), np.array([[1, 0, 1, 0], [0, 1, 0, 1]], bool))
    return {"target_logits": rng.normal(size=(4, 3)), "refs": refs, "labels": np.array([0, 1, 2, 0]),
            "candidates": np.array([0, 1])}


@validate_args(_rmia_example, target_logits=[ArrayLike(ndim=2)], refs=[InstanceOf(ReferenceModels)], labels=_LABELS,
               candidates=[_INDEX], population=[ArrayLike(ndim=1, dtype="integer", low=0, min_len=2), None],
               gamma=[POSITIVE_FINITE], temperature=[POSITIVE_FINITE], margin=_REAL, order=[Interval(int, 1, None)])
def rmia_scores(target_logits: Any, refs: ReferenceModels, labels: Any, candidates: Any, population: Any = None, *,
                gamma: float = 2.0, temperature: float = 2.0, margin: float = 0.6, order: int = 4) -> np.ndarray:
    """Online RMIA (Zarifzadeh et al. 2024) as used by AMUN.

    ``target_logits`` and ``refs.logits`` cover the whole pool; ``candidates``/``population`` index it.
    ratio(x) = p_target(x) / mean_k p_k(x) (all reference models); score(x) = fraction of population points
    z != x with ratio(x) / ratio(z) > gamma, in [0, 1]. Higher = more likely a member.
    """
    tl = np.asarray(target_logits, dtype=np.float64)
    if tl.shape != refs.logits.shape[1:]:
        raise InputError(f"The 'target_logits' argument of rmia_scores must have shape {refs.logits.shape[1:]} "
                         f"(the reference models' pool). Got {tl.shape} instead.")
    n = len(tl)
    labels = _check_labels(labels, n, tl.shape[1], "rmia_scores")
    cand = _check_index(candidates, n, "rmia_scores", "candidates")
    pop = np.arange(n) if population is None else _check_index(population, n, "rmia_scores", "population")
    p_t, _ = taylor_soft_margin(tl, labels, temperature=temperature, margin=margin, order=order)
    p_r, _ = taylor_soft_margin(refs.logits, labels, temperature=temperature, margin=margin, order=order)
    ratio = p_t / np.maximum(p_r.mean(0), 1e-12)
    rz = np.sort(ratio[pop])
    rx = ratio[cand]
    count = np.searchsorted(rz, rx / gamma, side="left")  # z with ratio(z) < ratio(x) / gamma
    in_pop = np.isin(cand, pop)
    # x itself satisfies ratio(x) < ratio(x) / gamma exactly when gamma < 1 (ratios are > 0): never count it,
    # and leave it out of the denominator
    if gamma < 1:
        count = count - in_pop.astype(np.int64)
    return count / (len(pop) - in_pop.astype(float))


def _auc_example() -> dict[str, Any]:
    return {"member_scores": np.array([1.0, 2.0]), "nonmember_scores": np.array([0.0, 1.5])}


@seed_alias
@validate_args(_auc_example, member_scores=[ArrayLike(ndim=1)], nonmember_scores=[ArrayLike(ndim=1)],
               balanced=["boolean"], n_rep=[Interval(int, 1, None)], random_state=_SEED)
def mia_auc(member_scores: Any, nonmember_scores: Any, *, balanced: bool = True, n_rep: int = 3,
            random_state: Any = 0) -> float:
    """ROC AUC in percent (members positive). ``balanced`` subsamples the larger side to the smaller one's size
    ``n_rep`` times and averages (as in AMUN's evaluation).

    Warns (:class:`SmallSampleWarning`) below 50 points on a side: the AUC's standard deviation is then
    about 4 points or more, so differences of a few points are noise.
    """
    seed = as_seed(random_state)
    from sklearn.metrics import roc_auc_score

    a, b = np.asarray(member_scores, float), np.asarray(nonmember_scores, float)
    if min(len(a), len(b)) < MIN_POINTS:
        warnings.warn(f"mia_auc on {len(a)} members and {len(b)} non-members: with fewer than {MIN_POINTS} points "
                      "per side the AUC is mostly noise (sd >= ~4 points).", SmallSampleWarning, stacklevel=3)
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


@validate_args(_logit_example, logits=[ArrayLike(ndim=2)], labels=_LABELS, kind=[{"margin", "loss"}])
def threshold_scores(logits: Any, labels: Any, kind: str = "margin") -> np.ndarray:
    """Threshold-attack membership scores: ``"margin"`` = l_y - max_{j!=y} l_j, ``"loss"`` = -CE."""
    lg = np.asarray(logits, np.float64)
    if lg.shape[1] < 2:
        raise InputError(f"The 'logits' argument of threshold_scores must have >= 2 classes (columns): a margin "
                         f"or loss needs a competing class. Got shape {lg.shape}.")
    labels = _check_labels(labels, len(lg), lg.shape[1], "threshold_scores")
    rows = np.arange(len(lg))
    if kind == "margin":
        other = lg.copy()
        other[rows, labels] = -np.inf
        return lg[rows, labels] - other.max(1)
    z = lg - lg.max(1, keepdims=True)
    return z[rows, labels] - np.log(np.exp(z).sum(1))


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


def _svc_example() -> dict[str, Any]:
    return {**_logit_example(), "retain_idx": np.array([0]), "forget_idx": np.array([1]), "test_idx": np.array([1])}


@seed_alias
@validate_args(_svc_example, logits=[ArrayLike(ndim=2)], labels=_LABELS, retain_idx=[_INDEX], forget_idx=[_INDEX],
               test_idx=[_INDEX], random_state=_SEED)
def svc_mia(logits: Any, labels: Any, retain_idx: Any, forget_idx: Any, test_idx: Any, *,
            random_state: Any = 0) -> dict[str, float]:
    """SVC-MIA "MIA-efficacy" (SalUn / l1-sparse papers): an SVC(C=3, rbf) fit on retain (member) vs test
    (non-member) features, balanced; returns, per feature, the percent of the forget set predicted
    *non-member* (higher = more forgotten). Each index set must be non-empty."""
    seed = as_seed(random_state)
    from sklearn.svm import SVC

    lg = np.asarray(logits, np.float64)
    lab = _check_labels(labels, len(lg), lg.shape[1], "svc_mia")
    r, f, t = (_check_index(i, len(lg), "svc_mia", n) for i, n in
               ((retain_idx, "retain_idx"), (forget_idx, "forget_idx"), (test_idx, "test_idx")))
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


@dataclass(frozen=True)
class UnlearningMetrics:
    """What :func:`evaluate_unlearning` measured, in percent.

    ``UA``/``RA``/``TA``: accuracy on the forget / retain / test set; ``AUC``: RMIA forget-vs-test AUC (None
    without reference models); ``AUC_margin``: the logit-margin threshold attack's AUC; ``svc``: SVC-MIA
    efficacy per feature (empty unless requested); ``n_forget``/``n_test``: the set sizes.
    """

    UA: float
    RA: float
    TA: float
    AUC_margin: float
    AUC: float | None = None
    svc: dict[str, float] = field(default_factory=dict)
    n_forget: int = 0
    n_test: int = 0

    def to_dict(self) -> dict[str, float]:
        """Flat metrics ``UA, RA, TA, [AUC], AUC_margin, [SVC_<feature>...]`` (the keys of :func:`avg_gap`)."""
        out = {"UA": self.UA, "RA": self.RA, "TA": self.TA}
        if self.AUC is not None:
            out["AUC"] = self.AUC
        out["AUC_margin"] = self.AUC_margin
        out.update({f"SVC_{k}": v for k, v in self.svc.items()})
        return out


def _eval_example() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    data = UnlearningData(X=rng.random((6, 2)), y=np.array([0, 1, 0, 1, 0, 1]), train_idx=np.arange(4),
                          test_idx=np.arange(4, 6))
    return {"model": MLP(2, 2, hidden=(2,)), "data": data, "forget_idx": np.array([0])}


@seed_alias
@validate_args(_eval_example, model=MODEL_RULE, data=[InstanceOf(UnlearningData, tuple)], forget_idx=[_INDEX],
               refs=[InstanceOf(ReferenceModels), None], balanced=["boolean"], n_rep=[Interval(int, 1, None)],
               random_state=_SEED, gamma=[POSITIVE_FINITE], svc=["boolean"])
def evaluate_unlearning(model: Any, data: UnlearningData, forget_idx: Any, refs: ReferenceModels | None = None, *,
                        balanced: bool = True, n_rep: int = 3, random_state: Any = 0, gamma: float = 2.0,
                        svc: bool = False) -> UnlearningMetrics:
    """UA / RA / TA (accuracy in percent on forget / retain / test), ``AUC`` = RMIA forget-vs-test AUC (if
    ``refs``), ``AUC_margin`` = logit-margin threshold AUC, and optionally SVC-MIA efficacy per feature.

    Fewer than 50 forget points warn (:class:`SmallSampleWarning`): the AUCs are then mostly noise.
    """
    seed = as_seed(random_state)
    data = as_unlearning_data(data, "evaluate_unlearning")
    f = check_forget_idx(forget_idx, data, "evaluate_unlearning")
    r, t = data.retain_idx(f), data.test_idx
    if len(t) == 0:
        raise InputError("evaluate_unlearning needs a non-empty test_idx (the non-members).")
    lg = logits_of(model, data.X)
    if lg.shape[1] != data.num_classes:
        raise InputError(f"The 'model' argument of evaluate_unlearning has {lg.shape[1]} outputs, but the data "
                         f"has {data.num_classes} classes; they must match.")
    pred = lg.argmax(1)
    acc = lambda idx: 100.0 * float(np.mean(pred[idx] == data.y[idx]))  # noqa: E731
    auc = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallSampleWarning)  # warned once below, naming the forget set
        if refs is not None:
            if refs.logits.shape[1] != len(data.X):
                raise InputError(f"The reference models cover {refs.logits.shape[1]} points; the data has "
                                 f"{len(data.X)}.")
            s = rmia_scores(lg, refs, data.y, np.r_[f, t], gamma=gamma)
            auc = mia_auc(s[: len(f)], s[len(f):], balanced=balanced, n_rep=n_rep, random_state=seed)
        m = threshold_scores(lg, data.y, "margin")
        auc_margin = mia_auc(m[f], m[t], balanced=balanced, n_rep=n_rep, random_state=seed)
    if min(len(f), len(t)) < MIN_POINTS:
        warnings.warn(f"evaluate_unlearning on {len(f)} forget and {len(t)} test points: with fewer than "
                      f"{MIN_POINTS} on a side the membership AUCs are mostly noise (sd >= ~4 points).",
                      SmallSampleWarning, stacklevel=3)
    svc_out = svc_mia(lg, data.y, r, f, t, random_state=seed) if svc else {}
    return UnlearningMetrics(UA=acc(f), RA=acc(r), TA=acc(t), AUC_margin=auc_margin, AUC=auc, svc=svc_out,
                             n_forget=int(len(f)), n_test=int(len(t)))


_METRICS = Satisfies(lambda v: isinstance(v, Mapping | UnlearningMetrics), "a dict of metrics or UnlearningMetrics",
                     [None, "UA", 3.0], valid={"UA": 1.0, "RA": 1.0, "TA": 1.0, "AUC": 50.0})


@validate_args(metrics=[_METRICS], reference=[_METRICS], keys=[SequenceOf(InstanceOf(str))])
def avg_gap(metrics: Mapping[str, float] | UnlearningMetrics, reference: Mapping[str, float] | UnlearningMetrics,
            keys: Sequence[str] = METRIC_KEYS) -> float:
    """Mean over ``keys`` of |metric - reference metric| (AMUN's "Avg Gap" to the retrained model)."""
    a = metrics.to_dict() if isinstance(metrics, UnlearningMetrics) else metrics
    b = reference.to_dict() if isinstance(reference, UnlearningMetrics) else reference
    missing = [k for k in keys if k not in a or k not in b]
    if missing:
        raise InputError(f"avg_gap: metrics {missing} are missing.")
    bad = {k: (a[k], b[k]) for k in keys if not (np.isfinite(float(a[k])) and np.isfinite(float(b[k])))}
    if bad:
        raise InputError(f"avg_gap needs finite metrics; got non-finite (metric, reference) values {bad}.")
    return float(np.mean([abs(a[k] - b[k]) for k in keys]))
