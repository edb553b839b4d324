"""FedCEO's server step (t-SVT smoothing of the client stack) and the UDP-FedAvg averaging baseline."""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from trustlab.core.base import PaperInfo
from trustlab.core.constraints import Interval
from trustlab.core.exceptions import InputError
from trustlab.core.roles import Aggregator
from trustlab.methods.fedceo._tsvt import fedceo_threshold, from_three_way, svt, to_three_way, tsvt

__all__ = ["FedCEO", "UDPFedAvg", "SmoothingResult", "smooth_clients", "LayerCollapsedWarning", "PAPER", "weighted_mean"]

PAPER = PaperInfo(
    title="Clients Collaborate: Flexible Differentially Private Federated Learning with Guaranteed "
          "Improvement of Utility-Privacy Trade-off",
    arxiv="2402.07002",
    repo="https://github.com/6lyc/FedCEO_Collaborate-with-Each-Other",
    commit="80280ca",
)


class LayerCollapsedWarning(UserWarning):
    """The threshold zeroed every singular value of a layer: the smoothed layer is all zeros."""


def content_key(update: dict[str, np.ndarray]) -> str:
    """SHA-256 over an upload's names, dtypes, shapes and bytes: the default client order key."""
    h = hashlib.sha256()
    for name in sorted(update):
        a = np.ascontiguousarray(update[name])
        h.update(name.encode())
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


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
        Mixing weights of the global model; None is the official unweighted mean.
    client_ids : list of hashable, optional
        Ids that fix the order of the clients along the FFT axis (ascending). By default the order is
        the ascending SHA-256 of each upload's content, so the result does not depend on the order the
        uploads arrive in. Duplicate ids are refused.
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
        keys_for_order: list[Any] = [content_key(u) for u in ups]
        ids: list[Hashable] = list(range(k))
    else:
        ids = list(client_ids)
        if len(ids) != k:
            raise InputError(f"{owner} got {len(ids)} client ids for {k} uploads.")
        keys_for_order = ids
    keys = _check_uploads(ups, ids, owner)
    w = np.full(k, 1.0 / k) if weights is None else np.asarray(weights, dtype=np.float64) / np.sum(weights)
    try:
        order = sorted(range(k), key=lambda i: keys_for_order[i])
    except TypeError as exc:
        raise InputError(f"The client ids of {owner} must be mutually comparable to fix the FFT order: {exc}") from exc
    uniform = bool(np.allclose(w, 1.0 / k, rtol=0, atol=1e-12))
    fast = not client_models and uniform
    glob: dict[str, np.ndarray] = {}
    clients: list[dict[str, np.ndarray]] | None = None if fast else [{} for _ in range(k)]
    collapsed: list[str] = []
    for name in keys:
        ref = ups[0][name]
        if ref.dtype.kind != "f":                      # integer / bool buffers: never FFT'd
            glob[name] = weighted_mean([{name: u[name]} for u in ups], w)[name]
            if clients is not None:
                for i in range(k):
                    clients[i][name] = ups[i][name].copy()
            continue
        if fast:
            mean = np.mean([u[name].astype(np.float64) for u in ups], axis=0)
            out = svt(mean, tau / k)
            glob[name] = out.astype(ref.dtype)
            if not out.any() and mean.any():
                collapsed.append(name)
            continue
        stack = np.stack([ups[i][name] for i in order], axis=-1).astype(np.float64)
        low = tsvt(stack, tau)
        if not low.any() and stack.any():
            collapsed.append(name)
        for pos, i in enumerate(order):
            clients[i][name] = low[..., pos].astype(ref.dtype)  # type: ignore[index]
        glob[name] = np.tensordot(low, w[order], axes=([-1], [0])).astype(ref.dtype)
    for name in collapsed:
        warnings.warn(f"{owner}: layer collapsed: the threshold tau={tau:.4g} zeroed every singular value of "
                      f"{name!r}; lower tau (raise lam, or theta towards 1).", LayerCollapsedWarning, stacklevel=3)
    return SmoothingResult(glob, clients, order, collapsed, float(tau))


def weighted_mean(updates: Sequence[dict[str, np.ndarray]], weights: np.ndarray, *,
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
    "lam": [Interval("real", 0, None, closed="neither")],
    "theta": [Interval("real", 1, None)],
    "interval": [Interval(int, 1, None)],
    "client_models": ["boolean"],
}


class FedCEO(Aggregator):
    """FedCEO server aggregation: tensor low-rank smoothing of the client models, then averaging.

    Every ``interval``-th call is a smoothing event m = 1, 2, ...: the K uploads of each float parameter
    are stacked along a client axis (in ascending order of their content hash, so the result does not
    depend on arrival order), smoothed by :func:`tsvt` with ``tau_m = theta**m / (2 lam)`` and averaged
    with the normalised weights; other calls average plainly. With the official unweighted mean the global
    equals ``SVT_{tau_m/K}(mean)`` per parameter. DP noise is not added here: it is the client's job
    (``UDP`` / ``DPSGD`` mechanisms), and smoothing is post-processing, so it costs no privacy.

    Parameters
    ----------
    lam : float
        lambda > 0 (``--lamb`` in the official code; 0.03 for EMNIST-MLP, 0.6 for CIFAR-10 in train.sh).
    theta : float, default=1.0
        vartheta >= 1 (``--r``): the threshold grows as theta**m over smoothing events.
    interval : int, default=1
        I: smooth in rounds t with (t + 1) % I == 0 (calls are counted from 0).
    client_models : bool, default=True
        Keep each client's smoothed model in ``client_models_`` (needed by the official restart rule).
        False with uniform weights computes the global alone through the SVT identity (faster).

    Attributes
    ----------
    n_rounds_ : int
        Calls of ``aggregate`` so far.
    n_smoothing_events_ : int
        m, the smoothing events so far.
    tau_ : float or None
        Threshold of the last call (None when it only averaged).
    client_models_ : list of dict or None
        Smoothed model of each client of the last call, in the caller's order.
    collapsed_ : list of str
        Parameters the last threshold zeroed entirely (a LayerCollapsedWarning is issued).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> ups = [{"w": rng.normal(size=(4, 3))} for _ in range(5)]
    >>> out = FedCEO(lam=2.0).aggregate(ups)
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

    def current_threshold(self) -> float | None:
        """The threshold the next ``aggregate`` call will use (None when it will only average)."""
        t = getattr(self, "n_rounds_", 0)
        if (t + 1) % self.interval != 0:
            return None
        return fedceo_threshold((t + 1) // self.interval, self.lam, self.theta)

    def _aggregate(self, updates: list[dict[str, np.ndarray]], weights: np.ndarray) -> dict[str, np.ndarray]:
        t = getattr(self, "n_rounds_", 0)
        tau = self.current_threshold()
        self.n_rounds_ = t + 1
        self.n_smoothing_events_ = getattr(self, "n_smoothing_events_", 0)
        if tau is None:
            _check_uploads(updates, list(range(len(updates))), "FedCEO")
            self.tau_, self.client_models_, self.collapsed_ = None, None, []
            return weighted_mean(updates, weights)
        self.n_smoothing_events_ += 1
        res = smooth_clients(updates, tau, weights=weights, client_models=self.client_models, owner="FedCEO")
        self.tau_, self.client_models_, self.collapsed_ = tau, res.client_params, res.collapsed
        self.client_order_ = res.order
        return res.global_params


class UDPFedAvg(Aggregator):
    """UDP-FedAvg's server step: the weighted mean of the (already privatised) client uploads.

    The user-level DP of UDP-FedAvg (Wei et al., 2021) is added on the client (``UDP`` mechanism: clip the
    update to C, add N(0, sigma^2 C^2)); the server only averages, like FedAvg.

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

    def _aggregate(self, updates: list[dict[str, np.ndarray]], weights: np.ndarray) -> dict[str, np.ndarray]:
        _check_uploads(updates, list(range(len(updates))), "UDPFedAvg")
        return weighted_mean(updates, weights, round_integers=self.round_integers)


__all__ += ["content_key", "to_three_way", "from_three_way"]
