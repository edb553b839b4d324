"""FedCEO experiment, end to end on digits: the (epsilon, seed) units of the accuracy-privacy curve (A3, A4).

A unit is FedAvg without DP on one seed (epsilon ``None``), or DP-FedAvg and FedCEO at every lambda of the grid
on one seed at one target epsilon (sigma calibrated to it). Units are independent: the experiment sends them
through ``ctx.map``.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from trustlab.experiments.base import RunContext

DP_FEDAVG, FEDCEO, NO_DP = "DP-FedAvg", "FedCEO", "FedAvg (no DP)"


def calibrate(cfg: Any, sizes: list[int], seed: int, target_epsilon: float) -> Any:
    """The DP-SGD mechanism whose busiest client spends at most ``target_epsilon`` (RDP, Opacus).

    Each client's Opacus loader takes ``ceil(n / batch_size)`` Poisson steps per epoch at rate
    ``1 / ceil(n / batch_size)``; the rounds it takes part in are known from the seeded schedule."""
    from trustlab.methods.fedceo import DPSGD, client_schedule

    counts = Counter(
        c for s in client_schedule(cfg.n_clients, cfg.clients_per_round, cfg.rounds, seed) for c in s
    )
    most_steps: dict[float, int] = {}  # per sample rate, the busiest client's steps
    for c, rounds in counts.items():
        q = 1.0 / math.ceil(sizes[c] / cfg.batch_size)
        most_steps[q] = max(most_steps.get(q, 0), rounds * cfg.local_epochs * int(1 / q))
    sigma = max(
        DPSGD.for_epsilon(target_epsilon, delta=cfg.delta, sample_rate=q, steps=n).sigma
        for q, n in most_steps.items()
    )
    return DPSGD(sigma=sigma, clip=cfg.clip)


def data(cfg: Any, seed: int) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
    from trustlab.data import load_digits_images, partition_dirichlet, partition_iid

    ds = load_digits_images(flatten=True)
    X, y = ds.X, ds.y
    perm = np.random.default_rng(2025).permutation(len(y))
    tr, va, te = perm[:1200], perm[1200:1400], perm[1400:]
    parts = (
        partition_iid(y[tr], cfg.n_clients, random_state=seed)
        if cfg.partition == "iid"
        else partition_dirichlet(y[tr], cfg.n_clients, cfg.alpha, random_state=seed)
    )
    return [(X[tr][p], y[tr][p]) for p in parts], {"val": (X[va], y[va]), "test": (X[te], y[te])}


def units(cfg: Any) -> list[tuple[float | None, int]]:
    """FedAvg without DP once per seed, then every (target epsilon, seed)."""
    return [(None, s) for s in cfg.seeds] + [(float(e), s) for e in cfg.target_epsilons for s in cfg.seeds]


def _jobs(cfg: Any, eps: float | None, mech: Any) -> list[tuple[str, float | None, Any]]:
    from trustlab.methods.fedceo import FedCEO, UDPFedAvg

    if eps is None:
        return [(NO_DP, None, UDPFedAvg())]
    return [(DP_FEDAVG, None, UDPFedAvg())] + [
        (
            FEDCEO,
            lam,
            FedCEO(lam=lam, theta=cfg.theta, interval=cfg.interval, client_models=cfg.restart)
            if cfg.smoothing
            else UDPFedAvg(),
        )
        for lam in cfg.lam_grid
    ]


def unit_runs(cfg: Any, ctx: RunContext, eps: float | None, seed: int) -> dict[str, Any]:
    """One unit's runs (same clients, batches and noise streams for every method) and, with DP, A4's numbers."""
    from trustlab.core.seeding import isolated_global_rng
    from trustlab.experiments._fedceo_accounting import unit_accounting
    from trustlab.methods.fedceo import BiasFreeMLP, run_federated

    clients, evals = data(cfg, seed)
    sizes = [len(c[1]) for c in clients]
    with isolated_global_rng(seed):
        model = BiasFreeMLP(clients[0][0].shape[1], cfg.hidden, 10)
    mech = None if eps is None else calibrate(cfg, sizes, seed, eps)
    rows, hists = [], []
    for method, lam, agg in _jobs(cfg, eps, mech):
        ctx.check_budget(f"{method} lam={lam} seed={seed} epsilon={eps}")
        h = run_federated(
            model,
            clients,
            aggregator=agg,
            mechanism=mech,
            rounds=cfg.rounds,
            clients_per_round=cfg.clients_per_round,
            local_epochs=cfg.local_epochs,
            batch_size=cfg.batch_size,
            lr=cfg.lr,
            momentum=cfg.momentum,
            restart=cfg.restart and cfg.smoothing and method == FEDCEO,
            eval_sets=evals,
            eval_every=cfg.eval_every,
            delta=cfg.delta,
            random_state=seed,
        )
        hists.append(h)
        rows.append(
            dict(
                method=method,
                lam=lam,
                seed=seed,
                target=eps,
                sigma=None if mech is None else mech.sigma,
                val=h.final("val"),
                test=h.final("test"),
                epsilon=h.epsilon if mech else None,
                restarted=int(sum(h.restarted)),
                smoothing_rounds=sum(t is not None for t in h.taus),
            )
        )
    acc = None if mech is None else unit_accounting(cfg, sizes, seed, mech.sigma, hists, eps)
    return {"rows": rows, "accounting": acc}


def unit_task(cfg: Any, unit: tuple[float | None, int]) -> dict[str, Any]:
    """One unit as an executor task (a worker has no budget clock: checked after all units)."""
    eps, seed = unit
    return unit_runs(cfg, RunContext(seeds=(seed,), show_progress=False), eps, seed)


def t_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95 % t-interval (nan bounds with fewer than 2 values)."""
    from scipy import stats

    d = np.asarray(values, dtype=float)
    if len(d) < 2:
        return float(d.mean()), float("nan"), float("nan")
    half = float(stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)))
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half)


def _point(cfg: Any, rows: list[dict[str, Any]], eps: float) -> dict[str, Any]:
    """One epsilon of the curve: per seed lambda by validation accuracy (test untouched), paired test gaps."""
    chosen, base, gaps = {}, {}, []
    for seed in cfg.seeds:
        mine = [r for r in rows if r["seed"] == seed and r["target"] == eps]
        chosen[seed] = max((r for r in mine if r["method"] == FEDCEO), key=lambda r: (r["val"], -r["lam"]))
        base[seed] = next(r for r in mine if r["method"] == DP_FEDAVG)
        gaps.append(100 * (chosen[seed]["test"] - base[seed]["test"]))
    out: dict[str, Any] = {"epsilon": eps, "gaps": gaps, "abs_gap": float(np.mean(np.abs(gaps)))}
    out["gap"], out["gap_low"], out["gap_high"] = t_interval(gaps)
    for key, runs in ((DP_FEDAVG, base), (FEDCEO, chosen)):
        out[key] = dict(zip(("mean", "low", "high"), t_interval([100 * r["test"] for r in runs.values()])))
    out["lam"] = {str(k): v["lam"] for k, v in chosen.items()}
    out["sigma"] = {str(k): v["sigma"] for k, v in base.items()}
    out["lam_grid_test_acc"] = {
        f"{lam:g}": 100
        * float(
            np.mean(
                [r["test"] for r in rows if r["target"] == eps and r["method"] == FEDCEO and r["lam"] == lam]
            )
        )
        for lam in cfg.lam_grid
    }
    out["restarted_per_run"] = float(np.mean([r["restarted"] for r in chosen.values()]))
    out["smoothing_rounds_per_run"] = float(np.mean([r["smoothing_rounds"] for r in chosen.values()]))
    return out


def summarise(
    cfg: Any, summary: dict[str, Any], rows: list[dict[str, Any]], accounting: list[dict[str, Any]]
) -> None:
    """The curve (per epsilon), the no-DP ceiling, the trend (gap at the smallest minus at the largest epsilon,
    paired by seed) and A4's per-unit accounting."""
    no_dp = [100 * r["test"] for r in rows if r["method"] == NO_DP]
    summary["no_dp"] = dict(zip(("mean", "low", "high"), t_interval(no_dp)))
    curve = [_point(cfg, rows, float(e)) for e in sorted(cfg.target_epsilons)]
    summary["curve"] = curve
    if len(curve) >= 2:
        lo_eps, hi_eps = curve[0], curve[-1]
        diffs = [a - b for a, b in zip(lo_eps["gaps"], hi_eps["gaps"])]
        mean, low, high = t_interval(diffs)
        summary["trend"] = {
            "from": hi_eps["epsilon"],
            "to": lo_eps["epsilon"],
            "diffs": diffs,
            "mean": mean,
            "low": low,
            "high": high,
        }
    summary["accounting"] = accounting
