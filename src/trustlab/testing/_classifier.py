"""The common check of classifier semantics under scikit-learn (issue 43).

scikit-learn reads a binary classifier's scores through two rules: ``decision_function`` is positive for
``classes_[1]``, and ``predict_proba``'s columns follow ``classes_``. A classifier that breaks either rule gives
right numbers when called directly and wrong ones inside ``cross_val_score(scoring="roc_auc")`` or
``GridSearchCV`` (which then picks the worst settings). :func:`check_classifier_semantics` fits the classifier on
string labels in both orders (the class the signal points to sorting last, then first) and asserts that the
``roc_auc`` scorer, ``cross_val_score`` and ``GridSearchCV`` agree with the AUROC computed directly from
``predict_proba``'s column of the true positive class, and that ``predict`` is ``classes_[argmax(predict_proba)]``.
An inverted score can only be told apart where the classifier ranks the check's rows away from chance (the
toy in tests/broken.py does; a method whose test inputs are too small to learn from passes the agreement
trivially and is still checked for the column order).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import clone

from trustlab.testing._inputs import default_inputs, role_of

__all__ = ["check_classifier_semantics"]

#: (label of y == 0, label of y == 1) pairs: the signal's class sorts last, then first
DEFAULT_LABEL_ORDERS: tuple[tuple[Any, Any, dict[str, Any]], ...] = (("a", "b", {}), ("b", "a", {}))
#: AUROCs that must agree differ at most this much (the same ranking gives the same AUROC; an inverted score
#: gives 1 - AUROC, far away on the check's learnable task)
TOLERANCE = 0.02


def _binary(inputs: dict[str, Any]) -> tuple[Any, np.ndarray]:
    """The check's inputs with y reduced to two classes (the two most frequent, rows of others dropped)."""
    X, y = inputs["X"], np.asarray(inputs["y"])
    values, counts = np.unique(y, return_counts=True)
    if len(values) == 2:
        return X, (y == values[1]).astype(int)
    keep_vals = values[np.argsort(-counts, kind="stable")[:2]]
    keep = np.isin(y, keep_vals)
    idx = np.nonzero(keep)[0]
    X = X[idx] if hasattr(X, "__getitem__") and not isinstance(X, list) else [X[i] for i in idx]
    return X, (y[keep] == max(keep_vals)).astype(int)


def _direct_auc(est: Any, X: Any, labels: np.ndarray, positive: Any) -> float:
    """AUROC of ``labels == positive`` against the probability column of ``positive`` (found by name in ``classes_``)."""
    from sklearn.metrics import roc_auc_score

    col = int(np.nonzero(np.asarray(est.classes_) == positive)[0][0])
    return float(roc_auc_score(labels == positive, est.predict_proba(X)[:, col]))


def _folds(y01: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    from sklearn.model_selection import StratifiedKFold

    return list(StratifiedKFold(n_splits=3, shuffle=True, random_state=0).split(np.zeros(len(y01)), y01))


def _take(X: Any, idx: np.ndarray) -> Any:
    return [X[i] for i in idx] if isinstance(X, list) else X[idx]


def check_classifier_semantics(est: Any) -> None:
    """Binary classifiers: scikit-learn's ``roc_auc`` scorer, ``cross_val_score`` and ``GridSearchCV`` agree with
    the directly computed AUROC, for string labels in both orders (see the module docstring)."""
    if role_of(est) != "predictor":
        return
    from sklearn.metrics import get_scorer
    from sklearn.model_selection import GridSearchCV, cross_val_score

    X, y01 = _binary(default_inputs(est))
    folds = _folds(y01)
    name = type(est).__name__
    for neg, pos, params in type(est).get_tags().get("test_label_orders", DEFAULT_LABEL_ORDERS):
        labels = np.where(y01 == 1, pos, neg).astype(object if not isinstance(pos, str) else str)
        base = clone(est).set_params(**params)
        e = clone(base).fit(X, labels)
        where = f"{name} with labels {neg!r} (y=0) / {pos!r} (y=1), classes_ = {list(e.classes_)}"
        direct = _direct_auc(e, X, labels, pos)
        P, pred = e.predict_proba(X), np.asarray(e.predict(X))
        clear = np.sort(P, axis=1)[:, -1] - np.sort(P, axis=1)[:, -2] > 1e-9  # rows without a tied top class
        from_proba = np.asarray(e.classes_)[P.argmax(axis=1)]
        assert np.array_equal(pred[clear], from_proba[clear]), (
            f"{where}: predict disagrees with classes_[argmax(predict_proba)] on "
            f"{int((pred[clear] != from_proba[clear]).sum())} of {int(clear.sum())} rows: predict_proba's columns "
            "do not follow classes_")
        # the scorer reads classes_[1]'s score; the AUROC of one class with its score is that of the other class
        # with the negated score, so a classifier that follows the rules gives the direct AUROC in both orders
        scored = float(get_scorer("roc_auc")(e, X, labels))
        assert abs(scored - direct) <= TOLERANCE, (
            f"{where}: the roc_auc scorer reads {scored:.3f}, the direct AUROC from "
            f"predict_proba is {direct:.3f}: decision_function or predict_proba is not oriented to classes_")
        manual = [_direct_auc(clone(base).fit(_take(X, tr), labels[tr]), _take(X, te), labels[te], pos)
                  for tr, te in folds]
        cv = cross_val_score(clone(base), X, labels, cv=folds, scoring="roc_auc")
        assert np.allclose(cv, manual, atol=TOLERANCE), (
            f"{where}: cross_val_score(scoring='roc_auc') gives {np.round(cv, 3).tolist()}, the direct AUROC per "
            f"fold {np.round(manual, 3).tolist()}")
        first = next(iter(sorted(base.get_params(deep=False))))
        gs = GridSearchCV(clone(base), {first: [base.get_params(deep=False)[first]]}, cv=folds, scoring="roc_auc")
        best = float(gs.fit(X, labels).best_score_)
        assert abs(best - float(np.mean(manual))) <= TOLERANCE, (
            f"{where}: GridSearchCV's best_score_ {best:.3f} differs from the mean direct AUROC "
            f"{np.mean(manual):.3f}")
