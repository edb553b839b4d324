"""Experiment ``xhacking``: X-hacking SHAP by AutoML, and the X-hacking audit (Sharma et al., ICML 2025).

Claims (issue 8, issues 31/32): (1a) on the synthetic controlled-redundancy data, Spearman(R^2_f, achievable
drop within eps) >= 0.6 over the informative features; (1b) on breast_cancer the top-SHAP feature is pushed to
<= 25 % of its reference share within eps = 0.01 by the single pre-declared TPE search (seed ``vuln_seeds[0]``;
the best of one search per seed in ``vuln_seeds`` is a secondary line); (2) TPE needs fewer trials to first
success than random sampling (median over seeds, ratio >= 1.5, bootstrap CI); (3) no false alarm on the
independent control feature (synthetic rho = 0 target): no success in >= 4 of 5 seeds for each sampler; (4)
audit soundness: every interval endpoint is a logged defensible trial that recomputes to 1e-6; (5) the audit
with its default search (feature switches on) pushes a near-copy feature's interval to <= 5 % of its reference
share, while an independent feature keeps >= 50 %.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, Premise, RunContext
from trustlab.methods.xhacking import PAPER as PAPER
from trustlab.results.result import Result

TITLE = "X-hacking: AutoML that manipulates SHAP, and the X-hacking audit"
EXTRAS: tuple[str, ...] = ("xai",)
#: issue 39: the rule's gate over quick seeds 0-4 + KNOCKOUT (2026-12-02, docs/papers/xhacking.md) is
#: (pre-search-room-bc, C1b, C5). C5 is dropped: it FAILs on quick seed 0 itself, the run tests/test_reproduce.py
#: makes (t1's ratio 1.0: 1 of 33 trials defensible). C4 passes under the knockout and C3 is VOID on seeds 1-4
#: (no defensible synthetic trial), so neither is gated. Before issue 39: (C1b, C3, C4).
QUICK_EXPECTED_PASS = ("pre-search-room-bc", "C1b")
#: the hacking search switched off: one trial per directed search (and none for the default audit's), so no
#: search can move away from the first configuration it draws; the reference, SHAP and the audit still run
KNOCKOUT: tuple[str, ...] = ("hack_budget=1", "vuln_budget=1", "control_budget=1", "default_audit_budget=0")


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    n_background: int = 30
    n_explain: int = 30
    synth_n: int = 1500
    # The synthetic label is a linear threshold of the factors, so the natural baseline is an L2 logistic
    # regression (held-out 0.91 vs 0.86 for the 100-tree RF at synth_n=1000): "within eps of an RF" would admit
    # pipelines clearly worse than a standard baseline. The search space is the standard one (as on the real
    # data sets); "linear" (LR family only) is kept as an option.
    synth_reference: str = "lr"      # reference pipeline on the synthetic data: "lr" or "rf"
    synth_space: str = "standard"    # search space on the synthetic data: "standard" or "linear" (LR family)
    synth_rhos: tuple[float, ...] = (0.0, 0.5, 0.8, 0.95)
    synth_independent: int = 4
    eps: float = 0.01
    kappa: float = 0.25
    hack_budget: int = 30            # claim 1b: TPE trials per seed in vuln_seeds (breast_cancer, wine, diabetes)
    other_datasets: bool = True      # also attack the top feature of wine (0 vs rest) and diabetes (median)
    audit_explore: int = 60          # claim 4: shared random trials of the synthetic audit
    vuln_budget: int = 40            # claim 1a: trials of the directed minimisation, per feature and seed
    vuln_seeds: tuple[int, ...] = (0, 1, 2)  # claim 1a: the same seeds for every feature (drop = mean over seeds)
    control_budget: int = 25         # claim 3: trials per seed and sampler on the control feature
    speed_eps: float = 0.005         # claim 2: tighter eps / kappa (random success rare)
    speed_kappa: float = 0.2
    speed_budget: int = 40
    speed_features: tuple[str, ...] = ("worst perimeter", "worst radius")
    run_speed: bool = True
    startup: int = 8
    copy_rho: float = 0.99           # claim 5: correlation of the near-copy (R^2 of the copy ~ 0.98)
    default_audit_budget: int = 20   # claim 5: XHackingAudit's own defaults (budget 20, n_explore 20)
    default_audit_explore: int = 20

    @classmethod
    def quick(cls) -> Config:
        return cls(n_background=15, n_explain=15, synth_n=1000, hack_budget=12, other_datasets=False,
                   audit_explore=30, control_budget=6, run_speed=False, startup=5, vuln_budget=30,
                   vuln_seeds=(0,), default_audit_budget=6, default_audit_explore=6)

    @classmethod
    def paper(cls) -> Config:
        """Closer to the paper's effort (23 OpenML-CC18 sets are not bundled; budgets x4)."""
        return cls(hack_budget=120, audit_explore=240, control_budget=100, speed_budget=150, vuln_budget=150,
                   vuln_seeds=(0, 1, 2, 3, 4), n_background=100, n_explain=100, seeds=tuple(range(10)),
                   default_audit_budget=80, default_audit_explore=80)

    def validate(self) -> None:
        super().validate()
        from trustlab.core.constraints import Interval, Options, validate_value

        for name in ("hack_budget", "audit_explore", "control_budget", "speed_budget", "n_background", "vuln_budget"):
            validate_value("xhacking.Config", name, getattr(self, name), [Interval(int, 1, None)])
        for name in ("default_audit_budget", "default_audit_explore"):
            validate_value("xhacking.Config", name, getattr(self, name), [Interval(int, 0, None)])
        validate_value("xhacking.Config", "eps", self.eps, [Interval(float, 0, 1)])
        validate_value("xhacking.Config", "copy_rho", self.copy_rho, [Interval(float, 0, 1)])
        validate_value("xhacking.Config", "synth_reference", self.synth_reference, [Options(["lr", "rf"])])
        validate_value("xhacking.Config", "synth_space", self.synth_space, [Options(["standard", "linear"])])
        if not self.vuln_seeds:
            from trustlab.core.exceptions import ConfigError

            raise ConfigError("The 'vuln_seeds' field of xhacking.Config must name at least one seed. Got () instead.")


def _load(name: str) -> tuple[Any, Any, list[str]]:
    from trustlab.data.tabular import load_tabular

    ds = load_tabular(name)
    y = ds.y
    if name == "wine":
        y = (y == 0).astype(int)
    elif name == "diabetes":
        y = (y > np.median(y)).astype(int)
    return ds.X, y, list(ds.feature_names)


def run(cfg: Config, ctx: RunContext) -> Result:
    """Run the X-hacking reproduction; sklearn/shap deprecation noise is silenced for this call only."""
    import warnings

    from trustlab.methods.xhacking import EvalSettings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        res = Result("xhacking", "", {})
        settings = EvalSettings(n_background=cfg.n_background, n_explain=cfg.n_explain)
        contexts = _attack_top_features(cfg, ctx, res, settings)
        synth = _synthetic(cfg, settings)
        _vulnerability(cfg, ctx, res, synth)
        _audit_soundness(cfg, ctx, res, synth)
        _control(cfg, ctx, res, synth)
        _default_audit(cfg, ctx, res)
        if cfg.run_speed:
            _speed(cfg, ctx, res, contexts["breast_cancer"])
    return res


# -- stages --------------------------------------------------------------------------------------------------
def _attack_top_features(cfg: Config, ctx: RunContext, res: Result, settings: Any) -> dict[str, Any]:
    """C1b (+ wine, diabetes): push each data set's top-SHAP feature down with TPE, one search per seed in
    ``vuln_seeds``. The first seed's search is the pre-declared primary measurement; the best over the
    seeds is the secondary one (introduced after the first default FAIL, see docs/papers/xhacking.md)."""
    from trustlab.methods.xhacking import SearchContext, xhack

    names_ds = ["breast_cancer"] + (["wine", "diabetes"] if cfg.other_datasets else [])
    contexts = {}
    for name in ctx.progress(names_ds, desc="attack top feature"):
        X, y, fn = _load(name)
        c = contexts[name] = SearchContext(X, y, settings, feature_names=fn, owner="xhacking")
        top = int(np.argmax(c.reference["share"]))
        ratios, n_def = [], []
        for seed in cfg.vuln_seeds:
            r = xhack(None, None, top, eps=cfg.eps, kappa=cfg.kappa, budget=cfg.hack_budget, context=c,
                      n_startup_trials=cfg.startup, random_state=seed)
            ratios.append(r.min_share / c.reference["share"][top])  # the reference counts: ratio <= 1
            n_def.append(int(sum(bool(t.get("defensible")) for t in r.trials)))
            res.add(method="tpe", dataset=name, seed=seed, metric="top_share_ratio", value=ratios[-1],
                    feature=c.names[top], reference_share=c.reference["share"][top],
                    reference_score=c.reference["score"], trials_to_success=r.trials_to_success)
        res.summary[f"{name}_top_feature"] = c.names[top]
        res.summary[f"{name}_top_share_ratio_first_seed"] = float(ratios[0])
        res.summary[f"{name}_top_share_ratio_best"] = float(np.min(ratios))
        res.summary[f"{name}_top_share_ratios"] = [float(v) for v in ratios]
        res.summary[f"{name}_defensible_first_seed"] = n_def[0]
        res.summary[f"{name}_reference_score"] = float(c.reference["score"])
        res.summary[f"{name}_majority"] = float(np.max(np.bincount(np.asarray(y, dtype=int))) / len(y))
        ctx.check_budget(f"attack {name}")
    return contexts


def _synthetic(cfg: Config, settings: Any) -> dict[str, Any]:
    """The controlled-redundancy data of C1a, C3 and C4, its reference pipeline, space and context."""
    from trustlab.methods.xhacking import (
        SearchContext,
        SearchSpace,
        default_space,
        make_redundant_classification,
        reference_config,
    )

    Xs, ys, info = make_redundant_classification(cfg.synth_n, cfg.synth_rhos, cfg.synth_independent,
                                                 random_state=cfg.seeds[0])
    names = [d["name"] for d in info]
    sref = reference_config(cfg.seeds[0]) if cfg.synth_reference == "rf" else _lr_reference(cfg.seeds[0])
    sspace = default_space() if cfg.synth_space == "standard" else SearchSpace(models=("lr",), transforms=("none",))
    sctx = SearchContext(Xs, ys, settings, feature_names=names, reference=sref, owner="xhacking")
    return {"X": Xs, "y": ys, "info": info, "names": names, "reference": sref, "space": sspace, "context": sctx}


def _lr_reference(seed: int) -> dict[str, Any]:
    return {"imputer": "mean", "scaler": "standard", "selector": "none", "transform": "none", "model": "lr",
            "lr_C": 1.0, "lr_penalty": "l2", "seed": seed}


def _vulnerability(cfg: Config, ctx: RunContext, res: Result, synth: dict[str, Any]) -> None:
    """C1a: directed minimisation of every informative synthetic feature (same budget, same seeds)."""
    from scipy.stats import spearmanr

    from trustlab.methods.xhacking import achievable_drop, redundancy

    info, sn, sctx = synth["info"], synth["names"], synth["context"]
    informative = [d["name"] for d in info if d["role"] in ("target", "independent")]
    vul = achievable_drop(None, None, informative, eps=cfg.eps, budget=cfg.vuln_budget, sampler="tpe",
                          seeds=cfg.vuln_seeds, search_space=synth["space"], n_startup_trials=cfg.startup, context=sctx,
                          executor=ctx.executor)
    r2, drop = [], []
    for f in informative:
        red = redundancy(sctx.X_tr, sn.index(f), random_state=cfg.seeds[0])
        v = vul[f]
        r2.append(red)
        drop.append(v.drop)
        res.add(method="tpe-min", dataset="synthetic", seed=cfg.vuln_seeds[0], metric="achievable_drop",
                value=v.drop, feature=f, redundancy=red, rho=next(d["rho"] for d in info if d["name"] == f),
                drop_max=v.drop_max, min_share=float(np.min(v.min_share)), reference_share=v.reference_share,
                n_defensible=int(np.sum(v.n_defensible)), n_seeds=len(cfg.vuln_seeds))
    res.summary["synthetic_spearman"] = float(spearmanr(r2, drop).statistic) if np.ptp(drop) > 0 else float("nan")
    tg = [k for k, f in enumerate(informative) if f.startswith("t")]
    res.summary["synthetic_spearman_targets_only"] = float(spearmanr([r2[k] for k in tg], [drop[k] for k in tg])
                                                           .statistic) if np.ptp([drop[k] for k in tg]) > 0 else float("nan")
    res.summary["synthetic_reference_score"] = sctx.reference["score"]
    ys = np.asarray(synth["y"], dtype=int)
    res.summary["synthetic_majority"] = float(np.max(np.bincount(ys)) / len(ys))
    res.summary["synthetic_vuln_defensible_trials"] = int(sum(np.sum(vul[f].n_defensible) for f in informative))
    res.summary["synthetic_vuln_trials"] = cfg.vuln_budget * len(cfg.vuln_seeds) * len(informative)
    ctx.check_budget("synthetic directed minimisation")


def _audit_soundness(cfg: Config, ctx: RunContext, res: Result, synth: dict[str, Any]) -> None:
    """C4: exploration audit on the synthetic data (standard space), every endpoint refitted."""
    from trustlab.methods.xhacking import XHackingAudit, verify_report

    audit = XHackingAudit(features=None, eps=cfg.eps, budget=0, n_explore=cfg.audit_explore,
                          reference=synth["reference"], search_space=synth["space"], n_background=cfg.n_background,
                          n_explain=cfg.n_explain, progress=False, random_state=cfg.seeds[0])
    rep = audit.audit(synth["X"], synth["y"], feature_names=synth["names"])
    ver = verify_report(rep, synth["X"], synth["y"])
    res.summary.update(synthetic_audit_trials=rep.n_trials, synthetic_audit_defensible=rep.n_defensible,
                       soundness_ok=bool(ver.ok), soundness_max_abs_diff=ver.max_abs_diff,
                       soundness_endpoints=ver.n_endpoints, audit_spec_hash=rep.spec_hash)
    res.add(method="audit", dataset="synthetic", seed=cfg.seeds[0], metric="soundness_max_abs_diff",
            value=ver.max_abs_diff)
    ctx.check_budget("synthetic audit")


def _control(cfg: Config, ctx: RunContext, res: Result, synth: dict[str, Any]) -> None:
    """C3: the control feature t0 (rho = 0), both samplers, every seed, stopping at the first success."""
    from trustlab.methods.xhacking import xhack

    for smp in ("tpe", "random"):
        tts = []
        for seed in ctx.progress(cfg.seeds, desc=f"control {smp}"):
            r = xhack(None, None, "t0", eps=cfg.eps, kappa=cfg.kappa, sampler=smp, budget=cfg.control_budget,
                      search_space=synth["space"], context=synth["context"], n_startup_trials=cfg.startup,
                      stop_on_success=True, random_state=seed)
            tts.append(r.trials_to_success)
            res.add(method=smp, dataset="synthetic", seed=seed, metric="control_success", value=float(r.success),
                    feature="t0", best_ratio=r.achieved_ratio)
            ctx.check_budget("control")
        res.summary[f"control_successes_{smp}"] = int(sum(t is not None for t in tts))
    res.summary["control_n_seeds"] = len(cfg.seeds)


def _default_audit(cfg: Config, ctx: RunContext, res: Result) -> None:
    """C5 (issue 31): XHackingAudit with its default search (audit_space: feature switches and drop probes)
    on data with a near-copy pair (t1 ~ c1, correlation ``copy_rho``) and independent features."""
    from trustlab.methods.xhacking import XHackingAudit, make_redundant_classification, verify_report

    X, y, info = make_redundant_classification(cfg.synth_n, (0.0, cfg.copy_rho), 2, random_state=cfg.seeds[0])
    names = [d["name"] for d in info]
    audit = XHackingAudit(features=["t1", "u0"], eps=cfg.eps, budget=cfg.default_audit_budget,
                          n_explore=cfg.default_audit_explore, reference=_lr_reference(cfg.seeds[0]),
                          n_background=cfg.n_background, n_explain=cfg.n_explain, n_startup_trials=cfg.startup,
                          progress=False, random_state=cfg.seeds[0])
    rep = audit.audit(X, y, feature_names=names)
    for f in rep.features:
        ratio = f.min_share / f.reference_share if f.reference_share > 0 else float("nan")
        res.add(method="audit (defaults)", dataset="near-copy synthetic", seed=cfg.seeds[0], metric="min_share_ratio",
                value=ratio, feature=f.name, redundancy=f.redundancy, reference_share=f.reference_share,
                min_share=f.min_share, max_share=f.max_share)
        res.summary[f"default_audit_ratio_{f.name}"] = float(ratio)
        res.summary[f"default_audit_redundancy_{f.name}"] = float(f.redundancy)
    ver = verify_report(rep, X, y)
    res.summary.update(default_audit_trials=rep.n_trials, default_audit_defensible=rep.n_defensible,
                       default_audit_sound=bool(ver.ok), default_audit_max_abs_diff=ver.max_abs_diff,
                       default_audit_reference_score=rep.reference["score"])
    ctx.check_budget("default audit")


def _speed(cfg: Config, ctx: RunContext, res: Result, c: Any) -> None:
    """C2: TPE vs random trials-to-first-success on the standard space (breast_cancer)."""
    from trustlab.methods.xhacking import speedup_ci, tts_summary, xhack

    best = None
    for feat in cfg.speed_features:
        tts: dict[str, list[int | None]] = {"tpe": [], "random": []}
        for smp in ("tpe", "random"):
            for seed in ctx.progress(cfg.seeds, desc=f"speed {feat} {smp}"):
                r = xhack(None, None, feat, eps=cfg.speed_eps, kappa=cfg.speed_kappa, sampler=smp,
                          budget=cfg.speed_budget, context=c, n_startup_trials=cfg.startup,
                          stop_on_success=True, random_state=seed)
                tts[smp].append(r.trials_to_success)
                res.add(method=smp, dataset="breast_cancer", seed=seed, metric="trials_to_success",
                        value=float(cfg.speed_budget if r.trials_to_success is None else r.trials_to_success),
                        censored=r.trials_to_success is None, feature=feat)
                ctx.check_budget("speed")
        ci = speedup_ci(tts["random"], tts["tpe"], cfg.speed_budget, random_state=cfg.seeds[0])
        susceptible = any(t is not None for t in tts["tpe"] + tts["random"])
        row = {"feature": feat, **ci.to_dict(), "susceptible": susceptible,
               "tpe": tts_summary(tts["tpe"], cfg.speed_budget).to_dict(),
               "random": tts_summary(tts["random"], cfg.speed_budget).to_dict()}
        res.summary.setdefault("speedup", []).append(row)
        if susceptible and (best is None or ci.ratio > best["ratio"]):
            best = row
    res.summary["speedup_best"] = best


# -- claims --------------------------------------------------------------------------------------------------
#: pre-registered premise thresholds (docs/papers/xhacking.md, "Premises, knockout and quick gate")
PRE_OVER_MAJORITY = 0.10  # each reference pipeline beats majority-class accuracy by >= 10 points
PRE_BC_DEFENSIBLE = 2  # the breast_cancer search found >= 2 defensible pipelines to choose among
PRE_SYNTH_DEFENSIBLE = 0.10  # >= 10 % of the synthetic directed-search trials are defensible


def _pre_learned(r: Result) -> CheckResult:
    s = r.summary
    gaps = {d: s[f"{d}_reference_score"] - s[f"{d}_majority"] for d in ("breast_cancer", "synthetic")}
    low = min(gaps.values())
    return CheckResult(low >= PRE_OVER_MAJORITY, round(low, 4), f">= {PRE_OVER_MAJORITY}",
                       unit="reference held-out accuracy minus majority-class rate (worst data set)",
                       detail=", ".join(f"{d}: reference {s[f'{d}_reference_score']:.3f}, majority "
                                        f"{s[f'{d}_majority']:.3f}" for d in gaps))


def _pre_room_bc(r: Result) -> CheckResult:
    bc = r.summary["breast_cancer_defensible_first_seed"]
    return CheckResult(bc >= PRE_BC_DEFENSIBLE, bc, f">= {PRE_BC_DEFENSIBLE}",
                       unit=f"defensible trials of the first breast_cancer search (of {r.config['hack_budget']})")


def _pre_room_synth(r: Result) -> CheckResult:
    s = r.summary
    frac = s["synthetic_vuln_defensible_trials"] / max(s["synthetic_vuln_trials"], 1)
    return CheckResult(frac >= PRE_SYNTH_DEFENSIBLE, round(frac, 4), f">= {PRE_SYNTH_DEFENSIBLE}",
                       unit="defensible share of the synthetic directed-search trials",
                       detail=f"{s['synthetic_vuln_defensible_trials']} of {s['synthetic_vuln_trials']}")


def _c1a(r: Result) -> CheckResult:
    v = r.summary["synthetic_spearman"]
    return CheckResult(bool(v is not None and np.isfinite(v) and v >= 0.6), v, ">= 0.6", unit="Spearman rho",
                       detail=f"targets only: {r.summary.get('synthetic_spearman_targets_only')}")


def _c1b(r: Result) -> CheckResult:
    v = r.summary["breast_cancer_top_share_ratio_first_seed"]
    return CheckResult(v <= 0.25, v, "<= 0.25", baseline=1.0, unit="x reference share",
                       detail=f"feature {r.summary['breast_cancer_top_feature']}; one TPE search, seed "
                              f"{r.config['vuln_seeds'][0]}")


def _c1b_best(r: Result) -> CheckResult:
    v = r.summary["breast_cancer_top_share_ratio_best"]
    return CheckResult(v <= 0.25, v, "<= 0.25", baseline=1.0, unit="x reference share",
                       detail=f"per seed {[round(x, 3) for x in r.summary['breast_cancer_top_share_ratios']]}")


def _c2(r: Result) -> CheckResult:
    b = r.summary.get("speedup_best")
    if b is None:
        return CheckResult(False, None, ">= 1.5", baseline=1.0, unit="x", detail="no susceptible feature")
    return CheckResult(b["ratio"] >= 1.5, b["ratio"], ">= 1.5", baseline=1.0, unit="x",
                       detail=f"95% CI [{b['lo']:.2f}, {b['hi']:.2f}], feature {b['feature']}")


def _c3(r: Result) -> CheckResult:
    n = r.summary["control_n_seeds"]
    worst = max(r.summary["control_successes_tpe"], r.summary["control_successes_random"])
    return CheckResult(n - worst >= 0.8 * n, n - worst, f">= {int(np.ceil(0.8 * n))} of {n}", unit="seeds",
                       detail=f"successes: TPE {r.summary['control_successes_tpe']}, random "
                              f"{r.summary['control_successes_random']}")


def _c4(r: Result) -> CheckResult:
    d = r.summary["soundness_max_abs_diff"]
    return CheckResult(bool(r.summary["soundness_ok"]) and d <= 1e-6, d, "<= 1e-6", unit="abs diff",
                       detail=f"{r.summary['soundness_endpoints']} endpoints refitted")


def _c5(r: Result) -> CheckResult:
    red, ind = r.summary["default_audit_ratio_t1"], r.summary["default_audit_ratio_u0"]
    return CheckResult(bool(red <= 0.05 and ind >= 0.5), red, "<= 0.05 (control u0 >= 0.5)", baseline=ind,
                       unit="x reference share",
                       detail=f"near-copy t1 (R^2 {r.summary['default_audit_redundancy_t1']:.2f}) vs independent u0 "
                              f"(R^2 {r.summary['default_audit_redundancy_u0']:.2f}); baseline = u0's ratio; "
                              f"{r.summary['default_audit_defensible']} of {r.summary['default_audit_trials']} "
                              "trials defensible")


def _note_c1a(c: dict[str, Any]) -> str:
    return (f"achievable drop = 1 - min defensible share / reference share from a directed TPE minimisation of each "
            f"feature's share, the same budget and seeds for every feature ({c['vuln_budget']} trials x "
            f"{len(c['vuln_seeds'])} seed(s), drop averaged over seeds); standard space, L2-LR reference; "
            f"{len(c['synth_rhos']) + c['synth_independent']} informative features ({len(c['synth_rhos'])} targets "
            f"with rho in {tuple(c['synth_rhos'])} and {c['synth_independent']} independent), so most have R^2 ~ 0 "
            "and tie up to noise")


_BC = ("pre-learned", "pre-search-room-bc")  # claims on breast_cancer
_SYN = ("pre-learned", "pre-search-room-synth")  # claims on the synthetic data

CLAIMS = [
    Premise("pre-learned", f"the reference pipelines learned: held-out accuracy >= majority-class rate + "
            f"{PRE_OVER_MAJORITY} on breast_cancer and on the synthetic data", _pre_learned,
            scale_note="reference = 100-tree RF (breast_cancer), L2-LR (synthetic); majority rate over all rows"),
    Premise("pre-search-room-bc", f"the breast_cancer hacking search had room to move: >= {PRE_BC_DEFENSIBLE} trials "
            "of the first search are defensible (within eps of the reference)", _pre_room_bc,
            scale_note=lambda c: f"{c['hack_budget']} TPE trials, seed {c['vuln_seeds'][0]}"),
    Premise("pre-search-room-synth", f"the synthetic hacking searches had room to move: >= "
            f"{100 * PRE_SYNTH_DEFENSIBLE:g} % of the directed-search trials are defensible", _pre_room_synth,
            scale_note=lambda c: f"{c['vuln_budget']} trials x {len(c['vuln_seeds'])} seed(s) per informative feature"),
    Claim("C1a", "Redundancy predicts vulnerability: Spearman(R^2_f, achievable SHAP-share drop within eps=0.01) "
          ">= 0.6 over the informative synthetic features", _c1a, scale_note=_note_c1a, requires=_SYN),
    Claim("C1b", "breast_cancer's top-SHAP feature can be pushed to <= 25% of its reference share within eps=0.01 "
          "(the single pre-declared TPE search)", _c1b,
          scale_note=lambda c: f"one TPE search of {c['hack_budget']} trials, seed {c['vuln_seeds'][0]}; standard "
          "space, held-out accuracy, reference = 100-tree RF", requires=_BC),
    Claim("C1b-best", "As C1b, measured as the best of one TPE search per seed in vuln_seeds (added after the first "
          "default C1b FAIL; secondary)", _c1b_best, secondary=True,
          scale_note=lambda c: f"{len(c['vuln_seeds'])} TPE search(es) x {c['hack_budget']} trials, seeds "
          f"{tuple(c['vuln_seeds'])}; see docs/papers/xhacking.md for the history", requires=_BC),
    Claim("C2", "TPE beats random: median trials-to-first-success ratio (random / TPE) >= 1.5 for >= 1 "
          "susceptible feature (eps=0.005, kappa=0.2; ratio with 95% bootstrap CI)", _c2, modes=("default", "paper"),
          scale_note=lambda c: f"{len(c['seeds'])} seeds x 2 samplers x {c['speed_budget']} trials; not run in quick "
          "mode. Censored runs count at the budget; small budgets are noisy (the paper reports ~3x)", requires=_BC,
          paper_value=3.0),
    Claim("C3", "No false alarm: the independent control feature (rho=0) is not pushed to <= 25% of its share "
          "within eps in >= 4 of 5 seeds (>= 80% of the seeds), for TPE and for random sampling", _c3,
          scale_note=lambda c: f"{c['control_budget']} trials per seed and sampler, {len(c['seeds'])} seeds, stopping "
          "at the first success", requires=_SYN),
    Claim("C4", "Audit soundness: every interval endpoint is a logged defensible trial that recomputes from its "
          "stored configuration to within 1e-6", _c4,
          scale_note=lambda c: f"exploration audit of {c['audit_explore']} random trials in the standard space"),
    Claim("C5", "The audit's default search (feature switches + drop probes) pushes a near-copy feature's share "
          "interval to <= 5% of its reference share within eps=0.01, while an independent feature keeps >= 50%",
          _c5, scale_note=lambda c: f"synthetic: t0 (rho 0), t1 with copy c1 (rho {c['copy_rho']}), u0, u1; "
          f"n = {c['synth_n']}; audit defaults except budget {c['default_audit_budget']}, n_explore "
          f"{c['default_audit_explore']}; L2-LR reference"),
]


def PLOTS(result: Result) -> dict[str, Any]:
    from trustlab.results.plots import bar_plot, new_figure

    out = {"achievable_drop": bar_plot(result, x="feature", where={"metric": "achievable_drop"},
                                       title="synthetic: achievable SHAP-share drop within eps",
                                       ylabel="1 - min share / reference share")}
    df = result.to_frame()
    sub = df[df["metric"] == "achievable_drop"] if "metric" in df else df.iloc[:0]
    fig, ax = new_figure()
    if len(sub):
        ax.scatter(sub["redundancy"], sub["value"])
        for _, row in sub.iterrows():
            ax.annotate(str(row["feature"]), (row["redundancy"], row["value"]), fontsize=7)
    ax.set_xlabel("redundancy R^2_f")
    ax.set_ylabel("achievable drop")
    ax.set_title("redundancy vs vulnerability (synthetic)", fontsize=9)
    out["redundancy_vs_drop"] = fig
    if "trials_to_success" in set(df.get("metric", [])):
        out["trials_to_success"] = bar_plot(result, x="feature", hue="method", where={"metric": "trials_to_success"},
                                            title="breast_cancer: trials to first success", ylabel="trials")
    return out
