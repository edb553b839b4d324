"""De-duplication of submitted points: exact (hash of rounded feature bytes + label) or near (radius)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval, Options
from trustlab.core.exceptions import InputError

__all__ = ["DuplicateGroups", "find_duplicates"]


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
        from sklearn.neighbors import NearestNeighbors

        # a k-d tree: O(n log n) for a small radius (sklearn's "auto" picks brute force above 15 features, which is
        # O(n^2): 115 s at 100k x 20 against 0.9 s; the neighbour sets are identical)
        nn = NearestNeighbors(radius=tol, metric="chebyshev", algorithm="kd_tree").fit(X)
        neigh = nn.radius_neighbors(X, return_distance=False)
        is_leader = np.zeros(n, dtype=bool)
        for i in range(n):
            cands = [j for j in neigh[i] if j < i and is_leader[j] and y[j] == y[i]]
            if cands:
                leader[i] = min(cands)
            else:
                is_leader[i] = True
    return DuplicateGroups(mode, float(tol), int(decimals), leader, leader != np.arange(n))
