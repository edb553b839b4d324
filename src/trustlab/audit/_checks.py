"""The checks of ``trustlab audit``, each a thin composition of a method's public API.

Every check takes the :class:`AuditInputs` and its settings and returns a :class:`CheckOutcome`; it decides
for itself whether it applies (``skipped`` with the reason otherwise). Default thresholds are policy defaults
of the audit (documented in docs/audit.md), not claims of the papers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.audit._common import cap_rows, quiet_feature_names
from trustlab.audit._common import outcome as _outcome
from trustlab.audit._common import skip as _skip
from trustlab.audit._data_checks import data_quality
from trustlab.audit._model_checks import calibration, drift, fairness
from trustlab.audit._report import CheckOutcome, figure_png

__all__ = ["AuditInputs", "CHECKS", "DEFAULTS", "METRICS", "run_check"]


@dataclass
class AuditInputs:
    """What every check sees: the fitted model, an unfitted twin to refit (None when the model cannot be
    refitted), both on model codes ``R_train``/``R_test`` (the user's table, decoded inside the model), the data
    encoding ``X_train``/``X_test`` (finite numbers, for the data checks) with labels encoded ``0..C-1`` (a
    regressor's numeric targets when ``task == "regression"``), and the audit's seed."""

    model: Any
    estimator: Any
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    feature_names: list[str]
    classes: list[Any]
    seed: int
    membership_known: bool
    train_rows: np.ndarray
    test_rows: np.ndarray
    progress: bool = False
    model_accuracy: float = field(default=float("nan"))
    raw_model: Any = None
    R_train: Any = None  # model codes (``trustlab.audit._table``): what the model and its refits are given
    R_test: Any = None
    schema: Any = None
    sensitive: dict[str, Any] = field(default_factory=dict)  # sensitive column -> its values on the held-out rows
    task: str = "classification"  # or "regression": y_* are then the numeric targets and classes is empty
    model_r2: float = field(default=float("nan"))  # a regressor's held-out R^2

    def predict(self, X: np.ndarray) -> np.ndarray:
        """A regressor's predictions (float64, one per row)."""
        return np.asarray(self.model.predict(X), dtype=np.float64).reshape(len(X))

    def proba(self, X: np.ndarray) -> np.ndarray:
        """The model's probabilities with columns in the order of ``classes``."""
        P = np.asarray(self.model.predict_proba(X), dtype=np.float64)
        out = np.zeros((len(X), len(self.classes)))
        order = [self.classes.index(c) for c in getattr(self.model, "classes_", self.classes)]
        out[:, order] = P
        return out


#: default settings of every check (``audit(..., settings={"membership": {"n_reference": 8}})`` overrides)
DEFAULTS: dict[str, dict[str, Any]] = {
    "data_quality": {"near_tol": 1e-3, "max_suspect_share": 0.04, "cv": 5, "label_rows": 20000, "k": 5,
                     "noise_quantile": 0.1, "knn_rows": 4000, "residual_z": 4.0},
    "leakage": {"tolerance": 0.015, "min_lift": 0.1, "regression_depth": 4},
    "membership": {"n_reference": 4, "max_auc": 0.6, "fpr": 0.01, "max_rows": 10000},
    "multiplicity": {"n_models": 5, "bootstrap": True, "max_arbitrariness": 0.17, "k": 8, "max_train_rows": 10000,
                     "max_test_rows": 5000, "range_tol": 1.25},
    "explanation_stability": {"max_rows": 600, "n_features": 2, "n_explore": 6, "budget": 3, "eps": 0.01,
                              "top_k": 3, "n_explain": 30},
    "explanation_controls": {"n_rows": 40, "n_background": 30, "max_train_rows": 5000},
    "interpretability_gap": {"depth_budget": 4, "time_limit": 60.0, "max_gap": 0.05, "max_rows": 10000},
    "calibration": {"n_bins": 10, "n_null": 200, "min_ece": 0.02, "max_ece": None},
    "drift": {"alpha": 0.01, "max_domain_auc": 0.6, "support_odds": 9.0, "max_rows": 20000},
    "fairness": {"n_boot": 200, "max_difference": 0.1},
}


#: metric names each check can report (``--fail-on`` knows a metric of a check that did not run is no typo)
METRICS: dict[str, list[str]] = {
    "data_quality": ["duplicate_rows", "near_duplicate_rows", "conflicting_label_rows", "suspect_labels",
                     "suspect_label_share", "knn_suspect_labels", "label_issue_knn_jaccard",
                     "label_issue_cleanlab_jaccard"],
    "leakage": ["leakage_best_accuracy", "model_accuracy", "leakage_best_r2", "model_r2", "leakage_gap",
                "leaky_features"],
    "membership": ["membership_auc", "membership_auc_lower", "membership_auc_rmia", "membership_auc_threshold_loss",
                   "membership_tpr_at_fpr_rmia", "membership_tpr_at_fpr_threshold_loss",
                   "membership_auc_calibrated_loss", "membership_tpr_at_fpr_calibrated_loss"],
    "multiplicity": ["arbitrariness", "mean_prediction_std", "unstable_points", "accuracy_spread", "range_tol_to_flag"],
    "explanation_stability": ["unstable_features", "defensible_pipelines"],
    "explanation_controls": ["controls_failed"],
    "interpretability_gap": ["sparse_tree_accuracy", "interpretability_gap"],
    "calibration": ["calibration_ece", "calibration_ece_null95", "brier_score", "calibration_slope", "residual_bias"],
    "drift": ["domain_auc", "drifted_features", "test_outside_support"],
    "fairness": ["fairness_worst_lower_bound"]}


# -- target leakage: one feature, one split -------------------------------------------------------------------
def _stump_scores(a: AuditInputs, s: dict[str, Any]) -> tuple[np.ndarray, float, float, str]:
    """Held-out score of a tree on each feature alone (one split; for a regressor ``regression_depth`` levels, as one
    split of a continuous target explains at most ~64 % of its variance), the no-feature baseline (majority class,
    or the mean: R^2 0), the model's own score and the score's name (accuracy, or R^2 for a regressor)."""
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    regression = a.task == "regression"
    stump = DecisionTreeRegressor if regression else DecisionTreeClassifier
    depth = int(s["regression_depth"]) if regression else 1
    scores = np.array([float(stump(max_depth=depth, random_state=0).fit(a.X_train[:, [j]], a.y_train)
                             .score(a.X_test[:, [j]], a.y_test)) for j in range(a.X_train.shape[1])])
    if regression:
        return scores, 0.0, a.model_r2, "R^2"
    return scores, float(np.mean(a.y_test == np.bincount(a.y_train).argmax())), a.model_accuracy, "accuracy"


def _leakage(a: AuditInputs, s: dict[str, Any]) -> CheckOutcome:
    from matplotlib.figure import Figure

    accs_a, baseline, model_score, unit = _stump_scores(a, s)
    how = f"alone (a depth-{s['regression_depth']} tree)" if unit == "R^2" else "with one split"
    leaky = np.flatnonzero((accs_a >= model_score - s["tolerance"]) & (accs_a >= baseline + s["min_lift"]))
    best = int(np.argmax(accs_a))
    names = [a.feature_names[j] for j in leaky]
    headline = (f"feature(s) {names} reach {unit} {accs_a[leaky].max():.3f} {how}; the model reaches "
                f"{model_score:.3f}" if len(leaky) else
                f"best single feature '{a.feature_names[best]}' reaches {unit} {accs_a[best]:.3f} {how} vs the "
                f"model's {model_score:.3f}")
    fig = Figure(figsize=(6.4, 0.6 + 0.22 * len(accs_a)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.barh(a.feature_names, accs_a, color=["#c62828" if j in leaky else "#90a4ae" for j in range(len(accs_a))])
    ax.axvline(model_score, color="k", ls="--", label="model")
    ax.axvline(baseline, color="#888", ls=":", label="mean target" if unit == "R^2" else "majority class")
    ax.set_xlabel(f"held-out {unit} of the feature {how}")
    ax.invert_yaxis()
    ax.legend(fontsize=8)
    key = "r2" if unit == "R^2" else "accuracy"
    return _outcome("leakage", "flag" if len(leaky) else "ok", headline,
                    metrics={f"leakage_best_{key}": float(accs_a[best]), f"model_{key}": model_score,
                             "leakage_gap": float(model_score - accs_a[best]), "leaky_features": len(leaky)},
                    details=[f"leaky features: {names}"] if names else [], settings=s,
                    plots={"one_split": figure_png(fig)})


# -- membership risk: RMIA and threshold attacks (amun) -------------------------------------------------------
def _membership(a: AuditInputs, s: dict[str, Any]) -> CheckOutcome:
    from matplotlib.figure import Figure
    from sklearn.metrics import roc_curve

    from trustlab.methods.amun import fit_reference_estimators, mia_auc, rmia_scores, threshold_scores

    if not a.membership_known:
        return _skip("membership", "needs held-out rows the model was not trained on: pass --test (the model was "
                     "given already fitted, so trustlab cannot tell members from non-members)", s)
    if a.estimator is None:
        return _skip("membership", "RMIA needs reference models of the same kind; this model cannot be refitted", s)
    member = np.r_[np.ones(len(a.y_train), bool), np.zeros(len(a.y_test), bool)]
    pick, cap_note = cap_rows(len(member), int(s["max_rows"]), a.seed, salt=3)
    X, y, member = np.vstack([a.R_train, a.R_test])[pick], np.r_[a.y_train, a.y_test][pick], member[pick]
    if a.task == "regression":
        from trustlab.audit._regression import membership_attacks

        attacks, n_refs = membership_attacks(a, X, y, s)
    else:
        logits = np.log(np.clip(a.proba(X), 1e-6, 1.0))
        refs = fit_reference_estimators(a.estimator, X, y, int(s["n_reference"]), random_state=a.seed,
                                        show_progress=a.progress)
        attacks = {"rmia": rmia_scores(logits, refs, y, np.arange(len(y))),
                   "threshold_loss": threshold_scores(logits, y, "loss")}
        n_refs = refs.n_models
    main = next(iter(attacks))
    metrics: dict[str, float] = {}
    fig = Figure(figsize=(4.8, 3.6), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    for name, score in attacks.items():
        auc = mia_auc(score[member], score[~member], balanced=True, random_state=a.seed) / 100.0
        fpr, tpr, _ = roc_curve(member, score)
        metrics[f"membership_auc_{name}"] = auc
        metrics[f"membership_tpr_at_fpr_{name}"] = float(np.interp(s["fpr"], fpr, tpr))
        ax.plot(fpr, tpr, label=f"{name} (AUC {auc:.3f})")
    ax.plot([0, 1], [0, 1], color="#888", ls=":")
    ax.set_xscale("symlog", linthresh=0.01)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.legend(fontsize=8)
    worst = max(metrics[f"membership_auc_{name}"] for name in attacks)
    lower = worst - 1.96 * _auc_se(worst, int(member.sum()), int((~member).sum()))
    metrics = {"membership_auc": worst, "membership_auc_lower": lower, **metrics}
    flagged = lower > s["max_auc"]
    label = {"rmia": "RMIA", "calibrated_loss": "calibrated loss", "threshold_loss": "loss threshold"}
    headline = (f"membership AUC {worst:.3f} (" + ", ".join(f"{label[n]} {metrics[f'membership_auc_{n}']:.3f}"
                                                           for n in attacks) +
                f"), 95 % lower bound {lower:.3f} {'>' if flagged else '<='} {s['max_auc']}; TPR at "
                f"{s['fpr']:.0%} FPR {metrics[f'membership_tpr_at_fpr_{main}']:.3f} ({label[main]})")
    return _outcome("membership", "flag" if flagged else "ok", headline, metrics=metrics, settings=s,
                    details=[f"{int(member.sum())} members (training rows) vs {int((~member).sum())} non-members (held-out "
                             f"rows); {n_refs} reference models on complementary halves of these rows"]
                    + ([cap_note] if cap_note else []),
                    plots={"roc": figure_png(fig)})


def _auc_se(auc: float, n1: int, n0: int) -> float:
    """Hanley & McNeil's (1982) standard error of an AUC from n1 positives and n0 negatives."""
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    var = (auc * (1 - auc) + (n1 - 1) * (q1 - auc**2) + (n0 - 1) * (q2 - auc**2)) / max(n1 * n0, 1)
    return float(np.sqrt(max(var, 0.0)))


# -- multiplicity over refits (multiplicity) -----------------------------------------------------------------
def _refit_factory(estimator: Any) -> Callable[[int], Any]:
    from sklearn.base import clone

    def make(seed: int) -> Any:
        est = clone(estimator)
        return est.set_params(random_state=seed)  # a TableModel: seeds every random_state inside

    return make


def _multiplicity(a: AuditInputs, s: dict[str, Any]) -> CheckOutcome:
    from trustlab.methods.multiplicity import MultiplicityAudit

    if a.estimator is None:
        return _skip("multiplicity", "needs refits of the model; this model cannot be refitted", s)
    if a.task == "regression":
        from trustlab.audit._regression import multiplicity

        return multiplicity(a, s)
    aud = MultiplicityAudit(factory=_refit_factory(a.estimator), n_models=int(s["n_models"]),
                            bootstrap=bool(s["bootstrap"]), k=int(s["k"]), mc_masks=0, relative=True,
                            random_state=a.seed % 2**31)
    tr, tr_note = cap_rows(len(a.y_train), int(s["max_train_rows"]), a.seed, salt=4)
    te, te_note = cap_rows(len(a.y_test), int(s["max_test_rows"]), a.seed, salt=5)
    rep = aud.audit(a.R_train[tr], a.y_train[tr], a.R_test[te], a.y_test[te])
    test_rows = a.test_rows[te]
    arb = float(rep.summary["arbitrariness"])
    flagged = arb > s["max_arbitrariness"]
    flips = np.flatnonzero(rep.flips)
    headline = (f"{arb:.1%} of held-out predictions change over {rep.n_models} refits "
                f"({'seeds and bootstraps' if s['bootstrap'] else 'seeds'}); {len(rep.unstable)} point(s) not "
                f"certified stable (S < {rep.threshold:.2f})")
    return _outcome("multiplicity", "flag" if flagged else "ok", headline,
                    metrics={"arbitrariness": arb, "mean_prediction_std": float(rep.summary["mean_std"]),
                             "unstable_points": len(rep.unstable),
                             "accuracy_spread": float(rep.summary["accuracy_spread"] or 0.0)},
                    rows={"label_flips": sorted(test_rows[flips].tolist()),
                          "unstable": sorted(test_rows[np.asarray(rep.unstable, int)].tolist())},
                    details=[f"kept {len(rep.kept)} of {rep.n_models} refits in the Rashomon set; test accuracies "
                             f"{[round(x, 3) for x in rep.test_accuracies]}"] + [f"warning: {w}" for w in rep.warnings]
                    + [f"training rows {n}" for n in (tr_note,) if n] + [f"held-out rows {n}" for n in (te_note,) if n],
                    settings=s, plots={"consistency": figure_png(rep.plot())})


# -- explanation stability (xhacking) -------------------------------------------------------------------------
def _top_features(a: AuditInputs, n: int) -> list[int]:
    imp = getattr(a.model, "feature_importances_", None)
    if imp is None or len(imp) != a.X_train.shape[1]:
        from sklearn.feature_selection import mutual_info_classif

        imp = mutual_info_classif(a.X_train, a.y_train, random_state=a.seed % 2**31)
    return [int(j) for j in np.argsort(-np.asarray(imp), kind="stable")[:n]]


def _explanation_stability(a: AuditInputs, s: dict[str, Any]) -> CheckOutcome:
    import warnings

    from trustlab.core.optional import is_available
    from trustlab.methods.xhacking import XHackingAudit

    if a.task == "regression":
        return _skip("explanation_stability", "X-hacking's defensible-pipeline search scores classifiers (accuracy, "
                     "balanced accuracy, ROC AUC); it has no regression pipelines or score", s)
    if not (is_available("shap") and is_available("optuna")):
        return _skip("explanation_stability", "needs shap and optuna (pip install 'trustlab[audit]')", s)
    if a.X_train.shape[1] < 2:
        return _skip("explanation_stability", "needs at least two features", s)
    X = np.vstack([a.X_train, a.X_test])
    y = np.r_[a.y_train, a.y_test]
    rng = np.random.default_rng(a.seed)
    rows = np.sort(rng.permutation(len(y))[: int(s["max_rows"])])
    top = _top_features(a, int(s["n_features"]))
    aud = XHackingAudit(features=top, n_explore=int(s["n_explore"]), budget=int(s["budget"]), eps=float(s["eps"]),
                        top_k=int(s["top_k"]), n_explain=int(s["n_explain"]), n_background=int(s["n_explain"]),
                        progress=a.progress, random_state=a.seed % 2**31)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rep = aud.audit(X[rows], y[rows], feature_names=a.feature_names)
    flagged = [f.name for f in rep.flagged()]
    headline = (f"explanation of {flagged} can be moved across the top-{rep.top_k} / negligible line by defensible "
                f"pipelines" if flagged else
                f"no feature's explanation crosses the top-{rep.top_k} or negligible line in {rep.n_defensible} "
                "defensible pipelines")
    details = [f"{f.name}: share {f.reference_share:.3f} in [{f.min_share:.3f}, {f.max_share:.3f}], rank "
               f"{f.reference_rank} in [{f.min_rank}, {f.max_rank}]" for f in rep.features]
    details += [f"{rep.n_defensible} of {rep.n_trials} pipelines defensible (held-out score >= {rep.score_floor:.3f}); "
                f"directed searches for {[a.feature_names[j] for j in top]} on {len(rows)} rows"]
    details += [f"warning: {w}" for w in rep.warnings][:3]
    del caught
    return _outcome("explanation_stability", "flag" if flagged else "ok", headline,
                    metrics={"unstable_features": len(flagged), "defensible_pipelines": rep.n_defensible},
                    details=details, settings=s, plots={"intervals": figure_png(rep.plot())})


# -- explanation controls (trustlab.explain) ------------------------------------------------------------------
def _explanation_controls(a: AuditInputs, s: dict[str, Any]) -> CheckOutcome:
    from trustlab.core.optional import is_available
    from trustlab.explain import explain

    if not is_available("shap"):
        return _skip("explanation_controls", "needs shap (pip install 'trustlab[audit]')", s)
    if a.R_train.shape[1] < 2:
        return _skip("explanation_controls", "needs at least two features (rank correlations are undefined)", s)
    rows = np.random.default_rng(a.seed).permutation(len(a.y_test))[: int(s["n_rows"])]
    # a plain numeric table: the user's own object, so tree explainers see trees; else the model on its codes
    model = a.raw_model if a.raw_model is not None else a.model.inner
    tr, _ = cap_rows(len(a.y_train), int(s["max_train_rows"]), a.seed, salt=6)  # the data-randomisation refit
    exp = explain(model, a.R_test[rows], X_train=a.R_train[tr], y_train=a.y_train[tr], feature_names=a.schema.columns,
                  n_background=int(s["n_background"]), random_state=a.seed)
    v = exp.verdict
    status = {"PASS": "ok", "FAIL": "flag"}.get(exp.status, "info")
    fails = [c.name for c in v.checks if c.status == "FAIL"]
    headline = (f"SHAP explanation {exp.status}" + (f": {fails} failed" if fails else "") +
                "; " + ", ".join(f"{c.name} {c.status}" + (f" ({c.observed:.3f})" if c.observed is not None else "")
                                 for c in v.checks))
    metrics = {f"controls_{c.name}": float(c.observed) for c in v.checks if c.observed is not None}
    return _outcome("explanation_controls", status, headline, metrics={"controls_failed": len(fails), **metrics},
                    details=[f"{c.name}: {c.status}, threshold {c.threshold}" + (f"; {c.detail}" if c.detail else "")
                             for c in v.checks], settings=s, plots={"explanation": figure_png(exp.plot())})


# -- interpretability gap (split) -----------------------------------------------------------------------------
def _interpretability_gap(a: AuditInputs, s: dict[str, Any]) -> CheckOutcome:
    from matplotlib.figure import Figure

    from trustlab.methods.split import SPLITClassifier

    if a.task == "regression":
        return _skip("interpretability_gap", "SPLIT fits sparse classification trees (binary targets); there is no "
                     "regression tree to compare with", s)
    if len(a.classes) != 2:
        return _skip("interpretability_gap", "SPLIT fits binary targets; this target has "
                     f"{len(a.classes)} classes", s)
    tree = SPLITClassifier(depth_budget=int(s["depth_budget"]), time_limit=float(s["time_limit"]),
                           random_state=a.seed % 2**31)
    tr, cap_note = cap_rows(len(a.y_train), int(s["max_rows"]), a.seed, salt=7)
    tree.fit(a.X_train[tr], a.y_train[tr])
    acc = float(np.mean(tree.predict(a.X_test) == a.y_test))
    gap = a.model_accuracy - acc
    small = gap <= s["max_gap"]
    headline = (f"a depth-{s['depth_budget']} sparse tree (SPLIT) reaches {acc:.3f} vs the model's "
                f"{a.model_accuracy:.3f} (gap {gap:+.3f}): " +
                ("an interpretable model may be enough" if small else "the black box buys accuracy here"))
    fig = Figure(figsize=(4.8, 2.4), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.barh(["model", f"SPLIT depth {s['depth_budget']}"], [a.model_accuracy, acc], color=["#546e7a", "#1565c0"])
    ax.set_xlim(min(acc, a.model_accuracy) - 0.1, 1.0)
    ax.set_xlabel("held-out accuracy")
    return _outcome("interpretability_gap", "info", headline,
                    metrics={"sparse_tree_accuracy": acc, "interpretability_gap": float(gap)},
                    details=[f"tree: {getattr(tree, 'n_leaves_', '?')} leaves"] + ([cap_note] if cap_note else []),
                    settings=s,
                    plots={"accuracy": figure_png(fig)})


CHECKS: dict[str, Callable[[AuditInputs, dict[str, Any]], CheckOutcome]] = {
    "data_quality": data_quality, "leakage": _leakage, "membership": _membership, "multiplicity": _multiplicity,
    "explanation_stability": _explanation_stability, "explanation_controls": _explanation_controls,
    "interpretability_gap": _interpretability_gap, "calibration": calibration, "drift": drift, "fairness": fairness,
}


def run_check(name: str, inputs: AuditInputs, settings: dict[str, Any]) -> CheckOutcome:
    """Run one check; an exception becomes an ``error`` outcome naming it (the other checks still run)."""
    t0 = time.perf_counter()
    try:
        with quiet_feature_names():
            out = CHECKS[name](inputs, settings)
    except Exception as exc:  # noqa: BLE001 - one failing check must not hide the others' findings
        out = _outcome(name, "error", "", reason=f"{type(exc).__name__}: {exc}", settings=settings)
    out.wall_time_s = time.perf_counter() - t0
    return out
