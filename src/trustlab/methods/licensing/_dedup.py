"""De-duplication of submitted points: exact (hash of rounded feature bytes + label) or near (radius)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval, Options
from trustlab.core.exceptions import InputError

__all__ = ["DuplicateGroups", "find_duplicates", "embedded_duplicates"]


@dataclass
class DuplicateGroups:
    """Duplicate groups in submission (row) order.

    ``leader[i]``: the row that represents row ``i`` (the group's first row; ``leader[i] == i`` for kept
    rows); ``is_duplicate[i]``: row ``i`` repeats an earlier row (it is dropped before valuation).
    """

    mode: str
    tol: float
    decimals: int
    leader: np.ndarray
    is_duplicate: np.ndarray
    n_components: int | None = None  # "embedded": principal components of the space ``tol`` is measured in

    @property
    def n_duplicates(self) -> int:
        return int(self.is_duplicate.sum())

    def groups(self) -> dict[int, list[int]]:
        """Leader row -> every row of its group (the leader first), for groups of two or more."""
        out: dict[int, list[int]] = {}
        for i in np.flatnonzero(self.is_duplicate):
            out.setdefault(int(self.leader[i]), [int(self.leader[i])]).append(int(i))
        return out


def _row_keys(X: np.ndarray, y: np.ndarray, decimals: int) -> list[bytes]:
    Xr = np.ascontiguousarray(np.round(X.astype(np.float64), decimals) + 0.0)  # + 0.0 turns -0.0 into 0.0
    labels = [str(v).encode() for v in y.tolist()]
    return [hashlib.blake2b(row.tobytes() + b"\x00" + lab, digest_size=16).digest() for row, lab in zip(Xr, labels)]


@validate_args(X=[ArrayLike(ndim=2)], y=[ArrayLike(ndim=1, dtype="any")], mode=[Options(["exact", "near"])],
               tol=[Interval(float, 0, None)], decimals=[Interval(int, 0, 15)],
               _example=lambda: {"X": np.eye(3), "y": np.array([0, 1, 0])})
def find_duplicates(X: Any, y: Any, mode: str = "exact", tol: float = 1e-3, decimals: int = 6) -> DuplicateGroups:
    """Find rows that repeat an earlier row with the same label.

    ``mode="exact"``: rows whose features rounded to ``decimals`` places, together with the label, hash
    (BLAKE2b) to the same key. ``mode="near"``: a row within ``tol`` in the max-norm (``|x - x'|_inf <=
    tol``) of an earlier kept row with the same label joins that row's group (greedy in row order, the
    earliest such row; no chaining through dropped rows). ``tol`` is in the units of ``X``: standardise
    features of different scales first.

    Examples
    --------
    >>> X = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0004], [3.0, 3.0]])
    >>> find_duplicates(X, np.array([1, 1, 1, 2])).is_duplicate.tolist()
    [False, True, False, False]
    >>> find_duplicates(X, np.array([1, 1, 1, 2]), mode="near", tol=1e-3).is_duplicate.tolist()
    [False, True, True, False]
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if len(X) != len(y):
        raise InputError(f"The 'y' argument of find_duplicates must have {len(X)} labels. Got {len(y)}.")
    n = len(X)
    leader = np.arange(n)
    if mode == "exact":
        first: dict[bytes, int] = {}
        for i, key in enumerate(_row_keys(X, y, decimals)):
            leader[i] = first.setdefault(key, i)
    else:
        leader = _greedy_groups(X, y, tol, "chebyshev")
    return DuplicateGroups(mode, float(tol), int(decimals), leader, leader != np.arange(n))


def _greedy_groups(E: np.ndarray, y: np.ndarray, tol: float, metric: str) -> np.ndarray:
    """Leader of each row: the earliest kept row within ``tol`` (``metric``) with the same label, else itself."""
    from sklearn.neighbors import NearestNeighbors

    # a k-d tree: O(n log n) for a small radius (sklearn's "auto" picks brute force above 15 features, which is
    # O(n^2): 115 s at 100k x 20 against 0.9 s; the neighbour sets are identical)
    nn = NearestNeighbors(radius=tol, metric=metric, algorithm="kd_tree").fit(E)
    neigh = nn.radius_neighbors(E, return_distance=False)
    n = len(E)
    leader = np.arange(n)
    is_leader = np.zeros(n, dtype=bool)
    for i in range(n):
        cands = [j for j in neigh[i] if j < i and is_leader[j] and y[j] == y[i]]
        if cands:
            leader[i] = min(cands)
        else:
            is_leader[i] = True
    return leader


def _embed(X: np.ndarray, X_ref: np.ndarray, variance: float) -> tuple[np.ndarray, np.ndarray, int]:
    from sklearn.decomposition import PCA

    mu = X.mean(axis=0)
    if len(X) < 2 or not np.any(X.std(axis=0) > 0):
        return X - mu, X_ref - mu, X.shape[1]
    pca = PCA(n_components=variance if variance < 1 else None, svd_solver="full").fit(X - mu)
    return pca.transform(X - mu), pca.transform(X_ref - mu), int(pca.n_components_)


def _embedded_example() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    return {"X": np.vstack([X, X[:3] + 0.01]), "y": np.zeros(33, dtype=int), "X_ref": rng.normal(size=(20, 4))}


@validate_args(X=[ArrayLike(ndim=2)], y=[ArrayLike(ndim=1, dtype="any")], X_ref=[ArrayLike(ndim=2)],
               quantile=[Interval(float, 0, 1, closed="neither")], variance=[Interval(float, 0, 1, closed="right")],
               _example=_embedded_example)
def embedded_duplicates(X: Any, y: Any, X_ref: Any, quantile: float = 0.01, variance: float = 0.9) -> DuplicateGroups:
    """Near duplicates that survive small perturbations: Euclidean distance in a PCA space, tolerance by a rule.

    The rows are centred and projected on the principal components keeping ``variance`` of the variance of
    ``X`` (``variance=1``: all components, i.e. Euclidean distance in the original space). The tolerance is
    the ``quantile`` quantile of the distances from each row of ``X_ref`` (genuine rows nobody submitted,
    e.g. the validation set) to its nearest row of ``X``, leaving out exact overlaps (distance 0): about a
    ``quantile`` fraction of genuine rows lie that close to another genuine row, the false-merge budget.
    Then, in row (submission) order, a row within the tolerance of an earlier kept row with the same label
    joins that row's group, as in ``find_duplicates(mode="near")``. Features must share a unit (pixels);
    standardise features of different scales first. Per-feature z-scores are not used: they inflate noise
    on near-constant features (digits' border pixels) far beyond the distances between genuine images.

    Examples
    --------
    >>> g = embedded_duplicates(**_embedded_example())
    >>> g.is_duplicate[-3:].tolist(), int(g.is_duplicate[:30].sum())
    ([True, True, True], 0)
    """
    from sklearn.neighbors import NearestNeighbors

    X = np.asarray(X, dtype=np.float64)
    X_ref = np.asarray(X_ref, dtype=np.float64)
    y = np.asarray(y)
    if len(X) != len(y):
        raise InputError(f"The 'y' argument of embedded_duplicates must have {len(X)} labels. Got {len(y)}.")
    if X_ref.shape[1] != X.shape[1] or len(X_ref) == 0:
        raise InputError(f"The 'X_ref' argument of embedded_duplicates must have rows with {X.shape[1]} features. "
                         f"Got shape {X_ref.shape}.")
    seen = {r.tobytes() for r in np.ascontiguousarray(X)}
    X_ref = X_ref[[r.tobytes() not in seen for r in np.ascontiguousarray(X_ref)]]  # exact overlaps left out
    if len(X_ref) == 0:
        raise InputError("The 'X_ref' argument of embedded_duplicates has every row in X: the tolerance rule needs "
                         "reference rows that no owner submitted.")
    E, E_ref, n_comp = _embed(X, X_ref, float(variance))
    dist = NearestNeighbors(n_neighbors=1).fit(E).kneighbors(E_ref)[0][:, 0]
    tol = float(np.quantile(dist, quantile))
    leader = _greedy_groups(E, y, tol, "euclidean")
    return DuplicateGroups("embedded", tol, 0, leader, leader != np.arange(len(X)), n_components=n_comp)
