"""FedCEO experiment, claim A4: the reported epsilons against an independent accountant.

The experiment's epsilons come from :func:`trustlab.methods.fedceo.dp_epsilon`, which composes the Opacus
histories that the simulator recorded and calls Opacus' accountants. The reference here is computed
separately: each client's (sigma, q, steps) is rebuilt from the seeded client schedule and the client sizes
(not from the recorded histories), and composed with Microsoft's ``prv_accountant`` package (Gopi et al.,
2021), a separate implementation of the PRV accountant that Opacus' ``PRVAccountant`` was ported from. So the
check can fail through the recorded histories (steps, sample rates, merging, the worst client) or through
Opacus' port; it shares the algorithm, not the code.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from trustlab.core.exceptions import InputError
from trustlab.core.optional import require


def schedule_histories(
    cfg: Any, sizes: list[int], seed: int, sigma: float
) -> dict[int, list[tuple[float, float, int]]]:
    """Each client's DP-SGD history ``[(sigma, q, steps)]`` from the seeded schedule: Opacus' Poisson loader takes
    ``ceil(n / batch_size)`` steps per epoch at rate ``1 / ceil(n / batch_size)``."""
    from trustlab.methods.fedceo import client_schedule

    counts = Counter(
        c for s in client_schedule(cfg.n_clients, cfg.clients_per_round, cfg.rounds, seed) for c in s
    )
    out = {}
    for c, rounds in counts.items():
        per_epoch = math.ceil(sizes[c] / cfg.batch_size)
        out[c] = [(float(sigma), 1.0 / per_epoch, rounds * cfg.local_epochs * per_epoch)]
    return out


def prv_reference(
    histories: dict[int, list[tuple[float, float, int]]], delta: float, eps_error: float
) -> tuple[float, float, float]:
    """The worst client's (lower, estimate, upper) epsilon from ``prv_accountant`` (one-entry histories; for one
    (sigma, q) epsilon grows with the steps, so per (sigma, q) only the busiest client is composed)."""
    prv = require("prv_accountant", purpose="the independent check of FedCEO's privacy accounting")
    busiest: dict[tuple[float, float], int] = {}
    for hist in histories.values():
        if len(hist) != 1:
            raise InputError(
                "The 'histories' argument of prv_reference must hold one (sigma, q, steps) entry per "
                f"client. Got {hist!r}."
            )
        sigma, q, n = hist[0]
        busiest[(sigma, q)] = max(busiest.get((sigma, q), 0), int(n))
    worst = (0.0, 0.0, 0.0)
    for (sigma, q), n in sorted(busiest.items()):
        acc = prv.PRVAccountant(
            prvs=[prv.PoissonSubsampledGaussianMechanism(sampling_probability=q, noise_multiplier=sigma)],
            max_self_compositions=[n],
            eps_error=eps_error,
            delta_error=delta / 1000,
        )
        lo, est, up = acc.compute_epsilon(delta=delta, num_self_compositions=[n])
        if est > worst[1]:
            worst = (float(lo), float(est), float(up))
    return worst


def unit_accounting(
    cfg: Any, sizes: list[int], seed: int, sigma: float, runs: list[Any], target: float
) -> dict[str, Any]:
    """A4's numbers for one (epsilon, seed) unit: the reported RDP epsilon (worst over the unit's DP runs), Opacus'
    PRV epsilon on the recorded histories, and the schedule-based ``prv_accountant`` reference."""
    from trustlab.methods.fedceo import dp_epsilon

    recorded = [dict(h.dp_histories) for h in runs]
    prv = dp_epsilon(
        [h for rec in recorded for h in rec.values()],
        cfg.delta,
        accountant="prv",
        eps_error=cfg.prv_eps_error,
    )
    lo, est, up = prv_reference(schedule_histories(cfg, sizes, seed, sigma), cfg.delta, cfg.prv_eps_error)
    return {
        "target": target,
        "seed": seed,
        "sigma": sigma,
        "rdp": max(float(h.epsilon) for h in runs),
        "prv": prv,
        "ref_low": lo,
        "ref": est,
        "ref_high": up,
        "prv_rel_diff": abs(prv - est) / est,
        "same_histories": all(r == recorded[0] for r in recorded),
    }
