"""Experiment ``cascade``'s independent units as executor tasks (issue 46): the policies, their evaluation
over a budget grid, and one job per B1 (models, noise, seed), per budget-check (noise, seed) and per pool
seed (B2, B3). A job does not touch the run's context: it builds its records in a fresh local ``Result``
and returns them with small plain numbers, which the driver adds in item order (the serial loop's result)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from trustlab.experiments._cascade_premises import _flatten, _mechanism_stats
from trustlab.experiments._cascade_tasks import controlled_honoured
from trustlab.results.result import Result

POLICIES = ("routing", "threshold cascade", "optimal cascade", "cascade routing")


def _policies(cfg: Any, *, seed: int, **extra: Any) -> dict[str, Any]:
    from trustlab.methods.cascade import (
        CascadeRouter,
        ConstantSearch,
        OptimalCascade,
        OptimalRouter,
        ThresholdCascade,
        TPESearch,
    )

    search = [ConstantSearch(n_iter=cfg.n_iter)] + ([TPESearch(n_trials=cfg.tpe_trials)] if cfg.tpe_trials else [])
    kw = {"random_state": seed, **extra}
    return {"routing": OptimalRouter(search=[ConstantSearch(n_iter=cfg.n_iter)], **kw),
            "threshold cascade": ThresholdCascade(search=search, **kw),
            "optimal cascade": OptimalCascade(search=search, n_samples=cfg.n_samples, **kw),
            "cascade routing": CascadeRouter(search=search, n_samples=cfg.n_samples, max_depth=cfg.max_depth, **kw)}


def _evaluate(policies: dict[str, Any], e_tune: Any, e_test: Any, cfg: Any, res: Result, tags: dict[str, Any],
              *, record: bool = True, executor: Any = None) -> dict[str, Any]:
    """Fit every policy on the tuning estimates, run it over the budget grid on the test estimates (the grid's
    lambda searches as tasks on ``executor``, the run's, when one is given)."""
    from trustlab.methods.cascade import BudgetWarning, auc, budget_grid, evaluate_policy, linear_curve

    mq, mc = e_test.quality.mean(axis=0), e_test.true_cost.mean(axis=0)
    budgets = budget_grid(mq, mc, cfg.n_per_segment)
    ref = {"c_min": float(mc.min()), "c_max": float(mc.max()), "q_min": float(mq.min())}
    lin = linear_curve(mq, mc)
    out: dict[str, Any] = {"auc": {"linear": 100 * auc(lin.cost, lin.quality, **ref)}, "curves": {}, "honoured": {},
                           "budgets": budgets, "mean_quality": mq, "mean_cost": mc, "policies": policies}
    for name, p in policies.items():
        p.fit(e_tune.quality, e_tune.true_cost, estimates=e_tune)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BudgetWarning)
            cv = evaluate_policy(p, e_test, budgets, name=name, executor=executor)
        out["curves"][name] = cv
        out["auc"][name] = 100 * auc(cv.cost, cv.quality, **ref)
        rel = (cv.cost - budgets) / budgets
        ok = np.where(cv.binding, np.abs(rel) <= 0.05, rel <= 0.05)
        out["honoured"][name] = ok.tolist()
        if record:
            for b, c, q in zip(budgets, cv.cost, cv.quality):
                res.add(**tags, policy=name, budget=float(b), cost=float(c), quality=float(q))
    if record:
        for b, c, q in zip(lin.cost, lin.cost, lin.quality):
            res.add(**tags, policy="linear", budget=float(b), cost=float(c), quality=float(q))
    return out


def _b1_estimates(cfg: Any, k: int, noise: str, seed: int, test_size: float) -> tuple[Any, Any]:
    from sklearn.model_selection import train_test_split

    from trustlab.methods.cascade import SyntheticNoiseEstimator, synthetic_table

    table = synthetic_table(cfg.b1_n, k, random_state=seed)
    est = SyntheticNoiseEstimator(noise=noise, random_state=seed).estimate(table)
    tr, te = train_test_split(np.arange(cfg.b1_n), test_size=test_size, random_state=seed)
    est = est if cfg.informative else _flatten(est)
    return est.subset(np.sort(tr)), est.subset(np.sort(te))


def _mismatches(a: Any, b: Any, e_test: Any, budgets: np.ndarray) -> int:
    from trustlab.methods.cascade import BudgetWarning

    bad = 0
    for x in budgets:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BudgetWarning)
            da, db = a.decide(e_test, float(x)), b.decide(e_test, float(x))
        bad += int(((da.answer != db.answer) | (da.run != db.run).any(axis=1)).sum())
    return bad


def _reductions(cfg: Any, seed: int, e_tune: Any, e_test: Any, fitted: dict[str, Any], budgets: np.ndarray
                ) -> dict[str, int]:
    from trustlab.methods.cascade import CascadeRouter, ConstantSearch, OptimalRouter

    kw = {"allow_in_sample": True, "random_state": seed, "search": [ConstantSearch(n_iter=cfg.n_iter)],
          "n_samples": cfg.n_samples}

    def fit(p: Any) -> Any:
        return p.fit(e_tune.quality, e_tune.true_cost, estimates=e_tune)

    router = fit(OptimalRouter(allow_in_sample=True, random_state=seed, search=kw["search"]))
    cr1 = fit(CascadeRouter(max_depth=1, **kw))
    crc = fit(CascadeRouter(cascade=True, **kw))
    no_prune = fit(CascadeRouter(max_depth=cfg.max_depth, prune=False, **{**kw, "search": fitted["cascade routing"].search}))
    return {"router vs CR(max_depth=1)": _mismatches(router, cr1, e_test, budgets),
            "optimal cascade vs CR(cascade=True)": _mismatches(fitted["optimal cascade"], crc, e_test, budgets),
            "CR pruning on vs off": _mismatches(fitted["cascade routing"], no_prune, e_test, budgets),
            "decisions compared": int(3 * len(budgets) * e_test.n)}


def _pool_run(cfg: Any, table: Any, estimator: Any, seed: int, res: Result, bench: str, executor: Any = None
              ) -> dict[str, float]:
    """Split a pool table: half test; the other half fits the estimator (first half) and the lambdas."""
    train, test = table.split(0.5, random_state=seed)
    perm = np.random.default_rng(seed).permutation(train.n_queries)
    fit_rows, tune_rows = np.sort(perm[: train.n_queries // 2]), np.sort(perm[train.n_queries // 2:])
    estimator.fit(train.subset(fit_rows))
    e_tune, e_test = estimator.estimate(train.subset(tune_rows)), estimator.estimate(test)
    if not cfg.informative:
        e_tune, e_test = _flatten(e_tune), _flatten(e_test)
    out = _evaluate(_policies(cfg, seed=seed), e_tune, e_test, cfg, res, {"bench": bench, "seed": seed}, executor=executor)
    res.summary.setdefault("mechanism", {}).setdefault(bench, []).append(_mechanism_stats(e_test))
    return out["auc"]




def b1_job(cfg: Any, job: tuple[int, str, int]) -> dict[str, Any]:
    """One B1 (models, noise, seed) on the paper's split (a task of ``ctx.map``): its records, AUCs and
    mechanism statistics; with 5 models also the bootstrap CIs, the honoured grid points (plain and
    controlled) and, on the first seed at low noise, the reductions."""
    from trustlab.methods.cascade import bootstrap_auc

    k, noise, seed = job
    res = Result("cascade", "", {})
    e_tune, e_test = _b1_estimates(cfg, k, noise, seed, cfg.b1_test_size)
    out = _evaluate(_policies(cfg, seed=seed, allow_in_sample=True), e_tune, e_test, cfg, res,
                    {"bench": "B1", "models": k, "noise": noise, "seed": seed})
    done: dict[str, Any] = {"records": res.records, "auc": out["auc"], "mech": _mechanism_stats(e_test), "ci": {},
                            "honoured": {}, "controlled": {}, "reductions": None}
    if k == 5:
        for base in ("routing", "optimal cascade"):
            bs = bootstrap_auc(out["curves"]["cascade routing"], out["mean_quality"], out["mean_cost"],
                               other=out["curves"][base], n_boot=cfg.n_boot, random_state=seed)
            done["ci"][base] = [100 * bs.estimate, 100 * bs.low, 100 * bs.high]
        ctl = controlled_honoured(out["policies"], e_test, out["budgets"], cfg)
        for name in POLICIES:
            done["honoured"][name] = out["honoured"][name]
            done["controlled"][name] = ctl[name]["ok"]
        if noise == "low" and seed == cfg.seeds[0]:
            done["reductions"] = _reductions(cfg, seed, e_tune, e_test, out["policies"], out["budgets"])
    return done


def budget_job(cfg: Any, job: tuple[str, int]) -> dict[str, dict[str, Any]]:
    """One budget check (5 models, ``noise``, ``seed``, the 50 / 50 split; a task of ``ctx.map``): per policy
    the honoured grid points, plain and controlled, and the plain minus controlled mean realised quality."""
    noise, seed = job
    e_tune, e_test = _b1_estimates(cfg, 5, noise, seed, cfg.budget_test_size)
    out = _evaluate(_policies(cfg, seed=seed, allow_in_sample=True), e_tune, e_test, cfg, Result("cascade", "", {}),
                    {}, record=False)
    ctl = controlled_honoured(out["policies"], e_test, out["budgets"], cfg)
    return {"honoured": {n: out["honoured"][n] for n in POLICIES}, "controlled": {n: ctl[n]["ok"] for n in POLICIES},
            "quality_loss": {n: float(np.mean(out["curves"][n].quality) - np.mean(ctl[n]["quality"]))
                             for n in POLICIES}}


def pool_job(cfg: Any, bench: str, table: Any, cache: Any, seed: int) -> dict[str, Any]:
    """One seed of a pool bench (a task of ``ctx.map``): B2 builds its classifier pool (``table`` None), B3
    splits the given LLM table. Its records, AUCs, mechanism statistics and, for B2, the pool's models."""
    from trustlab.methods.cascade import ClassificationEstimator, OpenFormEstimator, classifier_pool

    res = Result("cascade", "", {})
    if table is None:
        table = classifier_pool(cfg.b2_dataset, random_state=seed, cache_dir=cache)
        models = {"quality": table.mean_quality().tolist(), "cost": table.mean_cost().tolist()}
    else:
        models = None
    estimator = ClassificationEstimator() if bench == "B2" else OpenFormEstimator()
    auc = _pool_run(cfg, table, estimator, seed, res, bench)
    return {"records": res.records, "auc": auc, "mech": res.summary["mechanism"][bench][0], "models": models}
