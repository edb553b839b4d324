"""Kernel pieces of the two-sample tests (torch, float64): the MMD estimators, the test-power criterion,
the permutation and wild-bootstrap nulls. Shared by the detectors in ``_mmd``."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.optional import require

torch = require("torch", extra="topo", purpose="trustlab.methods.topodetect")


def sqdist(A: Any, B: Any) -> Any:
    """Pairwise squared Euclidean distances (clamped at 0)."""
    d = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2 * A @ B.T
    return d.clamp_min(0.0)


def median_sq(A: Any) -> float:
    """Median of the positive pairwise squared distances of A (1.0 if there are none)."""
    d = sqdist(A, A)
    iu = torch.triu_indices(len(A), len(A), 1)
    v = d[iu[0], iu[1]]
    v = v[v > 0]
    return float(v.median()) if len(v) else 1.0


def mmd2_and_var(K: Any, nx: int) -> tuple[Any, Any]:
    """Unbiased MMD^2 (one-sample-U cross term, as Liu et al. 2020) and the H1 variance estimate
    ``4 (V1 - V2^2)`` of ``sqrt(n) MMD^2`` from the pooled kernel matrix K (x rows first, equal sizes)."""
    Kxx, Kyy, Kxy = K[:nx, :nx], K[nx:, nx:], K[:nx, nx:]
    n = nx
    ny = K.shape[0] - nx
    xx = (Kxx.sum() - Kxx.diagonal().sum()) / (n * (n - 1))
    yy = (Kyy.sum() - Kyy.diagonal().sum()) / (ny * (ny - 1))
    if n == ny:
        xy = (Kxy.sum() - Kxy.diagonal().sum()) / (n * (n - 1))
        H = Kxx + Kyy - Kxy - Kxy.T
        V1 = (H.sum(1) / n).dot(H.sum(1) / n) / n
        V2 = H.sum() / n / n
        var = 4 * (V1 - V2 ** 2)
    else:
        xy = Kxy.mean()
        var = K.new_zeros(())
    return xx + yy - 2 * xy, var


def power_criterion(K: Any, nx: int) -> Any:
    """``J = MMD^2_u / sqrt(V + 1e-8)`` (to be maximised when training a kernel)."""
    m, v = mmd2_and_var(K, nx)
    return m / torch.sqrt(v.clamp_min(0.0) + 1e-8)


def permutation_null(K: np.ndarray, nx: int, n_null: int, rng: np.random.Generator) -> tuple[float, np.ndarray]:
    """The unbiased-MMD^2 statistic (all-pairs cross term, so sizes may differ) and ``n_null`` permuted
    copies, vectorised over permutations."""
    m = len(K)
    ny = m - nx
    diag = np.diag(K)

    def stats(V: np.ndarray) -> np.ndarray:
        KV = V @ K
        sxx = (KV * V).sum(1) - V @ diag
        W = 1.0 - V
        syy = (((W @ K) * W).sum(1)) - W @ diag
        sxy = (KV * W).sum(1)
        return sxx / (nx * (nx - 1)) + syy / (ny * (ny - 1)) - 2 * sxy / (nx * ny)

    base = np.zeros((1, m))
    base[0, :nx] = 1.0
    V = np.zeros((n_null, m))
    for b in range(n_null):
        V[b, rng.permutation(m)[:nx]] = 1.0
    return float(stats(base)[0]), stats(V)


def wild_bootstrap_null(K: np.ndarray, n: int, n_null: int, rng: np.random.Generator, ln: float = 0.2
                        ) -> tuple[float, np.ndarray]:
    """The unbiased statistic ``MMD^2_u = sum_{i != j} H_ij / (n (n - 1))``, ``H = Kxx + Kyy - Kxy - Kyx``
    (equal sizes; the one-sample-U estimator the power criterion ``J`` is trained on), and ``n_null``
    wild-bootstrap copies ``sum_{i != j} w_i w_j H_ij / (n (n - 1))`` with AR(1) Gaussian multipliers
    (``ar = exp(-1/ln)``, SAMMD's process).

    The diagonal ``H_ii`` is left out of both. SAMMD's code bootstraps the V-statistic ``mean(H)``: its diagonal
    part ``sum_i H_ii / n^2`` is nearly constant in the statistic but enters every bootstrap copy with random
    weights ``w_i^2``; with a sharp (trained) kernel that noise is larger than the MMD signal, and the test never
    rejects (type-I and power 0; docs/papers/topodetect.md, "The wild-bootstrap fix")."""
    Kxx, Kyy, Kxy = K[:n, :n], K[n:, n:], K[:n, n:]
    H = Kxx + Kyy - Kxy - Kxy.T
    np.fill_diagonal(H, 0.0)
    ar = np.exp(-1.0 / ln)
    e = rng.standard_normal((n_null, n))
    w = np.empty_like(e)
    w[:, 0] = e[:, 0]
    for t in range(1, n):
        w[:, t] = ar * w[:, t - 1] + np.sqrt(1 - ar ** 2) * e[:, t]
    den = n * (n - 1)
    boot = ((w @ H) * w).sum(1) / den
    return float(H.sum() / den), boot
