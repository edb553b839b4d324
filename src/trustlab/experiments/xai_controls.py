"""Experiment ``xai_controls``: explanation controls for user studies (Pičulin et al., ICML 2025 position track).

The position paper asks user studies of explanations for baselines, placebos and reproducibility; the
software feature is :mod:`trustlab.explain`. Claims (issue 23, pre-registered in docs/papers/xai_controls.md
before the first default run):

* C1a-c detectability: on digits, the real explanation (MLP: captum gradient, MLP: permutation SHAP, random
  forest: TreeSHAP) PASSES both randomisation checks (|Spearman| < 0.5 against the fully randomised model and
  against the label-permuted refit) in every seed, while an explainer that ignores the model FAILS both;
* C2a-c placebo separation: deletion faithfulness of the real explanation minus the best placebo's, mean over
  seeds with a 95 % t-interval, lower bound > 0;
* C3 the study export is byte-identical under the same seed (also after recomputing the explanation from
  scratch), differs under another seed, passes the blinding scan, and its sealed key re-identifies every stimulus;
* C4 the power helper gives Cohen's (1988, Table 2.4.1) n per group: 64 for d = 0.5 and 26 for d = 0.8
  (two-sided alpha 0.05, power 0.8); C4b (secondary) it matches statsmodels' TTestIndPower when installed.

Issue 41 (pre-registered before the default run that reports them; C2a and C1b keep their statements):
C2d placebo separation of integrated gradients from the background mean; C1d per-row detectability of MLP SHAP
on 100 rows per seed, pass rate >= 0.8; C5/C5b quantus' MPRT gives our verdict (see ``_xai_controls_extra``).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.base import PaperInfo
from trustlab.core.constraints import Interval, validate_value
from trustlab.experiments import _xai_controls_extra as _extra
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, Premise, RunContext
from trustlab.results.result import Result

PAPER = PaperInfo(title="Position: Explainable AI Cannot Advance Without Better User Studies",
                  venue="ICML 2025 (position track)", repo="https://github.com/estrumbelj/XAI-user-studies-dataset")
TITLE = "Explanation controls: placebo and baseline explanations, sanity verdicts, blinded study exports"
EXTRAS: tuple[str, ...] = ("xai-torch",)

#: the explainers with claims, as (model, method) -> label
CLAIMED = {("mlp", "gradient"): "MLP gradient", ("mlp", "shap"): "MLP SHAP", ("rf", "shap"): "RF TreeSHAP"}
#: run in every mode for C2d only (issue 41): integrated gradients from the background mean, the deletion's fill value
SEPARATED = {("mlp", "integrated_gradients"): "MLP IG"}
#: reported beside them without a claim (input-dominated explainers, Adebayo et al. 2018)
REPORTED = {("mlp", "input_x_gradient"): "MLP input x gradient"}
BROKEN = {"mlp": "MLP model-ignoring", "rf": "RF model-ignoring"}
COHEN = {0.5: 64, 0.8: 26}  # Cohen (1988), Table 2.4.1: n per group, two-sided alpha 0.05, power 0.8


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    train_frac: float = 0.7
    n_explain: int = 30
    n_background: int = 30
    hidden: tuple[int, ...] = (128, 64)   # trustlab.models.MLP's default
    epochs: int = 30                      # trustlab.models.TrainConfig's default
    n_trees: int = 100                    # scikit-learn's default
    study_rows: int = 6
    reported: bool = True                 # also run input x gradient (no claim)
    c1_rows: int = 100                    # C1d: MLP SHAP rows per seed (issue 41: >= 100)
    quantus: bool = True                  # C5/C5b: quantus' MPRT cross-check (SKIP when quantus is absent)
    train_models: bool = True             # False (the KNOCKOUT): MLP left untrained, RF fitted to permuted labels

    @classmethod
    def quick(cls) -> Config:
        return cls(seeds=(0, 1, 2), n_explain=10, n_background=10, hidden=(64,), epochs=10, n_trees=30,
                   study_rows=3, reported=False)

    @classmethod
    def paper(cls) -> Config:
        return cls(seeds=tuple(range(10)), n_explain=100, n_background=100)

    def validate(self) -> None:
        super().validate()
        own = "xai_controls.Config"
        if len(self.seeds) < 2:
            from trustlab.core.exceptions import ConfigError

            raise ConfigError(f"The 'seeds' field of {own} must hold at least 2 seeds (claim 2 is a CI over seeds). "
                              f"Got {self.seeds!r} instead.")
        validate_value(own, "train_frac", self.train_frac, [Interval(float, 0, 1, closed="neither")])
        for name in ("n_explain", "n_background", "epochs", "n_trees", "study_rows", "c1_rows"):
            validate_value(own, name, getattr(self, name), [Interval(int, 2, None)])


def model_ignoring(inp: Any) -> np.ndarray:
    """A deliberately broken explainer: each row's deviation from the background mean (never calls the model)."""
    return inp.X - inp.background.mean(axis=0)


class _RefitCache:
    """``refit(X, y)`` that fits each (X, permuted y) once: the label-permuted control model of a seed is shared by
    every explainer of that seed (the permutation is drawn from the same seed, so it is the same model)."""

    def __init__(self, fit: Any) -> None:
        self.fit, self.models = fit, {}

    def __call__(self, X: np.ndarray, y: np.ndarray) -> Any:
        from trustlab.core.hashing import content_hash

        key = content_hash(X, y)
        if key not in self.models:
            self.models[key] = self.fit(X, y)
        return self.models[key]


def _models(cfg: Config, seed: int, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    import copy

    from sklearn.ensemble import RandomForestClassifier

    from trustlab.core.seeding import isolated_global_rng
    from trustlab.models import MLP, TrainConfig, evaluate, fit_model

    idx = np.random.default_rng(seed).permutation(len(X))
    cut = int(cfg.train_frac * len(X))
    tr, te = idx[:cut], idx[cut:]
    tc = TrainConfig(epochs=cfg.epochs, seed=seed)
    with isolated_global_rng(seed):
        net = MLP(X.shape[1], 10, hidden=cfg.hidden)
        if cfg.train_models:
            fit_model(net, X[tr], y[tr], tc)

    def fit_mlp(Xf: np.ndarray, yf: np.ndarray) -> Any:
        fresh = copy.deepcopy(net)
        with isolated_global_rng(seed + 1):
            for m in fresh.modules():
                if hasattr(m, "reset_parameters"):
                    m.reset_parameters()
            fit_model(fresh, Xf, yf, tc)
        return fresh

    y_rf = y[tr] if cfg.train_models else np.random.default_rng([seed, 5]).permutation(y[tr])
    rf = RandomForestClassifier(n_estimators=cfg.n_trees, random_state=seed, n_jobs=1).fit(X[tr], y_rf)
    return {"tr": tr, "rows": te[:cfg.n_explain], "test": te, "mlp": net, "rf": rf,
            "acc": {"mlp": evaluate(net, X[te], y[te])[1], "rf": float(rf.score(X[te], y[te]))},
            "refit": {"mlp": _RefitCache(fit_mlp),
                      "rf": _RefitCache(lambda Xf, yf: RandomForestClassifier(
                          n_estimators=cfg.n_trees, random_state=seed, n_jobs=1).fit(Xf, yf))}}


def _record(res: Result, label: str, seed: int, e: Any) -> None:
    v = e.verdict
    for name, r in v.correlations.items():
        res.add(explainer=label, seed=seed, metric="rank_correlation", control=name, value=r.absolute,
                signed=r.signed, rows_defined=r.n_rows_defined)
    for c in v.checks:
        res.add(explainer=label, seed=seed, metric="check", control=c.name, value=c.observed, status=c.status)
    for name, f in v.faithfulness.items():
        res.add(explainer=label, seed=seed, metric="deletion", control=name, value=f.mean_deletion,
                insertion=f.mean_insertion)
    for stage in v.cascade:
        res.add(explainer=label, seed=seed, metric="cascade", control=stage.control, value=stage.absolute)
    res.add(explainer=label, seed=seed, metric="status", control="overall", value=float(v.status == "PASS"),
            status=v.status)


def _explain_all(cfg: Config, ctx: RunContext, res: Result, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Every seed's models, explanations and checks, one executor task per seed (issue 46); the records come
    back in seed order, and the first seed's forest and data for the blinded study."""
    import functools

    done = ctx.map(functools.partial(_seed_job, cfg, X, y), cfg.seeds, desc="xai_controls seeds")
    keep: dict[str, Any] = {}
    for records, kept in done:
        res.records.extend(records)
        keep = keep or kept
    ctx.check_budget(f"{len(cfg.seeds)} seed(s)")
    return keep


def _seed_job(cfg: Config, X: np.ndarray, y: np.ndarray, seed: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One seed: its records and, for the first seed, what the blinded study reuses (a task of ``ctx.map``)."""
    from trustlab.experiments import _xai_controls_extra as extra
    from trustlab.explain import explain

    res = Result("xai_controls", "", {})
    keep: dict[str, Any] = {}
    jobs = {**CLAIMED, **SEPARATED, **(REPORTED if cfg.reported else {})}
    m = _models(cfg, seed, X, y)
    res.add(explainer="model", seed=seed, metric="test_accuracy", control="mlp", value=m["acc"]["mlp"])
    res.add(explainer="model", seed=seed, metric="test_accuracy", control="rf", value=m["acc"]["rf"])
    todo = [(label, model, method) for (model, method), label in jobs.items()]
    todo += [(label, model, model_ignoring) for model, label in BROKEN.items()]
    mlp_done = {}
    for label, model, method in todo:
        e = explain(m[model], X[m["rows"]], method=method, X_train=X[m["tr"]], y_train=y[m["tr"]],
                    n_background=cfg.n_background, refit=m["refit"][model], random_state=seed)
        _record(res, label, seed, e)
        if model == "mlp":
            mlp_done[label] = (e, method)
        if seed == cfg.seeds[0] and label == "RF TreeSHAP":
            # what the blinded study reads: it crosses process boundaries, so no refit closures
            keep = {"model": m["rf"], "X": X, "y": y, "m": {"test": m["test"], "tr": m["tr"]}}
    extra.rows_job(cfg, seed, m, X, y, res, model_ignoring)
    extra.quantus_job(cfg, seed, m, X, y, res, mlp_done)
    _record_controls(res, seed, m, X, y)
    return res.records, keep


def _record_controls(res: Result, seed: int, m: dict[str, Any], X: np.ndarray, y: np.ndarray) -> None:
    """Test accuracy of every label-permuted control model the data-randomisation check fitted (the premise
    that the control changed the model)."""
    from trustlab.models import evaluate

    te = m["test"]
    for model in ("mlp", "rf"):
        for fitted in m["refit"][model].models.values():
            acc = evaluate(fitted, X[te], y[te])[1] if model == "mlp" else float(fitted.score(X[te], y[te]))
            res.add(explainer="control model", seed=seed, metric="test_accuracy", control=model, value=float(acc))


def _study(cfg: Config, res: Result, keep: dict[str, Any]) -> None:
    """Claim 3: export twice (same seed), once more with another seed, and once after recomputing from scratch."""
    from trustlab.explain import check_blinding, condition_values, explain, export_study, open_key

    m, X, y = keep["m"], keep["X"], keep["y"]
    rows = m["test"][:cfg.study_rows]

    def make() -> Any:
        return explain(keep["model"], X[rows], X_train=X[m["tr"]], y_train=y[m["tr"]], n_background=cfg.n_background,
                       random_state=cfg.seeds[0])

    exp = make()
    with tempfile.TemporaryDirectory() as tmp:
        kw = {"y_true": [y[rows]], "n_participants": 12, "allow_unverified": True}
        a = export_study([exp], random_state=11, out_dir=Path(tmp, "a"), **kw)
        export_study([exp], random_state=11, out_dir=Path(tmp, "b"), **kw)
        export_study([make()], random_state=11, out_dir=Path(tmp, "c"), **kw)
        export_study([exp], random_state=12, out_dir=Path(tmp, "d"), **kw)
        files = sorted(a.files)
        same = sum((Path(tmp, "a", f).read_bytes() == Path(tmp, "b", f).read_bytes()) for f in files)
        fresh = sum((Path(tmp, "a", f).read_bytes() == Path(tmp, "c", f).read_bytes()) for f in files)
        differs = Path(tmp, "a", "assignment.csv").read_bytes() != Path(tmp, "d", "assignment.csv").read_bytes()
        blind = check_blinding(Path(tmp, "a"))
        key = open_key(Path(tmp, "a"))
        found = 0
        import json

        for path in sorted(Path(tmp, "a", "stimuli").glob("*.json")):
            stim = json.loads(path.read_text())
            k = key.lookup(stim["stimulus"])
            want = np.round(condition_values(exp, k.condition)[k.row], 4)
            got = np.array([f["attribution"] for f in stim["features"]])
            found += bool(np.allclose(got, want, atol=1e-12) and k.condition in a.conditions)
    res.summary.update(study_files=len(files), study_same_seed_identical=int(same), study_recomputed_identical=int(fresh),
                       study_other_seed_differs=bool(differs), study_blinding_problems=blind.problems,
                       study_stimuli=a.n_stimuli, study_reidentified=int(found), study_status=exp.status)
    res.add(explainer="study", seed=cfg.seeds[0], metric="export", control="identical_files", value=same)


def _power(res: Result) -> None:
    from trustlab.core.optional import is_available
    from trustlab.explain import sample_size

    for d in (0.2, 0.5, 0.8):
        r = sample_size(d)
        res.add(explainer="power", seed=0, metric="n_per_group", control=f"d={d}", value=r.n_per_group,
                exact=r.n_exact)
    res.summary["power_n"] = {str(d): sample_size(d).n_per_group for d in COHEN}
    grid = [(d, a, p, r) for d in (0.2, 0.5, 0.8) for a in (0.01, 0.05) for p in (0.8, 0.9) for r in (1.0, 2.0)]
    if is_available("statsmodels"):
        from statsmodels.stats.power import TTestIndPower

        sm = TTestIndPower()
        diffs, closer = [], 0
        for d, a, p, r in grid:
            ours = sample_size(d, alpha=a, power=p, ratio=r).n_exact
            theirs = sm.solve_power(effect_size=d, alpha=a, power=p, ratio=r)
            diffs.append(abs(ours - theirs))
            # C4c: judged on statsmodels' own power function, is our n at least as close to the target?
            closer += abs(sm.power(d, ours, a, ratio=r) - p) <= abs(sm.power(d, theirs, a, ratio=r) - p)
        res.summary["power_statsmodels_max_diff"] = float(max(diffs))
        res.summary["power_statsmodels_closer"] = [int(closer), len(grid)]
    else:
        res.summary["power_statsmodels_max_diff"] = None
        res.summary["power_statsmodels_closer"] = None


def run(cfg: Config, ctx: RunContext) -> Result:
    import warnings

    from trustlab.data.images import load_digits_images

    res = Result("xai_controls", "", {})
    ds = load_digits_images(flatten=True)
    X, y = ds.X.astype(np.float64), np.asarray(ds.y)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        keep = _explain_all(cfg, ctx, res, X, y)
        _study(cfg, res, keep)
    _power(res)
    return res


# ---------------------------------------------------------------- claims
#: pre-registered premise thresholds (docs/papers/xai_controls.md, "Premises, knockout and quick gate"): digits MLPs
#: and forests reach 90-97 %, so 80 % (chance 10 %) separates a model that learned from one that did not; a
#: label-permuted control model at <= 30 % has lost what the real model learned
PRE_LEARNED, PRE_CONTROL = 0.80, 0.30


def _accs(result: Result, explainer: str) -> Any:
    df = _frame(result)
    d = df[(df["metric"] == "test_accuracy") & (df["explainer"] == explainer)]
    return d.groupby("control")["value"].mean()


def _pre_learned(result: Result) -> CheckResult:
    a = _accs(result, "model")
    worst = str(a.idxmin())
    return CheckResult(bool(a.min() >= PRE_LEARNED), round(float(a.min()), 4), f">= {PRE_LEARNED:g}", unit="accuracy",
                       baseline="chance 0.1", detail="mean test accuracy over seeds: " + ", ".join(
                           f"{k} {v:.3f}" for k, v in a.items()) + f" (lowest: {worst})")


def _pre_control(result: Result) -> CheckResult:
    a = _accs(result, "control model")
    if a.empty:
        return CheckResult(None, None, f"<= {PRE_CONTROL:g}", unit="accuracy", detail="no control model was fitted")
    return CheckResult(bool(a.max() <= PRE_CONTROL), round(float(a.max()), 4), f"<= {PRE_CONTROL:g}", unit="accuracy",
                       baseline="chance 0.1", detail="label-permuted control models' mean test accuracy: " + ", ".join(
                           f"{k} {v:.3f}" for k, v in a.items()))




def _frame(result: Result) -> Any:
    return result.to_frame()


def _checks(result: Result, label: str) -> Any:
    df = _frame(result)
    return df[(df["metric"] == "check") & (df["explainer"] == label)]


def _detect(model: str, method: str) -> Any:
    label, broken = CLAIMED[(model, method)], BROKEN[model]

    def check(result: Result) -> CheckResult:
        names = ("model_randomisation", "data_randomisation")
        real = _checks(result, label)
        bad = _checks(result, broken)
        real = real[real["control"].isin(names)]
        bad = bad[bad["control"].isin(names)]
        seeds = sorted(set(real["seed"]))
        real_ok = sum(all(real[(real["seed"] == s)]["status"] == "PASS") for s in seeds)
        bad_fail = sum(all(bad[(bad["seed"] == s)]["status"] == "FAIL") for s in seeds)
        worst = float(real["value"].max())
        return CheckResult(real_ok == len(seeds) and bad_fail == len(seeds),
                           f"real PASS {real_ok}/{len(seeds)}, broken FAIL {bad_fail}/{len(seeds)}; max real rho {worst:.2f}",
                           "all seeds", baseline=f"broken min rho {float(bad['value'].min()):.2f}",
                           detail="rho: mean per-row Spearman of |attributions| vs the fully randomised model and the "
                                  "label-permuted refit; PASS below 0.5")
    return check


def _margins(result: Result, label: str) -> np.ndarray:
    df = _frame(result)
    d = df[(df["metric"] == "deletion") & (df["explainer"] == label)]
    out = []
    for s in sorted(set(d["seed"])):
        ds = d[d["seed"] == s].set_index("control")["value"]
        out.append(float(ds["real"] - max(ds["placebo_permuted"], ds["placebo_random"])))
    return np.array(out)


def _separation(model: str, method: str) -> Any:
    label = {**CLAIMED, **SEPARATED}[(model, method)]

    def check(result: Result) -> CheckResult:
        from scipy import stats

        m = _margins(result, label)
        half = float(stats.t.ppf(0.975, len(m) - 1) * m.std(ddof=1) / np.sqrt(len(m)))
        lo, hi = float(m.mean() - half), float(m.mean() + half)
        return CheckResult(lo > 0, f"{m.mean():.3f} [{lo:.3f}, {hi:.3f}]", "95% CI lower bound > 0",
                           unit="output drop", detail=f"per seed: {', '.join(f'{v:.3f}' for v in m)}")
    return check


def _check_study(result: Result) -> CheckResult:
    s = result.summary
    n = s["study_files"]
    ok = (s["study_same_seed_identical"] == n and s["study_recomputed_identical"] == n and s["study_other_seed_differs"]
          and not s["study_blinding_problems"] and s["study_reidentified"] == s["study_stimuli"])
    return CheckResult(ok, f"identical {s['study_same_seed_identical']}/{n} (recomputed {s['study_recomputed_identical']}/"
                           f"{n}); other seed differs: {s['study_other_seed_differs']}; blinding problems "
                           f"{len(s['study_blinding_problems'])}; re-identified {s['study_reidentified']}/{s['study_stimuli']}",
                       "all files identical, 0 problems, all re-identified",
                       detail="; ".join(s["study_blinding_problems"][:5]))


def _check_power(result: Result) -> CheckResult:
    got = result.summary["power_n"]
    ok = all(int(got[str(d)]) == n for d, n in COHEN.items())
    return CheckResult(ok, ", ".join(f"d={d}: {got[str(d)]}" for d in COHEN), ", ".join(f"d={d}: {n}" for d, n in COHEN.items()),
                       unit="per group", detail="Cohen (1988) Table 2.4.1, two-sided alpha 0.05, power 0.8")


def _check_statsmodels(result: Result) -> CheckResult:
    diff = result.summary["power_statsmodels_max_diff"]
    if diff is None:
        return CheckResult(None, "statsmodels not installed", "< 1e-6", detail="pip install statsmodels to run it")
    return CheckResult(diff < 1e-6, diff, "< 1e-6", unit="participants")


def _check_statsmodels_power(result: Result) -> CheckResult:
    got = result.summary.get("power_statsmodels_closer")
    if got is None:
        return CheckResult(None, "statsmodels not installed", "all settings", detail="pip install statsmodels to run it")
    return CheckResult(got[0] == got[1], f"{got[0]}/{got[1]} settings", "all settings",
                       detail="|statsmodels power(n) - target| for our n <= for statsmodels' solve_power n")


def _scale(cfg: dict[str, Any]) -> str:
    return (f"{len(cfg['seeds'])} seeds, {cfg['n_explain']} explained rows (C1d: {cfg.get('c1_rows', '-')}), "
            f"{cfg['n_background']} background rows, "
            f"MLP {tuple(cfg['hidden'])} x {cfg['epochs']} epochs, RF {cfg['n_trees']} trees")


_PRE = ("pre-learned", "pre-control-changes")
CLAIMS = [
    Premise("pre-learned", f"The explained models learned the task: the MLP's and the random forest's mean test "
            f"accuracy on digits >= {PRE_LEARNED:g} (chance 0.1)", _pre_learned),
    Premise("pre-control-changes", f"The data-randomisation control changes the model: every label-permuted refit's "
            f"mean test accuracy <= {PRE_CONTROL:g}", _pre_control),
    Claim("C1a", "detectability (digits MLP, captum gradient): the real explanation PASSES both randomisation checks in "
                 "every seed; a model-ignoring explainer FAILS both", _detect("mlp", "gradient"), scale_note=_scale, requires=_PRE),
    Claim("C1b", "detectability (digits MLP, permutation SHAP): real PASSES both randomisation checks in every seed; "
                 "the model-ignoring explainer FAILS both", _detect("mlp", "shap"), scale_note=_scale, requires=_PRE),
    Claim("C1c", "detectability (digits random forest, TreeSHAP): real PASSES both randomisation checks in every seed; "
                 "the model-ignoring explainer FAILS both", _detect("rf", "shap"), scale_note=_scale, requires=_PRE),
    Claim("C2a", "placebo separation (MLP gradient): deletion faithfulness of the real explanation minus the best "
                 "placebo's, 95% CI over seeds above 0", _separation("mlp", "gradient"), scale_note=_scale, requires=_PRE),
    Claim("C2b", "placebo separation (MLP permutation SHAP): 95% CI of real minus best placebo deletion above 0",
          _separation("mlp", "shap"), scale_note=_scale, requires=_PRE),
    Claim("C2c", "placebo separation (RF TreeSHAP): 95% CI of real minus best placebo deletion above 0",
          _separation("rf", "shap"), scale_note=_scale, requires=_PRE),
    Claim("C2d", "(issue 41) placebo separation (MLP integrated gradients from the background mean, the deletion's "
                 "fill value; C2a's gradient times (input - baseline) along the path): 95% CI of real minus best "
                 "placebo deletion above 0", _separation("mlp", "integrated_gradients"), scale_note=_scale,
          requires=_PRE),
    Claim("C1d", f"(issue 41) per-row detectability (digits MLP, permutation SHAP, >= 100 rows per seed): the "
                 f"fraction of (row, seed) pairs whose own |Spearman| is < 0.5 against both the randomised model's "
                 f"and the label-permuted refit's explanation is >= {_extra.ROW_PASS:g}; the model-ignoring "
                 f"explainer's is <= {1 - _extra.ROW_PASS:.1f}", _extra.check_rows, scale_note=_scale, requires=_PRE),
    Claim("C5", "(issue 41) quantus cross-check: quantus' MPRT (top-down cascade, Spearman of |attributions|, all "
                "features) gives our model-randomisation verdict (mean rho < 0.5) for every MLP explainer and seed",
          _extra.check_quantus("all_features"), scale_note=_scale, requires=_PRE),
    Claim("C5b", "(issue 41) the same with quantus' Spearman restricted to the features our verdict compares (its "
                 "similarity_func): quantus' randomisation gives our verdict for every MLP explainer and seed",
          _extra.check_quantus("compared_features"), scale_note=_scale, requires=_PRE),
    Claim("C3", "study export: byte-identical under the same seed (also recomputed from scratch), different under "
                "another, no condition reachable from the stimuli, sealed key re-identifies every stimulus", _check_study),
    Claim("C4", "power helper: n per group for a two-sample t-test (alpha 0.05 two-sided, power 0.8) is 64 for d = 0.5 "
                "and 26 for d = 0.8 (Cohen 1988)", _check_power),
    Claim("C4b", "power helper matches statsmodels' TTestIndPower.solve_power to 1e-6 on a 24-setting grid",
          _check_statsmodels, secondary=True),
    Claim("C4c", "(added after C4b failed at 2.2e-6, see docs) on statsmodels' own power function our n is at least as "
                 "close to the target power as statsmodels' solve_power n, on the same 24 settings",
          _check_statsmodels_power, secondary=True),
]

#: the quick gate's rule (python -m trustlab.experiments._gates xai_controls: >= 4 of 5 quick seeds, not PASS under
#: KNOCKOUT): C2a passes on 1 of 5 quick seeds, C1d on 0; C3 and C4 (study export, power helper) pass under the
#: knockout. Dropped from the rule's gate: C5 (5/5 quick), because it FAILs in default mode (22/25): quick's smaller
#: MLP puts SHAP above 0.5 in both implementations, so quick never meets the near-0.5 case where the two differ.
QUICK_EXPECTED_PASS: tuple[str, ...] = ("pre-learned", "C1a", "C1c", "C2b", "C2c", "C2d", "C5b")
#: the mechanism off: the explained models learn nothing (MLP untrained, RF fitted to permuted labels)
KNOCKOUT: tuple[str, ...] = ("train_models=false",)


def PLOTS(result: Result) -> dict[str, Any]:
    from trustlab.results.plots import bar_plot

    fig = bar_plot(result, x="explainer", hue="control", where={"metric": "rank_correlation"},
                   title="real vs control explanations: mean |Spearman| per explainer (threshold 0.5)",
                   ylabel="Spearman of |attributions|")
    ax = fig.axes[0]
    ax.axhline(0.5, color="black", lw=0.8, ls="--")
    ax.tick_params(axis="x", labelrotation=30, labelsize=6)
    out = {"correlations": fig}
    dfig = bar_plot(result, x="explainer", hue="control", where={"metric": "deletion"},
                    title="deletion faithfulness: real vs controls", ylabel="mean output drop")
    dfig.axes[0].tick_params(axis="x", labelrotation=30, labelsize=6)
    out["deletion"] = dfig
    return out
