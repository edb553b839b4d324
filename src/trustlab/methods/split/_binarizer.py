"""Threshold-guessing binarization (McTavish et al., AAAI 2022), as SPLIT uses it.

A gradient-boosted ensemble of shallow trees is fitted on the *training* data; every threshold its trees
split on becomes one binary column ``x_j <= t``. Optional column elimination refits the ensemble on the
binary columns and drops the least important column while the training accuracy does not fall below
the accuracy reached with all of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted as _sk_check_is_fitted

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import AnyValue, Interval, Options, validate_params
from trustlab.core.exceptions import InputError, NotFittedError
from trustlab.core.seeding import spawn_seed
from trustlab.core.validation import check_array, check_X_y

__all__ = ["ThresholdGuessBinarizer", "reduce_columns"]


def reduce_columns(Xb: Any) -> np.ndarray:
    """Indices of the binary columns worth searching: non-constant, and one per group of duplicate or
    complementary columns (they induce the same partitions, so no tree objective changes)."""
    B = np.asarray(Xb).astype(bool, copy=False)
    n, p = B.shape
    if n == 0 or p == 0:
        return np.zeros(0, dtype=np.int64)
    packed = np.packbits(np.ascontiguousarray(B.T), axis=1, bitorder="little")  # (p, ceil(n/8)) bytes
    pad = (-packed.shape[1]) % 8
    if pad:
        packed = np.concatenate([packed, np.zeros((p, pad), dtype=np.uint8)], axis=1)
    words = packed.view(np.uint64)  # (p, W)
    full = np.packbits(np.ones(n, dtype=bool), bitorder="little")
    full = np.concatenate([full, np.zeros(pad if pad else (-len(full)) % 8, dtype=np.uint8)]).view(np.uint64)
    canon = np.where((words[:, :1] & np.uint64(1)).astype(bool), words ^ full[None, :], words)
    ones = np.bitwise_count(words).sum(1)
    nonconst = np.nonzero((ones > 0) & (ones < n))[0]
    if nonconst.size == 0:
        return nonconst
    rows = canon[nonconst]
    mult = np.random.default_rng(7).integers(1, 2**63, size=rows.shape[1], dtype=np.uint64) | np.uint64(1)
    h = (rows * mult[None, :]).sum(1, dtype=np.uint64)
    _, first, inv = np.unique(h, return_index=True, return_inverse=True)
    if not np.array_equal(rows[first][inv.ravel()], rows):  # a hash collision: exact comparison instead
        _, first = np.unique(rows, axis=0, return_index=True)
    return nonconst[np.sort(first)]


def _float32_safe_scale(X: np.ndarray) -> np.ndarray:
    """Per-column powers of two that bring columns whose magnitudes lie outside float32's range (beyond
    2**64 or below 2**-64) to about 1. Scaling by a power of two is exact, so split orderings and the
    mapped-back thresholds are unchanged; columns inside the range keep scale 1."""
    m = np.max(np.abs(X), axis=0) if X.size else np.zeros(X.shape[1])
    out = np.ones(X.shape[1])
    odd = (m > 2.0**64) | ((m > 0) & (m < 2.0**-64))
    out[odd] = np.ldexp(1.0, np.frexp(m[odd])[1])
    return out


class ThresholdGuessBinarizer(TransformerMixin, BaseEstimator):
    """Binary columns ``x_j <= t`` at the thresholds a gradient-boosting ensemble uses.

    Fit it on training data only; :meth:`transform` then applies the same thresholds to any data.

    Parameters
    ----------
    n_estimators : int, default=50
        Boosting rounds of the threshold-guessing ensemble (SPLIT's ``gbdt_n_est``).
    max_depth : int, default=1
        Depth of each boosted tree (SPLIT's ``gbdt_max_depth``; 1 = stumps).
    learning_rate : float, default=0.1
        Learning rate of the ensemble.
    column_elimination : bool, default=False
        Drop the least important binary column while the training accuracy of an ensemble refitted on
        the remaining columns does not fall below the all-columns accuracy (the reference's default is
        True; it costs one refit per dropped column).
    drop_redundant : bool, default=True
        Drop columns that are constant on the training data or duplicate (or complement) an earlier
        column there: they add no distinct split.
    random_state : int, numpy Generator or None, default=None
        Seed of the ensemble.
    output : {"auto", "numpy", "pandas"}, default="auto"
        What :meth:`transform` returns: ``"numpy"`` a ``uint8`` array; ``"pandas"`` a DataFrame of ``uint8``
        columns named by :meth:`get_feature_names_out` (``"worst radius <= 16.795"``); ``"auto"`` a DataFrame
        when ``X`` is a DataFrame and an array otherwise. With ``"auto"``, a pipeline
        ``make_pipeline(ThresholdGuessBinarizer(), SPLITClassifier())`` fitted on a DataFrame passes the
        binary column names to the tree, which then prints exactly as when SPLIT binarizes by itself.
        (scikit-learn's ``set_output(transform="pandas")`` works as well.)

    Attributes
    ----------
    thresholds_ : list of (int, float)
        ``(input column, threshold)`` of every output column, in output order.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` had string column names.
    n_features_out_ : int

    References
    ----------
    McTavish, Zhong, Achermann, Karimalis, Chen, Rudin, Seltzer. "Fast Sparse Decision Tree Optimization
    via Reference Ensembles", AAAI 2022.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> enc = ThresholdGuessBinarizer(n_estimators=20, random_state=0).fit(X, y)
    >>> enc.transform(X).shape[1] == enc.n_features_out_
    True
    """

    _constraints = {
        "n_estimators": [Interval(int, 1, None)],
        "max_depth": [Interval(int, 1, None)],
        "learning_rate": [Interval(float, 0, None, closed="neither")],
        "column_elimination": ["boolean"],
        "drop_redundant": ["boolean"],
        "random_state": ["random_state"],
        "output": [Options(["auto", "numpy", "pandas"])],
    }

    def __init__(self, *, n_estimators: int = 50, max_depth: int = 1, learning_rate: float = 0.1,
                 column_elimination: bool = False, drop_redundant: bool = True, random_state: Any = None,
                 output: str = "auto") -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.column_elimination = column_elimination
        self.drop_redundant = drop_redundant
        self.random_state = random_state
        self.output = output

    def _gbdt(self) -> Any:
        from sklearn.ensemble import GradientBoostingClassifier

        return GradientBoostingClassifier(loss="log_loss", learning_rate=self.learning_rate,
                                          n_estimators=self.n_estimators, max_depth=self.max_depth,
                                          random_state=self._seed)

    @validate_args(X=[AnyValue("checked by check_X_y (InputError naming X)")],
                   y=[AnyValue("checked by check_X_y (InputError naming y)")])
    def fit(self, X: Any, y: Any) -> ThresholdGuessBinarizer:
        validate_params(type(self).__name__, self.get_params(deep=False), self._constraints)
        names = getattr(X, "columns", None)
        X, y = check_X_y(X, y, owner=type(self).__name__, allow_complex=False)
        X = X.astype(np.float64)
        rs = self.random_state
        self._seed = spawn_seed(rs) if isinstance(rs, np.random.Generator) else rs
        if len(np.unique(y)) < 2:
            raise InputError(f"The 'y' argument of {type(self).__name__} must contain at least 2 classes. "
                             f"Got only {np.unique(y).tolist()}.")
        self.n_features_in_ = X.shape[1]
        if names is not None and all(isinstance(c, str) for c in names):
            self.feature_names_in_ = np.asarray(list(names), dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        scale = _float32_safe_scale(X)
        gb = self._gbdt().fit(X / scale, y)  # scikit-learn's trees work in float32
        found: set[tuple[int, float]] = set()
        for est in np.asarray(gb.estimators_).ravel():
            t = est.tree_
            internal = t.children_left >= 0
            for f, thr in zip(t.feature[internal], t.threshold[internal]):
                found.add((int(f), float(thr) * float(scale[f])))
        thresholds = sorted(found)
        if not thresholds:  # nothing to split on: keep one column that is constant
            thresholds = [(0, float(np.max(X[:, 0])))]
        if self.column_elimination and len(thresholds) > 1:
            thresholds = self._eliminate(X, y, thresholds)
        if self.drop_redundant:
            keep = reduce_columns(self._apply(X, thresholds))
            thresholds = [thresholds[i] for i in keep] if keep.size else thresholds[:1]
        self.thresholds_ = thresholds
        self.n_features_out_ = len(thresholds)
        return self

    def _eliminate(self, X: np.ndarray, y: np.ndarray, thresholds: list[tuple[int, float]]) -> list[tuple[int, float]]:
        keep = list(thresholds)
        Xb = self._apply(X, keep)
        gb = self._gbdt().fit(Xb, y)
        target = gb.score(Xb, y)
        while len(keep) > 1:
            drop = int(np.argmin(gb.feature_importances_))
            trial = keep[:drop] + keep[drop + 1:]
            Xt = self._apply(X, trial)
            gb_t = self._gbdt().fit(Xt, y)
            if gb_t.score(Xt, y) < target:
                break
            keep, gb = trial, gb_t
        return keep

    @staticmethod
    def _apply(X: np.ndarray, thresholds: list[tuple[int, float]]) -> np.ndarray:
        cols = np.array([j for j, _ in thresholds], dtype=np.int64)
        thr = np.array([t for _, t in thresholds], dtype=np.float64)
        return (X[:, cols] <= thr[None, :]).astype(np.uint8)

    @validate_args(X=[AnyValue("checked by check_array (InputError naming X)")])
    def transform(self, X: Any) -> np.ndarray:
        """0/1 matrix of shape ``(n_samples, n_features_out_)`` (``uint8``; a DataFrame, see ``output``)."""
        try:
            _sk_check_is_fitted(self, "thresholds_")
        except Exception as exc:  # sklearn's NotFittedError -> ours
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet. Call 'fit' first.") from exc
        index = getattr(X, "index", None)
        frame = hasattr(X, "columns") and index is not None
        X = check_array(X, owner=type(self).__name__, allow_complex=False)
        if X.shape[1] != self.n_features_in_:
            raise InputError(f"The 'X' argument of {type(self).__name__} must have {self.n_features_in_} features, "
                             f"as seen in fit. Got {X.shape[1]} instead.")
        out = self._apply(X.astype(np.float64), self.thresholds_)
        if self.output == "pandas" or (self.output == "auto" and frame):
            import pandas as pd

            return pd.DataFrame(out, columns=list(self.get_feature_names_out()), index=index)
        return out

    @validate_args(input_features=[None, ArrayLike(ndim=1, dtype="any", finite=False)])
    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """``"<input name> <= <threshold>"`` for every output column."""
        _sk_check_is_fitted(self, "thresholds_")
        if input_features is None:
            input_features = getattr(self, "feature_names_in_", None)
        if input_features is None:
            input_features = [f"x{j}" for j in range(self.n_features_in_)]
        return np.asarray([f"{input_features[j]} <= {t:.6g}" for j, t in self.thresholds_], dtype=object)
