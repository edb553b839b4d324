"""The user's table in the two forms the audit needs.

* **Model codes** ``R`` (float64, one column per table column): numbers as they are (NaN kept), categorical values
  as integer codes (NaN for missing). :meth:`TableSchema.decode` turns ``R`` back into the user's DataFrame (column
  names, dtypes, categories), so :class:`TableModel` can hand the user's own model or ``Pipeline`` exactly the
  table it was built for, while the methods that index, resample and refit see plain arrays.
* **Data encoding** ``Z`` (finite float64) for the data checks (KNN, stumps, trees, drift): numbers imputed with
  the column median plus a ``col=missing`` indicator where a column has NaN; categoricals one-hot (at most
  ``max_onehot`` categories, missing as its own category) or, above that, their frequency rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone

from trustlab.core.exceptions import InputError

__all__ = ["TableSchema", "TableModel", "TableRegressor"]


def _is_categorical(series: Any) -> bool:
    import pandas as pd

    dt = series.dtype
    return not (pd.api.types.is_numeric_dtype(dt) or pd.api.types.is_bool_dtype(dt))


@dataclass
class TableSchema:
    """Columns, kinds (``numeric``/``categorical``), original dtypes and categories of the user's table."""

    columns: list[str]
    kinds: list[str]
    dtypes: list[Any]
    categories: list[list[Any]]
    frame: bool = True
    sentinel: list[float] = field(default_factory=list)

    @classmethod
    def infer(cls, frames: list[Any], name: str = "X") -> TableSchema:
        """From the training table (and the test table): categories are the union of both, in order of first
        appearance. A non-DataFrame input must be numeric."""
        import pandas as pd

        first = frames[0]
        if not isinstance(first, pd.DataFrame):
            arr = np.asarray(first)
            if arr.ndim != 2 or arr.dtype.kind not in "biuf":
                raise InputError(f"The '{name}' argument of audit must be a DataFrame or a 2-d numeric array. Got "
                                 f"dtype {arr.dtype}, shape {arr.shape}.")
            p = arr.shape[1]
            return cls([f"x{j}" for j in range(p)], ["numeric"] * p, [np.dtype(np.float64)] * p, [[]] * p, False)
        both = pd.concat(frames, axis=0, ignore_index=True)
        kinds, cats = [], []
        for col in both.columns:
            s = both[col]
            cat = _is_categorical(s)
            kinds.append("categorical" if cat else "numeric")
            cats.append([v for v in pd.unique(s.dropna())] if cat else [])
        return cls([str(c) for c in first.columns], kinds, list(first.dtypes), cats, True)

    @property
    def has_categoricals(self) -> bool:
        return "categorical" in self.kinds

    def to_codes(self, X: Any, name: str = "X") -> np.ndarray:
        """``R``: the table as float64 model codes (see the module docstring); refuses infinite values."""
        import pandas as pd

        if not self.frame:
            R = np.asarray(X, dtype=np.float64)
        else:
            R = np.empty((len(X), len(self.columns)))
            for j, (col, kind) in enumerate(zip(X.columns, self.kinds)):
                s = X[col]
                if kind == "numeric":
                    R[:, j] = s.to_numpy(dtype=np.float64, na_value=np.nan)
                else:
                    codes = pd.Categorical(s, categories=self.categories[j]).codes
                    R[:, j] = np.where(codes < 0, np.nan, codes)
        if np.isinf(R).any():
            bad = [self.columns[j] for j in np.flatnonzero(np.isinf(R).any(0))]
            raise InputError(f"The '{name}' argument of audit has infinite values in column(s) {bad[:10]}; replace "
                             "them (missing values, NaN, are supported).")
        return R

    def decode(self, R: Any) -> Any:
        """The user's table from model codes: a DataFrame with the original columns and dtypes (codes are
        rounded and clipped to a category, so perturbed codes map to the nearest one; values below a column's
        ``sentinel`` are missing)."""
        import pandas as pd

        R = np.asarray(R, dtype=np.float64)
        if len(self.sentinel):
            R = np.where(R <= np.asarray(self.sentinel), np.nan, R)
        if not self.frame:
            return R
        data = {}
        for j, (col, kind) in enumerate(zip(self.columns, self.kinds)):
            v = R[:, j]
            if kind == "categorical":
                cats = np.asarray(self.categories[j] + [np.nan], dtype=object)
                codes = np.where(np.isnan(v), len(cats) - 1, np.clip(np.rint(np.nan_to_num(v)), 0, len(cats) - 2))
                vals = cats[codes.astype(int)]
                data[col] = (pd.Categorical(vals, categories=self.dtypes[j].categories, ordered=self.dtypes[j].ordered)
                             if isinstance(self.dtypes[j], pd.CategoricalDtype) else
                             pd.array(vals, dtype=self.dtypes[j]) if str(self.dtypes[j]).startswith("str") else vals)
            elif np.isnan(v).any() or self.dtypes[j].kind == "f":
                data[col] = v
            else:
                data[col] = v.astype(self.dtypes[j])
        return pd.DataFrame(data, columns=self.columns)

    def with_sentinels(self, R: np.ndarray) -> tuple[np.ndarray, TableSchema]:
        """``R`` with NaN replaced by a value below each column's range, and a schema that decodes it back to NaN
        (for methods that need finite inputs but only substitute whole values, such as SHAP's maskers)."""
        lo = np.nan_to_num(np.nanmin(R, axis=0), nan=0.0)
        span = np.nan_to_num(np.nanmax(R, axis=0), nan=0.0) - lo
        sentinel = lo - 10.0 * (span + 1.0)
        out = np.where(np.isnan(R), sentinel, R)
        schema = TableSchema(self.columns, self.kinds, self.dtypes, self.categories, self.frame,
                             (sentinel + 5.0 * (span + 1.0)).tolist())
        return out, schema

    def encode(self, R: np.ndarray, max_onehot: int = 10) -> tuple[np.ndarray, list[str]]:
        """``Z``: the finite data encoding of model codes ``R`` for the data checks, and its column names."""
        cols, names = [], []
        for j, (col, kind) in enumerate(zip(self.columns, self.kinds)):
            v = R[:, j]
            miss = np.isnan(v)
            if kind == "numeric":
                cols.append(np.where(miss, np.nanmedian(v) if (~miss).any() else 0.0, v))
                names.append(col)
            elif len(self.categories[j]) <= max_onehot:
                for i, cat in enumerate(self.categories[j]):
                    cols.append((v == i).astype(np.float64))
                    names.append(f"{col}={cat}")
            else:
                counts = np.bincount(np.nan_to_num(v, nan=0).astype(int)[~miss], minlength=len(self.categories[j]))
                rank = np.argsort(np.argsort(-counts, kind="stable"), kind="stable").astype(np.float64)
                cols.append(np.where(miss, -1.0, rank[np.nan_to_num(v, nan=0).astype(int)]))
                names.append(f"{col} (frequency rank)")
            if miss.any():
                cols.append(miss.astype(np.float64))
                names.append(f"{col}=missing")
        return np.column_stack(cols), names


class _TableEstimator(BaseEstimator):
    """The user's estimator on model codes (the parameters and the wrapping of a fitted one)."""

    def __init__(self, estimator: Any = None, schema: TableSchema | None = None, random_state: Any = None):
        self.estimator = estimator
        self.schema = schema
        self.random_state = random_state

    @classmethod
    def fitted(cls, model: Any, schema: TableSchema) -> Any:
        """Wrap an already fitted model (audited as given)."""
        out = cls(model, schema)
        out.estimator_ = model
        if hasattr(model, "classes_") or isinstance(out, ClassifierMixin):
            out.classes_ = np.asarray(getattr(model, "classes_", []))
        return out


class TableModel(ClassifierMixin, _TableEstimator):
    """The user's estimator seen on model codes ``R``: ``fit``/``predict_proba`` decode ``R`` to the user's table
    first. Clonable (``sklearn.base.clone`` gives an unfitted copy of the user's estimator inside), so the checks
    that refit (membership references, multiplicity, label issues, explanation controls) refit the user's
    own pipeline on the user's own columns. ``random_state`` (when not None) is set on every ``random_state``
    of the inner estimator before fitting, so code that seeds refits through ``random_state`` seeds the user's."""

    def fit(self, X: Any, y: Any) -> TableModel:
        self.estimator_ = _seeded_fit(self.estimator, self.random_state, self.schema.decode(X), y)
        self.classes_ = np.asarray(self.estimator_.classes_)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        return np.asarray(self.estimator_.predict_proba(self.schema.decode(X)), dtype=np.float64)

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[self.predict_proba(X).argmax(1)]


def _seeded_fit(estimator: Any, random_state: Any, X: Any, y: Any) -> Any:
    """A clone of ``estimator`` with every ``random_state`` set (when not None), fitted on ``X, y``."""
    est = clone(estimator)
    if random_state is not None and hasattr(est, "get_params"):
        keys = [k for k in est.get_params() if k == "random_state" or k.endswith("__random_state")]
        est.set_params(**dict.fromkeys(keys, random_state))
    return est.fit(X, y)


class TableRegressor(RegressorMixin, _TableEstimator):
    """:class:`TableModel` for a regressor: ``fit``/``predict`` decode model codes ``R`` to the user's table first;
    clonable, and ``random_state`` seeds every ``random_state`` of the inner estimator."""

    def fit(self, X: Any, y: Any) -> TableRegressor:
        self.estimator_ = _seeded_fit(self.estimator, self.random_state, self.schema.decode(X), y)
        return self

    def predict(self, X: Any) -> np.ndarray:
        return np.asarray(self.estimator_.predict(self.schema.decode(X)), dtype=np.float64).reshape(len(X))
