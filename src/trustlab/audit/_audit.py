"""``audit(model, X, y, ...)``: run every applicable check on a user's model and data, return an AuditReport."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from trustlab.audit._checks import CHECKS, DEFAULTS, AuditInputs, run_check
from trustlab.audit._common import quiet_feature_names
from trustlab.audit._gate import AuditCrashError, evaluate_fail_on, parse_fail_on
from trustlab.audit._report import AuditReport
from trustlab.audit._table import TableModel, TableRegressor, TableSchema
from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Satisfies
from trustlab.core.exceptions import InputError, did_you_mean
from trustlab.core.executor import Executor, map_items

__all__ = ["audit", "resolve_checks"]

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


def _check_columns(X: Any, X_test: Any) -> None:
    if hasattr(X, "columns") and hasattr(X_test, "columns") and list(X.columns) != list(X_test.columns):
        missing = [c for c in X.columns if c not in X_test.columns]
        extra = [c for c in X_test.columns if c not in X.columns]
        raise InputError(f"The 'X_test' argument of audit must have the training table's columns in the same order. "
                         f"Missing {missing[:10]}, extra {extra[:10]}" + ("" if missing or extra else " (order differs)")
                         + ".")


def _codes(schema: TableSchema, X: Any, name: str) -> np.ndarray:
    R = schema.to_codes(X, name)
    if R.ndim != 2 or R.shape[0] == 0 or R.shape[1] == 0:
        raise InputError(f"The '{name}' argument of audit must be a non-empty 2-d table. Got shape {R.shape}.")
    if R.shape[1] != len(schema.columns):
        raise InputError(f"The '{name}' argument of audit must have {len(schema.columns)} columns. Got {R.shape[1]}.")
    return R


def _rows(X: Any, y: Any, X_test: Any, y_test: Any, feature_names: Any) -> tuple[TableSchema, np.ndarray, np.ndarray,
                                                                                int]:
    """The table's schema, every row as model codes (training rows first) and the labels."""
    if X_test is not None:
        _check_columns(X, X_test)
    schema = TableSchema.infer([X] if X_test is None else [X, X_test])
    if not schema.frame and feature_names is not None:
        schema.columns = [str(c) for c in feature_names]
    R = _codes(schema, X, "X")
    y = np.asarray(y)
    if len(y) != len(R):
        raise InputError(f"The 'y' argument of audit must have one label per row of X ({len(R)}). Got {len(y)}.")
    if X_test is None:
        return schema, R, y, len(R)
    Rt = _codes(schema, X_test, "X_test")
    yt = np.asarray(y_test)
    if len(yt) != len(Rt):
        raise InputError(f"The 'y_test' argument of audit must have {len(Rt)} labels. Got {len(yt)}.")
    return schema, np.vstack([R, Rt]), np.r_[y, yt], len(R)


def _estimator(model: Any) -> tuple[Any, str]:
    """The estimator (a spec string parsed) and its task: ``"regression"`` for a scikit-learn regressor (a
    ``Pipeline`` ending in one) or a model with ``predict`` but no ``predict_proba``, else ``"classification"``."""
    from sklearn.base import is_regressor

    from trustlab.audit._inputs import parse_estimator

    est = parse_estimator(model) if isinstance(model, str) else model
    try:
        regressor = bool(is_regressor(est))
    except Exception:  # noqa: BLE001 - not a scikit-learn estimator (a torch wrapper): decided by its methods
        regressor = False
    regressor = regressor or (hasattr(est, "predict") and not hasattr(est, "predict_proba"))
    return est, "regression" if regressor else "classification"


def _model(est: Any, spec: bool, schema: TableSchema, R: np.ndarray, y: np.ndarray, classes: list[Any], task: str
           ) -> tuple[Any, Any, bool]:
    """The fitted model on model codes, its refittable twin (None when it cannot be cloned) and whether the
    audit fitted it (``est`` from :func:`_estimator`; ``spec``: it was given as a spec string). A model that raises
    while fitting is an :class:`AuditCrashError` (exit 3)."""
    from sklearn.base import clone

    verb = "predict_proba" if task == "classification" else "predict"
    if not (hasattr(est, verb) and (hasattr(est, "fit") or _is_fitted(est))):
        raise InputError(f"The 'model' argument of audit must be a classifier with predict_proba or a regressor with "
                         f"predict (a scikit-learn estimator or pipeline, a spec string, or a TorchClassifier). Got "
                         f"{type(est).__name__}.")
    wrap = TableModel if task == "classification" else TableRegressor
    if spec or not _is_fitted(est):
        twin = wrap(clone(est), schema)
        try:
            return clone(twin).fit(R, y), twin, True
        except Exception as exc:  # noqa: BLE001 - the user's estimator failed: exit 3, named
            raise AuditCrashError(f"The model raised while fitting on the training rows: {type(exc).__name__}: "
                                  f"{exc}{_hint(schema)}") from exc
    try:
        twin = wrap(clone(est), schema)
    except Exception:  # noqa: BLE001 - not clonable (a torch wrapper): checks that refit are skipped
        twin = None
    n_in = getattr(est, "n_features_in_", None)
    if n_in is not None and n_in != len(schema.columns):
        raise InputError(f"The 'model' argument of audit expects {n_in} features (n_features_in_) but the data has "
                         f"{len(schema.columns)} columns ({schema.columns[:10]}). Pass the table the model was "
                         "trained on.")
    if task == "regression":
        return wrap.fitted(est, schema), twin, False
    unknown = [c for c in classes if c not in list(getattr(est, "classes_", classes))]
    if unknown:
        raise InputError(f"The 'y' argument of audit has label(s) {unknown[:5]} the model does not predict "
                         f"(classes_ = {list(est.classes_)[:10]}).")
    return TableModel.fitted(est, schema), twin, False


def _hint(schema: TableSchema) -> str:
    """Why a bare estimator may fail on this table (for the crash message)."""
    cats = [c for c, k in zip(schema.columns, schema.kinds) if k == "categorical"]
    if not cats and not len(schema.sentinel):
        return ""
    return (f". The table has {'categorical column(s) ' + str(cats[:10]) if cats else 'missing values'}: a model that "
            "needs numbers must encode them itself, e.g. a Pipeline with a ColumnTransformer (OneHotEncoder, "
            "SimpleImputer)")


def _prepare(model: Any, X: Any, y: Any, X_test: Any, y_test: Any, feature_names: Any, test_size: float,
             seed: int) -> tuple[TableModel, TableModel | None, dict[str, Any]]:
    """Model codes and the data encoding of every row, encoded labels, the fitted model and its twin."""
    from sklearn.model_selection import train_test_split

    schema, R_all, y_all, n_train = _rows(X, y, X_test, y_test, feature_names)
    est, task = _estimator(model)
    y_all, classes = _target(y_all, task)
    if X_test is None:
        counts = np.unique(y_all, return_counts=True)[1]
        strat = y_all if task == "classification" and counts.min() >= 2 else None
        tr, te = train_test_split(np.arange(len(y_all)), test_size=test_size, random_state=seed % 2**31, stratify=strat)
        tr, te = np.sort(tr), np.sort(te)
    else:
        tr, te = np.arange(n_train), np.arange(n_train, len(y_all))
    Z, names = schema.encode(R_all)
    n_missing = int(np.isnan(R_all).sum())
    if np.isnan(R_all).any():  # the methods need finite arrays: missing values as codes that decode back to NaN
        R_all, schema = schema.with_sentinels(R_all)
    fitted, twin, fitted_by_us = _model(est, isinstance(model, str), schema, R_all[tr], y_all[tr], classes, task)
    enc = np.searchsorted(np.asarray(classes), y_all) if task == "classification" else y_all
    info = {"names": names, "columns": schema.columns, "classes": classes, "tr": tr, "te": te, "task": task,
            "fitted_by_us": fitted_by_us, "schema": schema, "R": R_all, "n_missing": n_missing,
            "membership_known": fitted_by_us or X_test is not None, "split": (
                f"random {1 - test_size:.0%}/{test_size:.0%} split, seed {seed}" if X_test is None else "given test table")}
    return fitted, twin, {"X": Z, "y": enc, **info}


def _target(y: np.ndarray, task: str) -> tuple[np.ndarray, list[Any]]:
    """The target checked for the task, and the sorted class labels (none for regression)."""
    if task == "regression":
        try:
            values = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError("The 'y' argument of audit must hold numbers for a regressor. Got values of dtype "
                             f"{np.asarray(y).dtype} (e.g. {np.asarray(y).ravel()[:3].tolist()}).") from None
        if not np.isfinite(values).all():
            raise InputError(f"The 'y' argument of audit must be finite for a regressor. Got "
                             f"{int((~np.isfinite(values)).sum())} NaN or infinite value(s).")
        if len(np.unique(values)) < 2:
            raise InputError(f"The 'y' argument of audit must vary for a regressor. Got the constant {values[0]!r}.")
        return values, []
    if y.dtype.kind == "f" and not np.all(y == np.round(y)):
        raise InputError(f"The 'y' argument of audit must hold class labels for a classifier; it holds "
                         f"{len(np.unique(y))} distinct non-integer numbers (a regression target): pass a regressor, "
                         "e.g. 'sklearn.ensemble.RandomForestRegressor()', to audit it as regression.")
    classes = sorted(np.unique(y).tolist())
    if len(classes) < 2:
        raise InputError(f"The 'y' argument of audit must have at least two classes. Got only {classes!r}.")
    return y, classes


def _describe(model: Any) -> str:
    text = repr(model).replace("\n", " ")
    return re.sub(r"\s+", " ", text)[:300]


_TABLE = Satisfies(lambda v: getattr(v, "ndim", np.ndim(v) if isinstance(v, list | tuple) else 0) == 2,
                   "a DataFrame or a 2-d array-like", invalid=[3, "x", [1, 2]], valid=np.eye(3))
_LABELS = Satisfies(lambda v: getattr(v, "ndim", np.ndim(v) if isinstance(v, list | tuple) else 0) == 1,
                    "a 1-d array-like of labels (a Series, array or list)", invalid=[3, "x", [[1]]],
                    valid=np.array([0, 1, 0]))


@validate_args(
    _example=lambda: {"model": "sklearn.linear_model.LogisticRegression()", "X": np.eye(6), "y": np.array([0, 1] * 3)},
    model=[Satisfies(lambda m: isinstance(m, str) or hasattr(m, "predict_proba") or hasattr(m, "predict"),
                     "a classifier with predict_proba, a regressor with predict or an estimator spec string",
                     invalid=[3, None, object()])],
    X=[_TABLE], y=[_LABELS], X_test=[None, _TABLE], y_test=[None, _LABELS],
    checks=[InstanceOf(str), SequenceOf(InstanceOf(str))], settings=[None, InstanceOf(dict)],
    fail_on=[InstanceOf(str), SequenceOf(InstanceOf(str))], test_size=[Interval(float, 0, 1, closed="neither")],
    feature_names=[None, SequenceOf(InstanceOf(str))], executor=[None, InstanceOf(Executor)],
    sensitive=[SequenceOf(InstanceOf(str), min_len=0)], progress=["boolean"], command=[InstanceOf(str)],
    random_state=["random_state"])
def audit(model: Any, X: Any, y: Any, *, X_test: Any = None, y_test: Any = None, checks: str | Sequence[str] = "all",
          settings: dict[str, dict[str, Any]] | None = None, fail_on: str | Sequence[str] = "",
          test_size: float = 0.3, feature_names: Sequence[str] | None = None, executor: Executor | None = None,
          sensitive: Sequence[str] = (), progress: bool = False, command: str = "", random_state: Any = 0
          ) -> AuditReport:
    """Audit a classifier or a regressor and its data with every applicable check (see ``CHECKS``, docs/audit.md).

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
    sensitive : columns of ``X`` whose groups the fairness check compares (at most 50 distinct values each).
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
    with isolated_global_rng(seed), quiet_feature_names():
        fitted, twin, d = _prepare(model, X, y, X_test, y_test, feature_names, test_size, seed)
        inputs = _inputs(fitted, twin, d, seed, progress)
        inputs.sensitive = _sensitive(d, list(sensitive))
        outcomes = map_items(executor, lambda name: run_check(name, inputs, merged[name]), names, seed=seed,
                             desc="audit checks", show_progress=progress)
    tr, te = d["tr"], d["te"]
    report = AuditReport(
        checks=outcomes,
        model={"description": _describe(fitted.estimator_), "type": type(fitted.estimator_).__name__,
               "origin": "fitted by trustlab on the training rows" if d["fitted_by_us"] else "given fitted"},
        data={"n_train": len(tr), "n_test": len(te), "n_features": len(d["columns"]), "features": d["columns"],
              "encoded_features": len(d["names"]), "categorical": [c for c, k in zip(d["columns"], d["schema"].kinds)
                                                                   if k == "categorical"],
              "missing_values": d["n_missing"], "task": d["task"], "classes": d["classes"], "split": d["split"],
              "target": getattr(y, "name", None) or "y"},
        provenance=_provenance(command, seed, d, time.perf_counter() - t0, names))
    report.policy = [str(r) for r in rules]
    report.policy_failures = evaluate_fail_on(report, rules)
    return report


def _sensitive(d: dict[str, Any], columns: list[str]) -> dict[str, Any]:
    """The held-out rows' values of each sensitive column (decoded from the model codes: the user's values)."""
    schema = d["schema"]
    bad = [c for c in columns if c not in schema.columns]
    if bad:
        raise InputError(f"The 'sensitive' argument of audit must name columns of X. Got {bad[0]!r}."
                         f"{did_you_mean(bad[0], schema.columns)}")
    if not columns:
        return {}
    table = schema.decode(d["R"][d["te"]])
    out = {}
    for c in columns:
        values = np.asarray(table[c] if schema.frame else table[:, schema.columns.index(c)], dtype=object)
        values = np.where(np.asarray([v is None or v != v for v in values]), "missing", values)
        if len(set(values.tolist())) > 50:
            raise InputError(f"The 'sensitive' argument of audit: column {c!r} has {len(set(values.tolist()))} distinct "
                             "values on the held-out rows; a group column needs at most 50 (bin it first).")
        out[c] = values
    return out


def _inputs(fitted: TableModel, twin: TableModel | None, d: dict[str, Any], seed: int, progress: bool) -> AuditInputs:
    """What the checks see; the model's held-out accuracy (a model that raises here is an AuditCrashError)."""
    tr, te, schema = d["tr"], d["te"], d["schema"]
    same_space = len(d["names"]) == len(d["columns"]) and not schema.has_categoricals
    model = _Encoded(fitted, d["classes"], same_space) if d["task"] == "classification" else \
        _EncodedRegressor(fitted, same_space)
    inputs = AuditInputs(model=model, estimator=twin, X_train=d["X"][tr], task=d["task"],
                         y_train=d["y"][tr], X_test=d["X"][te], y_test=d["y"][te], feature_names=d["names"],
                         classes=list(range(len(d["classes"]))), seed=seed, membership_known=d["membership_known"],
                         train_rows=tr, test_rows=te, progress=progress)
    inputs.R_train, inputs.R_test, inputs.schema = d["R"][tr], d["R"][te], schema
    plain = same_space and not d["n_missing"] and type(fitted.estimator_).__name__ != "Pipeline"
    inputs.raw_model = fitted.estimator_ if plain else None  # tree explainers see the user's own trees
    try:
        if d["task"] == "classification":
            inputs.model_accuracy = float(np.mean(inputs.proba(inputs.R_test).argmax(1) == inputs.y_test))
        else:
            inputs.model_r2 = _r2(inputs.y_test, inputs.predict(inputs.R_test))
    except AuditCrashError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's model failed: exit 3, named
        raise AuditCrashError(f"The model raised while predicting the held-out rows: {type(exc).__name__}: {exc}"
                              ) from exc
    return inputs


def _copy_importances(wrapper: Any, model: Any, same_space: bool) -> None:
    """Give ``wrapper`` the user's ``feature_importances_``, which index the data encoding only when it is the table."""
    imp = getattr(getattr(model, "estimator_", model), "feature_importances_", None)
    if imp is not None and same_space:
        wrapper.feature_importances_ = imp


class _Encoded:
    """The user's model seen with labels ``0..C-1`` (columns of predict_proba in the order of the sorted labels),
    so every check works on encoded labels whatever the model's own classes are."""

    def __init__(self, model: Any, classes: list[Any], same_space: bool = True):
        self.inner = model
        self.classes_ = np.arange(len(classes))
        own = list(getattr(model, "classes_", classes))
        self._order = [classes.index(c) for c in own]
        self._n = len(classes)
        _copy_importances(self, model, same_space)

    def predict_proba(self, X: Any) -> np.ndarray:
        P = np.asarray(self.inner.predict_proba(X), dtype=np.float64)
        out = np.zeros((len(P), self._n))
        out[:, self._order] = P
        return out

    def predict(self, X: Any) -> np.ndarray:
        return self.predict_proba(X).argmax(1)


class _EncodedRegressor:
    """The user's regressor on model codes, with its feature importances where they index the data encoding."""

    def __init__(self, model: Any, same_space: bool = True):
        self.inner = model
        _copy_importances(self, model, same_space)

    def predict(self, X: Any) -> np.ndarray:
        return np.asarray(self.inner.predict(X), dtype=np.float64).reshape(len(X))


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    from sklearn.metrics import r2_score

    pred = np.asarray(pred, dtype=np.float64)
    if not np.isfinite(pred).all():
        raise AuditCrashError(f"The model predicted {int((~np.isfinite(pred)).sum())} NaN or infinite value(s) on the "
                              "held-out rows.")
    return float(r2_score(y, pred))


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
