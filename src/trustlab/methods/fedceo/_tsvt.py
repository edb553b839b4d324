"""The tensor singular value thresholding (t-SVT) prox behind FedCEO's server-side "semantic smoothing".

A stack of K client copies of one parameter, client axis last, is viewed as a third-order tensor
``X`` of shape (n1, n2, K). t-SVT (Lu et al.'s prox of the tensor nuclear norm, as the official FedCEO
code runs it) takes the FFT along the client axis, soft-thresholds the singular values of every
frequency slice by the same ``tau`` (on the unnormalised FFT) and transforms back:

    D = fft(X, axis=-1);  D_k = U_k S_k V_k^H;  D'_k = U_k max(S_k - tau, 0) V_k^H;  L = Re(ifft(D'))

Because the client mean of ``L`` is ``(1/K) D'_0``, the mean of the smoothed clients is
``SVT_{tau/K}(mean_i X_i)`` (an identity the tests check to 1e-10).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval, Options
from trustlab.core.exceptions import InputError
from trustlab.core.validation import check_array
from trustlab.methods.fedceo._rules import FINITE_NONNEGATIVE, FINITE_POSITIVE

__all__ = ["tsvt", "tsvt_reference", "svt", "to_three_way", "from_three_way", "fedceo_threshold"]

_STACK = [ArrayLike(ndim=(1, 2, 3, 4, 5, 6))]


def to_three_way(stack: np.ndarray) -> np.ndarray:
    """Reshape a (*param_shape, K) stack into the (n1, n2, K) tensor t-SVT works on.

    * scalar parameter ``()``: (1, 1, K);
    * bias ``(out,)``: (1, out, K), as in the official code;
    * matrix ``(out, in)``: (out, in, K) (the official code uses the transpose, which has the same
      singular values, so the prox is the transpose of ours);
    * conv kernel ``(out, in, kh, kw)`` and any higher order: (out, in*kh*kw, K) (the official
      code flattens to (kw*kh*in, out, K): a transpose and a row permutation of ours, same prox).

    :func:`from_three_way` is its exact inverse.
    """
    shape, k = stack.shape[:-1], stack.shape[-1]
    if len(shape) == 0:
        return stack.reshape(1, 1, k)
    if len(shape) == 1:
        return stack.reshape(1, shape[0], k)
    return stack.reshape(shape[0], int(np.prod(shape[1:], dtype=np.int64)), k)


def from_three_way(tensor: np.ndarray, param_shape: tuple[int, ...]) -> np.ndarray:
    """Inverse of :func:`to_three_way`: back to ``(*param_shape, K)``."""
    return tensor.reshape(*param_shape, tensor.shape[-1])


def _check_stack(stack: Any, owner: str) -> np.ndarray:
    arr = check_array(stack, name="stack", owner=owner, ndim=None)
    if arr.ndim < 1 or arr.shape[-1] < 1:
        raise InputError(f"The 'stack' argument of {owner} must have a client axis last, shape (..., K) with "
                         f"K >= 1. Got shape {arr.shape} instead.")
    if arr.dtype.kind not in "fiu":
        raise InputError(f"The 'stack' argument of {owner} must be real. Got dtype {arr.dtype} instead.")
    return arr


def _slice_svt(slices: np.ndarray, tau: float) -> np.ndarray:
    """Soft-threshold the singular values of each (n1, n2) matrix of a (S, n1, n2) batch."""
    u, s, vh = np.linalg.svd(slices, full_matrices=False)
    s = np.maximum(s - tau, 0.0)
    return (u * s[:, None, :]) @ vh


@validate_args(stack=_STACK, tau=[FINITE_NONNEGATIVE], fft=[Options(("real", "full"))])
def tsvt(stack: Any, tau: float, *, fft: str = "real") -> np.ndarray:
    """t-SVT of a (…, K) stack of client parameters along its last (client) axis.

    Parameters
    ----------
    stack : array-like of shape (*param_shape, K)
        K client copies of one parameter (matrix, conv kernel, bias or scalar), clients along the last
        axis, in the order the caller fixed (FedCEO sorts them, see :class:`FedCEO`).
    tau : float
        Threshold on the singular values of each frequency slice of the unnormalised FFT; FedCEO uses
        ``tau = theta**m / (2 * lam)``.
    fft : {"real", "full"}, default="real"
        "real" thresholds only the K//2+1 non-redundant slices (rfft/irfft, output exactly real);
        "full" runs the textbook complex FFT over all K slices and drops the (round-off) imaginary part.
        Both give the same result (the slices come in conjugate pairs).

    Returns
    -------
    ndarray of the input's shape and float dtype (float64 for integer input).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(4, 3, 5))
    >>> np.allclose(tsvt(x, 0.0), x)
    True
    >>> float(np.abs(tsvt(x, 1e6)).max())
    0.0

    References
    ----------
    Lu et al., "Tensor robust principal component analysis with a new tensor nuclear norm", TPAMI 2020;
    Li et al., "Clients Collaborate: Flexible Differentially Private Federated Learning with Guaranteed
    Improvement of Utility-Privacy Trade-off", ICML 2025, https://github.com/6lyc/FedCEO_Collaborate-with-Each-Other
    """
    arr = _check_stack(stack, "tsvt")
    out_dtype = arr.dtype if arr.dtype.kind == "f" else np.dtype(np.float64)
    x3 = to_three_way(arr.astype(np.float64, copy=False))
    if fft == "full":
        low, _ = _tsvt_full(x3, float(tau))
    else:
        k = x3.shape[-1]
        d = np.fft.rfft(x3, axis=-1)                      # (n1, n2, K//2+1) complex
        d = np.moveaxis(d, -1, 0)                         # (S, n1, n2)
        d = _slice_svt(d, float(tau))
        low = np.fft.irfft(np.moveaxis(d, 0, -1), n=k, axis=-1)
    return from_three_way(low, arr.shape[:-1]).astype(out_dtype, copy=False)


def _tsvt_full(x3: np.ndarray, tau: float) -> tuple[np.ndarray, float]:
    d = np.moveaxis(np.fft.fft(x3, axis=-1), -1, 0)
    d = _slice_svt(d, tau)
    low = np.fft.ifft(np.moveaxis(d, 0, -1), axis=-1)
    return low.real, float(np.abs(low.imag).max(initial=0.0))


@validate_args(stack=_STACK, tau=[FINITE_NONNEGATIVE])
def tsvt_reference(stack: Any, tau: float) -> tuple[np.ndarray, float]:
    """Full complex-FFT t-SVT (the textbook form) and the largest imaginary part it dropped.

    Used by tests and the experiment to check that the imaginary part is round-off (< 1e-10).
    """
    arr = _check_stack(stack, "tsvt_reference")
    low, imag = _tsvt_full(to_three_way(arr.astype(np.float64)), float(tau))
    return from_three_way(low, arr.shape[:-1]), imag


@validate_args(matrix=[ArrayLike(ndim=(1, 2, 3, 4, 5))], tau=[FINITE_NONNEGATIVE])
def svt(matrix: Any, tau: float) -> np.ndarray:
    """Matrix singular value thresholding ``U max(S - tau, 0) V^T`` (the prox of ``tau * ||.||_*``).

    1-d input is treated as a (1, n) row, like a bias in :func:`to_three_way`; higher orders are
    flattened to (shape[0], rest).

    Examples
    --------
    >>> import numpy as np
    >>> svt(np.diag([3.0, 1.0]), 2.0)
    array([[1., 0.],
           [0., 0.]])
    """
    arr = check_array(matrix, name="matrix", owner="svt", ndim=None).astype(np.float64)
    m = to_three_way(arr[..., None])[..., 0]
    return _slice_svt(m[None], float(tau))[0].reshape(arr.shape)


@validate_args(m=[Interval(int, 0, None)], lam=[FINITE_POSITIVE], theta=[Interval("real", 1, None)])
def fedceo_threshold(m: int, lam: float, theta: float = 1.0) -> float:
    """FedCEO's threshold at the ``m``-th smoothing event: ``tau_m = theta**m / (2 * lam)``.

    Parameters
    ----------
    m : int
        Index of the smoothing event, 1, 2, ... (smoothing happens in rounds t with (t+1) % I == 0,
        so m = (t+1) / I).
    lam : float
        lambda, the weight of the fidelity term in ``||L||_TNN + (lam / theta**m) ||L - X||_F^2``.
    theta : float, default=1.0
        vartheta >= 1, the growth of the threshold over training (1 keeps it fixed).

    Examples
    --------
    >>> fedceo_threshold(2, lam=0.5, theta=2.0)
    4.0
    """
    return float(theta) ** int(m) / (2.0 * float(lam))
