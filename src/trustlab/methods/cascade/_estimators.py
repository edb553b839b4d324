"""Quality estimators: from a SelectionTable to QualityEstimates for every (query, run-set).

* :class:`SyntheticNoiseEstimator` -- the RouterBench protocol: noisy copies of the true quality before
  (``sigma_a``) and after (``sigma_p``) a model runs, each calibrated by a linear regression per model;
  ``sigma_j = std(ante - post)`` is the uncertainty of an unrun model. A *simulation*: it reads the
  table's true quality and calibrates on the very rows it estimates (``in_sample`` is set on every row).
* :class:`ClassificationEstimator` -- the paper's classification features: per-query features, ``1 /
  #options``, for each pair of run models the Jensen-Shannon divergence of their class distributions and
  whether their arg-maxes agree, and for the target model, if it ran, its top class probabilities and
  entropy; one logistic regression per (target model, run-set) on 0/1 correctness.
* :class:`OpenFormEstimator` -- the open-form features: agreement (equal extracted answers) of run models
  and the target's token log-prob statistics (sum / 100, mean, min, median, 25 % and 10 % quantiles, log
  length, answer-found flag); one logistic regression per (target, run-set).

The covariance fit of both feature estimators is the paper's: ``Sigma(R) = Cov[pred(R) - pred(all run)]`` over
the rows the estimator was fitted on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import (
    Boolean,
    InstanceOf,
    Interval,
    Options,
    RandomStateRule,
    Satisfies,
    validate_params,
)
from trustlab.core.exceptions import InputError, NotFittedError
from trustlab.core.seeding import check_random_state
from trustlab.methods.cascade._estimates import QualityEstimates, diagonal_covariances
from trustlab.methods.cascade._table import SelectionTable

__all__ = ["QualityEstimator", "SyntheticNoiseEstimator", "ClassificationEstimator", "OpenFormEstimator",
           "NOISE_LEVELS", "estimator_from_dict"]

#: RouterBench noise levels of the official scripts: (sigma ante, sigma post, cost sigma ante, cost sigma post)
NOISE_LEVELS: dict[str, tuple[float, float, float, float]] = {
    "low": (0.6, 0.3, 2e-4, 5e-5),
    "medium": (1.6, 0.8, 4e-4, 1e-4),
    "high": (2.4, 1.2, 100.0, 100.0),
}


def _pair_rule(what: str) -> Satisfies:
    return Satisfies(lambda v: isinstance(v, tuple | list) and len(v) == 2 and all(
        isinstance(x, int | float) and not isinstance(x, bool) and x >= 0 for x in v),
        f"a pair ({what} before, {what} after) of numbers >= 0", ["x", (1.0,), (-1.0, 1.0)], (0.5, 0.25))


_TABLE = [InstanceOf(SelectionTable)]


class QualityEstimator(BaseEstimator):
    """Base: ``fit(table)`` (when ``needs_fit``), ``estimate(table) -> QualityEstimates``, ``to_dict()``."""

    needs_fit: ClassVar[bool] = True
    _constraints: ClassVar[dict[str, list[Any]]] = {}

    def _validate(self) -> None:
        validate_params(type(self).__name__, self.get_params(deep=False), self._constraints)

    @validate_args(table=_TABLE)
    def fit(self, table: SelectionTable) -> QualityEstimator:  # pragma: no cover - overridden
        raise NotImplementedError

    @validate_args(table=_TABLE)
    def estimate(self, table: SelectionTable) -> QualityEstimates:  # pragma: no cover - overridden
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError


def _calibrate(noisy: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per column: the least-squares line from the noisy value to the truth, evaluated at the noisy value."""
    from sklearn.linear_model import LinearRegression

    out = np.empty_like(noisy)
    for j in range(noisy.shape[1]):
        out[:, j] = LinearRegression().fit(noisy[:, j : j + 1], truth[:, j]).predict(noisy[:, j : j + 1])
    return out


class SyntheticNoiseEstimator(QualityEstimator):
    """The RouterBench synthetic-noise estimator (a controlled-noise simulation on a labelled table).

    Parameters
    ----------
    noise : {"low", "medium", "high"} or (sigma_a, sigma_p)
        Quality noise before / after running a model (the official levels: 0.6/0.3, 1.6/0.8, 2.4/1.2).
    cost_noise : (sigma_a, sigma_p) or None
        Cost noise; None takes the level's (2e-4/5e-5, 4e-4/1e-4, 100/100 -- the last collapses costs to
        per-model constants), or (0, 0) with a numeric ``noise``.
    random_state : None, int or Generator
    """

    needs_fit: ClassVar[bool] = False
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "noise": [Options(list(NOISE_LEVELS)), _pair_rule("sigma")],
        "cost_noise": [None, _pair_rule("sigma")], "random_state": [RandomStateRule()]}

    def __init__(self, *, noise: Any = "low", cost_noise: Any = None, random_state: Any = None) -> None:
        self.noise = noise
        self.cost_noise = cost_noise
        self.random_state = random_state

    def _levels(self) -> tuple[float, float, float, float]:
        if isinstance(self.noise, str):
            a, p, ca, cp = NOISE_LEVELS[self.noise]
        else:
            (a, p), (ca, cp) = self.noise, (0.0, 0.0)
        if self.cost_noise is not None:
            ca, cp = self.cost_noise
        return float(a), float(p), float(ca), float(cp)

    @validate_args(table=_TABLE)
    def fit(self, table: SelectionTable) -> SyntheticNoiseEstimator:
        """Nothing to fit: the protocol calibrates on the rows it estimates."""
        self._validate()
        return self

    @validate_args(table=_TABLE)
    def estimate(self, table: SelectionTable) -> QualityEstimates:
        self._validate()
        table.require("quality", "cost")
        a, p, ca, cp = self._levels()
        rng = check_random_state(self.random_state)
        q, c = table.quality, table.cost
        ante = _calibrate(q + rng.normal(0, a, q.shape), q) if a > 0 else q.copy()
        post = _calibrate(q + rng.normal(0, p, q.shape), q) if p > 0 else q.copy()
        cost = _calibrate(c + rng.normal(0, ca, c.shape), c) if ca > 0 else c.copy()
        sigma = np.std(ante - post, axis=0)
        return QualityEstimates(table.models, np.clip(cost, 0, None), ante=ante, post=post,
                                cov=diagonal_covariances(sigma), quality=q, true_cost=c,
                                in_sample=np.ones(table.n_queries, bool), kind=f"synthetic-{self.noise}")

    def to_dict(self) -> dict[str, Any]:
        return {"class": "SyntheticNoiseEstimator", "params": {
            "noise": self.noise if isinstance(self.noise, str) else list(self.noise),
            "cost_noise": None if self.cost_noise is None else list(self.cost_noise),
            "random_state": self.random_state if isinstance(self.random_state, int | None) else None}}


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


class _FeatureEstimator(QualityEstimator):
    """One logistic regression per (target model, run-set) on features built from the run models' answers."""

    _constraints: ClassVar[dict[str, list[Any]]] = {
        "C": [Interval("real", 0, None, closed="neither")], "max_run_set": [None, Interval(int, 0, None)],
        "covariance": [Boolean()], "cost": [Options(["table", "mean"])], "query_features": [Boolean()]}

    def __init__(self, *, C: float = 1.0, max_run_set: int | None = None, covariance: bool = True,
                 cost: str = "table", query_features: bool = True) -> None:
        self.C = C
        self.max_run_set = max_run_set
        self.covariance = covariance
        self.cost = cost
        self.query_features = query_features

    def _sets(self, k: int) -> np.ndarray:
        d = k if self.max_run_set is None else min(self.max_run_set, k)
        return np.array(sorted({m for m in range(2**k) if bin(m).count("1") <= d} | {2**k - 1}), dtype=np.int64)

    def _base(self, table: SelectionTable) -> list[np.ndarray]:
        return [table.features] if self.query_features and table.features is not None else []

    def _design(self, feats: dict[str, Any], mask: int, t: int, k: int) -> np.ndarray:
        run = [j for j in range(k) if mask >> j & 1]
        parts = list(feats["base"])
        parts += [feats["pairs"][(i, j)] for a, i in enumerate(run) for j in run[a + 1 :]]
        if mask >> t & 1:
            parts.append(feats["self"][t])
        return np.hstack(parts) if parts else np.zeros((feats["n"], 1))

    def _check_table(self, table: SelectionTable, *, fit: bool) -> None:
        table.require("answers", *(("quality",) if fit else ()))
        fitted = getattr(self, "models_", None)
        if fitted is not None and tuple(table.models) != tuple(fitted):
            raise InputError(f"{type(self).__name__} was fitted on models {list(fitted)}; the table has "
                             f"{list(table.models)}.")

    @validate_args(table=_TABLE)
    def fit(self, table: SelectionTable) -> _FeatureEstimator:
        """Fit the regressions (and covariances) on ``table``'s rows (0/1 correctness in ``quality``)."""
        from sklearn.linear_model import LogisticRegression

        self._validate()
        self.models_ = None
        self._check_table(table, fit=True)
        q = table.quality
        if not np.isin(q, (0.0, 1.0)).all():
            raise InputError(f"{type(self).__name__} needs 0/1 quality (correctness) to fit its logistic regressions; "
                             f"the table has values in [{q.min():.3g}, {q.max():.3g}] that are not 0 or 1.")
        k = table.n_models
        feats = self._featurize(table)
        self.sets_ = self._sets(k)
        self.coef_: dict[tuple[int, int], np.ndarray] = {}
        preds = {}
        for mask in self.sets_:
            pm = np.empty((table.n_queries, k))
            for t in range(k):
                X, y = self._design(feats, int(mask), t, k), q[:, t]
                if y.min() == y.max():
                    w = np.concatenate([np.zeros(X.shape[1]), [np.inf if y[0] > 0 else -np.inf]])
                else:
                    lr = LogisticRegression(C=self.C, solver="newton-cholesky", max_iter=200).fit(X, y)
                    w = np.concatenate([lr.coef_[0], lr.intercept_])
                self.coef_[(int(mask), t)] = w
                pm[:, t] = self._predict(X, w)
            preds[int(mask)] = pm
        full = preds[2**k - 1]
        self.cov_ = None
        if self.covariance:
            self.cov_ = np.zeros((2**k, k, k))
            for mask, pm in preds.items():
                self.cov_[mask] = np.atleast_2d(np.cov((pm - full).T)) if len(pm) > 1 else 0.0
        self.mean_cost_ = None if table.cost is None else table.cost.mean(axis=0)
        self.fit_keys_ = set(table.row_keys())
        self.models_ = tuple(table.models)
        return self

    @staticmethod
    def _predict(X: np.ndarray, w: np.ndarray) -> np.ndarray:
        if not np.isfinite(w[-1]):
            return np.full(len(X), 1.0 if w[-1] > 0 else 0.0)
        return _sigmoid(X @ w[:-1] + w[-1])

    @validate_args(table=_TABLE)
    def estimate(self, table: SelectionTable) -> QualityEstimates:
        """Estimates for every fitted run-set on ``table``'s rows (answers needed, quality optional)."""
        if getattr(self, "coef_", None) is None:
            raise NotFittedError(f"This {type(self).__name__} is not fitted yet; call fit(table) first.")
        self._check_table(table, fit=False)
        k = table.n_models
        feats = self._featurize(table)
        mean = np.empty((len(self.sets_), table.n_queries, k))
        for s, mask in enumerate(self.sets_):
            for t in range(k):
                mean[s, :, t] = self._predict(self._design(feats, int(mask), t, k), self.coef_[(int(mask), t)])
        if self.cost == "table" and table.cost is not None:
            cost = table.cost
        elif self.mean_cost_ is not None:
            cost = np.tile(self.mean_cost_, (table.n_queries, 1))
        else:
            raise InputError(f"{type(self).__name__} has no cost estimates: the table has no costs and the "
                             "fitting table had none either.")
        keys = table.row_keys()
        in_sample = np.array([key in self.fit_keys_ for key in keys], dtype=bool)
        return QualityEstimates(table.models, cost, mean=mean, sets=self.sets_, cov=self.cov_,
                                quality=table.quality, true_cost=table.cost, in_sample=in_sample,
                                kind=type(self).__name__)

    def to_dict(self) -> dict[str, Any]:
        if getattr(self, "coef_", None) is None:
            raise NotFittedError(f"This {type(self).__name__} is not fitted yet; nothing to serialise.")
        return {"class": type(self).__name__, "params": self.get_params(deep=False), "models": list(self.models_),
                "sets": self.sets_.tolist(),
                "coef": {f"{m}:{t}": [float(x) if np.isfinite(x) else str(x) for x in w]
                         for (m, t), w in self.coef_.items()},
                "cov": None if self.cov_ is None else self.cov_.tolist(),
                "mean_cost": None if self.mean_cost_ is None else self.mean_cost_.tolist()}

    @classmethod
    def _from_dict(cls, d: dict[str, Any]) -> _FeatureEstimator:
        est = cls(**d["params"])
        est.models_ = tuple(d["models"])
        est.sets_ = np.asarray(d["sets"], dtype=np.int64)
        est.coef_ = {(int(key.split(":")[0]), int(key.split(":")[1])): np.array([float(x) for x in w])
                     for key, w in d["coef"].items()}
        est.cov_ = None if d["cov"] is None else np.asarray(d["cov"], dtype=np.float64)
        est.mean_cost_ = None if d["mean_cost"] is None else np.asarray(d["mean_cost"], dtype=np.float64)
        est.fit_keys_ = set()
        return est

    def _featurize(self, table: SelectionTable) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError


def _entropy(p: np.ndarray) -> np.ndarray:
    return -(p * np.log2(np.maximum(p, 1e-16))).sum(axis=-1)


def _kl(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return (p * np.log2(np.maximum(p, 1e-16) / np.maximum(q, 1e-16))).sum(axis=-1)


class ClassificationEstimator(_FeatureEstimator):
    """The paper's classification estimator; ``answers`` hold class-probability vectors.

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularisation of each logistic regression.
    n_top : int, default=2
        Highest class probabilities of the target model used as certainty features (the official scripts: 2).
    max_run_set : int or None
        Fit run-sets of at most this many models (None: all 2^k); must be >= the policy's max_depth.
    covariance : bool, default=True
        Fit ``Sigma(R)``; False gives estimates without uncertainty.
    cost : {"table", "mean"}
        Cost estimates: the table's own per-query costs (known in advance, like tokens x price) or the
        per-model mean of the fitting rows.
    query_features : bool, default=True
        Use the table's ``features`` (e.g. a benchmark one-hot).
    """

    _constraints: ClassVar[dict[str, list[Any]]] = {**_FeatureEstimator._constraints,
                                                    "n_top": [Interval(int, 1, None)]}

    def __init__(self, *, C: float = 1.0, n_top: int = 2, max_run_set: int | None = None, covariance: bool = True,
                 cost: str = "table", query_features: bool = True) -> None:
        super().__init__(C=C, max_run_set=max_run_set, covariance=covariance, cost=cost, query_features=query_features)
        self.n_top = n_top

    def _featurize(self, table: SelectionTable) -> dict[str, Any]:
        n, k = table.n_queries, table.n_models
        width = max(len(np.atleast_1d(a)) for a in table.answers.ravel() if a is not None)
        P = np.zeros((n, k, width))
        n_opt = np.ones(n)
        for i in range(n):
            for j in range(k):
                a = table.answers[i, j]
                if a is None:
                    continue
                v = np.asarray(a, dtype=np.float64).reshape(-1)
                if v.dtype.kind not in "f" or not np.isfinite(v).all():
                    raise InputError(f"ClassificationEstimator needs class-probability vectors as answers; query "
                                     f"{i}, model {table.models[j]!r} has {a!r}.")
                P[i, j, : len(v)] = v
                n_opt[i] = max(n_opt[i], len(v))
        top = -np.sort(-P, axis=2)[:, :, : self.n_top]
        if top.shape[2] < self.n_top:
            top = np.concatenate([top, np.zeros((n, k, self.n_top - top.shape[2]))], axis=2)
        self_f = [np.column_stack([top[:, t], _entropy(P[:, t])]) for t in range(k)]
        pairs = {}
        for i in range(k):
            for j in range(i + 1, k):
                m = (P[:, i] + P[:, j]) / 2
                js = (_kl(P[:, i], m) + _kl(P[:, j], m)) / 2
                agree = (P[:, i].argmax(1) == P[:, j].argmax(1)).astype(float)
                pairs[(i, j)] = np.column_stack([js, agree])
        return {"n": n, "base": [*self._base(table), (1.0 / np.maximum(n_opt, 1))[:, None]], "self": self_f,
                "pairs": pairs}


def _open_form(a: Any) -> tuple[Any, list[float]]:
    """(extracted answer or None, token log-probs) from a string, number or dict answer."""
    if a is None:
        return None, []
    if isinstance(a, dict):
        ans = a.get("answer", a.get("text"))
        return (None if ans is None or ans == "" else ans), [float(x) for x in (a.get("logprobs") or [])]
    if isinstance(a, str):
        return (a.strip() or None), []
    return a, []


class OpenFormEstimator(_FeatureEstimator):
    """The paper's open-form estimator; ``answers`` are strings, numbers or dicts with ``answer`` (the
    extracted answer, None when not found) and ``logprobs`` (the answer's token log-probs).

    Parameters are those of :class:`ClassificationEstimator` without ``n_top``.
    """

    def _featurize(self, table: SelectionTable) -> dict[str, Any]:
        n, k = table.n_queries, table.n_models
        parsed = [[_open_form(table.answers[i, j]) for j in range(k)] for i in range(n)]
        self_f = []
        for t in range(k):
            rows = []
            for i in range(n):
                ans, lp = parsed[i][t]
                if lp:
                    v = np.asarray(lp)
                    rows.append([v.sum() / 100, v.mean(), v.min(), np.median(v), np.quantile(v, 0.25),
                                 np.quantile(v, 0.1), np.log(len(v)), float(ans is not None)])
                else:
                    rows.append([0.0] * 7 + [float(ans is not None)])
            self_f.append(np.asarray(rows))
        pairs = {}
        for i in range(k):
            for j in range(i + 1, k):
                pairs[(i, j)] = np.array([[float(parsed[r][i][0] is not None and str(parsed[r][i][0]) ==
                                                 str(parsed[r][j][0]))] for r in range(n)])
        return {"n": n, "base": self._base(table), "self": self_f, "pairs": pairs}


_CLASSES = {"SyntheticNoiseEstimator": SyntheticNoiseEstimator, "ClassificationEstimator": ClassificationEstimator,
            "OpenFormEstimator": OpenFormEstimator}


def estimator_from_dict(d: dict[str, Any]) -> QualityEstimator:
    """Rebuild an estimator written by ``to_dict()`` (fitted state included)."""
    cls = _CLASSES.get(d.get("class", ""))
    if cls is None:
        raise InputError(f"Unknown estimator class {d.get('class')!r}; known: {sorted(_CLASSES)}.")
    if cls is SyntheticNoiseEstimator:
        params = dict(d["params"])
        for key in ("noise", "cost_noise"):
            if isinstance(params.get(key), list):
                params[key] = tuple(params[key])
        return SyntheticNoiseEstimator(**params)
    return cls._from_dict(d)


def auto_estimator(table: SelectionTable) -> QualityEstimator:
    """ClassificationEstimator for probability-vector answers, OpenFormEstimator for text or dicts."""
    table.require("answers")
    first = next(a for a in table.answers.ravel() if a is not None)
    if isinstance(first, np.ndarray | Sequence) and not isinstance(first, str):
        return ClassificationEstimator()
    return OpenFormEstimator()
