"""Quality estimates for every (query, run-set), and the expected quality E[max] of supermodels.

A run-set ``R`` is a bitmask over the models (bit ``j`` set = model ``j`` has run). For each query an
estimator gives, for every run-set, the estimated quality of every model: post-hoc for models in ``R``
(their answers are known), ex-ante for the others (conditioned on the answers of ``R``). The uncertainty of
these estimates is a covariance ``Sigma(R)`` shared by the queries. Estimates are computed once, here,
for every (query, run-set); the policies never call an estimator inside their loops.

The quality of a *supermodel* ``M`` (run every model of ``M``, answer with the best) is
``E[max_{j in M} Q_j]`` with ``Q ~ N(mu_R, Sigma(R))``, by scrambled-Sobol Monte Carlo: one set of
``n_samples`` normal points in ``k`` dimensions, ``X = mu + Z L^T`` with ``L = chol(Sigma(R) + 1e-12 I)``
(for a diagonal Sigma this scales each model's samples by its *standard deviation*), and the supermodel
value is the sample mean of the maximum over ``M``'s columns. Because every supermodel given ``R`` uses the
same samples, the estimate is exactly submodular in ``M``, which is what makes the pruning lemma exact.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, takes_any, validate_args
from trustlab.core.constraints import Boolean, Interval, RandomStateRule
from trustlab.core.exceptions import InputError
from trustlab.core.seeding import check_random_state
from trustlab.methods.cascade._table import ROWS

__all__ = ["QualityEstimates", "expected_max", "sobol_normal", "mask_bits", "RUN_VARIANCE"]

#: variance given to the estimate of a model that has run (its answer is known), as in the paper
RUN_VARIANCE = 1e-6
#: rows per chunk are chosen so one chunk's samples stay below this many floats
_CHUNK_FLOATS = 4_000_000
#: the run-set arguments of the lookups the policy engine calls in its inner loops (not validated per call)
_HOT_MASK = "a run-set bitmask on the engine's hot path; the index lookup refuses an unknown one"


def mask_bits(masks: Any, k: int) -> np.ndarray:
    """``(len(masks), k)`` booleans: bit ``j`` of each mask."""
    m = np.asarray(masks, dtype=np.int64).reshape(-1)
    return ((m[:, None] >> np.arange(k)[None, :]) & 1).astype(bool)


@validate_args(n_samples=[Interval(int, 1, None)], dim=[Interval(int, 1, 64)], random_state=[RandomStateRule()],
               centre=[Boolean()])
def sobol_normal(n_samples: int = 128, dim: int = 1, random_state: Any = None, *, centre: bool = False) -> np.ndarray:
    """``(n_samples, dim)`` standard-normal points from a scrambled Sobol sequence (``scipy.stats.qmc``).

    A power of two keeps Sobol's balance properties (scipy warns otherwise, so other sizes are drawn as
    the next power of two and truncated). ``centre`` subtracts each column's sample mean, so that the Monte
    Carlo value of a single model is its mean (to rounding), consistent with the exact value of a single
    model that the supermodel values use.
    """
    from scipy.stats import norm, qmc

    m = int(np.ceil(np.log2(max(n_samples, 1))))
    u = qmc.Sobol(d=dim, scramble=True, seed=check_random_state(random_state)).random_base2(m)[:n_samples]
    z = norm.ppf(np.clip(u, 1e-12, 1 - 1e-12))
    return z - z.mean(axis=0) if centre else z


def cholesky_factor(cov: np.ndarray) -> np.ndarray:
    """``L`` with ``L L^T = cov + 1e-12 I``; a matrix that is not positive semi-definite has its negative
    eigenvalues clipped to 0 first (with a warning)."""
    k = cov.shape[0]
    try:
        return np.linalg.cholesky(cov + 1e-12 * np.eye(k))
    except np.linalg.LinAlgError:
        w, v = np.linalg.eigh((cov + cov.T) / 2)
        warnings.warn(f"A quality covariance is not positive semi-definite (smallest eigenvalue {w.min():.3g}); "
                      "its negative eigenvalues are clipped to 0.", UserWarning, stacklevel=3)
        fixed = (v * np.clip(w, 0, None)) @ v.T
        return np.linalg.cholesky(fixed + 1e-9 * np.eye(k))


def supermodel_values(mu: np.ndarray, W: np.ndarray | None, masks: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """``(n, len(masks))`` E[max] of each supermodel for each row of ``mu`` (n, k).

    ``W`` is ``Z L^T`` (S, k) or None (no uncertainty: the max of the means). ``parents[c]`` is the column of
    a mask that equals ``masks[c]`` minus one model (or -1): its running maximum is reused, so each value
    costs one ``maximum`` over the samples. Masks must come after their parents. A single model's value is
    its mean exactly (``E[Q_j] = mu_j``, as the official ``compute_expected_max`` special-cases).
    """
    n, k = mu.shape
    bits = mask_bits(masks, k)
    out = np.empty((n, len(masks)))
    if W is None:
        for c in range(len(masks)):
            out[:, c] = mu[:, bits[c]].max(axis=1)
        return out
    S = W.shape[0]
    step = max(1, _CHUNK_FLOATS // max(1, S * (k + len(masks))))
    Wt = np.ascontiguousarray(W.T)
    for s in range(0, n, step):
        X = mu[s : s + step].T[:, :, None] + Wt[:, None, :]  # (k, rows, S): each model's samples contiguous
        run: list[np.ndarray | None] = [None] * len(masks)
        for c in range(len(masks)):
            p = int(parents[c])
            new = np.flatnonzero(bits[c] & ~bits[p]) if p >= 0 else np.flatnonzero(bits[c])
            if p >= 0 and run[p] is not None and len(new) == 1:
                run[c] = np.maximum(run[p], X[new[0]])
            else:
                run[c] = X[bits[c]].max(axis=0)
            single = np.flatnonzero(bits[c])
            out[s : s + step, c] = mu[s : s + step, single[0]] if len(single) == 1 else run[c].mean(axis=1)
    return out


@dataclass(eq=False)
class QualityEstimates:
    """Quality estimates of every model for every (query, run-set), cost estimates and the truth.

    Two storages: *separable* (``ante`` and ``post``, each (n, k): a model's estimate is ``post`` once it
    ran and ``ante`` before, whatever else ran, as in the RouterBench protocol) or *dense* (``mean`` of shape
    (n_sets, n, k) for the run-sets listed in ``sets``). ``cov`` is None (no uncertainty) or (2^k, k, k): the
    covariance of the estimates given each run-set. ``cost`` (n, k) are the cost estimates decisions use;
    ``quality`` / ``true_cost`` the realised values used to evaluate (and to tune budgets on tuning rows).
    ``in_sample`` marks rows the estimator was fitted on.
    """

    models: tuple[str, ...]
    cost: np.ndarray
    ante: np.ndarray | None = None
    post: np.ndarray | None = None
    mean: np.ndarray | None = None
    sets: np.ndarray | None = None
    cov: np.ndarray | None = None
    quality: np.ndarray | None = None
    true_cost: np.ndarray | None = None
    in_sample: np.ndarray | None = None
    kind: str = ""

    def __post_init__(self) -> None:
        self.models = tuple(self.models)
        k = len(self.models)
        self.cost = np.asarray(self.cost, dtype=np.float64)
        n = self.cost.shape[0]
        if self.cost.shape != (n, k) or not np.isfinite(self.cost).all() or (self.cost < 0).any():
            raise InputError(f"QualityEstimates.cost must be a finite (n, {k}) array >= 0. Got shape {self.cost.shape}.")
        if (self.ante is None) != (self.post is None) or (self.ante is None) == (self.mean is None):
            raise InputError("QualityEstimates needs either 'ante' and 'post' (separable) or 'mean' and 'sets' (dense).")
        if self.mean is not None:
            self.mean = np.asarray(self.mean, dtype=np.float64)
            self.sets = np.asarray(self.sets, dtype=np.int64)
            if self.mean.shape != (len(self.sets), n, k):
                raise InputError(f"QualityEstimates.mean must have shape (len(sets), {n}, {k}). Got {self.mean.shape}.")
            self._index = np.full(2**k, -1, dtype=np.int64)
            self._index[self.sets] = np.arange(len(self.sets))
        else:
            self.ante, self.post = (np.asarray(a, dtype=np.float64) for a in (self.ante, self.post))
            if self.ante.shape != (n, k) or self.post.shape != (n, k):
                raise InputError(f"QualityEstimates.ante/post must have shape ({n}, {k}).")
        for name in ("ante", "post", "mean"):
            a = getattr(self, name)
            if a is not None and not np.isfinite(a).all():
                raise InputError(f"QualityEstimates.{name} has NaN or infinite values.")
        if self.cov is not None:
            self.cov = np.asarray(self.cov, dtype=np.float64)
            if self.cov.shape != (2**k, k, k) or not np.isfinite(self.cov).all():
                raise InputError(f"QualityEstimates.cov must be a finite (2^k={2**k}, {k}, {k}) array or None.")
        for name in ("quality", "true_cost"):
            a = getattr(self, name)
            if a is not None:
                setattr(self, name, np.asarray(a, dtype=np.float64))
                if getattr(self, name).shape != (n, k):
                    raise InputError(f"QualityEstimates.{name} must have shape ({n}, {k}).")
        self.in_sample = np.zeros(n, bool) if self.in_sample is None else np.asarray(self.in_sample, bool)

    @property
    def n(self) -> int:
        return int(self.cost.shape[0])

    @property
    def k(self) -> int:
        return len(self.models)

    def __len__(self) -> int:
        return self.n

    @takes_any(mask=_HOT_MASK)
    def has_set(self, mask: int) -> bool:
        return self.mean is None or bool(self._index[mask] >= 0)

    @takes_any(mask=_HOT_MASK, rows="row indices on the engine's hot path; numpy indexing refuses bad ones")
    def mean_for(self, mask: int, rows: Any = None) -> np.ndarray:
        """(n, k) estimates given run-set ``mask`` (for ``rows`` only when given)."""
        sl = slice(None) if rows is None else rows
        if self.mean is None:
            b = mask_bits([mask], self.k)[0]
            return np.where(b[None, :], self.post[sl], self.ante[sl])
        i = int(self._index[mask])
        if i < 0:
            raise InputError(f"These estimates hold no run-set {mask:#b}; the estimator was fitted with a smaller "
                             "max_run_set (raise it, or lower the policy's max_depth).")
        return self.mean[i][sl]

    @takes_any(masks="run-set bitmasks on the engine's hot path; the index lookup refuses unknown ones",
               rows="row indices on the engine's hot path; numpy indexing refuses bad ones")
    def mean_rows(self, masks: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(len(rows), k): row ``rows[t]``'s estimates given run-set ``masks[t]``."""
        if self.mean is None:
            b = mask_bits(masks, self.k)
            return np.where(b, self.post[rows], self.ante[rows])
        idx = self._index[np.asarray(masks, dtype=np.int64)]
        if (idx < 0).any():
            raise InputError("These estimates lack a run-set the policy reached; raise the estimator's max_run_set.")
        return self.mean[idx, rows]

    @takes_any(mask=_HOT_MASK)
    def cov_for(self, mask: int) -> np.ndarray | None:
        return None if self.cov is None else self.cov[mask]

    @validate_args(rows=[ROWS])
    def subset(self, rows: Any) -> QualityEstimates:
        """The estimates of ``rows`` only (covariances are shared and kept)."""
        idx = np.arange(self.n)[np.asarray(rows)]

        def pick(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[idx]

        return replace(self, cost=self.cost[idx], ante=pick(self.ante), post=pick(self.post),
                       mean=None if self.mean is None else self.mean[:, idx], quality=pick(self.quality),
                       true_cost=pick(self.true_cost), in_sample=self.in_sample[idx])

    def without_uncertainty(self) -> QualityEstimates:
        """The same estimates with ``cov=None`` (supermodel quality = the max of the means)."""
        return replace(self, cov=None)

    def __repr__(self) -> str:
        store = "separable" if self.mean is None else f"dense, {len(self.sets)} run-sets"
        return (f"QualityEstimates({self.kind or 'custom'}: {self.n} queries x {self.k} models, {store}, "
                f"{'no uncertainty' if self.cov is None else 'with covariances'})")


def diagonal_covariances(sigma: np.ndarray) -> np.ndarray:
    """(2^k, k, k): ``sigma_j^2`` on the diagonal for models not run, ``RUN_VARIANCE`` for models run."""
    k = len(sigma)
    bits = mask_bits(np.arange(2**k), k)
    diag = np.where(bits, RUN_VARIANCE, np.asarray(sigma, dtype=float)[None, :] ** 2)
    out = np.zeros((2**k, k, k))
    out[:, np.arange(k), np.arange(k)] = diag
    return out


@validate_args(means=[ArrayLike(ndim=(1, 2))], cov=[None, ArrayLike(ndim=2)], n_samples=[Interval(int, 1, None)],
               random_state=[RandomStateRule()])
def expected_max(means: Any, cov: Any = None, *, n_samples: int = 128, random_state: Any = None) -> np.ndarray:
    """E[max_j Q_j] for ``Q ~ N(means, cov)``, per row of ``means`` (scrambled-Sobol Monte Carlo).

    ``cov=None`` returns the max of the means. A diagonal ``cov`` scales each column's samples by its
    standard deviation (the official code scaled by the variance).

    Examples
    --------
    >>> float(expected_max([0.0, 0.0], [[1.0, 0.0], [0.0, 1.0]], n_samples=4096, random_state=0)[0]).__round__(2)
    0.56
    """
    mu = np.atleast_2d(np.asarray(means, dtype=np.float64))
    k = mu.shape[1]
    if cov is None:
        return mu.max(axis=1)
    cov = np.asarray(cov, dtype=np.float64)
    if cov.shape != (k, k):
        raise InputError(f"The 'cov' argument of expected_max must have shape ({k}, {k}). Got {cov.shape} instead.")
    W = sobol_normal(n_samples, k, random_state) @ cholesky_factor(cov).T
    return supermodel_values(mu, W, np.array([2**k - 1]), np.array([-1]))[:, 0]
