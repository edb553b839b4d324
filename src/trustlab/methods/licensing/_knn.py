"""Exact KNN-Shapley (Jia et al., VLDB 2019) and the neighbour orderings it shares with the KNN game.

Every KNN computation in this package orders the training points by the same distance,
``|x|^2 - 2 x.v`` (the squared Euclidean distance up to the validation point's constant ``|v|^2``),
with ties broken by the rows' contents, the label and then the training index (:func:`neighbour_order`). The point-level KNN-Shapley values and the
owner-level KNN game therefore value exactly the same utility, and a check of one against the other
(the exact game over singleton players) agrees to rounding error.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval
from trustlab.core.exceptions import InputError

__all__ = ["knn_shapley", "knn_vote_disagrees", "flag_noisy_labels"]


def neighbour_order(X: np.ndarray, X_val: np.ndarray, y: np.ndarray, batch_size: int = 256
                    ) -> Iterator[tuple[slice, np.ndarray]]:
    """Yield ``(rows, order)`` per validation batch; ``order[b]`` sorts the training points by distance.

    Distances are computed once per distinct training row, so identical rows get identical distances,
    and ties are broken by the rows' contents, then the label, then the index: identical (row, label)
    pairs are always adjacent in the order (on a discrete grid such as digits' pixels, other points often
    tie in distance), which makes exact duplicates interchangeable (symmetric) in every KNN utility.
    """
    X = np.asarray(X, dtype=np.float64)
    X_val = np.asarray(X_val, dtype=np.float64)
    uniq, inv = np.unique(X, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    perm = np.lexsort((np.arange(len(X)), np.asarray(y), inv))  # identical (row, label) pairs consecutive
    col = inv[perm]
    sq = np.einsum("ij,ij->i", uniq, uniq)
    for start in range(0, len(X_val), batch_size):
        rows = slice(start, min(start + batch_size, len(X_val)))
        d = (sq[None, :] - 2.0 * (X_val[rows] @ uniq.T))[:, col]
        yield rows, perm[np.argsort(d, axis=1, kind="stable")]


def check_knn_inputs(X: Any, y: Any, X_val: Any, y_val: Any, k: int, owner: str
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Arrays as float64 / encoded labels, with the semantic checks every KNN user needs.

    Returns ``X, y_enc, X_val, y_val_enc, classes``. Raises InputError for mismatched lengths or feature
    counts, validation labels never seen in training, and ``k`` larger than the training set.
    """
    X = np.asarray(X, dtype=np.float64)
    X_val = np.asarray(X_val, dtype=np.float64)
    y = np.asarray(y)
    y_val = np.asarray(y_val)
    if len(X) != len(y):
        raise InputError(f"The 'y' argument of {owner} must have one label per row of X ({len(X)}). Got {len(y)}.")
    if len(X_val) != len(y_val):
        raise InputError(f"The 'y_val' argument of {owner} must have one label per row of X_val ({len(X_val)}). "
                         f"Got {len(y_val)}.")
    if X.shape[1] != X_val.shape[1]:
        raise InputError(f"The 'X_val' argument of {owner} must have {X.shape[1]} features like X. "
                         f"Got {X_val.shape[1]}.")
    classes = np.unique(y)
    unseen = sorted(set(np.unique(y_val).tolist()) - set(classes.tolist()), key=str)
    if unseen:
        raise InputError(f"The 'y_val' argument of {owner} has labels never seen in training: {unseen[:10]}. "
                         "A valuation cannot credit any training point for them; drop those validation rows "
                         "or add training data of those classes.")
    if k > len(X):
        raise InputError(f"The 'k' argument of {owner} must be <= the number of training points ({len(X)}). "
                         f"Got {k} instead.")
    return X, np.searchsorted(classes, y), X_val, np.searchsorted(classes, y_val), classes


def _knn_shapley_batch(order: np.ndarray, y: np.ndarray, yv: np.ndarray, k: int) -> np.ndarray:
    """Sum over a batch of validation points of the exact KNN-Shapley values (Jia et al. recursion)."""
    n = order.shape[1]
    m = (y[order] == yv[:, None]).astype(np.float64)  # match indicator in rank order
    s = np.empty_like(m)
    s[:, -1] = m[:, -1] / n
    if n > 1:
        i = np.arange(1, n, dtype=np.float64)  # 1-indexed ranks 1..n-1
        coef = np.minimum(k, i) / i / k
        d = (m[:, :-1] - m[:, 1:]) * coef
        s[:, :-1] = s[:, -1:] + np.cumsum(d[:, ::-1], axis=1)[:, ::-1]
    out = np.empty_like(s)
    np.put_along_axis(out, order, s, axis=1)
    return out.sum(axis=0)


@validate_args(X=[ArrayLike(ndim=2)], y=[ArrayLike(ndim=1, dtype="any")], X_val=[ArrayLike(ndim=2)],
               y_val=[ArrayLike(ndim=1, dtype="any")], k=[Interval(int, 1, None)],
               batch_size=[Interval(int, 1, None)],
               _example=lambda: {"X": np.eye(4), "y": np.array([0, 1, 0, 1]), "X_val": np.eye(4)[:2],
                                 "y_val": np.array([0, 1])})
def knn_shapley(X: Any, y: Any, X_val: Any, y_val: Any, k: int = 5, *, batch_size: int = 256) -> np.ndarray:
    """Exact KNN-Shapley value of every training point, averaged over the validation points.

    The utility is ``v(S) = mean_v (1/k) #{correctly labelled points among the k nearest in S}`` (fewer
    than ``k`` points: all of them), so ``v(empty) = 0`` and the values sum to ``v(N)`` exactly (up to
    rounding). Per validation point: sort by distance (ties by index), ``s_N = 1[y_N = y_v] / N`` and
    ``s_i = s_{i+1} + (1[y_i = y_v] - 1[y_{i+1} = y_v]) / k * min(k, i) / i``; O(N log N) each,
    vectorised over batches of ``batch_size`` validation points.

    Parameters
    ----------
    X, y : training features (n, d) and labels (n,)
    X_val, y_val : validation features and labels; every validation label must occur in ``y``
    k : int, number of neighbours (<= n)
    batch_size : int, validation points per vectorised batch (memory ~ 3 * batch_size * n floats)

    Returns
    -------
    numpy.ndarray of shape (n,)

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [10.0]]); y = np.array([0, 0, 1])
    >>> phi = knn_shapley(X, y, np.array([[0.2]]), np.array([0]), k=1)
    >>> float(phi.sum())  # = v(N): the nearest point has the right label
    1.0
    """
    X, y_enc, X_val, yv_enc, _ = check_knn_inputs(X, y, X_val, y_val, k, "knn_shapley")
    total = np.zeros(len(X))
    for rows, order in neighbour_order(X, X_val, y_enc, batch_size):
        total += _knn_shapley_batch(order, y_enc, yv_enc[rows], k)
    return total / len(X_val)


@validate_args(X=[ArrayLike(ndim=2)], y=[ArrayLike(ndim=1, dtype="any")], k=[Interval(int, 1, None)],
               _example=lambda: {"X": np.eye(4), "y": np.array([0, 1, 0, 1])})
def knn_vote_disagrees(X: Any, y: Any, k: int = 5) -> np.ndarray:
    """True where a point's label is not among the most frequent labels of its ``k`` nearest *other*
    training points (leave-one-out KNN vote; exact duplicates of the point count as neighbours).

    Examples
    --------
    >>> X = np.array([[0.0], [0.1], [0.2], [5.0]]); y = np.array([0, 0, 1, 1])
    >>> knn_vote_disagrees(X, y, k=2).tolist()
    [False, False, True, True]
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if len(X) != len(y):
        raise InputError(f"The 'y' argument of knn_vote_disagrees must have {len(X)} labels. Got {len(y)}.")
    if k > len(X) - 1:
        raise InputError(f"The 'k' argument of knn_vote_disagrees must be <= n - 1 = {len(X) - 1}. Got {k}.")
    _, y_enc = np.unique(y, return_inverse=True)
    n_cls = int(y_enc.max()) + 1
    out = np.zeros(len(X), dtype=bool)
    for rows, order in neighbour_order(X, X, y_enc):
        idx = np.arange(rows.start, rows.stop)
        not_self = order != idx[:, None]
        pos = np.cumsum(not_self, axis=1)
        take = not_self & (pos <= k)
        nb = order[take].reshape(len(idx), k)
        counts = np.zeros((len(idx), n_cls), dtype=np.int64)
        np.add.at(counts, (np.repeat(np.arange(len(idx)), k), y_enc[nb].ravel()), 1)
        out[idx] = counts[np.arange(len(idx)), y_enc[idx]] < counts.max(axis=1)
    return out


@validate_args(X=[ArrayLike(ndim=2)], y=[ArrayLike(ndim=1, dtype="any")], X_val=[ArrayLike(ndim=2)],
               y_val=[ArrayLike(ndim=1, dtype="any")], k=[Interval(int, 1, None)], quantile=[Interval(float, 0, 1)],
               _example=lambda: {"X": np.eye(4), "y": np.array([0, 1, 0, 1]), "X_val": np.eye(4)[:2],
                                 "y_val": np.array([0, 1])})
def flag_noisy_labels(X: Any, y: Any, X_val: Any, y_val: Any, k: int = 5, quantile: float = 0.05) -> np.ndarray:
    """The noisy-label flags of :class:`CompensationAudit`: True for rows in the lowest ``quantile`` of the
    point-level :func:`knn_shapley` values (against ``X_val, y_val``) *and* disagreeing with the leave-one-out
    KNN vote (:func:`knn_vote_disagrees`). No row is flagged when ``quantile == 0`` or there are at most ``k``
    rows.

    Examples
    --------
    >>> X = np.array([[0.0], [0.1], [0.2], [0.3], [5.0], [5.1], [5.2], [5.3]])
    >>> y = np.array([0, 0, 1, 0, 1, 1, 1, 1])
    >>> flag_noisy_labels(X, y, X, y, k=2, quantile=0.2).tolist()
    [False, False, True, False, False, False, False, False]
    """
    flags = np.zeros(len(X), dtype=bool)
    if quantile > 0 and len(X) > k:
        phi = knn_shapley(X, y, X_val, y_val, k=k)
        flags = (phi <= np.quantile(phi, quantile)) & knn_vote_disagrees(X, y, k=k)
    return flags
