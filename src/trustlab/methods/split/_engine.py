"""Bit-packed capture sets and the vectorised primitives every search in this package is built on.

A *capture set* (the training samples that reach a node) is a row of ``W = ceil(n / 64)`` ``uint64``
words. A child is ``parent & column`` (feature true) or ``parent & ~column`` (feature false), and every
count is a popcount summed over words, computed for all features of many nodes at once: with
``np.bitwise_count`` (numpy path) or the fused loops of :mod:`._kernels` (numba path, used when numba
imports; both paths give identical results).

Objective units: the engine works in *mistake units*, ``value = mistakes + lam_n * leaves`` with
``lam_n = reg * n``; dividing by ``n`` gives the paper's ``R(t) = mistakes / n + reg * leaves``.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["Engine", "SearchTimeout", "pack_columns", "unpack_rows", "TOL"]

#: tolerance in mistake units under which two objective values count as equal (a split must beat a
#: leaf by more than this, so ties always keep the simpler tree)
TOL = 1e-9
#: gains below this (in nats x samples) count as "no information"; C++ uses ``gain > 0`` in float32
_GAIN_TOL = 1e-9
#: rows x features x classes x words held at once by a counting kernel (bounds memory to ~64 MB)
_BLOCK = 1 << 23


_KERNELS: object = None  # None: not tried yet; False: numba unavailable; else the kernels module


def kernels() -> object | None:
    """The compiled numba kernels, or None when numba is not importable (numpy fallback)."""
    global _KERNELS
    if _KERNELS is None:
        try:
            from trustlab.methods.split import _kernels as mod

            _KERNELS = mod
        except Exception:  # noqa: BLE001 - any numba problem means "use numpy"
            _KERNELS = False
    return _KERNELS or None


class SearchTimeout(Exception):
    """Raised inside a search when its deadline passes (caught by the estimators, never escapes)."""


def pack_columns(B: np.ndarray) -> np.ndarray:
    """Pack the columns of a boolean ``(n, q)`` matrix into a ``(q, W)`` ``uint64`` array."""
    B = np.asarray(B, dtype=bool)
    n, q = B.shape
    W = max(1, -(-n // 64))
    packed = np.packbits(np.ascontiguousarray(B.T), axis=1, bitorder="little")
    out = np.zeros((q, W * 8), dtype=np.uint8)
    out[:, : packed.shape[1]] = packed
    return out.view(np.uint64)


def unpack_rows(C: np.ndarray, n: int) -> np.ndarray:
    """The boolean sample masks ``(m, n)`` of capture rows ``(m, W)`` (inverse of :func:`pack_columns`)."""
    C = np.ascontiguousarray(np.atleast_2d(C))
    bits = np.unpackbits(C.view(np.uint8), axis=1, bitorder="little")
    return bits[:, :n].astype(bool)


class Engine:
    """Packed training data ``(X, y)`` with a leaf penalty, and the batched counting kernels.

    Parameters
    ----------
    X : ndarray of shape (n, p), boolean
        Binary features (constant and duplicate columns should already be removed).
    y : ndarray of shape (n,), int
        Labels encoded ``0..k-1``.
    n_classes : int
        ``k``.
    reg : float
        The leaf penalty lambda (per leaf, in objective units).
    use_numba : bool or None
        Use the compiled kernels (None: when numba imports).
    exact_last : bool
        In greedy completions, choose the last split level exactly (best single split on the objective)
        instead of by information gain, as the C++ ``licketysplit`` package does.
    """

    def __init__(self, X: np.ndarray, y: np.ndarray, n_classes: int, reg: float,
                 use_numba: bool | None = None, exact_last: bool = False) -> None:
        X = np.asarray(X, dtype=bool)
        y = np.asarray(y, dtype=np.int64)
        self.n, self.p = X.shape
        self.k = int(n_classes)
        self.reg = float(reg)
        self.lam_n = float(reg) * self.n
        self.X = pack_columns(X)  # (p, W)
        self.W = self.X.shape[1]
        self.Y = pack_columns(np.eye(self.k, dtype=bool)[y])  # (k, W)
        self.XY = self.X[:, None, :] & self.Y[None, :, :]  # (p, k, W)
        self.root = pack_columns(np.ones((self.n, 1), dtype=bool))[0]
        # word-major copies for the counting kernels
        self._Xt = np.ascontiguousarray(self.X.T)  # (W, p)
        self._Yt = np.ascontiguousarray(self.Y.T)  # (W, k)
        self._XYt = np.ascontiguousarray(self.XY.transpose(2, 0, 1))  # (W, p, k)
        self._XYflat = np.ascontiguousarray(self.XY.reshape(self.p * self.k, self.W))
        idx = np.arange(max(self.n, 1) + 1, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            self._xlogx = np.where(idx > 0, idx * np.log(np.maximum(idx, 1.0)), 0.0)
        self._hash = np.random.default_rng(12345).integers(1, 2**63, size=self.W, dtype=np.uint64) | np.uint64(1)
        self._Xbool, self._ylab = X, y  # for the equivalent-points groups, built on first use
        self._G: np.ndarray | None = None
        self.deadline: float | None = None
        self.kern = kernels() if use_numba is not False else None
        self.exact_last = bool(exact_last)

    # -- equivalent points (identical rows with conflicting labels) --------------------------------
    @property
    def G(self) -> np.ndarray:
        """Packed samples of each label within each group of identical rows that has conflicting labels,
        shape ``(groups, k, W)`` (built on first use)."""
        if self._G is None:
            self._G = self._equivalence(self._Xbool, self._ylab)
        return self._G

    def _equivalence(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        if self.n == 0:
            return np.zeros((0, self.k, self.W), dtype=np.uint64)
        _, inv = np.unique(X, axis=0, return_inverse=True)
        inv = inv.ravel()
        pairs = np.unique(np.stack([inv, y], axis=1), axis=0)
        groups, n_labels = np.unique(pairs[:, 0], return_counts=True)
        conflicting = groups[n_labels > 1]
        if conflicting.size == 0:
            return np.zeros((0, self.k, self.W), dtype=np.uint64)
        masks = inv[:, None] == conflicting[None, :]  # (n, Gc)
        G = pack_columns(masks)  # (Gc, W)
        return G[:, None, :] & self.Y[None, :, :]  # (Gc, k, W)

    def min_loss(self, C: np.ndarray) -> np.ndarray:
        """Mistakes every tree must make on each capture row (equivalent-points bound), shape (m,)."""
        C = np.atleast_2d(C)
        if self.G.shape[0] == 0:
            return np.zeros(len(C))
        cnt = np.bitwise_count(C[:, None, None, :] & self.G[None]).sum(-1, dtype=np.int64)  # (m, Gc, k)
        return (cnt.sum(-1) - cnt.max(-1)).sum(-1).astype(np.float64)

    # -- time ----------------------------------------------------------------------------------------
    def check_time(self) -> None:
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise SearchTimeout

    # -- counting kernels ----------------------------------------------------------------------------
    def _count(self, C: np.ndarray, masks_t: np.ndarray) -> np.ndarray:
        """``popcount(C[i] & mask)`` summed over words for every row and every mask (``int32``).

        ``masks_t`` has the word axis first, ``(W, *shape)``; the result is ``(m, *shape)``. Looping over
        the (few) words with in-place ufuncs is several times faster than reducing a trailing word axis.
        """
        m = len(C)
        shape = masks_t.shape[1:]
        size = int(np.prod(shape)) if shape else 1
        extra = (None,) * len(shape)
        step = max(1, _BLOCK // max(1, size * 8))
        if m <= step:
            return self._count_block(C, masks_t, shape, extra)
        out = np.empty((m, *shape), dtype=np.int32)
        for s in range(0, m, step):
            out[s:s + step] = self._count_block(C[s:s + step], masks_t, shape, extra)
        return out

    def _count_block(self, C: np.ndarray, masks_t: np.ndarray, shape: tuple, extra: tuple) -> np.ndarray:
        ms = len(C)
        tmp = np.empty((ms, *shape), dtype=np.uint64)
        cnt = np.empty((ms, *shape), dtype=np.uint8)
        acc = np.zeros((ms, *shape), dtype=np.int32)
        for w in range(self.W):
            np.bitwise_and(C[(slice(None), w, *extra)], masks_t[w][None], out=tmp)
            np.bitwise_count(tmp, out=cnt)
            acc += cnt
        return acc

    def _count_kernel(self, C: np.ndarray, M: np.ndarray) -> np.ndarray:
        C = np.ascontiguousarray(C)
        return self.kern.count_and(C, M, np.empty((len(C), len(M)), dtype=np.int64))  # type: ignore[union-attr]

    def class_counts(self, C: np.ndarray) -> np.ndarray:
        """Class counts ``(m, k)`` of capture rows ``(m, W)``."""
        C = np.atleast_2d(C)
        if self.kern is not None:
            return self._count_kernel(C, self.Y)
        return self._count(C, self._Yt)

    def left_counts(self, C: np.ndarray) -> np.ndarray:
        """Class counts ``(m, p, k)`` of the feature-true child of every row for every feature."""
        C = np.atleast_2d(C)
        if self.kern is not None:
            return self._count_kernel(C, self._XYflat).reshape(len(C), self.p, self.k)
        return self._count(C, self._XYt)

    def left_sizes(self, C: np.ndarray) -> np.ndarray:
        """Sizes ``(m, p)`` of the feature-true child of every row for every feature."""
        C = np.atleast_2d(C)
        if self.kern is not None:
            return self._count_kernel(C, self.X)
        return self._count(C, self._Xt)

    def leaf_values(self, counts: np.ndarray) -> np.ndarray:
        """Leaf objective (mistakes + lam_n) from class counts ``(..., k)``."""
        return (counts.sum(-1) - counts.max(-1)) + self.lam_n

    def children(self, C: np.ndarray, rows: np.ndarray, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Feature-true and feature-false children of ``C[rows]`` split on ``feats``."""
        P = C[rows]
        Xj = self.X[feats]
        return P & Xj, P & ~Xj

    def dedup(self, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Unique capture rows and the inverse map (memoisation inside a batch)."""
        if len(C) < 32:
            return C, np.arange(len(C))
        h = (C * self._hash[None, :]).sum(1, dtype=np.uint64) if self.W > 1 else C[:, 0] * self._hash[0]
        _, first, inv = np.unique(h, return_index=True, return_inverse=True)
        U = C[first]
        if not np.array_equal(U[inv], C):  # a hash collision: fall back to exact row comparison
            U, inv = np.unique(C, axis=0, return_inverse=True)
        return U, inv.ravel()

    # -- greedy (information gain) -------------------------------------------------------------------
    def best_gain(self, C: np.ndarray, tot: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Feature of largest unscaled information gain per row, and whether that gain is positive.

        Gain ``|S| H(S) - |S1| H(S1) - |S0| H(S0)`` (natural log); features that leave a side empty are
        skipped; ties keep the first feature.
        """
        C = np.atleast_2d(C)
        if self.kern is not None:
            m = len(C)
            j, g = self.kern.best_gain(np.ascontiguousarray(C), self.XY, self.Y, self._xlogx,  # type: ignore
                                       np.empty(m, dtype=np.int64), np.empty(m))
            return np.maximum(j, 0), g > _GAIN_TOL
        if tot is None:
            tot = self.class_counts(C)
        T = self._xlogx
        L = self.left_counts(C)  # (m, p, k)
        R = tot[:, None, :] - L
        nL = L[..., 0].copy()
        hL = T[L[..., 0]]
        hR = T[R[..., 0]]
        for c in range(1, self.k):
            nL += L[..., c]
            hL += T[L[..., c]]
            hR += T[R[..., c]]
        N = tot.sum(-1)
        nR = N[:, None] - nL
        u_parent = T[N] - T[tot].sum(-1)
        # gain = U(S) - U(S1) - U(S0) with U(counts) = N log N - sum_c n_c log n_c
        gain = (u_parent[:, None] - T[nL] - T[nR]) + hL + hR
        gain[(nL == 0) | (nR == 0)] = -np.inf
        j = gain.argmax(1)
        g = gain[np.arange(len(C)), j]
        return j, g > _GAIN_TOL

    def best_leaf_split(self, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the best split into two leaves: its value (``inf`` when no feature splits the row)
        and feature (first on ties)."""
        C = np.atleast_2d(C)
        m = len(C)
        if self.kern is not None:
            return self.kern.best_leaf_split(np.ascontiguousarray(C), self.XY, self.Y, self.lam_n,  # type: ignore
                                             np.empty(m), np.empty(m, dtype=np.int64))
        tot = self.class_counts(C)
        L = self.left_counts(C)
        R = tot[:, None, :] - L
        split = self.leaf_values(L) + self.leaf_values(R)
        split[(L.sum(-1) == 0) | (R.sum(-1) == 0)] = np.inf
        j = np.argmin(split, axis=1) if m else np.zeros(0, dtype=np.int64)
        return split[np.arange(m), j], j

    def greedy_values(self, C: np.ndarray, depth: int) -> np.ndarray:
        """``Greedy(S, depth)`` for every capture row: the objective (mistake units) of the
        information-gain tree of the given depth budget, pruned bottom-up on the regularised objective
        (with ``exact_last`` the last split level is the best single split on the objective).
        """
        U = np.atleast_2d(C)
        if len(U) == 0:
            return np.zeros(0)
        tot = self.class_counts(U)
        leaf = self.leaf_values(tot)
        if depth <= 1:
            return leaf
        if depth == 2 and self.exact_last:
            best, _ = self.best_leaf_split(U)
            return np.where(best < leaf - TOL, best, leaf)
        self.check_time()
        j, ok = self.best_gain(U, tot)
        rows = np.nonzero(ok)[0]
        out = leaf.copy()
        if rows.size:
            A, B = self.children(U, rows, j[rows])
            kv = self.greedy_values(np.concatenate([A, B]), depth - 1)
            split = kv[: rows.size] + kv[rows.size:]
            out[rows] = np.where(split < leaf[rows] - TOL, split, leaf[rows])
        return out
