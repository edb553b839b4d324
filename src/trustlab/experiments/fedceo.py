"""FedCEO: t-SVT server smoothing for DP federated learning, at digits scale, as the official code runs it.

Claims (pre-registered in this file and docs/papers/fedceo.md before the first default run of this design):

* A1: the operator identity (global = SVT_{tau/K}(mean), order invariance, tau=0, big tau, real output) to 1e-10.
* A2: denoising of synthetic low-rank-plus-noise client stacks (>= 20 % lower error than the mean).
* A3 (primary): end to end on digits with record-level DP-SGD through Opacus (sigma calibrated so that the
  busiest client spends at most the target epsilon at delta 1e-5), the official CIFAR-10 script's smoothing
  schedule (I = 10, theta = 1.04), the official restart rule and per-client smoothed models: FedCEO (lambda
  chosen on the validation split) beats DP-FedAvg (the same clients, batches and noise streams, plain
  averaging) in test accuracy, paired over seeds: the 95 % t-interval of the gap lies above 0.
* A3b: FedAvg without DP >= both DP methods (mean test accuracy over seeds).
* A3c (secondary): non-inferiority, mean gap >= -1 point (the claim this experiment used to make).
* A4: the reported epsilon (Opacus RDP accountant, worst client) meets the target and lies in [1, 10], and an
  independent accountant (Opacus PRV) on the same histories does not exceed it by more than its stated error.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.constraints import Interval, validate_value
from trustlab.core.exceptions import ConfigError
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, Premise, RunContext
from trustlab.methods.fedceo import PAPER as PAPER
from trustlab.results.result import Result

TITLE = "FedCEO: tensor low-rank server smoothing for DP-SGD federated learning (digits, N=20, K=10)"
EXTRAS = ("torch", "fl")
#: the quick gate's rule (python -m trustlab.experiments._gates fedceo: >= 4 of 5 quick seeds, not PASS under
#: KNOCKOUT); A1 (operator identities) and A4 (the accountant) pass under the knockout too, so the rule leaves them
#: out; A3 is not checked in quick mode
QUICK_EXPECTED_PASS = ("pre-smoothing-moves", "A2")
#: the mechanism off: no t-SVT smoothing (FedCEO's place is taken by the plain client mean, in A2 and end to end)
KNOCKOUT: tuple[str, ...] = ("smoothing=false",)
DP_FEDAVG, FEDCEO, NO_DP = "DP-FedAvg", "FedCEO", "FedAvg (no DP)"


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    n_clients: int = 20
    clients_per_round: int = 10
    rounds: int = 50
    local_epochs: int = 1
    batch_size: int = 16                     # expected Poisson batch (sample rate 16/60 -> 1/4)
    lr: float = 0.1
    momentum: float = 0.5                    # the official update.py
    hidden: int = 64                         # the official MLP's hidden width
    partition: str = "iid"
    alpha: float = 0.5
    clip: float = 1.0                        # Opacus max_grad_norm in the official code
    target_epsilon: float = 8.0
    delta: float = 1e-5
    prv_eps_error: float = 0.01
    lam_grid: tuple[float, ...] = (0.3, 1.0, 3.0, 10.0)
    theta: float = 1.04                      # train.sh, CIFAR-10
    interval: int = 10                       # train.sh, CIFAR-10
    restart: bool = True                     # the official restart rule
    eval_every: int = 10
    a2_shape: tuple[int, ...] = (64, 64)
    a2_rank: int = 4
    a2_snr: float = 2.0                      # signal singular values / noise bulk edge of the mean
    run_end_to_end: bool = True
    smoothing: bool = True                   # False (the KNOCKOUT): the plain client mean in FedCEO's place

    @classmethod
    def quick(cls) -> Config:
        return cls(seeds=(0,), rounds=10, interval=5, lam_grid=(1.0,), eval_every=5)

    @classmethod
    def default(cls) -> Config:
        return cls()

    @classmethod
    def paper(cls) -> Config:
        """Closer to the official runs: 300 rounds (train.sh), 5 seeds, a wider lambda grid; hours on a CPU."""
        return cls(rounds=300, lam_grid=(0.1, 0.3, 1.0, 3.0, 10.0, 30.0), eval_every=25)

    def validate(self) -> None:
        super().validate()
        own = "fedceo.Config"
        validate_value(own, "n_clients", self.n_clients, [Interval(int, 2, None)])
        validate_value(own, "clients_per_round", self.clients_per_round, [Interval(int, 2, self.n_clients)])
        for name in ("rounds", "local_epochs", "batch_size", "hidden", "interval", "a2_rank", "eval_every"):
            validate_value(own, name, getattr(self, name), [Interval(int, 1, None)])
        for name in ("lr", "clip", "target_epsilon", "prv_eps_error"):
            validate_value(own, name, getattr(self, name), [Interval("real", 0, None, closed="neither")])
        validate_value(own, "momentum", self.momentum, [Interval("real", 0, 1, closed="left")])
        validate_value(own, "theta", self.theta, [Interval("real", 1, None)])
        validate_value(own, "delta", self.delta, [Interval("real", 0, 1, closed="neither")])
        validate_value(own, "partition", self.partition, [{"iid", "dirichlet"}])
        if not self.lam_grid or any(v <= 0 for v in self.lam_grid):
            raise ConfigError(f"The 'lam_grid' field of {own} must be non-empty and > 0. Got {self.lam_grid!r}.")
        if len(self.a2_shape) != 2 or min(self.a2_shape) <= self.a2_rank:
            raise ConfigError(f"The 'a2_shape' field of {own} must be 2 sizes > a2_rank. Got {self.a2_shape!r}.")


# ------------------------------------------------------------------------------------------------ A1, A2
def _svt_np(m: np.ndarray, tau: float) -> np.ndarray:
    """An independent SVT (the 1-d bias is a (1, n) row, conv kernels (out, rest))."""
    shape = m.shape
    mat = m.reshape(1, -1) if m.ndim == 1 else m.reshape(shape[0], -1)
    u, s, vt = np.linalg.svd(mat, full_matrices=False)
    return ((u * np.maximum(s - tau, 0)) @ vt).reshape(shape)


def _a1_stack(ups: list[dict[str, np.ndarray]], name: str, tau: float, k: int, g: dict[str, np.ndarray]) -> dict:
    import warnings

    from trustlab.methods.fedceo import FedCEO, tsvt, tsvt_reference

    mean = np.mean([u[name] for u in ups], axis=0)
    stack = np.stack([u[name] for u in ups], axis=-1)
    _, imag = tsvt_reference(stack, tau)
    d = np.moveaxis(np.fft.fft(stack.reshape(stack.shape[0] if stack.ndim > 2 else 1, -1, k), axis=-1), -1, 0)
    smax = np.linalg.svd(d, compute_uv=False).max(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # tau >= sigma_max of every slice zeroes every client; >= sigma_max(D_0) zeroes the global
        zero = max(float(np.abs(tsvt(stack, float(smax.max()))).max()),
                   float(np.abs(FedCEO(lam=1.0 / (2 * float(smax[0]))).aggregate(ups, server_round=1)[name]).max()))
    return {"identity_err": float(np.abs(g[name] - _svt_np(mean, tau / k)).max()), "imag_max": imag,
            "tau0_err": float(np.abs(tsvt(stack, 0.0) - stack).max()), "big_tau_max": zero}


def _a1(res: Result, seeds: tuple[int, ...]) -> None:
    from trustlab.methods.fedceo import FedCEO

    worst = {"identity_err": 0.0, "perm_err": 0.0, "imag_max": 0.0, "tau0_err": 0.0, "big_tau_max": 0.0}
    shapes = {"matrix": (8, 5), "conv": (4, 3, 3, 3), "bias": (6,)}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for k in (2, 5, 10):
            ups = [{n: rng.normal(size=s) for n, s in shapes.items()} for _ in range(k)]
            agg = FedCEO(lam=0.5)
            g = agg.aggregate(ups, server_round=1)
            for n in shapes:
                for key, v in _a1_stack(ups, n, agg.tau_, k, g).items():
                    worst[key] = max(worst[key], v)
            for _ in range(3):
                p = rng.permutation(k)
                g2 = FedCEO(lam=0.5).aggregate([ups[i] for i in p], server_round=1)
                worst["perm_err"] = max(worst["perm_err"], max(float(np.abs(g2[n] - g[n]).max()) for n in shapes))
    for metric, v in worst.items():
        res.add(method="operator", seed=-1, metric=metric, value=v)
    res.summary["a1_max_error"] = max(worst.values())
    res.summary["a1"] = worst


def _a2(cfg: Config, res: Result) -> None:
    from trustlab.methods.fedceo import FedCEO

    m, n = cfg.a2_shape
    k, r = cfg.clients_per_round, cfg.a2_rank
    noise_sd = 1.0
    edge = noise_sd / math.sqrt(k) * (math.sqrt(m) + math.sqrt(n))   # bulk edge of the client mean's noise

    def problem(seed: int) -> tuple[np.ndarray, list[dict[str, np.ndarray]]]:
        rng = np.random.default_rng(seed)
        u, _ = np.linalg.qr(rng.normal(size=(m, r)))
        v, _ = np.linalg.qr(rng.normal(size=(n, r)))
        w = (u * (cfg.a2_snr * edge)) @ v.T
        return w, [{"w": w + rng.normal(0, noise_sd, size=(m, n))} for _ in range(k)]

    def errors(lam: float, seed: int) -> tuple[float, float]:
        w, ups = problem(seed)
        mean = np.mean([u["w"] for u in ups], axis=0)
        g = FedCEO(lam=lam).aggregate(ups, server_round=1)["w"] if cfg.smoothing else mean
        nw = np.linalg.norm(w)
        return float(np.linalg.norm(g - w) / nw), float(np.linalg.norm(mean - w) / nw)

    # lam from a grid on a validation problem (seed 10_000), threshold tau/K around the bulk edge
    grid = [1.0 / (2 * k * edge * f) for f in (0.5, 0.75, 1.0, 1.25, 1.5)]
    lam = min(grid, key=lambda g: errors(g, 10_000)[0])
    rel_f, rel_m = [], []
    for seed in cfg.seeds:
        ef, em = errors(lam, seed)
        rel_f.append(ef)
        rel_m.append(em)
        res.add(method="FedCEO", seed=seed, metric="a2_rel_error", value=ef, lam=lam)
        res.add(method="mean", seed=seed, metric="a2_rel_error", value=em)
    res.summary["a2_rel_error_fedceo"] = float(np.mean(rel_f))
    res.summary["a2_rel_error_mean"] = float(np.mean(rel_m))
    res.summary["a2_reduction"] = 1.0 - float(np.mean(rel_f)) / float(np.mean(rel_m))
    res.summary["a2_lam"] = lam


# ------------------------------------------------------------------------------------------------ end to end
def _calibrate(cfg: Config, sizes: list[int], seed: int) -> Any:
    """The DP-SGD mechanism whose busiest client spends at most ``target_epsilon`` (RDP, Opacus).

    Each client's Opacus loader takes ``ceil(n / batch_size)`` Poisson steps per epoch at rate
    ``1 / ceil(n / batch_size)``; the rounds it takes part in are known from the seeded schedule."""
    from trustlab.methods.fedceo import DPSGD, client_schedule

    counts = Counter(c for s in client_schedule(cfg.n_clients, cfg.clients_per_round, cfg.rounds, seed) for c in s)
    most_steps: dict[float, int] = {}                  # per sample rate, the busiest client's steps
    for c, rounds in counts.items():
        q = 1.0 / math.ceil(sizes[c] / cfg.batch_size)
        most_steps[q] = max(most_steps.get(q, 0), rounds * cfg.local_epochs * int(1 / q))
    sigma = max(DPSGD.for_epsilon(cfg.target_epsilon, delta=cfg.delta, sample_rate=q, steps=n).sigma
                for q, n in most_steps.items())
    return DPSGD(sigma=sigma, clip=cfg.clip)


def _data(cfg: Config, seed: int) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
    from trustlab.data import load_digits_images, partition_dirichlet, partition_iid

    ds = load_digits_images(flatten=True)
    X, y = ds.X, ds.y
    perm = np.random.default_rng(2025).permutation(len(y))
    tr, va, te = perm[:1200], perm[1200:1400], perm[1400:]
    parts = (partition_iid(y[tr], cfg.n_clients, random_state=seed) if cfg.partition == "iid"
             else partition_dirichlet(y[tr], cfg.n_clients, cfg.alpha, random_state=seed))
    return [(X[tr][p], y[tr][p]) for p in parts], {"val": (X[va], y[va]), "test": (X[te], y[te])}


def _seed_runs(cfg: Config, ctx: RunContext, seed: int) -> list[dict[str, Any]]:
    """FedAvg without DP, DP-FedAvg and FedCEO at every lambda of the grid, on one seed's clients."""
    from trustlab.core.seeding import isolated_global_rng
    from trustlab.methods.fedceo import BiasFreeMLP, FedCEO, UDPFedAvg, dp_epsilon, run_federated

    clients, evals = _data(cfg, seed)
    with isolated_global_rng(seed):
        model = BiasFreeMLP(clients[0][0].shape[1], cfg.hidden, 10)
    mech = _calibrate(cfg, [len(c[1]) for c in clients], seed)
    jobs: list[tuple[str, float | None, Any, Any]] = [(NO_DP, None, UDPFedAvg(), None), (DP_FEDAVG, None, UDPFedAvg(), mech)]
    jobs += [(FEDCEO, lam, FedCEO(lam=lam, theta=cfg.theta, interval=cfg.interval, client_models=cfg.restart)
              if cfg.smoothing else UDPFedAvg(), mech) for lam in cfg.lam_grid]
    rows = []
    for method, lam, agg, m in jobs:
        ctx.check_budget(f"{method} lam={lam} seed={seed}")
        h = run_federated(model, clients, aggregator=agg, mechanism=m, rounds=cfg.rounds,
                          clients_per_round=cfg.clients_per_round, local_epochs=cfg.local_epochs,
                          batch_size=cfg.batch_size, lr=cfg.lr, momentum=cfg.momentum,
                          restart=cfg.restart and cfg.smoothing and method == FEDCEO, eval_sets=evals, eval_every=cfg.eval_every,
                          delta=cfg.delta, random_state=seed)
        prv = dp_epsilon(h.dp_histories, cfg.delta, accountant="prv", eps_error=cfg.prv_eps_error) if m else None
        rows.append(dict(method=method, lam=lam, seed=seed, sigma=None if m is None else m.sigma,
                         val=h.final("val"), test=h.final("test"), epsilon=h.epsilon if m else None, epsilon_prv=prv,
                         test_curve=list(h.metrics["test"]), eval_rounds=list(h.rounds),
                         restarted=int(sum(h.restarted)), smoothing_rounds=sum(t is not None for t in h.taus)))
    return rows


def _record(res: Result, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        for metric in ("val", "test", "epsilon", "epsilon_prv"):
            if row[metric] is not None:
                res.add(method=row["method"], lam=row["lam"], seed=row["seed"], sigma=row["sigma"],
                        metric=f"{metric}_acc" if metric in ("val", "test") else metric, value=row[metric])


def _ci(diffs: list[float]) -> tuple[float, float, float]:
    from scipy import stats

    d = np.asarray(diffs, dtype=float)
    if len(d) < 2:
        return float(d.mean()), float("nan"), float("nan")
    half = float(stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)))
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half)


def _summarise_a3(cfg: Config, res: Result, rows: list[dict[str, Any]]) -> None:
    """Per seed, lambda with the best validation accuracy (test untouched); paired test-accuracy gaps."""
    s = res.summary
    chosen, diffs = {}, []
    for seed in cfg.seeds:
        mine = [r for r in rows if r["seed"] == seed]
        cands = [r for r in mine if r["method"] == FEDCEO]
        best = max(cands, key=lambda r: (r["val"], -r["lam"]))  # ties: the weaker smoothing (larger lam)
        base = next(r for r in mine if r["method"] == DP_FEDAVG)
        chosen[seed] = best
        diffs.append(100 * (best["test"] - base["test"]))
    mean, lo, hi = _ci(diffs)
    s["a3_abs_gap"] = float(np.mean(np.abs(diffs)))
    s["a3_gap"], s["a3_ci_low"], s["a3_ci_high"], s["a3_diffs"] = mean, lo, hi, diffs
    s["a3_chosen_lam"] = {str(k): v["lam"] for k, v in chosen.items()}
    acc = {NO_DP: [r["test"] for r in rows if r["method"] == NO_DP],
           DP_FEDAVG: [r["test"] for r in rows if r["method"] == DP_FEDAVG],
           FEDCEO: [r["test"] for r in chosen.values()]}
    s["mean_test_acc"] = {k: 100 * float(np.mean(v)) for k, v in acc.items()}
    s["lam_grid_test_acc"] = {f"{lam:g}": 100 * float(np.mean([r["test"] for r in rows if r["method"] == FEDCEO
                                                               and r["lam"] == lam])) for lam in cfg.lam_grid}
    s["restarted_per_run"] = float(np.mean([r["restarted"] for r in chosen.values()]))
    s["smoothing_rounds_per_run"] = float(np.mean([r["smoothing_rounds"] for r in chosen.values()]))
    s["curves"] = {m: np.mean([r["test_curve"] for r in rr], axis=0).tolist() for m, rr in
                   ((NO_DP, [r for r in rows if r["method"] == NO_DP]),
                    (DP_FEDAVG, [r for r in rows if r["method"] == DP_FEDAVG]), (FEDCEO, list(chosen.values())))}
    s["curve_rounds"] = rows[0]["eval_rounds"]


def _summarise_a4(cfg: Config, res: Result, rows: list[dict[str, Any]]) -> None:
    dp = [r for r in rows if r["epsilon"] is not None]
    res.summary["epsilon_rdp_max"] = float(max(r["epsilon"] for r in dp))
    res.summary["epsilon_rdp_min"] = float(min(r["epsilon"] for r in dp))
    res.summary["epsilon_prv_excess_max"] = float(max(r["epsilon_prv"] - r["epsilon"] for r in dp))
    res.summary["sigma"] = {str(r["seed"]): r["sigma"] for r in dp}
    res.summary["target_epsilon"] = cfg.target_epsilon
    res.summary["prv_eps_error"] = cfg.prv_eps_error


def _seed_task(cfg: Config, seed: int) -> list[dict[str, Any]]:
    """One seed's runs as an executor task (a worker has no budget clock: checked after all seeds)."""
    return _seed_runs(cfg, RunContext(seeds=(seed,), show_progress=False), seed)


def _end_to_end(cfg: Config, ctx: RunContext, res: Result) -> None:
    import functools

    rows: list[dict[str, Any]] = []
    for seed_rows in ctx.map(functools.partial(_seed_task, cfg), cfg.seeds, desc="fedceo seeds"):
        rows += seed_rows
    ctx.check_budget("fedceo seeds")
    _record(res, rows)
    _summarise_a3(cfg, res, rows)
    _summarise_a4(cfg, res, rows)


def run(cfg: Config, ctx: RunContext) -> Result:
    from trustlab.core.threads import limit_threads

    res = Result("fedceo", "", {})
    with limit_threads(1):
        _a1(res, cfg.seeds)
        _a2(cfg, res)
        if cfg.run_end_to_end:
            _end_to_end(cfg, ctx, res)
    s = res.summary
    if "a3_gap" in s:
        ctx.note(f"gap FedCEO - DP-FedAvg: {s['a3_gap']:+.2f} points (95% CI {s['a3_ci_low']:+.2f} .. "
                 f"{s['a3_ci_high']:+.2f}; per seed {[round(d, 2) for d in s['a3_diffs']]}; lambda chosen "
                 f"{s['a3_chosen_lam']}); epsilon {s['epsilon_rdp_min']:.2f}..{s['epsilon_rdp_max']:.2f} "
                 f"(target {cfg.target_epsilon:g}, delta {cfg.delta:g}); sigma {s['sigma']}")
    return res


# ------------------------------------------------------------------------------------------------ claims
def _check_a1(r: Result) -> CheckResult:
    v = r.summary["a1_max_error"]
    return CheckResult(v < 1e-10, v, "< 1e-10", detail=str(r.summary["a1"]))


def _check_a2(r: Result) -> CheckResult:
    s = r.summary
    return CheckResult(s["a2_reduction"] >= 0.2, 100 * s["a2_reduction"], ">= 20", unit="% lower error",
                       baseline=f"client mean's relative error {s['a2_rel_error_mean']:.3f}",
                       detail=f"FedCEO's relative error {s['a2_rel_error_fedceo']:.3f} (lambda {s['a2_lam']:.4g})")


def _check_a3(r: Result) -> CheckResult:
    s = r.summary
    if "a3_gap" not in s:
        return CheckResult(None, None, "95% CI low > 0", detail="end-to-end runs were not made")
    return CheckResult(s["a3_ci_low"] > 0, s["a3_gap"], "95% CI low > 0", unit="points",
                       baseline=f"DP-FedAvg {s['mean_test_acc'][DP_FEDAVG]:.2f} %",
                       detail=f"95% CI {s['a3_ci_low']:+.2f} .. {s['a3_ci_high']:+.2f}; per seed {s['a3_diffs']}; "
                              f"FedCEO {s['mean_test_acc'][FEDCEO]:.2f} %; lambda {s['a3_chosen_lam']}")


def _check_a3b(r: Result) -> CheckResult:
    s = r.summary
    if "mean_test_acc" not in s:
        return CheckResult(None, None, ">= both DP methods", detail="end-to-end runs were not made")
    acc = s["mean_test_acc"]
    best_dp = max(acc[DP_FEDAVG], acc[FEDCEO])
    return CheckResult(acc[NO_DP] >= best_dp, acc[NO_DP], f">= {best_dp:.2f}", unit="%",
                       baseline=f"DP-FedAvg {acc[DP_FEDAVG]:.2f} %, FedCEO {acc[FEDCEO]:.2f} %")


def _check_a3c(r: Result) -> CheckResult:
    s = r.summary
    if "a3_gap" not in s:
        return CheckResult(None, None, ">= -1", detail="end-to-end runs were not made")
    return CheckResult(s["a3_gap"] >= -1.0, s["a3_gap"], ">= -1", unit="points",
                       baseline=f"DP-FedAvg {s['mean_test_acc'][DP_FEDAVG]:.2f} %")


def _check_a4(r: Result) -> CheckResult:
    s = r.summary
    if "epsilon_rdp_max" not in s:
        return CheckResult(None, None, "in [1, target]", detail="no DP runs were made")
    eps, excess, upper = s["epsilon_rdp_max"], s["epsilon_prv_excess_max"], min(s["target_epsilon"], 10.0)
    ok = 1.0 <= s["epsilon_rdp_min"] and eps <= upper + 1e-9 and excess <= s["prv_eps_error"]
    return CheckResult(ok, eps, f"in [1, {upper:g}]; PRV - RDP <= {s['prv_eps_error']:g}",
                       baseline=f"PRV - RDP at most {excess:+.3f}",
                       detail=f"RDP epsilon {s['epsilon_rdp_min']:.3f}..{eps:.3f} over runs; sigma per seed "
                              f"{s['sigma']}")


#: pre-registered premise thresholds (docs/papers/fedceo.md, "Premises, knockout and quick gate"): FedAvg without DP
#: well above chance (10 %) and DP-FedAvg at least twice chance; DP must cost >= 3 points (else there is nothing to
#: denoise); smoothing must move test accuracy by >= 0.5 points on average (2 of the 397 test images)
PRE_NO_DP, PRE_DP, PRE_DP_COST, PRE_SMOOTH = 50.0, 20.0, 3.0, 0.5


def _acc(r: Result) -> dict[str, float] | None:
    return r.summary.get("mean_test_acc")


def _check_pre_learned(r: Result) -> CheckResult:
    a = _acc(r)
    if a is None:
        return CheckResult(None, None, f">= {PRE_NO_DP:g} and >= {PRE_DP:g}", detail="end-to-end runs were not made")
    return CheckResult(a[NO_DP] >= PRE_NO_DP and a[DP_FEDAVG] >= PRE_DP, f"no DP {a[NO_DP]:.1f}, DP-FedAvg "
                       f"{a[DP_FEDAVG]:.1f}", f"no DP >= {PRE_NO_DP:g}, DP-FedAvg >= {PRE_DP:g}", unit="% test acc",
                       baseline="chance 10 %")


def _check_pre_dp_hurts(r: Result) -> CheckResult:
    a = _acc(r)
    if a is None:
        return CheckResult(None, None, f">= {PRE_DP_COST:g}", detail="end-to-end runs were not made")
    return CheckResult(a[NO_DP] - a[DP_FEDAVG] >= PRE_DP_COST, a[NO_DP] - a[DP_FEDAVG], f">= {PRE_DP_COST:g}",
                       unit="points", baseline=f"FedAvg without DP {a[NO_DP]:.2f} %")


def _check_pre_smoothing(r: Result) -> CheckResult:
    s = r.summary
    if "a3_abs_gap" not in s:
        return CheckResult(None, None, f">= {PRE_SMOOTH:g}", detail="end-to-end runs were not made")
    return CheckResult(s["a3_abs_gap"] >= PRE_SMOOTH, s["a3_abs_gap"], f">= {PRE_SMOOTH:g}", unit="points",
                       detail=f"|FedCEO - DP-FedAvg| test accuracy per seed {[round(d, 2) for d in s['a3_diffs']]}")


def _e2e_note(cfg: dict[str, Any]) -> str:
    return (f"digits, N={cfg['n_clients']} IID clients of ~{1200 // cfg['n_clients']} records, K="
            f"{cfg['clients_per_round']}, {cfg['rounds']} rounds, {len(cfg['seeds'])} seed(s), lambda grid "
            f"{list(cfg['lam_grid'])}, I={cfg['interval']}, theta={cfg['theta']}; the paper runs 300 rounds on "
            "EMNIST/CIFAR-10")


#: the paper's Table 1, EMNIST MLP-2, sigma_g 1.0: FedCEO (theta > 1) 78.05 - UDP-FedAvg 76.59 test accuracy
PAPER_GAP = 1.46
_E2E = ("pre-learned", "pre-dp-hurts", "pre-smoothing-moves")
CLAIMS = [
    Premise("pre-learned", f"The federation learned: FedAvg without DP >= {PRE_NO_DP:g} % and DP-FedAvg >= "
            f"{PRE_DP:g} % test accuracy on digits (chance 10 %; mean over seeds)", _check_pre_learned),
    Premise("pre-dp-hurts", f"The DP noise hurts the baseline: FedAvg without DP beats DP-FedAvg by >= "
            f"{PRE_DP_COST:g} points (mean test accuracy over seeds)", _check_pre_dp_hurts),
    Premise("pre-smoothing-moves", f"The smoothing changes the model: |test acc(FedCEO) - test acc(DP-FedAvg)| >= "
            f"{PRE_SMOOTH:g} points (mean over seeds, same clients, batches and noise)", _check_pre_smoothing),
    Claim("A1", "t-SVT operator: FedCEO's global equals SVT_{tau/K}(client mean), tau=0 is the identity, a "
                "tau above sigma_max gives zeros, the FFT's imaginary part is round-off and the global is "
                "invariant to client order (max error < 1e-10)", _check_a1),
    Claim("A2", "on synthetic rank-4-plus-noise client stacks (signal ~2x the noise bulk edge) FedCEO lowers the "
                "relative error of the client mean by >= 20 % (mean over seeds)", _check_a2),
    Claim("A3", "end to end on digits with record-level DP-SGD (Opacus) at the target epsilon, the official "
                "smoothing schedule (I, theta), restart rule and per-client smoothed models: FedCEO (lambda chosen "
                "on validation) beats DP-FedAvg in test accuracy, paired over seeds (95 % CI of the gap above 0)",
          _check_a3, modes=("default", "paper"), scale_note=_e2e_note, requires=_E2E, paper_value=PAPER_GAP),
    Claim("A3b", "FedAvg without DP is at least as accurate as both DP methods (mean test accuracy over seeds)",
          _check_a3b, modes=("default", "paper"), scale_note=_e2e_note, requires=("pre-learned",)),
    Claim("A3c", "non-inferiority: FedCEO's mean test-accuracy gap to DP-FedAvg >= -1 point (the experiment's "
                 "earlier claim, kept as a secondary line)", _check_a3c, modes=("default", "paper"), secondary=True,
          scale_note=_e2e_note, requires=_E2E, paper_value=PAPER_GAP),
    Claim("A4", "the reported record-level epsilon (Opacus RDP, worst client, delta 1e-5) meets the configured "
                "target and lies in [1, 10]; Opacus' PRV accountant on the same histories exceeds it by at most "
                "its stated error", _check_a4,
          scale_note=lambda c: f"target epsilon {c['target_epsilon']:g}, delta {c['delta']:g}, PRV eps_error "
                               f"{c['prv_eps_error']:g}; {c['rounds']} rounds"),
]


def PLOTS(result: Result) -> dict[str, Any]:
    from trustlab.results.plots import new_figure

    fig, ax = new_figure(6.4, 3.8)
    curves, rounds = result.summary.get("curves") or {}, result.summary.get("curve_rounds") or []
    if not curves:
        ax.text(0.5, 0.5, "no end-to-end runs", ha="center", va="center")
        return {"accuracy_by_round": fig}
    for name, curve in curves.items():
        ax.plot(rounds, [100 * v for v in curve], marker="o", ms=3, lw=1.2, label=name)
    s = result.summary
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (%), mean over seeds")
    ax.set_title(f"FedCEO vs DP-FedAvg on digits (epsilon <= {s.get('target_epsilon', float('nan')):g}, "
                 f"delta 1e-5); gap {s.get('a3_gap', float('nan')):+.2f} points", fontsize=9)
    ax.legend(fontsize=7)
    return {"accuracy_by_round": fig}
