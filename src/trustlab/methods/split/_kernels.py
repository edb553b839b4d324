"""Fused numba kernels for the two hot loops (optional: the engine falls back to numpy without numba).

Both kernels reproduce the numpy path's arithmetic in the same order, so both paths pick the same
features (bit-identical gains and objectives). They are compiled on first use and cached on disk.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["best_gain", "best_leaf_split"]

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_S1, _S2, _S4, _S56 = np.uint64(1), np.uint64(2), np.uint64(4), np.uint64(56)


@nb.njit(cache=True, inline="always")
def _popcount(x):  # noqa: ANN001, ANN202 - numba
    x = x - ((x >> _S1) & _M1)
    x = (x & _M2) + ((x >> _S2) & _M2)
    x = (x + (x >> _S4)) & _M4
    return np.int64((x * _H01) >> _S56)


@nb.njit(cache=True, inline="always")
def _class_counts(C, i, Y, tot):  # noqa: ANN001, ANN202 - numba
    """``tot[c]`` = rows of bitset ``C[i]`` in class ``c`` (``Y[c]``); returns their total."""
    N = 0
    for c in range(Y.shape[0]):
        s = 0
        for w in range(C.shape[1]):
            s += _popcount(C[i, w] & Y[c, w])
        tot[c] = s
        N += s
    return N


@nb.njit(cache=True)
def best_gain(C, XY, Y, T, out_j, out_gain):  # noqa: ANN001, ANN201 - numba
    """Per row of ``C``: the feature of largest unscaled information gain (first on ties), -1 if none."""
    m, W = C.shape
    p = XY.shape[0]
    k = Y.shape[0]
    tot = np.zeros(k, np.int64)
    L = np.zeros(k, np.int64)
    for i in range(m):
        N = _class_counts(C, i, Y, tot)
        st = T[tot[0]]
        for c in range(1, k):
            st += T[tot[c]]
        up = T[N] - st
        bj = -1
        bg = -np.inf
        for j in range(p):
            nL = _class_counts(C, i, XY[j], L)
            nR = N - nL
            if nL == 0 or nR == 0:
                continue
            hL = T[L[0]]
            hR = T[tot[0] - L[0]]
            for c in range(1, k):
                hL += T[L[c]]
                hR += T[tot[c] - L[c]]
            g = (((up - T[nL]) - T[nR]) + hL) + hR
            if g > bg:
                bg = g
                bj = j
        out_j[i] = bj
        out_gain[i] = bg
    return out_j, out_gain


@nb.njit(cache=True)
def best_leaf_split(C, XY, Y, lam_n, out_val, out_j):  # noqa: ANN001, ANN201 - numba
    """Per row: the best single split into two leaves, ``(mistakes_1 + lam_n) + (mistakes_0 + lam_n)``
    (first feature on ties; ``inf`` and -1 when no feature splits the row)."""
    m, W = C.shape
    p = XY.shape[0]
    k = Y.shape[0]
    tot = np.zeros(k, np.int64)
    for i in range(m):
        N = _class_counts(C, i, Y, tot)
        bv = np.inf
        bj = -1
        for j in range(p):
            nL = 0
            mxL = 0
            mxR = 0
            for c in range(k):
                s = 0
                for w in range(W):
                    s += _popcount(C[i, w] & XY[j, c, w])
                nL += s
                if s > mxL:
                    mxL = s
                r = tot[c] - s
                if r > mxR:
                    mxR = r
            nR = N - nL
            if nL == 0 or nR == 0:
                continue
            v = ((nL - mxL) + lam_n) + ((nR - mxR) + lam_n)
            if v < bv:
                bv = v
                bj = j
        out_val[i] = bv
        out_j[i] = bj
    return out_val, out_j


@nb.njit(cache=True)
def count_and(C, M, out):  # noqa: ANN001, ANN201 - numba
    """``out[i, q] = popcount(C[i] & M[q])`` summed over words."""
    m, W = C.shape
    Q = M.shape[0]
    for i in range(m):
        for q in range(Q):
            s = 0
            for w in range(W):
                s += _popcount(C[i, w] & M[q, w])
            out[i, q] = s
    return out
