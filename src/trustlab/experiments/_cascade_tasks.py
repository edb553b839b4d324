"""Issue 41 parts of experiment ``cascade``: the B1-tasks generator run (task-specific skills), the budget check
under online control, and their claim checks."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from trustlab.experiments.base import CheckResult
from trustlab.results.result import Result

POLICIES = ("routing", "threshold cascade", "optimal cascade", "cascade routing")
NOISES = ("low", "medium", "high")


def honoured(cost: np.ndarray, budgets: np.ndarray, binding: np.ndarray) -> list[bool]:
    """Within 5 % of B where the budget binds; at most 1.05 B where it does not (lambda = 0)."""
    rel = (np.asarray(cost) - budgets) / budgets
    return np.where(binding, np.abs(rel) <= 0.05, rel <= 0.05).tolist()


def controlled_honoured(policies: dict[str, Any], e_test: Any, budgets: np.ndarray, cfg: Any) -> dict[str, Any]:
    """Per policy, which grid points the online controller (``decide_controlled``) meets on the test rows, and
    the controlled curve's realised mean quality; with ``budget_control=False`` (the KNOCKOUT) the plain
    decisions stand in for the controlled ones."""
    from trustlab.methods.cascade import BudgetWarning, decide_controlled

    out: dict[str, Any] = {}
    for name, p in policies.items():
        cost, quality, binding = [], [], []
        for b in budgets:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", BudgetWarning)
                d = decide_controlled(p, e_test, float(b), batch=cfg.budget_batch) if cfg.budget_control \
                    else p.decide(e_test, float(b))
            cost.append(float(d.cost(e_test.true_cost).mean()))
            quality.append(float(d.quality(e_test.quality).mean()))
            binding.append(bool(d.info["binding"]))
        out[name] = {"ok": honoured(np.array(cost), budgets, np.array(binding)), "cost": cost, "quality": quality}
    return out


def best_per_task(e_test: Any, features: np.ndarray) -> list[int]:
    """The best single model (mean true quality on the test rows) of each task type."""
    task = features.argmax(axis=1)
    return [int(e_test.quality[task == t].mean(axis=0).argmax()) for t in range(features.shape[1]) if (task == t).any()]


def run_b1t(cfg: Any, ctx: Any, res: Result, evaluate: Any, policies: Any, flatten: Any, mech: Any) -> None:
    """B1-tasks: 5 models, low noise, the paper's 5 %/95 % split, one executor task per seed (issue 46)."""
    import functools

    entry: dict[str, Any] = {"auc": {}, "ci": [], "mech": {}, "best_per_task": []}
    done = ctx.map(functools.partial(b1t_job, cfg, evaluate, policies, flatten, mech), cfg.seeds,
                   desc="cascade B1-tasks")
    for d in done:
        res.records.extend(d["records"])
        for name, v in d["auc"].items():
            entry["auc"].setdefault(name, []).append(v)
        for name, v in d["mech"].items():
            entry["mech"].setdefault(name, []).append(v)
        entry["best_per_task"].append(d["best_per_task"])
        entry["ci"].append(d["ci"])
    ctx.check_budget(f"B1-tasks, {len(cfg.seeds)} seed(s)")
    res.summary["b1t"] = {"5-low": {"auc": {n: float(np.mean(v)) for n, v in entry["auc"].items()},
                                    "auc_per_seed": entry["auc"], "ci": entry["ci"],
                                    "best_per_task": entry["best_per_task"],
                                    **{n: float(np.mean(v)) for n, v in entry["mech"].items()}}}


def b1t_job(cfg: Any, evaluate: Any, policies: Any, flatten: Any, mech: Any, seed: int) -> dict[str, Any]:
    """One B1-tasks seed (a task of ``ctx.map``): its records, AUCs, mechanism statistics, per-task best
    models and the bootstrap CI of CR - optimal cascade."""
    from sklearn.model_selection import train_test_split

    from trustlab.methods.cascade import SyntheticNoiseEstimator, bootstrap_auc, synthetic_table

    res = Result("cascade", "", {})
    table = synthetic_table(cfg.b1_n, 5, n_tasks=cfg.b1t_tasks, task_skill=cfg.b1t_task_skill,
                            cost_ratio=cfg.b1t_cost_ratio, random_state=seed)
    est = SyntheticNoiseEstimator(noise="low", random_state=seed).estimate(table)
    tr, te = (np.sort(i) for i in train_test_split(np.arange(cfg.b1_n), test_size=cfg.b1_test_size,
                                                   random_state=seed))
    est = est if cfg.informative else flatten(est)
    e_tune, e_test = est.subset(tr), est.subset(te)
    out = evaluate(policies(cfg, seed=seed, allow_in_sample=True), e_tune, e_test, cfg, res,
                   {"bench": "B1-tasks", "models": 5, "noise": "low", "seed": seed})
    bs = bootstrap_auc(out["curves"]["cascade routing"], out["mean_quality"], out["mean_cost"],
                       other=out["curves"]["optimal cascade"], n_boot=cfg.n_boot, random_state=seed)
    return {"records": res.records, "auc": out["auc"], "mech": mech(e_test),
            "best_per_task": best_per_task(e_test, table.features[te]),
            "ci": [100 * bs.estimate, 100 * bs.low, 100 * bs.high]}


def b1t_scale(cfg: dict[str, Any]) -> str:
    return (f"synthetic_table with {cfg.get('b1t_tasks')} task types, task_skill {cfg.get('b1t_task_skill')}, cost "
            f"ratio {cfg.get('b1t_cost_ratio')}; {cfg.get('b1_n')} queries, {len(cfg.get('seeds', ()))} seed(s).")


def check_b1t_vs_cascade(result: Result) -> CheckResult:
    e = result.summary.get("b1t", {}).get("5-low")
    if e is None:
        return CheckResult(None, None, ">= +0.5", unit="points")
    a = e["auc"]
    gap = a["cascade routing"] - a["optimal cascade"]
    detail = (f"AUC(CR) {a['cascade routing']:.2f}, routing {a['routing']:.2f}, threshold cascade "
              f"{a['threshold cascade']:.2f}, linear {a['linear']:.2f}; per-seed bootstrap 95% CI of the gap: "
              + "; ".join(f"{g:+.2f} [{lo:+.2f}, {hi:+.2f}]" for g, lo, hi in e["ci"]))
    return CheckResult(gap >= 0.5, round(gap, 2), ">= +0.5", baseline=round(a["optimal cascade"], 2), unit="points",
                       detail=detail)


def check_specialists(result: Result) -> CheckResult:
    e = result.summary.get("b1t", {}).get("5-low")
    if e is None:
        return CheckResult(None, None, ">= 2 distinct")
    worst = min(len(set(b)) for b in e["best_per_task"])
    return CheckResult(worst >= 2, worst, ">= 2 distinct", unit="best models",
                       detail="per seed, the best single model of each task type (test rows): "
                              + "; ".join(str(b) for b in e["best_per_task"]))


def PLOTS(result: Result) -> dict[str, Any]:  # noqa: N802 - the contract's name
    from matplotlib.figure import Figure

    from trustlab.results.plots import claims_plot

    df = result.to_frame()
    figs: dict[str, Any] = {"claims": claims_plot(result)}
    if df.empty or "bench" not in df:
        return figs
    seed0 = df["seed"].min() if "seed" in df else 0
    b1 = df[(df["bench"] == "B1") & (df["models"] == 5) & (df["seed"] == seed0)]
    noises = [n for n in NOISES if n in set(b1.get("noise", []))]
    if noises:
        fig = Figure(figsize=(4.2 * len(noises), 3.6))
        axes = fig.subplots(1, len(noises), squeeze=False)[0]
        for ax, noise in zip(axes, noises):
            _curves(ax, b1[b1["noise"] == noise], f"B1, 5 models, {noise} noise (seed {seed0})")
        fig.tight_layout()
        figs["b1_quality_vs_budget"] = fig
    for bench in ("B1-tasks", "B2", "B3"):
        sub = df[(df["bench"] == bench) & (df["seed"] == seed0)]
        if not sub.empty:
            fig = Figure(figsize=(5.0, 3.6))
            _curves(fig.subplots(), sub, f"{bench} (seed {seed0})")
            fig.tight_layout()
            figs[f"{bench.lower()}_quality_vs_budget"] = fig
    return figs


def _curves(ax: Any, sub: Any, title: str) -> None:
    for name in ("linear", *POLICIES):
        s = sub[sub["policy"] == name].sort_values("cost")
        if not s.empty:
            ax.plot(s["cost"], 100 * s["quality"], marker="o" if name == "linear" else None, ms=3, lw=1.2,
                    ls="--" if name == "linear" else "-", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("realised mean cost per query (log)")
    ax.set_ylabel("quality (x100)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
