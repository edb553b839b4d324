"""FedCEO's server step (t-SVT smoothing of the client stack) and the UDP-FedAvg averaging baseline."""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.hashing import content_hash
from trustlab.core.roles import Aggregator
from trustlab.methods.fedceo._paper import PAPER
from trustlab.methods.fedceo._rules import FINITE_NONNEGATIVE, FINITE_POSITIVE
from trustlab.methods.fedceo._tsvt import fedceo_threshold, svt, tsvt

__all__ = ["FedCEO", "UDPFedAvg", "SmoothingResult", "smooth_clients", "LayerCollapsedWarning"]


class LayerCollapsedWarning(UserWarning):
    """The threshold zeroed every singular value of a layer: the smoothed layer is all zeros."""


def _check_uploads(updates: Sequence[dict[str, np.ndarray]], ids: Sequence[Hashable], owner: str) -> list[str]:
    """Same keys, shapes and dtypes across clients, finite floats, unique ids; returns the keys."""
    if len(set(ids)) != len(ids):
        seen: set[Hashable] = set()
        dup = next(i for i in ids if i in seen or seen.add(i))  # type: ignore[func-returns-value]
        raise InputError(f"{owner} got the client id {dup!r} more than once; every client may upload once "
                         "per round. Drop or merge the duplicate upload.")
    keys = list(updates[0])
    for cid, up in zip(ids, updates):
        if sorted(up) != sorted(keys):
            raise InputError(f"Client {cid!r} of {owner} uploaded the keys {sorted(up)}; expected {sorted(keys)}.")
        for k in keys:
            a, ref = np.asarray(up[k]), np.asarray(updates[0][k])
            if a.shape != ref.shape:
                raise InputError(f"Client {cid!r} of {owner} uploaded {k!r} with shape {a.shape}; expected "
                                 f"{ref.shape} like client {ids[0]!r}.")
            if a.dtype != ref.dtype:
                raise InputError(f"Client {cid!r} of {owner} uploaded {k!r} with dtype {a.dtype}; expected "
                                 f"{ref.dtype} like client {ids[0]!r}. Cast every upload to one dtype.")
            if a.dtype.kind not in "fiub":
                raise InputError(f"Client {cid!r} of {owner} uploaded {k!r} with dtype {a.dtype}; only real "
                                 "float, integer and bool arrays can be aggregated.")
            if a.dtype.kind == "f" and not np.isfinite(a).all():
                raise InputError(f"Client {cid!r} of {owner} uploaded {k!r} with {int((~np.isfinite(a)).sum())} "
                                 "NaN or infinite value(s); reject or re-request that client's update.")
    return keys


@dataclass
class SmoothingResult:
    """What one FedCEO server step produced.

    Attributes
    ----------
    global_params : dict
        The new global model: the weighted mean of the smoothed clients (unweighted in the official code,
        where it equals ``SVT_{tau/K}(mean)`` for every float parameter).
    client_params : list of dict or None
        The smoothed model of each client, in the caller's order (``None`` when not computed).
    order : list of int
        The caller's indices in the order they were placed along the FFT axis.
    collapsed : list of str
        Float parameters the threshold zeroed entirely.
    tau : float
    """

    global_params: dict[str, np.ndarray]
    client_params: list[dict[str, np.ndarray]] | None
    order: list[int]
    collapsed: list[str] = field(default_factory=list)
    tau: float = 0.0


_UPDATES = Satisfies(lambda v: isinstance(v, Sequence) and not isinstance(v, str) and len(v) > 0
                     and all(isinstance(u, Mapping) for u in v),
                     "a non-empty list of dicts name -> array", [[], "x", [3.0], None], valid=[{"w": np.ones((2, 2))}])
_IDS = Satisfies(lambda v: isinstance(v, Sequence) and not isinstance(v, str) and all(isinstance(i, Hashable) for i in v),
                 "a list of hashable client ids", ["x", 3.0, [[1]]])


def _smooth_example() -> dict[str, Any]:
    return {"updates": [{"w": np.ones((2, 2))}, {"w": np.zeros((2, 2))}], "tau": 0.5}


@validate_args(_smooth_example, updates=[_UPDATES], tau=[FINITE_NONNEGATIVE],
               weights=[ArrayLike(ndim=1, low=0), None], client_ids=[_IDS, None], client_models=["boolean"],
               owner=[InstanceOf(str)])
def smooth_clients(
    updates: Sequence[dict[str, Any]], tau: float, *, weights: Any = None, client_ids: Sequence[Hashable] | None = None,
    client_models: bool = True, owner: str = "smooth_clients",
) -> SmoothingResult:
    """One FedCEO server step: t-SVT of each float parameter's client stack, then the (weighted) mean.

    Parameters
    ----------
    updates : list of dict name -> array
        The K uploaded models (full parameters, not deltas), same keys, shapes and dtypes.
    tau : float
        The t-SVT threshold (:func:`fedceo_threshold`).
    weights : array-like of shape (K,), optional
        Mixing weights of the global model, finite, >= 0 with a positive sum (normalised here); None is
        the official unweighted mean.
    client_ids : list of hashable, optional
        Ids that fix the order of the clients along the FFT axis (ascending). By default the order is
        the ascending content hash (:func:`trustlab.core.hashing.content_hash`) of each upload, so the
        result does not depend on the order the uploads arrive in. Duplicate ids are refused.
    client_models : bool, default=True
        Compute each client's smoothed model. With False and uniform weights, only the global is
        computed, through the exact identity ``global = SVT_{tau/K}(mean)`` (one SVD per parameter).

    Returns
    -------
    SmoothingResult

    Notes
    -----
    Integer and bool arrays (e.g. BatchNorm's ``num_batches_tracked``) are never transformed: the
    global gets their weighted mean rounded back to the dtype and each client keeps its own values.
    """
    if len(updates) == 0:
        raise InputError(f"{owner} needs at least one client upload. Got none.")
    k = len(updates)
    if k < 2:
        warnings.warn(f"{owner} got {k} client; FedCEO's smoothing needs >= 2 clients to share information "
                      "(with one client it is plain SVT of that model).", UserWarning, stacklevel=3)
    ups = [{n: np.asarray(v) for n, v in u.items()} for u in updates]
    if client_ids is None:
        keys_for_order: list[Any] = [content_hash(u) for u in ups]
        ids: list[Hashable] = list(range(k))
    else:
        ids = list(client_ids)
        if len(ids) != k:
            raise InputError(f"The 'client_ids' argument of {owner} must name each of the {k} uploads once. "
                             f"Got {len(ids)} id(s) instead.")
        keys_for_order = ids
    keys = _check_uploads(ups, ids, owner)
    w = _normalised_weights(weights, k, owner)
    try:
        order = sorted(range(k), key=lambda i: keys_for_order[i])
    except TypeError as exc:
        raise InputError(f"The client ids of {owner} must be mutually comparable to fix the FFT order: {exc}") from exc
    fast = not client_models and bool(np.allclose(w, 1.0 / k, rtol=0, atol=1e-12))
    glob: dict[str, np.ndarray] = {}
    clients: list[dict[str, np.ndarray]] | None = None if fast else [{} for _ in range(k)]
    collapsed = [name for name in keys if _smooth_param(name, ups, tau, w, order, fast, glob, clients)]
    for name in collapsed:
        warnings.warn(f"{owner}: layer collapsed: the threshold tau={tau:.4g} zeroed every singular value of "
                      f"{name!r}; lower tau (raise lam, or theta towards 1).", LayerCollapsedWarning, stacklevel=3)
    return SmoothingResult(glob, clients, order, collapsed, float(tau))


def _smooth_param(name: str, ups: list[dict[str, np.ndarray]], tau: float, w: np.ndarray, order: list[int],
                  fast: bool, glob: dict[str, np.ndarray], clients: list[dict[str, np.ndarray]] | None) -> bool:
    """Smooth one parameter into ``glob`` (and ``clients``); True when the threshold zeroed a non-zero layer."""
    ref = ups[0][name]
    if ref.dtype.kind != "f":                      # integer / bool buffers: never FFT'd
        glob[name] = _weighted_mean([{name: u[name]} for u in ups], w)[name]
        if clients is not None:
            for i in range(len(ups)):
                clients[i][name] = ups[i][name].copy()
        return False
    if fast:
        mean = np.mean([u[name].astype(np.float64) for u in ups], axis=0)
        out = svt(mean, tau / len(ups))
        glob[name] = out.astype(ref.dtype)
        return not out.any() and bool(mean.any())
    stack = np.stack([ups[i][name] for i in order], axis=-1).astype(np.float64)
    low = tsvt(stack, tau)
    for pos, i in enumerate(order):
        clients[i][name] = low[..., pos].astype(ref.dtype)  # type: ignore[index]
    glob[name] = np.tensordot(low, w[order], axes=([-1], [0])).astype(ref.dtype)
    return not low.any() and bool(stack.any())


def _normalised_weights(weights: Any, k: int, owner: str) -> np.ndarray:
    """Uniform weights for None; otherwise K finite weights >= 0 with a positive sum, normalised."""
    if weights is None:
        return np.full(k, 1.0 / k)
    w = np.asarray(weights, dtype=np.float64).ravel()
    if len(w) != k:
        raise InputError(f"The 'weights' argument of {owner} must have one weight per upload ({k}). "
                         f"Got {len(w)} instead.")
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise InputError(f"The 'weights' argument of {owner} must be finite and >= 0 with a positive sum. "
                         f"Got {w.tolist()} instead.")
    return w / w.sum()


def _weighted_mean(updates: Sequence[dict[str, np.ndarray]], weights: np.ndarray, *,
                   round_integers: bool = True) -> dict[str, np.ndarray]:
    """Weighted mean per parameter; float dtypes kept, integer/bool buffers rounded back (optional)."""
    out = {}
    for name, ref in updates[0].items():
        ref = np.asarray(ref)
        mean = np.tensordot(weights, np.stack([np.asarray(u[name], dtype=np.float64) for u in updates]), axes=1)
        if ref.dtype.kind == "f":
            out[name] = mean.astype(ref.dtype)
        elif round_integers:
            out[name] = (mean >= 0.5 if ref.dtype.kind == "b" else np.rint(mean)).astype(ref.dtype)
        else:
            out[name] = mean
    return out


_PARAM_RULES: dict[str, list[Any]] = {
    "lam": [FINITE_POSITIVE],
    "theta": [Interval("real", 1, None)],
    "interval": [Interval(int, 1, None)],
    "client_models": ["boolean"],
}


class FedCEO(Aggregator):
    """FedCEO server aggregation: tensor low-rank smoothing of the client models, then averaging.

    The server round r = 1, 2, ... (Flower's numbering; round t = r - 1 of the paper) decides the step: rounds
    with ``r % interval == 0`` are smoothing events m = r / I. There the K uploads of each float parameter are
    stacked along a client axis (ascending ``client_ids`` when given, else ascending content hash, so the
    result does not depend on arrival order), smoothed by :func:`tsvt` with ``tau_m = theta**m / (2 lam)`` and
    averaged with the normalised weights; other rounds average plainly. With the official unweighted mean the
    global equals ``SVT_{tau_m/K}(mean)`` per parameter. DP noise is not added here: it is the client's job
    (``UDP`` / ``DPSGD`` mechanisms), and smoothing is post-processing, so it costs no privacy.

    Pass the round explicitly: ``aggregate(updates, weights, server_round=r, client_ids=ids)``. Without
    ``server_round`` the call is the round after the previous call (1 for the first), for plain loops.

    Parameters
    ----------
    lam : float
        lambda > 0 (``--lamb`` in the official code; 0.03 for EMNIST-MLP, 0.6 for CIFAR-10 in train.sh).
    theta : float, default=1.0
        vartheta >= 1 (``--r``): the threshold grows as theta**m over smoothing events.
    interval : int, default=1
        I: smooth in rounds r with ``r % I == 0``.
    client_models : bool, default=True
        Keep each client's smoothed model in ``client_models_`` (needed by the official restart rule).
        False with uniform weights computes the global alone through the SVT identity (faster).

    Attributes
    ----------
    n_rounds_ : int
        The server round of the last call.
    n_smoothing_events_ : int
        m = r // I, the index of the last smoothing event up to that round.
    tau_ : float or None
        Threshold of the last call (None when it only averaged).
    client_models_ : list of dict or None
        Smoothed model of each client of the last call, in the caller's order (None when it only averaged).
    client_order_ : list of int
        The caller's indices in the order they were placed along the FFT axis (last smoothing call).
    collapsed_ : list of str
        Parameters the last threshold zeroed entirely (a LayerCollapsedWarning is issued).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> ups = [{"w": rng.normal(size=(4, 3))} for _ in range(5)]
    >>> out = FedCEO(lam=2.0).aggregate(ups, server_round=1)
    >>> out["w"].shape
    (4, 3)

    References
    ----------
    Li et al., "Clients Collaborate: Flexible Differentially Private Federated Learning with Guaranteed
    Improvement of Utility-Privacy Trade-off", ICML 2025 (arXiv:2402.07002); official code
    https://github.com/6lyc/FedCEO_Collaborate-with-Each-Other (TensorLR.py, FedCEO.py).
    """

    paper = PAPER
    # The t-SVT prox shrinks singular values, so identical uploads do not come back unchanged.
    tags: ClassVar[dict[str, Any]] = {"requires": (), "stochastic": False, "consensus_fixed_point": False}
    _constraints: ClassVar[dict[str, list[Any]]] = _PARAM_RULES

    def __init__(self, *, lam: float = 1.0, theta: float = 1.0, interval: int = 1, client_models: bool = True):
        self.lam = lam
        self.theta = theta
        self.interval = interval
        self.client_models = client_models

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        # Real thresholds: the t-SVT shrinks identical uploads too, so FedCEO declares
        # consensus_fixed_point=False; the common checks still require invariance to client order.
        return [{"lam": 1.0}, {"lam": 0.5, "theta": 1.05, "client_models": False}]

    @validate_args(server_round=[Interval(int, 0, None)])
    def threshold(self, server_round: int) -> float | None:
        """tau of round ``server_round`` (>= 1), or None when that round only averages."""
        if server_round % self.interval != 0:
            return None
        return fedceo_threshold(server_round // self.interval, self.lam, self.theta)

    def _aggregate(self, updates: list[dict[str, np.ndarray]], weights: np.ndarray, *, server_round: int | None = None,
                   client_ids: list[Hashable] | None = None) -> dict[str, np.ndarray]:
        r = server_round if server_round is not None else getattr(self, "n_rounds_", 0) + 1
        self.n_rounds_ = r
        self.n_smoothing_events_ = r // self.interval
        tau = self.threshold(r)
        if tau is None:
            _check_uploads(updates, client_ids or list(range(len(updates))), "FedCEO")
            self.tau_, self.client_models_, self.collapsed_ = None, None, []
            return _weighted_mean(updates, weights)
        res = smooth_clients(updates, tau, weights=weights, client_ids=client_ids, client_models=self.client_models,
                             owner="FedCEO")
        self.tau_, self.client_models_, self.collapsed_ = tau, res.client_params, res.collapsed
        self.client_order_ = res.order
        return res.global_params


class UDPFedAvg(Aggregator):
    """UDP-FedAvg's server step: the weighted mean of the (already privatised) client uploads.

    The DP of UDP-FedAvg (Wei et al., 2021) is added on the client (``UDP`` mechanism: clip the update to C, add
    N(0, sigma^2 C^2); or record-level ``DPSGD`` as the official baseline runs it); the server only averages,
    like FedAvg. ``server_round`` is accepted and ignored (the step is the same every round); ``client_ids``
    name the clients in error messages.

    Parameters
    ----------
    round_integers : bool, default=True
        Round the mean of integer buffers back to their dtype (False returns float64 means).

    Examples
    --------
    >>> import numpy as np
    >>> UDPFedAvg().aggregate([np.ones(3), 3 * np.ones(3)])
    array([2., 2., 2.])

    References
    ----------
    Wei et al., "User-level privacy-preserving federated learning: analysis and performance
    optimization", IEEE TMC 2021; the UDP_FedAvg.py baseline of the official FedCEO code.
    """

    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {"requires": (), "stochastic": False}
    _constraints: ClassVar[dict[str, list[Any]]] = {"round_integers": ["boolean"]}

    def __init__(self, *, round_integers: bool = True):
        self.round_integers = round_integers

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{}]

    def _aggregate(self, updates: list[dict[str, np.ndarray]], weights: np.ndarray, *, server_round: int | None = None,
                   client_ids: list[Hashable] | None = None) -> dict[str, np.ndarray]:
        _check_uploads(updates, client_ids or list(range(len(updates))), "UDPFedAvg")
        return _weighted_mean(updates, weights, round_integers=self.round_integers)
