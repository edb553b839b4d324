"""``audit(model, X, y, ...)``: run every applicable check on a user's model and data, return an AuditReport."""

from __future__ import annotations

import operator
import re
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from trustlab.audit._checks import CHECKS, DEFAULTS, AuditInputs, run_check
from trustlab.audit._report import AuditReport
from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Satisfies
from trustlab.core.exceptions import InputError, did_you_mean
from trustlab.core.executor import Executor, map_items
from trustlab.core.validation import non_numeric_columns

__all__ = ["audit", "parse_fail_on", "evaluate_fail_on", "resolve_checks"]

_OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt}
_RULE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|==|!=|>|<)\s*([-+0-9.eE]+|inf)\s*$")


@validate_args(policy=[InstanceOf(str), SequenceOf(InstanceOf(str))])
def parse_fail_on(policy: str | Sequence[str]) -> list[tuple[str, str, float]]:
    """Parse a fail-on policy: ``"membership_auc>0.6,duplicate_rows>0"`` (or a list of such rules; ``"any"`` means
    ``flagged>0``) into ``(metric, operator, threshold)`` triples. A rule fails the audit when it holds."""
    items = [p for part in ([policy] if isinstance(policy, str) else policy) for p in part.split(",") if p.strip()]
    out = []
    for item in items:
        if item.strip() == "any":
            out.append(("flagged", ">", 0.0))
            continue
        m = _RULE.match(item)
        if not m:
            raise InputError(f"The 'policy' argument of parse_fail_on must be rules like 'membership_auc>0.6' "
                             f"(metric, one of {list(_OPS)}, a number) or 'any'. Got {item!r} instead.")
        out.append((m.group(1), m.group(2), float(m.group(3))))
    return out


@validate_args(_example=lambda: {"report": None, "rules": []},
               report=[Satisfies(lambda r: r is None or isinstance(r, AuditReport), "an AuditReport", invalid=[3, "x"])],
               rules=[InstanceOf(list, tuple)])
def evaluate_fail_on(report: AuditReport | None, rules: Sequence[tuple[str, str, float]]) -> list[str]:
    """The rules that hold for the report's metrics (each as ``"membership_auc=0.71 > 0.6"``). A metric of a check
    that was skipped does not fail the policy; an unknown metric name is an ``InputError`` ("did you mean")."""
    if report is None:
        return []
    metrics = report.metrics
    known = set(metrics) | {k for c in _metric_names().values() for k in c}
    failures = []
    for name, op, thr in rules:
        if name not in known:
            raise InputError(f"The 'fail_on' rule names an unknown metric {name!r}.{did_you_mean(name, sorted(known))} "
                             f"Metrics: {sorted(known)}.")
        if name in metrics and metrics[name] is not None and _OPS[op](float(metrics[name]), thr):
            failures.append(f"{name}={float(metrics[name]):.4g} {op} {thr:g}")
    return failures


def _metric_names() -> dict[str, list[str]]:
    """Metric names each check can report (so a policy on a skipped check is not a typo)."""
    return {"data_quality": ["duplicate_rows", "near_duplicate_rows", "suspect_labels", "suspect_label_share"],
            "leakage": ["leakage_best_accuracy", "model_accuracy", "leakage_gap", "leaky_features"],
            "membership": ["membership_auc", "membership_auc_rmia", "membership_auc_threshold_loss",
                           "membership_tpr_at_fpr_rmia", "membership_tpr_at_fpr_threshold_loss"],
            "multiplicity": ["arbitrariness", "mean_prediction_std", "unstable_points", "accuracy_spread"],
            "explanation_stability": ["unstable_features", "defensible_pipelines"],
            "explanation_controls": ["controls_failed"],
            "interpretability_gap": ["sparse_tree_accuracy", "interpretability_gap"]}


@validate_args(checks=[InstanceOf(str), SequenceOf(InstanceOf(str))])
def resolve_checks(checks: str | Sequence[str] = "all") -> list[str]:
    """``"all"`` or a comma-separated / listed subset of ``CHECKS`` (in the report's order)."""
    items = [p.strip() for part in ([checks] if isinstance(checks, str) else checks) for p in part.split(",") if p.strip()]
    if not items or items == ["all"]:
        return list(CHECKS)
    bad = [c for c in items if c not in CHECKS]
    if bad:
        raise InputError(f"The 'checks' argument of audit must be 'all' or names from {list(CHECKS)}. Got {bad[0]!r} "
                         f"instead.{did_you_mean(bad[0], CHECKS)}")
    return [c for c in CHECKS if c in items]


def _is_fitted(model: Any) -> bool:
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    if not hasattr(model, "get_params"):
        return True  # not a scikit-learn estimator (e.g. a TorchClassifier): given as trained
    try:
        check_is_fitted(model)
    except NotFittedError:
        return False
    except TypeError:
        return True
    return True


def _features(X: Any, name: str, names: list[str] | None) -> tuple[np.ndarray, list[str]]:
    import pandas as pd

    if isinstance(X, pd.DataFrame):
        bad = non_numeric_columns(X)
        if bad:
            raise InputError(f"The '{name}' argument of audit has {bad}. The audit's data checks need numeric features: "
                             "encode the table first (e.g. pd.get_dummies) and fit the model on the encoded columns.")
        cols = [str(c) for c in X.columns]
        arr = X.to_numpy(dtype=np.float64)
    else:
        arr = np.asarray(X, dtype=np.float64) if np.asarray(X).dtype.kind in "biuf" else None
        if arr is None:
            raise InputError(f"The '{name}' argument of audit must hold numbers. Got dtype {np.asarray(X).dtype}.")
        cols = names or [f"x{j}" for j in range(arr.shape[1])]
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(f"The '{name}' argument of audit must be a non-empty 2-d table. Got shape {arr.shape}.")
    if not np.isfinite(arr).all():
        raise InputError(f"The '{name}' argument of audit has {int((~np.isfinite(arr)).sum())} missing or infinite "
                         "value(s); impute or drop them first.")
    return arr, cols


def _prepare(model: Any, X: Any, y: Any, X_test: Any, y_test: Any, feature_names: Any, test_size: float,
             seed: int) -> tuple[Any, Any, dict[str, Any]]:
    """Numeric arrays, encoded labels, the fitted model and its refittable twin."""
    from sklearn.base import clone
    from sklearn.model_selection import train_test_split

    from trustlab.audit._inputs import parse_estimator

    Xa, names = _features(X, "X", feature_names)
    y = np.asarray(y)
    if len(y) != len(Xa):
        raise InputError(f"The 'y' argument of audit must have one label per row of X ({len(Xa)}). Got {len(y)}.")
    if X_test is not None:
        if hasattr(X, "columns") and hasattr(X_test, "columns") and list(X.columns) != list(X_test.columns):
            missing = [c for c in X.columns if c not in X_test.columns]
            extra = [c for c in X_test.columns if c not in X.columns]
            raise InputError(f"The 'X_test' argument of audit must have the training table's columns in the same order. "
                             f"Missing {missing[:10]}, extra {extra[:10]}" + ("" if missing or extra else " (order differs)")
                             + ".")
        Xt, _ = _features(X_test, "X_test", names)
        if Xt.shape[1] != Xa.shape[1]:
            raise InputError(f"The 'X_test' argument of audit must have {Xa.shape[1]} columns. Got {Xt.shape[1]}.")
        yt = np.asarray(y_test)
        if len(yt) != len(Xt):
            raise InputError(f"The 'y_test' argument of audit must have {len(Xt)} labels. Got {len(yt)}.")
        tr, te = np.arange(len(Xa)), np.arange(len(Xa), len(Xa) + len(Xt))
        X_all, y_all = np.vstack([Xa, Xt]), np.r_[y, yt]
    else:
        X_all, y_all = Xa, y
    classes = sorted(np.unique(y_all).tolist())
    if len(classes) < 2:
        raise InputError(f"The 'y' argument of audit must have at least two classes. Got only {classes!r}.")
    if X_test is None:
        counts = np.unique(y_all, return_counts=True)[1]
        strat = y_all if counts.min() >= 2 else None
        tr, te = train_test_split(np.arange(len(y_all)), test_size=test_size, random_state=seed % 2**31, stratify=strat)
        tr, te = np.sort(tr), np.sort(te)
    spec = isinstance(model, str)
    est = parse_estimator(model) if spec else model
    if not (hasattr(est, "predict_proba") and (hasattr(est, "fit") or _is_fitted(est))):
        raise InputError(f"The 'model' argument of audit must be a classifier with predict_proba (a scikit-learn "
                         f"estimator or pipeline, a spec string, or a TorchClassifier). Got {type(est).__name__}.")
    fitted_by_us = spec or not _is_fitted(est)
    if fitted_by_us:
        twin = clone(est)
        est = clone(est).fit(X_all[tr], y_all[tr])
    else:
        try:
            twin = clone(est)
        except Exception:  # noqa: BLE001 - not clonable (a torch wrapper): checks that refit are skipped
            twin = None
        n_in = getattr(est, "n_features_in_", None)
        if n_in is not None and n_in != Xa.shape[1]:
            raise InputError(f"The 'model' argument of audit expects {n_in} features (n_features_in_) but the data has "
                             f"{Xa.shape[1]} columns ({names[:10]}). Pass the table the model was trained on.")
        unknown = [c for c in classes if c not in list(getattr(est, "classes_", classes))]
        if unknown:
            raise InputError(f"The 'y' argument of audit has label(s) {unknown[:5]} the model does not predict "
                             f"(classes_ = {list(est.classes_)[:10]}).")
    enc = np.searchsorted(np.asarray(classes), y_all)
    info = {"names": names, "classes": classes, "tr": tr, "te": te, "fitted_by_us": fitted_by_us,
            "membership_known": fitted_by_us or X_test is not None, "split": (
                f"random {1 - test_size:.0%}/{test_size:.0%} split, seed {seed}" if X_test is None else "given test table")}
    return est, twin, {"X": X_all, "y": enc, **info}


def _describe(model: Any) -> str:
    text = repr(model).replace("\n", " ")
    return re.sub(r"\s+", " ", text)[:300]


@validate_args(
    _example=lambda: {"model": "sklearn.linear_model.LogisticRegression()", "X": np.eye(6), "y": np.array([0, 1] * 3)},
    model=[Satisfies(lambda m: isinstance(m, str) or hasattr(m, "predict_proba"),
                     "a classifier with predict_proba or an estimator spec string", invalid=[3, None, object()])],
    X="no_validation", y="no_validation", X_test="no_validation", y_test="no_validation",
    checks=[InstanceOf(str), SequenceOf(InstanceOf(str))], settings=[None, InstanceOf(dict)],
    fail_on=[InstanceOf(str), SequenceOf(InstanceOf(str))], test_size=[Interval(float, 0, 1, closed="neither")],
    feature_names=[None, SequenceOf(InstanceOf(str))], executor=[None, InstanceOf(Executor)],
    progress=["boolean"], command=[InstanceOf(str)], random_state=["random_state"])
def audit(model: Any, X: Any, y: Any, *, X_test: Any = None, y_test: Any = None, checks: str | Sequence[str] = "all",
          settings: dict[str, dict[str, Any]] | None = None, fail_on: str | Sequence[str] = "",
          test_size: float = 0.3, feature_names: Sequence[str] | None = None, executor: Executor | None = None,
          progress: bool = False, command: str = "", random_state: Any = 0) -> AuditReport:
    """Audit a classifier and its data with every applicable check (see ``CHECKS`` and docs/audit.md).

    Parameters
    ----------
    model : fitted or unfitted scikit-learn classifier/pipeline, estimator spec string, or TorchClassifier
        An unfitted estimator or a spec (``"sklearn.ensemble.RandomForestClassifier(n_estimators=200)"``) is fitted
        on the training rows. A fitted model is audited as given; checks that refit use ``sklearn.base.clone``.
    X, y : DataFrame/array (numeric) and labels: the training rows.
    X_test, y_test : held-out rows; without them, ``test_size`` of the rows are held out (for a fitted model the
        membership check is then skipped: trustlab cannot know which rows it was trained on).
    checks : "all" or names; settings : per-check overrides of ``DEFAULTS``; fail_on : policy rules
        (:func:`parse_fail_on`), recorded on the report (``report.policy_failures``).
    executor : run the checks as independent tasks (``trustlab.core.executor``; e.g. a process pool or Ray).
    random_state : int, Generator or None (one int seed is drawn from it and recorded).
    """
    from trustlab.core.seeding import as_seed, isolated_global_rng

    seed = as_seed(random_state)
    names = resolve_checks(checks)
    rules = parse_fail_on(fail_on) if fail_on else []
    merged = {k: dict(v) for k, v in DEFAULTS.items()}
    for key, over in (settings or {}).items():
        if key not in merged:
            raise InputError(f"The 'settings' argument of audit has an unknown check {key!r}.{did_you_mean(key, merged)}")
        unknown = [k for k in over if k not in merged[key]]
        if unknown:
            raise InputError(f"The 'settings' argument of audit: check {key!r} has no setting {unknown[0]!r} "
                             f"(settings: {list(merged[key])}).{did_you_mean(unknown[0], merged[key])}")
        merged[key].update(over)
    t0 = time.perf_counter()
    with isolated_global_rng(seed), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        warnings.filterwarnings("ignore", message="X has feature names")
        fitted, twin, d = _prepare(model, X, y, X_test, y_test, feature_names, test_size, seed)
        tr, te = d["tr"], d["te"]
        inputs = AuditInputs(model=_Encoded(fitted, d["classes"]), estimator=twin, X_train=d["X"][tr], y_train=d["y"][tr], X_test=d["X"][te],
                             y_test=d["y"][te], feature_names=d["names"], classes=list(range(len(d["classes"]))),
                             seed=seed, membership_known=d["membership_known"], train_rows=tr, test_rows=te,
                             progress=progress)
        inputs.raw_model = fitted
        inputs.model_accuracy = float(np.mean(inputs.proba(inputs.X_test).argmax(1) == inputs.y_test))
        outcomes = map_items(executor, lambda name: run_check(name, inputs, merged[name]), names, seed=seed,
                             desc="audit checks", show_progress=progress)
    report = AuditReport(
        checks=outcomes,
        model={"description": _describe(fitted), "origin": "fitted by trustlab on the training rows" if d["fitted_by_us"]
               else "given fitted", "type": type(fitted).__name__},
        data={"n_train": len(tr), "n_test": len(te), "n_features": len(d["names"]), "features": d["names"],
              "classes": d["classes"], "split": d["split"], "target": getattr(y, "name", None) or "y"},
        provenance=_provenance(command, seed, d, time.perf_counter() - t0, names))
    report.policy = [f"{n}{op}{thr:g}" for n, op, thr in rules]
    report.policy_failures = evaluate_fail_on(report, rules)
    return report


class _Encoded:
    """The user's model seen with labels ``0..C-1`` (columns of predict_proba in the order of the sorted labels),
    so every check works on encoded labels whatever the model's own classes are."""

    def __init__(self, model: Any, classes: list[Any]):
        self.inner = model
        self.classes_ = np.arange(len(classes))
        own = list(getattr(model, "classes_", classes))
        self._order = [classes.index(c) for c in own]
        self._n = len(classes)
        for attr in ("feature_importances_", "n_features_in_"):
            if hasattr(model, attr):
                setattr(self, attr, getattr(model, attr))

    def predict_proba(self, X: Any) -> np.ndarray:
        P = np.asarray(self.inner.predict_proba(X), dtype=np.float64)
        out = np.zeros((len(P), self._n))
        out[:, self._order] = P
        return out

    def predict(self, X: Any) -> np.ndarray:
        return self.predict_proba(X).argmax(1)


def _provenance(command: str, seed: int, d: dict[str, Any], wall: float, names: list[str]) -> dict[str, Any]:
    import importlib.metadata as md
    import platform

    from trustlab.core.hashing import content_hash

    versions = {"python": platform.python_version()}
    for dist in ("trustlab", "numpy", "scikit-learn", "shap", "optuna", "skops", "torch"):
        try:
            versions[dist] = md.version(dist)
        except md.PackageNotFoundError:
            continue
    return {"command": command or "trustlab.audit.audit(...)", "versions": versions, "seed": seed,
            "data_hash": content_hash(d["X"], d["y"]), "checks_run": names, "wall_time_s": round(wall, 2),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
