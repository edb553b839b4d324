"""FedCEO: t-SVT server smoothing for DP federated learning, at digits scale, as the official code runs it.

Claims (pre-registered in this file and docs/papers/fedceo.md before the first default run of this design,
issue 41: the curve over epsilon and the accountant cross-check):

* A1: the operator identity (global = SVT_{tau/K}(mean), order invariance, tau=0, big tau, real output) to 1e-10.
* A2: denoising of synthetic low-rank-plus-noise client stacks (>= 20 % lower error than the mean).
* A3 (primary, the curve): end to end on digits with record-level DP-SGD through Opacus, sigma calibrated so
  that the busiest client spends at most epsilon at delta 1e-5, for every epsilon in {1, 2, 4, 8}; the
  official CIFAR-10 script's smoothing schedule (I = 10, theta = 1.04), restart rule and per-client smoothed
  models: FedCEO (lambda chosen on the validation split) beats DP-FedAvg (the same clients, batches and noise
  streams, plain averaging) in test accuracy at EVERY epsilon, paired over seeds: the 95 % t-interval of the
  gap lies above 0 at each epsilon.
* A3t (the paper's trend): the gain grows as epsilon shrinks: per seed, gap(epsilon 1) - gap(epsilon 8), the
  95 % t-interval lies above 0.
* A3b: FedAvg without DP >= both DP methods at every epsilon (mean test accuracy over seeds).
* A3c (secondary): non-inferiority, mean gap >= -1 point at every epsilon.
* A4: the accountant can be wrong: at every (epsilon, seed) the worst client's epsilon that the experiment
  reports through Opacus' PRV accountant on the simulator's recorded histories is within 1 % of Microsoft's
  prv_accountant on (sigma, q, steps) rebuilt from the seeded schedule; the reported RDP epsilon is at most the
  target and at least the reference's lower bound (RDP is an upper bound on the tight epsilon).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trustlab.core.constraints import Interval, validate_value
from trustlab.core.exceptions import ConfigError
from trustlab.experiments._fedceo_e2e import DP_FEDAVG, FEDCEO, units
from trustlab.experiments._fedceo_report import PLOTS as PLOTS
from trustlab.experiments._fedceo_report import curve_table as curve_table
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, Premise, RunContext
from trustlab.methods.fedceo import PAPER as PAPER
from trustlab.results.result import Result

TITLE = "FedCEO: tensor low-rank server smoothing for DP-SGD federated learning (digits, N=20, K=10)"
EXTRAS = ("torch", "fl")
#: the quick gate's rule (python -m trustlab.experiments._gates fedceo: >= 4 of 5 quick seeds, not PASS under
#: KNOCKOUT); A1 (operator identities) and A4 (the accountant) pass under the knockout too, so the rule leaves them
#: out; pre-smoothing-moves passed 3/5 (the quick run now needs it at epsilon 1 and 8); pre-learned is in the
#: rule's gate only because it FAILs on seed 0 (DP-FedAvg 16.6 % at epsilon 1 after 10 rounds) with and without the
#: knockout, so it cannot be expected to PASS in quick mode; A3, A3t, A3b are not checked in quick mode
QUICK_EXPECTED_PASS = ("A2",)
#: the mechanism off: no t-SVT smoothing (FedCEO's place is taken by the plain client mean, in A2 and end to end)
KNOCKOUT: tuple[str, ...] = ("smoothing=false",)


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    n_clients: int = 20
    clients_per_round: int = 10
    rounds: int = 50
    local_epochs: int = 1
    batch_size: int = 16  # expected Poisson batch (sample rate 16/60 -> 1/4)
    lr: float = 0.1
    momentum: float = 0.5  # the official update.py
    hidden: int = 64  # the official MLP's hidden width
    partition: str = "iid"
    alpha: float = 0.5
    clip: float = 1.0  # Opacus max_grad_norm in the official code
    target_epsilons: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
    delta: float = 1e-5
    prv_eps_error: float = 0.005  # both PRV accountants (A4)
    a4_rel_tol: float = 0.01  # A4: |Opacus PRV - prv_accountant| / prv_accountant
    lam_grid: tuple[float, ...] = (0.3, 1.0, 3.0, 10.0)
    theta: float = 1.04  # train.sh, CIFAR-10
    interval: int = 10  # train.sh, CIFAR-10
    restart: bool = True  # the official restart rule
    eval_every: int = 10
    a2_shape: tuple[int, ...] = (64, 64)
    a2_rank: int = 4
    a2_snr: float = 2.0  # signal singular values / noise bulk edge of the mean
    run_end_to_end: bool = True
    smoothing: bool = True  # False (the KNOCKOUT): the plain client mean in FedCEO's place

    @classmethod
    def quick(cls) -> Config:
        return cls(
            seeds=(0,), rounds=10, interval=5, lam_grid=(1.0,), eval_every=5, target_epsilons=(1.0, 8.0)
        )

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
        for name in ("lr", "clip", "prv_eps_error", "a4_rel_tol"):
            validate_value(own, name, getattr(self, name), [Interval("real", 0, None, closed="neither")])
        validate_value(own, "momentum", self.momentum, [Interval("real", 0, 1, closed="left")])
        validate_value(own, "theta", self.theta, [Interval("real", 1, None)])
        validate_value(own, "delta", self.delta, [Interval("real", 0, 1, closed="neither")])
        validate_value(own, "partition", self.partition, [{"iid", "dirichlet"}])
        if not self.lam_grid or any(v <= 0 for v in self.lam_grid):
            raise ConfigError(
                f"The 'lam_grid' field of {own} must be non-empty and > 0. Got {self.lam_grid!r}."
            )
        eps = self.target_epsilons
        if not eps or len(set(eps)) != len(eps) or any(not 0 < float(e) < float("inf") for e in eps):
            raise ConfigError(
                f"The 'target_epsilons' field of {own} must be distinct finite values > 0. Got {eps!r}."
            )
        if len(self.a2_shape) != 2 or min(self.a2_shape) <= self.a2_rank:
            raise ConfigError(
                f"The 'a2_shape' field of {own} must be 2 sizes > a2_rank. Got {self.a2_shape!r}."
            )


# ------------------------------------------------------------------------------------------------ end to end
def _end_to_end(cfg: Config, ctx: RunContext, res: Result) -> None:
    import functools

    from trustlab.experiments._fedceo_e2e import summarise, unit_task

    rows: list[dict[str, Any]] = []
    accounting: list[dict[str, Any]] = []
    for out in ctx.map(functools.partial(unit_task, cfg), units(cfg), desc="fedceo (epsilon, seed) units"):
        rows += out["rows"]
        if out["accounting"] is not None:
            accounting.append(out["accounting"])
    ctx.check_budget("fedceo units")
    for row in rows:
        for metric in ("val", "test", "epsilon"):
            if row[metric] is not None:
                res.add(
                    method=row["method"],
                    lam=row["lam"],
                    seed=row["seed"],
                    target_epsilon=row["target"],
                    sigma=row["sigma"],
                    metric=f"{metric}_acc" if metric != "epsilon" else metric,
                    value=row[metric],
                )
    for a in accounting:
        for metric in ("rdp", "prv", "ref"):
            res.add(
                method="accountant",
                seed=a["seed"],
                target_epsilon=a["target"],
                sigma=a["sigma"],
                metric=f"epsilon_{metric}",
                value=a[metric],
            )
    summarise(cfg, res.summary, rows, accounting)
    res.summary["a4_rel_tol"] = cfg.a4_rel_tol


def run(cfg: Config, ctx: RunContext) -> Result:
    from trustlab.core.threads import limit_threads
    from trustlab.experiments._fedceo_synthetic import a1, a2

    res = Result("fedceo", "", {})
    with limit_threads(1):
        a1(res, cfg.seeds)
        a2(cfg, res)
        if cfg.run_end_to_end:
            _end_to_end(cfg, ctx, res)
    for p in res.summary.get("curve", []):
        ctx.note(
            f"epsilon {p['epsilon']:g}: gap FedCEO - DP-FedAvg {p['gap']:+.2f} points (95% CI "
            f"{p['gap_low']:+.2f} .. {p['gap_high']:+.2f}; per seed {[round(d, 2) for d in p['gaps']]}; "
            f"lambda {p['lam']}; sigma {p['sigma']})"
        )
    return res


# ------------------------------------------------------------------------------------------------ claims
def _check_a1(r: Result) -> CheckResult:
    v = r.summary["a1_max_error"]
    return CheckResult(v < 1e-10, v, "< 1e-10", detail=str(r.summary["a1"]))


def _check_a2(r: Result) -> CheckResult:
    s = r.summary
    return CheckResult(
        s["a2_reduction"] >= 0.2,
        100 * s["a2_reduction"],
        ">= 20",
        unit="% lower error",
        baseline=f"client mean's relative error {s['a2_rel_error_mean']:.3f}",
        detail=f"FedCEO's relative error {s['a2_rel_error_fedceo']:.3f} (lambda {s['a2_lam']:.4g})",
    )


_NO_E2E = "end-to-end runs were not made"


def _curve(r: Result) -> list[dict[str, Any]]:
    return r.summary.get("curve") or []


def _per_eps(curve: list[dict[str, Any]], key: str, fmt: str = "{:+.2f}") -> str:
    return ", ".join(
        f"eps {p['epsilon']:g}: " + fmt.format(key(p) if callable(key) else p[key]) for p in curve
    )


def _check_a3(r: Result) -> CheckResult:
    curve = _curve(r)
    if not curve:
        return CheckResult(None, None, "95% CI low > 0 at every epsilon", detail=_NO_E2E)
    low = min(p["gap_low"] for p in curve)
    ok = all(p["gap_low"] > 0 for p in curve)  # nan (one seed) is not > 0
    return CheckResult(
        ok,
        low,
        "> 0 (smallest 95% CI low over epsilons)",
        unit="points",
        baseline="DP-FedAvg " + _per_eps(curve, lambda p: p[DP_FEDAVG]["mean"], "{:.2f} %"),
        detail="gap (CI) "
        + "; ".join(
            f"eps {p['epsilon']:g}: {p['gap']:+.2f} ({p['gap_low']:+.2f} .. {p['gap_high']:+.2f})"
            for p in curve
        ),
    )


def _check_a3t(r: Result) -> CheckResult:
    t = r.summary.get("trend")
    if t is None:
        return CheckResult(None, None, "95% CI low > 0", detail=_NO_E2E + " at 2 or more epsilons")
    return CheckResult(
        t["low"] > 0,
        t["mean"],
        "95% CI low > 0",
        unit="points",
        baseline=f"gap at epsilon {t['from']:g}",
        detail=f"gap(eps {t['to']:g}) - gap(eps {t['from']:g}) per seed "
        f"{[round(d, 2) for d in t['diffs']]}; 95% CI {t['low']:+.2f} .. {t['high']:+.2f}",
    )


def _check_a3b(r: Result) -> CheckResult:
    curve = _curve(r)
    if not curve:
        return CheckResult(None, None, ">= both DP methods at every epsilon", detail=_NO_E2E)
    no_dp = r.summary["no_dp"]["mean"]
    best_dp = max(max(p[DP_FEDAVG]["mean"], p[FEDCEO]["mean"]) for p in curve)
    return CheckResult(
        no_dp >= best_dp,
        no_dp,
        f">= {best_dp:.2f}",
        unit="%",
        baseline="best DP method "
        + _per_eps(curve, lambda p: max(p[DP_FEDAVG]["mean"], p[FEDCEO]["mean"]), "{:.2f} %"),
    )


def _check_a3c(r: Result) -> CheckResult:
    curve = _curve(r)
    if not curve:
        return CheckResult(None, None, ">= -1 at every epsilon", detail=_NO_E2E)
    worst = min(p["gap"] for p in curve)
    return CheckResult(
        worst >= -1.0,
        worst,
        ">= -1 (smallest mean gap over epsilons)",
        unit="points",
        baseline="gap " + _per_eps(curve, "gap"),
    )


def _check_a4(r: Result) -> CheckResult:
    acc = r.summary.get("accounting") or []
    if not acc:
        return CheckResult(None, None, "<= 1 %", detail="no DP runs were made")
    tol = r.summary.get("a4_rel_tol", 0.01)
    worst = max(a["prv_rel_diff"] for a in acc)
    rdp_ok = all(a["ref_low"] <= a["rdp"] <= a["target"] + 1e-9 for a in acc)
    same = all(a["same_histories"] for a in acc)
    by_eps: dict[float, list[dict[str, Any]]] = {}
    for a in acc:
        by_eps.setdefault(a["target"], []).append(a)
    detail = "; ".join(
        f"eps {e:g}: RDP {max(a['rdp'] for a in v):.3f}, Opacus PRV {max(a['prv'] for a in v):.4f}, "
        f"prv_accountant {max(a['ref'] for a in v):.4f}"
        for e, v in sorted(by_eps.items())
    )
    return CheckResult(
        worst <= tol and rdp_ok and same,
        100 * worst,
        f"<= {100 * tol:g} %; prv_accountant low <= RDP <= target",
        unit="% max relative difference",
        baseline="prv_accountant on the schedule's (sigma, q, steps)",
        detail=f"{len(acc)} units; RDP within [reference low, target] everywhere: {rdp_ok}; "
        f"histories equal across a unit's DP runs: {same}; {detail}",
    )


#: pre-registered premise thresholds (docs/papers/fedceo.md, "Premises, knockout and quick gate"): FedAvg without DP
#: well above chance (10 %) and DP-FedAvg at least twice chance; DP must cost >= 3 points (else there is nothing to
#: denoise); smoothing must move test accuracy by >= 0.5 points on average (2 of the 397 test images); every one at
#: every epsilon of the curve
PRE_NO_DP, PRE_DP, PRE_DP_COST, PRE_SMOOTH = 50.0, 20.0, 3.0, 0.5


def _check_pre_learned(r: Result) -> CheckResult:
    curve = _curve(r)
    if not curve:
        return CheckResult(None, None, f">= {PRE_NO_DP:g} and >= {PRE_DP:g}", detail=_NO_E2E)
    no_dp, dp = r.summary["no_dp"]["mean"], min(p[DP_FEDAVG]["mean"] for p in curve)
    return CheckResult(
        no_dp >= PRE_NO_DP and dp >= PRE_DP,
        f"no DP {no_dp:.1f}, DP-FedAvg (lowest) {dp:.1f}",
        f"no DP >= {PRE_NO_DP:g}, DP-FedAvg >= {PRE_DP:g} at every epsilon",
        unit="% test acc",
        baseline="chance 10 %",
        detail="DP-FedAvg " + _per_eps(curve, lambda p: p[DP_FEDAVG]["mean"], "{:.2f} %"),
    )


def _check_pre_dp_hurts(r: Result) -> CheckResult:
    curve = _curve(r)
    if not curve:
        return CheckResult(None, None, f">= {PRE_DP_COST:g}", detail=_NO_E2E)
    no_dp = r.summary["no_dp"]["mean"]
    cost = min(no_dp - p[DP_FEDAVG]["mean"] for p in curve)
    return CheckResult(
        cost >= PRE_DP_COST,
        cost,
        f">= {PRE_DP_COST:g} at every epsilon",
        unit="points",
        baseline=f"FedAvg without DP {no_dp:.2f} %",
    )


def _check_pre_smoothing(r: Result) -> CheckResult:
    curve = _curve(r)
    if not curve:
        return CheckResult(None, None, f">= {PRE_SMOOTH:g}", detail=_NO_E2E)
    low = min(p["abs_gap"] for p in curve)
    return CheckResult(
        low >= PRE_SMOOTH,
        low,
        f">= {PRE_SMOOTH:g} at every epsilon",
        unit="points",
        detail="mean |FedCEO - DP-FedAvg| " + _per_eps(curve, "abs_gap", "{:.2f}"),
    )


def _e2e_note(cfg: dict[str, Any]) -> str:
    return (
        f"digits, N={cfg['n_clients']} IID clients of ~{1200 // cfg['n_clients']} records, K="
        f"{cfg['clients_per_round']}, {cfg['rounds']} rounds, {len(cfg['seeds'])} seed(s), epsilon "
        f"{list(cfg['target_epsilons'])}, lambda grid {list(cfg['lam_grid'])}, I={cfg['interval']}, "
        f"theta={cfg['theta']}; the paper runs 300 rounds on EMNIST/CIFAR-10"
    )


#: the paper's Table 1, EMNIST MLP-2: FedCEO (theta > 1) - UDP-FedAvg test accuracy is 1.46 points at sigma_g 1.0
#: and 3.88 at sigma_g 2.0 (the gain grows with the noise: 3.88 - 1.46 = 2.42)
PAPER_GAP, PAPER_TREND = 1.46, 2.42
_E2E = ("pre-learned", "pre-dp-hurts", "pre-smoothing-moves")
_DEFAULT = ("default", "paper")
CLAIMS = [
    Premise(
        "pre-learned",
        f"The federation learned: FedAvg without DP >= {PRE_NO_DP:g} % and DP-FedAvg >= "
        f"{PRE_DP:g} % test accuracy on digits at every epsilon (chance 10 %; mean over seeds)",
        _check_pre_learned,
    ),
    Premise(
        "pre-dp-hurts",
        f"The DP noise hurts the baseline: FedAvg without DP beats DP-FedAvg by >= "
        f"{PRE_DP_COST:g} points at every epsilon (mean test accuracy over seeds)",
        _check_pre_dp_hurts,
    ),
    Premise(
        "pre-smoothing-moves",
        f"The smoothing changes the model: |test acc(FedCEO) - test acc(DP-FedAvg)| >= "
        f"{PRE_SMOOTH:g} points at every epsilon (mean over seeds, same clients, batches and noise)",
        _check_pre_smoothing,
    ),
    Claim(
        "A1",
        "t-SVT operator: FedCEO's global equals SVT_{tau/K}(client mean), tau=0 is the identity, a "
        "tau above sigma_max gives zeros, the FFT's imaginary part is round-off and the global is "
        "invariant to client order (max error < 1e-10)",
        _check_a1,
    ),
    Claim(
        "A2",
        "on synthetic rank-4-plus-noise client stacks (signal ~2x the noise bulk edge) FedCEO lowers the "
        "relative error of the client mean by >= 20 % (mean over seeds)",
        _check_a2,
    ),
    Claim(
        "A3",
        "the curve: end to end on digits with record-level DP-SGD (Opacus) calibrated to each epsilon in "
        "{1, 2, 4, 8}, the official smoothing schedule (I, theta), restart rule and per-client smoothed "
        "models, FedCEO (lambda chosen on validation) beats DP-FedAvg in test accuracy at every epsilon, "
        "paired over seeds (95 % CI of the gap above 0 at each epsilon)",
        _check_a3,
        modes=_DEFAULT,
        scale_note=_e2e_note,
        requires=_E2E,
        paper_value=PAPER_GAP,
    ),
    Claim(
        "A3t",
        "the paper's trend: FedCEO's gain over DP-FedAvg grows as epsilon shrinks (per seed gap at "
        "epsilon 1 minus gap at epsilon 8; 95 % CI above 0)",
        _check_a3t,
        modes=_DEFAULT,
        scale_note=_e2e_note,
        requires=_E2E,
        paper_value=PAPER_TREND,
    ),
    Claim(
        "A3b",
        "FedAvg without DP is at least as accurate as both DP methods at every epsilon (mean test "
        "accuracy over seeds)",
        _check_a3b,
        modes=_DEFAULT,
        scale_note=_e2e_note,
        requires=("pre-learned",),
    ),
    Claim(
        "A3c",
        "non-inferiority: FedCEO's mean test-accuracy gap to DP-FedAvg >= -1 point at every epsilon (the "
        "experiment's earlier claim, kept as a secondary line)",
        _check_a3c,
        modes=_DEFAULT,
        secondary=True,
        scale_note=_e2e_note,
        requires=_E2E,
        paper_value=PAPER_GAP,
    ),
    Claim(
        "A4",
        "the accountant against an independent one: at every (epsilon, seed) the worst client's epsilon "
        "from Opacus' PRV accountant on the simulator's recorded histories is within 1 % of Microsoft's "
        "prv_accountant on (sigma, q, steps) rebuilt from the seeded schedule, and the reported RDP epsilon "
        "lies between that reference's lower bound and the target",
        _check_a4,
        scale_note=lambda c: (
            f"epsilon {list(c['target_epsilons'])}, delta {c['delta']:g}, eps_error "
            f"{c['prv_eps_error']:g} (both PRV accountants); {c['rounds']} rounds"
        ),
    ),
]
