"""Client-side DP mechanisms for FedCEO / UDP-FedAvg and their accounting with Opacus' RDP accountant.

* :class:`UDP` (the paper's user-level DP): the client clips its model update to L2 norm ``C`` and adds
  N(0, sigma^2 C^2) to every coordinate before uploading. The server sees each upload, so one user's
  protection is its own Gaussian mechanism with noise multiplier sigma, amplified by client sampling with
  rate q = K/N; over T rounds this is the sampled Gaussian mechanism, accounted with
  :class:`opacus.accountants.RDPAccountant` (history ``[(sigma, q, T)]``).
* :class:`DPSGD` (what the official code runs): record-level DP-SGD through Opacus ``make_private`` inside
  each client (per-sample clipping at ``max_grad_norm``, Poisson batches). Accounted per client from the
  Opacus accountant histories of the rounds it took part in (client sampling is not used for amplification).

Server-side smoothing is post-processing: epsilon does not depend on it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.constraints import Interval, validate_value
from trustlab.core.optional import require

__all__ = ["UDP", "DPSGD", "rdp_epsilon", "clip_update"]


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
    validate_value("rdp_epsilon", "noise_multiplier", noise_multiplier, [Interval("real", 0, None)])
    validate_value("rdp_epsilon", "sample_rate", sample_rate, [Interval("real", 0, 1, closed="right")])
    validate_value("rdp_epsilon", "steps", steps, [Interval(int, 0, None)])
    validate_value("rdp_epsilon", "delta", delta, [Interval("real", 0, 1, closed="neither")])
    if steps == 0:
        return 0.0
    if noise_multiplier == 0:
        return float("inf")
    accountants = require("opacus.accountants", purpose="FedCEO privacy accounting")
    acc = accountants.RDPAccountant()
    acc.history = [(float(noise_multiplier), float(sample_rate), int(steps))]
    with warnings.catch_warnings():  # "optimal order is the smallest alpha" for tiny sigma: eps is huge anyway
        warnings.simplefilter("ignore", UserWarning)
        return float(acc.get_epsilon(delta=delta))


def clip_update(delta: dict[str, np.ndarray], clip: float) -> tuple[dict[str, np.ndarray], float]:
    """Scale a model update so that its global L2 norm (over every float array) is at most ``clip``.

    Returns the clipped update and the norm before clipping.
    """
    validate_value("clip_update", "clip", clip, [Interval("real", 0, None, closed="neither")])
    norm = float(np.sqrt(sum(float(np.sum(np.square(v, dtype=np.float64))) for v in delta.values()
                             if np.asarray(v).dtype.kind == "f")))
    factor = min(1.0, clip / norm) if norm > 0 else 1.0
    return {k: (v * factor).astype(v.dtype) if np.asarray(v).dtype.kind == "f" else v for k, v in delta.items()}, norm


@dataclass(frozen=True)
class UDP:
    """User-level DP (UDP): clip the client's update to ``clip`` and add N(0, sigma^2 clip^2) per coordinate.

    Parameters
    ----------
    sigma : float, default=1.0
        Noise multiplier sigma >= 0 (sigma_g in the paper's tables; 0 disables the noise, not the clip).
    clip : float, default=1.0
        C > 0, the L2 bound on one client's update (all float parameters together).

    Examples
    --------
    >>> import numpy as np
    >>> mech = UDP(sigma=0.0, clip=1.0)
    >>> out = mech.privatize({"w": np.zeros(2)}, {"w": np.array([3.0, 4.0])}, np.random.default_rng(0))
    >>> out["w"].round(3).tolist()
    [0.6, 0.8]
    """

    sigma: float = 1.0
    clip: float = 1.0
    name: str = "udp"

    def __post_init__(self) -> None:
        validate_value("UDP", "sigma", self.sigma, [Interval("real", 0, None)])
        validate_value("UDP", "clip", self.clip, [Interval("real", 0, None, closed="neither")])

    def privatize(self, start: dict[str, np.ndarray], trained: dict[str, np.ndarray],
                  rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The upload of one client: ``start + clip(trained - start) + noise`` (integer buffers as trained)."""
        floats = {k: np.asarray(trained[k]) - np.asarray(start[k]) for k in trained
                  if np.asarray(trained[k]).dtype.kind == "f"}
        clipped, _ = clip_update(floats, self.clip)
        out = dict(trained)
        for k, d in clipped.items():
            noise = rng.normal(0.0, self.sigma * self.clip, size=d.shape) if self.sigma > 0 else 0.0
            out[k] = (np.asarray(start[k]) + d + noise).astype(np.asarray(trained[k]).dtype)
        return out

    def epsilon(self, rounds: int, sample_rate: float, delta: float = 1e-5) -> float:
        """User-level epsilon after ``rounds`` rounds with client sampling rate q = K/N."""
        return rdp_epsilon(self.sigma, sample_rate, rounds, delta)


@dataclass(frozen=True)
class DPSGD:
    """Record-level DP-SGD inside each client via Opacus ``make_private`` (the official code's noise).

    Parameters
    ----------
    sigma : float, default=1.0
        Opacus ``noise_multiplier``.
    clip : float, default=1.0
        Opacus ``max_grad_norm`` (per-sample clipping bound; 1.0 in the official code).
    """

    sigma: float = 1.0
    clip: float = 1.0
    name: str = "dpsgd"

    def __post_init__(self) -> None:
        validate_value("DPSGD", "sigma", self.sigma, [Interval("real", 0, None, closed="neither")])
        validate_value("DPSGD", "clip", self.clip, [Interval("real", 0, None, closed="neither")])

    @staticmethod
    def epsilon_from_histories(histories: list[list[tuple[float, float, int]]], delta: float = 1e-5) -> float:
        """Record-level epsilon: the worst client over its composed Opacus accountant histories."""
        if not histories or not any(histories):
            return 0.0
        accountants = require("opacus.accountants", purpose="FedCEO privacy accounting")
        eps = 0.0
        for hist in histories:
            if not hist:
                continue
            acc = accountants.RDPAccountant()
            acc.history = list(hist)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                eps = max(eps, float(acc.get_epsilon(delta=delta)))
        return eps


def as_mechanism(mechanism: Any) -> UDP | DPSGD | None:
    """None, a mechanism object, or the names "udp"/"dpsgd" (defaults) -> a mechanism."""
    if mechanism is None or isinstance(mechanism, UDP | DPSGD):
        return mechanism
    validate_value("run_federated", "mechanism", mechanism, [{"udp", "dpsgd"}])
    return UDP() if mechanism == "udp" else DPSGD()
