"""Client-side DP mechanisms for FedCEO / UDP-FedAvg and their accounting with Opacus' accountants.

* :class:`UDP` (the paper's user-level DP): the client clips its model update to L2 norm ``C`` and adds
  N(0, sigma^2 C^2) to every coordinate before uploading. The server sees each upload, so one user's
  protection is its own Gaussian mechanism with noise multiplier sigma, amplified by client sampling with
  rate q = K/N; over T rounds this is the sampled Gaussian mechanism, accounted with
  :class:`opacus.accountants.RDPAccountant` (history ``[(sigma, q, T)]``).
* :class:`DPSGD` (what the official code runs): record-level DP-SGD through Opacus ``make_private`` inside
  each client (per-sample clipping at ``clip``, Poisson batches). A client's rounds are composed from the
  Opacus accountant histories of the rounds it took part in (client sampling is not used for
  amplification); the reported epsilon is the worst client's. :func:`dp_epsilon` accounts such histories
  with the RDP accountant or, as an independent check, with Opacus' PRV accountant.

Server-side smoothing is post-processing: epsilon does not depend on it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf, Interval, Options, Satisfies, validate_value
from trustlab.core.exceptions import InputError
from trustlab.core.optional import require
from trustlab.core.seeding import check_random_state
from trustlab.methods.fedceo._rules import FINITE_NONNEGATIVE, FINITE_POSITIVE

__all__ = ["UDP", "DPSGD", "rdp_epsilon", "dp_epsilon", "clip_update"]


_DELTA = [Interval("real", 0, 1, closed="neither")]


def _accountant(name: str) -> Any:
    accountants = require("opacus.accountants", purpose="FedCEO privacy accounting")
    return accountants.RDPAccountant() if name == "rdp" else accountants.PRVAccountant()


def _quiet_epsilon(acc: Any, delta: float, **kwargs: Any) -> float:
    with warnings.catch_warnings():  # "optimal order is the smallest alpha" for tiny sigma: eps is huge anyway
        warnings.simplefilter("ignore", UserWarning)
        return float(acc.get_epsilon(delta=delta, **kwargs))


@validate_args(noise_multiplier=[FINITE_NONNEGATIVE], sample_rate=[Interval("real", 0, 1, closed="right")],
               steps=[Interval(int, 0, None)], delta=_DELTA)
def rdp_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float = 1e-5) -> float:
    """Epsilon of ``steps`` compositions of the sampled Gaussian mechanism (Opacus ``RDPAccountant``).

    Parameters
    ----------
    noise_multiplier : float
        sigma (noise std / sensitivity); 0 gives ``inf``.
    sample_rate : float
        q in (0, 1]: the probability that a user (UDP) or a record (DP-SGD) takes part in a step.
    steps : int
        Number of compositions (rounds for UDP).
    delta : float, default=1e-5

    Examples
    --------
    >>> round(rdp_epsilon(1.0, 0.5, 10), 2) > 0
    True
    """
    if steps == 0:
        return 0.0
    if noise_multiplier == 0:
        return float("inf")
    acc = _accountant("rdp")
    acc.history = [(float(noise_multiplier), float(sample_rate), int(steps))]
    return _quiet_epsilon(acc, delta)


def _merge(history: Sequence[tuple[float, float, int]]) -> list[tuple[float, float, int]]:
    """Sum the steps of identical (sigma, q) entries: composition does not depend on the order."""
    steps: dict[tuple[float, float], int] = {}
    for sigma, q, n in history:
        steps[(float(sigma), float(q))] = steps.get((float(sigma), float(q)), 0) + int(n)
    return [(s, q, n) for (s, q), n in sorted(steps.items())]


_HISTORIES = Satisfies(
    lambda v: isinstance(v, Mapping | Sequence) and not isinstance(v, str)
    and all(all(len(e) == 3 for e in h) for h in (v.values() if isinstance(v, Mapping) else v)),
    "a list (or dict client -> list) of Opacus histories [(sigma, q, steps), ...]", ["x", 3.0, [[(1.0, 0.5)]]],
    valid=[[(1.0, 0.5, 2)]])


@validate_args(histories=[_HISTORIES], delta=_DELTA, accountant=[Options(("rdp", "prv"))],
               eps_error=[FINITE_POSITIVE])
def dp_epsilon(histories: Any, delta: float = 1e-5, *, accountant: str = "rdp", eps_error: float = 0.01) -> float:
    """Record-level epsilon of DP-SGD clients: the worst client over its composed Opacus histories.

    Parameters
    ----------
    histories : list of histories, or dict client -> history
        A history is Opacus' ``accountant.history``: ``[(noise_multiplier, sample_rate, steps), ...]``,
        the rounds of one client concatenated (rounds compose).
    accountant : {"rdp", "prv"}
        Opacus' ``RDPAccountant`` (what :class:`DPSGD` reports) or ``PRVAccountant`` (numerical
        composition of privacy random variables; it returns an upper bound with error ``eps_error``).

    Examples
    --------
    >>> dp_epsilon([[(1.0, 0.25, 40)]]) > dp_epsilon([[(2.0, 0.25, 40)]])
    True
    """
    hists = list(histories.values()) if isinstance(histories, Mapping) else list(histories)
    merged = [_merge(h) for h in hists if h]
    if any(s == 0 for h in merged for s, _, _ in h):
        return float("inf")
    # epsilon grows with the steps of a single (sigma, q) mechanism: of such clients only the busiest counts
    single: dict[tuple[float, float], int] = {}
    candidates: set[tuple[tuple[float, float, int], ...]] = set()
    for h in merged:
        if len(h) == 1:
            sigma, q, n = h[0]
            single[(sigma, q)] = max(single.get((sigma, q), 0), n)
        else:
            candidates.add(tuple(h))
    candidates |= {((sigma, q, n),) for (sigma, q), n in single.items()}
    eps = 0.0
    kwargs = {"eps_error": float(eps_error)} if accountant == "prv" else {}
    for hist in sorted(candidates):
        acc = _accountant(accountant)
        acc.history = list(hist)
        eps = max(eps, _quiet_epsilon(acc, delta, **kwargs))
    return eps


_FLOAT_DICT = Satisfies(lambda v: isinstance(v, Mapping), "a dict name -> array", [None, "x", 3.0],
                        valid={"w": np.ones(2)})


@validate_args(delta=[_FLOAT_DICT], clip=[FINITE_POSITIVE])
def clip_update(delta: dict[str, np.ndarray], clip: float) -> tuple[dict[str, np.ndarray], float]:
    """Scale a model update so that its global L2 norm (over every float array) is at most ``clip``.

    Returns the clipped update and the norm before clipping.
    """
    arrays = {k: np.asarray(v) for k, v in delta.items()}
    bad = [k for k, a in arrays.items() if a.dtype.kind == "f" and not np.isfinite(a).all()]
    if bad:
        raise InputError(f"The 'delta' argument of clip_update holds NaN or infinite values in {bad}.")
    norm = float(np.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in arrays.values()
                             if a.dtype.kind == "f")))
    factor = min(1.0, clip / norm) if norm > 0 else 1.0
    return {k: (a * factor).astype(a.dtype) if a.dtype.kind == "f" else a for k, a in arrays.items()}, norm


@dataclass(frozen=True)
class UDP:
    """User-level DP (UDP): clip the client's update to ``clip`` and add N(0, sigma^2 clip^2) per coordinate.

    Parameters
    ----------
    sigma : float, default=1.0
        Noise multiplier sigma >= 0, finite (sigma_g in the paper's tables; 0 disables the noise, not the clip).
    clip : float, default=1.0
        C > 0, finite: the L2 bound on one client's update (all float parameters together).

    Examples
    --------
    >>> import numpy as np
    >>> mech = UDP(sigma=0.0, clip=1.0)
    >>> out = mech.privatize({"w": np.zeros(2)}, {"w": np.array([3.0, 4.0])}, 0)
    >>> out["w"].round(3).tolist()
    [0.6, 0.8]
    """

    sigma: float = 1.0
    clip: float = 1.0
    name: str = "udp"

    def __post_init__(self) -> None:
        validate_value("UDP", "sigma", self.sigma, [FINITE_NONNEGATIVE])
        validate_value("UDP", "clip", self.clip, [FINITE_POSITIVE])

    @validate_args(start=[InstanceOf(Mapping)], trained=[InstanceOf(Mapping)], rng=["random_state"])
    def privatize(self, start: dict[str, np.ndarray], trained: dict[str, np.ndarray],
                  rng: Any = None) -> dict[str, np.ndarray]:
        """The upload of one client: ``start + clip(trained - start) + noise`` (integer buffers as trained).

        ``rng``: a numpy Generator, an int seed or None (fresh entropy). ``start`` and ``trained`` must have
        the same keys and shapes.
        """
        gen = check_random_state(rng, name="rng", owner="UDP.privatize")
        for name, value in (("start", start), ("trained", trained)):
            if not isinstance(value, Mapping):
                raise InputError(f"The '{name}' argument of UDP.privatize must be a dict name -> array. "
                                 f"Got {type(value).__name__} instead.")
        if sorted(start) != sorted(trained):
            raise InputError(f"The 'start' and 'trained' arguments of UDP.privatize must have the same keys. Got "
                             f"{sorted(start)} and {sorted(trained)}; missing in start: "
                             f"{sorted(set(trained) - set(start))}, missing in trained: {sorted(set(start) - set(trained))}.")
        floats = {}
        for k in trained:
            a, b = np.asarray(trained[k]), np.asarray(start[k])
            if a.shape != b.shape:
                raise InputError(f"UDP.privatize: {k!r} has shape {a.shape} in 'trained' but {b.shape} in 'start'.")
            if a.dtype.kind == "f":
                floats[k] = a - b
        clipped, _ = clip_update(floats, self.clip)
        out = dict(trained)
        for k, d in clipped.items():
            noise = gen.normal(0.0, self.sigma * self.clip, size=d.shape) if self.sigma > 0 else 0.0
            out[k] = (np.asarray(start[k]) + d + noise).astype(np.asarray(trained[k]).dtype)
        return out

    @validate_args(rounds=[Interval(int, 0, None)], sample_rate=[Interval("real", 0, 1, closed="right")], delta=_DELTA)
    def epsilon(self, rounds: int, sample_rate: float, delta: float = 1e-5) -> float:
        """User-level epsilon after ``rounds`` rounds with client sampling rate q = K/N."""
        return rdp_epsilon(self.sigma, sample_rate, rounds, delta)


@dataclass(frozen=True)
class DPSGD:
    """Record-level DP-SGD inside each client via Opacus ``make_private`` (the official code's noise).

    Parameters
    ----------
    sigma : float, default=1.0
        Opacus ``noise_multiplier`` (> 0, finite).
    clip : float, default=1.0
        Opacus ``max_grad_norm`` (per-sample clipping bound; 1.0 in the official code).

    Examples
    --------
    >>> mech = DPSGD.for_epsilon(8.0, delta=1e-5, sample_rate=0.25, steps=100)
    >>> dp_epsilon([[(mech.sigma, 0.25, 100)]]) <= 8.0
    True
    """

    sigma: float = 1.0
    clip: float = 1.0
    name: str = "dpsgd"

    def __post_init__(self) -> None:
        validate_value("DPSGD", "sigma", self.sigma, [FINITE_POSITIVE])
        validate_value("DPSGD", "clip", self.clip, [FINITE_POSITIVE])

    @classmethod
    @validate_args(target_epsilon=[FINITE_POSITIVE], delta=_DELTA, sample_rate=[Interval("real", 0, 1, closed="right")],
                   steps=[Interval(int, 1, None)], clip=[FINITE_POSITIVE])
    def for_epsilon(cls, target_epsilon: float, *, delta: float = 1e-5, sample_rate: float, steps: int,
                    clip: float = 1.0) -> DPSGD:
        """The mechanism whose ``steps`` Poisson steps at ``sample_rate`` spend at most ``target_epsilon``
        (Opacus ``get_noise_multiplier``, RDP accountant, tolerance 0.01)."""
        utils = require("opacus.accountants.utils", purpose="DP-SGD noise calibration")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            sigma = utils.get_noise_multiplier(target_epsilon=float(target_epsilon), target_delta=float(delta),
                                               sample_rate=float(sample_rate), steps=int(steps), accountant="rdp")
        return cls(sigma=float(sigma), clip=clip)

    @staticmethod
    @validate_args(histories=[_HISTORIES], delta=_DELTA)
    def epsilon_from_histories(histories: Any, delta: float = 1e-5) -> float:
        """Record-level epsilon: the worst client over its composed Opacus accountant histories (RDP)."""
        return dp_epsilon(histories, delta, accountant="rdp")


def as_mechanism(mechanism: Any) -> UDP | DPSGD | None:
    """None, a mechanism object, or the names "udp"/"dpsgd" (defaults) -> a mechanism."""
    if mechanism is None or isinstance(mechanism, UDP | DPSGD):
        return mechanism
    validate_value("run_federated", "mechanism", mechanism, [{"udp", "dpsgd"}], noun="argument")
    return UDP() if mechanism == "udp" else DPSGD()
