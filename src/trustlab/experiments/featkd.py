"""Experiment ``featkd``: FEAT-KD against its TabNet teacher and GP baselines (issue 17, spec 2.4/2.5).

Data (all offline): two synthetic formula tasks (``product_sine``: ``x0*x1 + sin(x2)``; ``ratio``:
``x0**2/(1 + x1**2) + 0.5*x3``; 8 inputs, n = 2000, noise sd 5 % of the target's), sklearn ``diabetes``
and statsmodels ``fair`` (a seeded subsample of ``fair_rows`` rows), and the multi-target ``shared`` task
(targets sharing ``x0*x1``, ``sin(x2)``, ``x3**2``). Each (data set, seed) is an 80/20 split drawn from the
seed. Methods on the same split: FEAT-KD (``targets=claim_targets``), its TabNet teacher ("TabNet alone"),
gplearn on y given FEAT-KD's own fit time (warm start, one generation at a time), the FEAT-like
SymbolicTransformer + ridge, ridge and a depth-3 GBM.

Claims (pre-registered before the first default run; they read only this run's numbers):

* ``C1a``: on both synthetic tasks, mean test R² of FEAT-KD >= mean R² of its TabNet teacher - 0.10.
* ``C1b``: on both synthetic tasks FEAT-KD's whole formula has <= 60 nodes (mean over seeds) while the
  teacher has >= 5,000 parameters.
* ``C2``: at equal wall time, R²(FEAT-KD) >= R²(gplearn on y) - 0.02 and nodes(FEAT-KD) <= nodes(gplearn on
  y) on at least 1 of the 2 synthetic tasks (both reported).
* ``C3a``/``C3b``: multi-target, one shared feature set (choice A) with per-target ridge heads reaches mean
  R² >= 0.9 x the mean R² of separately trained single-target FEAT-KD models (choice A), with no more
  features than theirs in total.
* ``C4``: the same seed gives identical formulas (content hash) and predictions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, Premise, RunContext
from trustlab.methods.featkd import PAPER as PAPER
from trustlab.results.result import Result

TITLE = "FEAT-KD: concise symbolic features distilled from a TabNet teacher"
EXTRAS = ("symbolic",)
SYNTHETIC = ("product_sine", "ratio")
REAL = ("diabetes", "fair")

#: issue 39: the rule's gate (quick seeds 0-4 + KNOCKOUT, 2026-12-02, git 3b968bb; docs/papers/featkd.md): C1a
#: (2/5) and C1b (3/5) are no longer gated (FEAT-KD raised on seed 2, fit R² 0.003 on seed 3, C1a -0.16 on seed 1).
#: C4 is admitted by the rule because the knockout's FEAT-KD raises (SKIP), not because it is about the mechanism.
#: Before issue 39: (C1a, C1b, C4).
#: 2026-12-03, a second machine (git 1392e0b): pre-teacher-learned 3/5 (FAIL on seeds 1 and 4), so it leaves the gate
#: (design.md: the gate is the intersection over machines). No FEAT-KD mechanism line passes 4/5 at quick scale on
#: both machines; C4 (determinism) is what the quick gate can hold, and the mechanism is decided in default mode.
#: issue 40 (2026-12-07, git d635bfb; the distiller now evolves every generation and a process's first fit no longer
#: differs): every mechanism line passes 5/5 quick seeds (quick seed 0: C1a +0.19 vs -0.10, C1b 26 vs 60 nodes,
#: teacher R² 0.78 vs 0.5) and the knockout FAILs the premises (C1a, C1b, C4 SKIP there), so the rule's gate is adopted.
QUICK_EXPECTED_PASS = ("pre-teacher-learned", "pre-formula-nontrivial", "C1a", "C1b", "C4")
#: the teacher switched (nearly) off: one TabNet epoch, so FEAT-KD distils an untrained network's steps
KNOCKOUT: tuple[str, ...] = ("max_epochs=1", "patience=1")


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: tuple[int, ...] = (0, 1, 2)
    synthetic: tuple[str, ...] = SYNTHETIC
    n_samples: int = 2000
    noise: float = 0.05
    real: tuple[str, ...] = REAL
    real_seeds: tuple[int, ...] = (0,)
    fair_rows: int = 2000
    multi_targets: int = 2
    multi_seeds: tuple[int, ...] = (0, 1, 2)
    test_fraction: float = 0.2
    # FEAT-KD (claims C1, C2): FEATKDRegressor's library defaults (issue 40: the claim setting is the default;
    # the distiller budget was chosen by the pilot rule in scripts/featkd_pilot.py)
    claim_targets: str = "step_contributions"
    n_d: int = 8
    n_steps: int = 3
    max_epochs: int = 100
    patience: int = 15
    population_size: int = 1000
    generations: int = 20
    fidelity_threshold: float = 0.25
    # FEAT-KD for the multi-target claim C3 (shared step outputs)
    multi_population_size: int = 500
    multi_generations: int = 10
    # baselines
    st_population_size: int = 1000
    st_generations: int = 20
    st_components: int = 10
    gp_population_size: int = 1000
    check_determinism: bool = True
    n_threads: int = 2

    @classmethod
    def quick(cls) -> Config:
        """product_sine only (n = 1000), one seed, a short teacher and small GP budgets (about 40-60 s)."""
        return cls(seeds=(0,), synthetic=("product_sine",), n_samples=1000, real=(), multi_seeds=(),
                   max_epochs=30, patience=6, population_size=300, generations=10, st_population_size=300,
                   st_generations=10, gp_population_size=300)

    @classmethod
    def paper(cls) -> Config:
        """The paper's suite (PMLB) is not offline; this runs ours with TabNet's 200 epochs and 5 seeds."""
        return cls(seeds=(0, 1, 2, 3, 4), real_seeds=(0, 1, 2), multi_seeds=(0, 1, 2), max_epochs=200,
                   patience=20, fair_rows=6366)

    def validate(self) -> None:
        super().validate()
        from trustlab.core.constraints import Interval, Options, validate_value
        from trustlab.core.exceptions import ConfigError

        own = "featkd.Config"
        for name in ("n_samples", "fair_rows", "max_epochs", "patience", "population_size", "generations",
                     "multi_population_size", "multi_generations", "st_population_size", "st_generations",
                     "st_components", "gp_population_size", "n_d", "n_steps", "n_threads"):
            validate_value(own, name, getattr(self, name), [Interval(int, 1, None)])
        validate_value(own, "multi_targets", self.multi_targets, [Interval(int, 2, 3)])
        validate_value(own, "test_fraction", self.test_fraction, [Interval("real", 0, 0.5, closed="neither")])
        validate_value(own, "noise", self.noise, [Interval("real", 0, None)])
        validate_value(own, "fidelity_threshold", self.fidelity_threshold, [Interval("real", 0, 1)])
        validate_value(own, "claim_targets", self.claim_targets, [Options(["step_outputs", "step_contributions"])])
        for name, allowed in (("synthetic", SYNTHETIC), ("real", REAL)):
            bad = [d for d in getattr(self, name) if d not in allowed]
            if bad:
                raise ConfigError(f"The '{name}' field of {own} must name data sets among {allowed}. "
                                  f"Got {getattr(self, name)!r} instead.")


# ------------------------------------------------------------------------------------------ data
def load_data(name: str, seed: int, cfg: Config) -> tuple[np.ndarray, np.ndarray, list[str], Any]:
    """``(X, y, feature_names, task)`` for a synthetic task (``task`` holds the truth) or a real set."""
    if name in SYNTHETIC or name == "shared":
        from trustlab.methods.featkd import make_formula_task

        k = cfg.multi_targets if name == "shared" else None
        task = make_formula_task(name, cfg.n_samples, noise=cfg.noise, n_targets=k, random_state=seed)
        return task.X, task.y, list(task.feature_names), task
    from trustlab.data import load_tabular

    ds = load_tabular(name)
    X, y = np.asarray(ds.X, dtype=float), np.asarray(ds.y, dtype=float)
    if name == "fair" and len(X) > cfg.fair_rows:
        rows = np.random.default_rng(seed).choice(len(X), cfg.fair_rows, replace=False)
        X, y = X[rows], y[rows]
    return X, y, list(ds.feature_names), None


def split(n: int, seed: int, test_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(10_000 + seed).permutation(n)
    n_test = int(round(test_fraction * n))
    return perm[n_test:], perm[:n_test]


def featkd_model(cfg: Config, seed: int, *, targets: str | None = None, multi: bool = False) -> Any:
    from trustlab.methods.featkd import FEATKDRegressor

    return FEATKDRegressor(
        n_d=cfg.n_d, n_a=cfg.n_d, n_steps=cfg.n_steps, max_epochs=cfg.max_epochs, patience=cfg.patience,
        targets=targets or cfg.claim_targets, fidelity_threshold=cfg.fidelity_threshold,
        population_size=cfg.multi_population_size if multi else cfg.population_size,
        generations=cfg.multi_generations if multi else cfg.generations, n_threads=cfg.n_threads,
        random_state=seed)


def claim_setting_vs_default(cfg: Config) -> dict[str, Any]:
    """The FEAT-KD parameters of claims C1-C2 that differ from ``FEATKDRegressor()``'s defaults (besides
    ``n_threads`` and ``random_state``): empty when the claims judge the library's default estimator."""
    from trustlab.methods.featkd import FEATKDRegressor

    ours = featkd_model(cfg, 0).get_params()
    default = FEATKDRegressor().get_params()
    diff = {k: [ours[k], default[k]] for k in sorted(ours) if k not in ("n_threads", "random_state")
            and ours[k] != default[k]}
    return {"differs_from_default": diff, "is_library_default": not diff}


# ------------------------------------------------------------------------------------------ run
def _record(res: Result, method: str, dataset: str, seed: int, **metrics: Any) -> None:
    for metric, value in metrics.items():
        if value is not None:
            res.add(method=method, dataset=dataset, seed=seed, metric=metric, value=float(value))


def _baselines(res: Result, ds: str, seed: int, data: tuple[Any, ...], budget_s: float, cfg: Config) -> None:
    from trustlab.core.threads import limit_threads
    from trustlab.methods.featkd import fit_gbm, fit_gplearn_on_y, fit_ridge, fit_symbolic_transformer_ridge

    Xtr, ytr, Xte, yte = data
    with limit_threads(cfg.n_threads):
        fits = [fit_gplearn_on_y(Xtr, ytr, time_budget_s=budget_s, population_size=cfg.gp_population_size,
                                 random_state=seed),
                fit_symbolic_transformer_ridge(Xtr, ytr, n_components=cfg.st_components,
                                               population_size=cfg.st_population_size,
                                               generations=cfg.st_generations, random_state=seed),
                fit_ridge(Xtr, ytr), fit_gbm(Xtr, ytr, random_state=seed)]
    for b in fits:
        _record(res, b.name, ds, seed, r2=b.score(Xte, yte), nodes=b.n_nodes, size=b.n_nodes, n_features=b.n_features,
                time_s=b.time_s, feat_complexity=b.feat_complexity, generations=b.info.get("generations", [None])[0])
        res.summary.setdefault("formulas", {}).setdefault(f"{ds}/{seed}", {})[b.name] = b.formula[:400]


def _one(res: Result, ds: str, seed: int, cfg: Config) -> dict[str, Any]:
    from trustlab.methods.featkd import is_equivalent, teacher_baseline, term_recovered

    X, y, names, task = load_data(ds, seed, cfg)
    tr, te = split(len(X), seed, cfg.test_fraction)
    model = featkd_model(cfg, seed)
    t0 = time.perf_counter()
    model.fit(X[tr], y[tr])
    fit_s = time.perf_counter() - t0
    cx = model.complexity_
    teacher = teacher_baseline(model)
    _record(res, "FEAT-KD", ds, seed, r2=model.score(X[te], y[te]), nodes=cx.n_nodes, size=cx.n_nodes,
            n_features=cx.n_features,
            feature_nodes=cx.feature_nodes, feat_complexity=cx.feat_complexity, time_s=fit_s)
    _record(res, teacher.name, ds, seed, r2=teacher.score(X[te], y[te]), parameters=teacher.n_parameters,
            size=teacher.n_parameters,
            time_s=teacher.time_s)
    out = {"formula": model.export_text(feature_names=names), "hash": model.formula_hash_,
           "report": {"dropped": model.distillation_report_.dropped, "kept": model.distillation_report_.n_kept,
                      "dead": model.distillation_report_.n_dead, "epochs": model.distillation_report_.teacher_epochs}}
    if task is not None:
        formula = model.sympy_formulas()[0]
        terms = task.truth_terms()
        feats = [f.expression() for f in model.features_]
        hit = [any(term_recovered(f, t) for f in feats) for t in terms]
        _record(res, "FEAT-KD", ds, seed, exact_recovery=is_equivalent(formula, task.truth_expressions()[0]),
                term_recovery=float(np.mean(hit)))
    _baselines(res, ds, seed, (X[tr], y[tr], X[te], y[te]), fit_s, cfg)
    return out


def _multi(res: Result, seed: int, cfg: Config) -> dict[str, Any]:
    from trustlab.methods.featkd import r2_per_target

    X, Y, _, _ = load_data("shared", seed, cfg)
    tr, te = split(len(X), seed, cfg.test_fraction)
    shared = featkd_model(cfg, seed, targets="step_outputs", multi=True).fit(X[tr], Y[tr])
    r2_shared = r2_per_target(Y[te], shared.predict(X[te]))
    sep_r2, sep_feats, sep_nodes = [], 0, 0
    for m in range(Y.shape[1]):
        single = featkd_model(cfg, seed, targets="step_outputs", multi=True).fit(X[tr], Y[tr, m])
        sep_r2.append(single.score(X[te], Y[te, m]))
        sep_feats += single.complexity_.n_features
        sep_nodes += single.complexity_.n_nodes
    _record(res, "FEAT-KD shared", "shared", seed, r2=float(np.mean(r2_shared)),
            n_features=shared.complexity_.n_features, nodes=shared.complexity_.n_nodes)
    _record(res, "FEAT-KD separate", "shared", seed, r2=float(np.mean(sep_r2)), n_features=sep_feats,
            nodes=sep_nodes)
    return {"shared_r2": r2_shared.tolist(), "separate_r2": sep_r2, "shared_features": shared.complexity_.n_features,
            "separate_features": sep_feats, "shared_nodes": shared.complexity_.n_nodes, "separate_nodes": sep_nodes}


def _job(cfg: Config, item: tuple[str, str, int]) -> dict[str, Any]:
    """One unit of the run (a task of ``ctx.map``): a (data set, seed) fit (``"one"``), the determinism refit
    (``"again"``) or a multi-target seed (``"multi"``). Returns its records, the baselines' formulas, its
    summary entry (``out``) and the error text when FEAT-KD raised (``None`` otherwise)."""
    from trustlab.core.exceptions import TrustlabError

    kind, ds, seed = item
    res = Result("featkd", "", {})
    out: Any = None
    try:
        if kind == "one":
            out = _one(res, ds, seed, cfg)
        elif kind == "multi":
            out = _multi(res, seed, cfg)
        else:
            X, y, _, _ = load_data(ds, seed, cfg)
            tr, _ = split(len(X), seed, cfg.test_fraction)
            again = featkd_model(cfg, seed).fit(X[tr], y[tr])
            out = {"hash": again.formula_hash_, "n_features": again.complexity_.n_features}
    except TrustlabError as exc:  # e.g. no formula passed the fidelity filter: recorded, never hidden
        return {"records": res.records, "formulas": res.summary.get("formulas", {}), "out": None, "error": str(exc)}
    return {"records": res.records, "formulas": res.summary.get("formulas", {}), "out": out, "error": None}


def run(cfg: Config, ctx: RunContext) -> Result:
    """Every (data set, seed) fit, the determinism refit and every multi-target seed is one executor task
    (issue 46); the driver adds what they return in item order."""
    import functools

    res = Result(experiment="featkd", mode="", config=cfg.to_dict())
    jobs = [("one", d, s) for d in cfg.synthetic for s in cfg.seeds]
    jobs += [("one", d, s) for d in cfg.real for s in cfg.real_seeds]
    if cfg.check_determinism and cfg.synthetic:
        jobs.append(("again", cfg.synthetic[0], cfg.seeds[0]))
    jobs += [("multi", "shared", s) for s in cfg.multi_seeds]
    done = ctx.map(functools.partial(_job, cfg), jobs, desc="featkd: data sets x seeds")
    ctx.check_budget(f"{len(jobs)} fit job(s)")
    runs: dict[str, Any] = {}
    multi, again = [], None
    for (kind, ds, seed), got in zip(jobs, done, strict=True):
        res.records.extend(got["records"])
        for key, forms in got["formulas"].items():
            res.summary.setdefault("formulas", {}).setdefault(key, {}).update(forms)
        if kind == "again":
            again = got
        elif kind == "one":
            runs[f"{ds}/{seed}"] = got["out"] if got["error"] is None else {"error": got["error"]}
            if got["error"] is not None:
                ctx.note(f"{ds} seed {seed}: FEAT-KD failed: {got['error']}")
        elif got["error"] is None:
            multi.append(got["out"])
        else:
            ctx.note(f"multi-target seed {seed}: FEAT-KD failed: {got['error']}")
    res.summary["runs"] = runs
    first = runs.get(f"{cfg.synthetic[0]}/{cfg.seeds[0]}", {}) if cfg.synthetic else {}
    if again is not None and "hash" in first:
        h = (again["out"] or {}).get("hash")
        res.summary["determinism"] = {"same_hash": h == first["hash"], "dataset": cfg.synthetic[0],
                                      "seed": cfg.seeds[0], "n_features": (again["out"] or {}).get("n_features")}
    res.summary["multi"] = multi
    res.summary["claim_setting"] = claim_setting_vs_default(cfg)
    res.summary["means"] = _means(res)
    # gplearn on y runs for FEAT-KD's wall time (C2): what it finds depends on the clock (compare.comparable)
    res.summary["timed_paths"] = ["means.*.gplearn on y", "formulas.*.gplearn on y"]
    return res


def _means(res: Result) -> dict[str, Any]:
    df = res.to_frame()
    if df.empty:
        return {}
    out: dict[str, Any] = {}
    for (ds, method, metric), grp in df.groupby(["dataset", "method", "metric"], sort=False):
        out.setdefault(ds, {}).setdefault(method, {})[metric] = float(grp["value"].mean())
    return out


# ------------------------------------------------------------------------------------------ claims
def _synthetic_means(result: Result) -> dict[str, Any]:
    means = result.summary.get("means", {})
    return {d: means[d] for d in result.config.get("synthetic", ()) if d in means}


#: pre-registered premise thresholds (docs/papers/featkd.md, "Premises, knockout and quick gate")
PRE_TEACHER_R2 = 0.5  # the teacher explains at least half the variance: it learned the task
PRE_OVER_RIDGE = 0.05  # ... and beats a linear model by >= 0.05 R² (it learned the non-linear part)


def _pre_rows(result: Result, method: str) -> tuple[float, float, str]:
    rows = _synthetic_means(result)
    if not rows:  # FEAT-KD raised on every synthetic task (e.g. no formula passed the fidelity filter)
        errs = "; ".join(f"{k}: {v['error']}" for k, v in result.summary.get("runs", {}).items() if "error" in v)
        return float("-inf"), float("-inf"), f"no synthetic task has a FEAT-KD fit in this run ({errs or 'none run'})"
    r2 = {d: r[method]["r2"] for d, r in rows.items()}
    over = {d: r[method]["r2"] - r["ridge"]["r2"] for d, r in rows.items()}
    detail = "; ".join(f"{d}: {method} {r2[d]:.3f}, ridge {rows[d]['ridge']['r2']:.3f}" for d in rows)
    return min(r2.values()), min(over.values()), detail


def _check_pre_teacher(result: Result) -> CheckResult:
    r2, over, detail = _pre_rows(result, "TabNet (teacher)")
    return CheckResult(r2 >= PRE_TEACHER_R2 and over >= PRE_OVER_RIDGE, round(r2, 4) if np.isfinite(r2) else None,
                       f">= {PRE_TEACHER_R2} and >= ridge + {PRE_OVER_RIDGE}", baseline=f"min margin over ridge "
                       f"{over:+.3f}", unit="teacher test R² (worst task)", detail=detail)


def _check_pre_formula(result: Result) -> CheckResult:
    _, over, detail = _pre_rows(result, "FEAT-KD")
    return CheckResult(over >= PRE_OVER_RIDGE, round(over, 4) if np.isfinite(over) else None, f">= {PRE_OVER_RIDGE}",
                       unit="FEAT-KD R² minus ridge R² (worst task)", detail=detail)


def _check_c1a(result: Result) -> CheckResult:
    rows = _synthetic_means(result)
    if not rows:
        return CheckResult(None, None, ">= -0.10")
    gaps = {d: r["FEAT-KD"]["r2"] - r["TabNet (teacher)"]["r2"] for d, r in rows.items()}
    worst = min(gaps, key=gaps.get)
    detail = "; ".join(f"{d}: FEAT-KD {rows[d]['FEAT-KD']['r2']:.3f} vs teacher {rows[d]['TabNet (teacher)']['r2']:.3f}"
                       for d in rows)
    return CheckResult(gaps[worst] >= -0.10, round(gaps[worst], 4), ">= -0.10",
                       baseline=round(rows[worst]["TabNet (teacher)"]["r2"], 4), unit="R² (worst task)", detail=detail)


def _check_c1b(result: Result) -> CheckResult:
    rows = _synthetic_means(result)
    if not rows:
        return CheckResult(None, None, "<= 60")
    nodes = max(r["FEAT-KD"]["nodes"] for r in rows.values())
    params = min(r["TabNet (teacher)"]["parameters"] for r in rows.values())
    detail = "; ".join(f"{d}: {r['FEAT-KD']['nodes']:.1f} nodes, {r['FEAT-KD']['n_features']:.1f} features"
                       for d, r in rows.items())
    return CheckResult(nodes <= 60 and params >= 5000, round(nodes, 1), "<= 60 (teacher >= 5000 parameters)",
                       baseline=int(params), unit="nodes (largest task mean)", detail=detail)


def _check_c2(result: Result) -> CheckResult:
    rows = _synthetic_means(result)
    if not rows:
        return CheckResult(None, None, ">= 1 task")
    wins, parts = 0, []
    for d, r in rows.items():
        f, g = r["FEAT-KD"], r["gplearn on y"]
        ok = f["r2"] >= g["r2"] - 0.02 and f["nodes"] <= g["nodes"]
        wins += int(ok)
        parts.append(f"{d}: R² {f['r2']:.3f} vs {g['r2']:.3f}, nodes {f['nodes']:.1f} vs {g['nodes']:.1f} "
                     f"({'holds' if ok else 'fails'})")
    return CheckResult(wins >= 1, wins, ">= 1 task", unit="tasks", detail="; ".join(parts))


def _multi_rows(result: Result) -> list[dict[str, Any]]:
    return list(result.summary.get("multi", []))


def _check_c3a(result: Result) -> CheckResult:
    rows = _multi_rows(result)
    if not rows:
        return CheckResult(None, None, ">= 0.9", detail="multi-target task not run in this mode")
    shared = float(np.mean([np.mean(r["shared_r2"]) for r in rows]))
    sep = float(np.mean([np.mean(r["separate_r2"]) for r in rows]))
    ratio = shared / sep if sep > 0 else float("-inf")
    return CheckResult(ratio >= 0.9, round(ratio, 4), ">= 0.9", baseline=round(sep, 4), unit="x",
                       detail=f"shared mean R² {shared:.4f}, separate {sep:.4f}")


def _check_c3b(result: Result) -> CheckResult:
    rows = _multi_rows(result)
    if not rows:
        return CheckResult(None, None, "<= 1.0", detail="multi-target task not run in this mode")
    ratio = float(np.mean([r["shared_features"] / max(r["separate_features"], 1) for r in rows]))
    detail = "; ".join(f"{r['shared_features']} shared vs {r['separate_features']} separate"
                       + (f" ({r['shared_nodes']} vs {r['separate_nodes']} nodes)" if "shared_nodes" in r else "")
                       for r in rows)
    return CheckResult(ratio <= 1.0, round(ratio, 3), "<= 1.0", unit="x features", detail=detail)


def _check_c4(result: Result) -> CheckResult:
    det = result.summary.get("determinism")
    if not det:
        return CheckResult(None, None, "identical")
    return CheckResult(bool(det["same_hash"]), "identical" if det["same_hash"] else "different", "identical",
                       detail=f"{det['dataset']} seed {det['seed']}: formula content hash of two fits")


def _scale(cfg: dict[str, Any]) -> str:
    return (f"{len(cfg.get('synthetic', ()))} synthetic task(s), n = {cfg.get('n_samples')}, "
            f"{len(cfg.get('seeds', ()))} seed(s); TabNet n_d = {cfg.get('n_d')}, {cfg.get('n_steps')} steps, "
            f"<= {cfg.get('max_epochs')} epochs; gplearn {cfg.get('population_size')} x {cfg.get('generations')} "
            "per teacher signal. The paper's PMLB suite is not available offline.")


def _multi_scale(cfg: dict[str, Any]) -> str:
    return (f"'shared' task with {cfg.get('multi_targets')} targets, {len(cfg.get('multi_seeds', ()))} seed(s); "
            f"gplearn {cfg.get('multi_population_size')} x {cfg.get('multi_generations')} per step-output unit.")


_BOTH = ("pre-teacher-learned", "pre-formula-nontrivial")

CLAIMS = [
    Premise("pre-teacher-learned", f"the TabNet teacher learned every synthetic task: test R² >= {PRE_TEACHER_R2} and "
            f">= ridge's + {PRE_OVER_RIDGE} (mean over seeds, worst task)", _check_pre_teacher, scale_note=_scale),
    Premise("pre-formula-nontrivial", f"the distilled formula is not trivial: FEAT-KD's test R² >= ridge's + "
            f"{PRE_OVER_RIDGE} on every synthetic task (mean over seeds)", _check_pre_formula, scale_note=_scale),
    Claim("C1a", "On both synthetic formula tasks, FEAT-KD's mean test R² is at least the TabNet teacher's - 0.10",
          _check_c1a, scale_note=_scale, requires=_BOTH),
    Claim("C1b", "FEAT-KD's whole formula has <= 60 nodes (mean over seeds, largest task) while the teacher has "
          ">= 5,000 parameters", _check_c1b, scale_note=_scale, requires=_BOTH),
    Claim("C2", "At equal wall time, R²(FEAT-KD) >= R²(gplearn on y) - 0.02 and nodes(FEAT-KD) <= nodes(gplearn "
          "on y) on at least 1 of the 2 synthetic tasks", _check_c2,
          scale_note=lambda c: _scale(c) + " gplearn on y evolves until it has used FEAT-KD's fit time.",
          requires=_BOTH, timed=True),
    Claim("C3a", "Multi-target: one shared feature set (step outputs) with per-target ridge heads reaches >= 0.9x "
          "the mean R² of separately trained single-target FEAT-KD models", _check_c3a, scale_note=_multi_scale),
    Claim("C3b", "Multi-target: the shared feature set has no more features than the separate models in total",
          _check_c3b, scale_note=_multi_scale),
    Claim("C4", "Two fits with the same seed give identical formulas (content hash)", _check_c4,
          scale_note="One refit of the first synthetic task's first seed."),
]


def PLOTS(result: Result) -> dict[str, Any]:  # noqa: N802 - the contract's name
    from trustlab.results.plots import bar_plot, claims_plot, front_plot

    return {
        "front": front_plot(result, "size", "r2", where=None, title="Complexity vs test R² (mean ± sd over seeds)",
                            xlabel="model size: formula/tree nodes, TabNet parameters (log)", ylabel="test R²"),
        "r2": bar_plot(result, "dataset", hue="method", where={"metric": "r2"}, title="Test R²", ylabel="R²"),
        "claims": claims_plot(result),
    }
