"""Time-series loaders over aeon's bundled UCR/UEA data (no network) and the user's own .ts files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf, Options
from trustlab.core.exceptions import AssetNotFoundError, InputError, UnknownNameError, did_you_mean
from trustlab.core.optional import require
from trustlab.data._base import Dataset

__all__ = [ "load_timeseries",]


def _bundled_dir() -> Path:
    aeon_datasets = require("aeon.datasets", extra="ts", purpose="time-series data")
    return Path(aeon_datasets.__file__).parent / "data"


@validate_args()
def list_timeseries() -> list[str]:
    """Names of the classification/regression sets aeon ships with a TRAIN and a TEST ``.ts`` file."""
    root = _bundled_dir()
    return sorted(
        d.name for d in root.iterdir()
        if d.is_dir() and (d / f"{d.name}_TRAIN.ts").exists() and (d / f"{d.name}_TEST.ts").exists()
    )


@validate_args(path=[InstanceOf(str, os.PathLike)], name=[InstanceOf(str), None])
def load_ts_file(path: str | Path, *, name: str | None = None) -> Dataset:
    """Load a ``.ts`` file (the UCR/UEA format) from the user's disk: X is (n, channels, length)."""
    p = Path(path)
    if not p.exists():
        raise AssetNotFoundError(f"The 'path' argument of load_ts_file points to a missing file: {str(p)!r}.")
    from aeon.datasets import load_from_ts_file

    X, y = load_from_ts_file(str(p))
    if isinstance(X, list):
        raise InputError(f"{p.name} holds series of unequal length; trustlab loaders need equal lengths.")
    return Dataset(
        X=np.asarray(X, dtype=np.float64), y=np.asarray(y), name=name or p.stem,
        description=f"time series from {p.name}", provenance={"source": str(p.resolve())},
    )


@validate_args(name=[InstanceOf(str)], split=[Options(("train", "test", "all"))])
def load_timeseries(name: str, split: str = "train") -> Dataset:
    """Load one of aeon's bundled sets by name, ``split`` in {"train", "test", "all"}.

    Examples
    --------
    >>> ds = load_timeseries("GunPoint", "train")  # doctest: +SKIP
    >>> ds.X.shape  # doctest: +SKIP
    (50, 1, 150)
    """
    names = list_timeseries()
    if name not in names:
        raise UnknownNameError(
            f"Unknown bundled time-series set '{name}'.{did_you_mean(name, names)} "
            f"aeon ships: {', '.join(names)}. Pass your own file to load_ts_file()."
        )
    root = _bundled_dir() / name
    parts = ["TRAIN", "TEST"] if split == "all" else [split.upper()]
    loaded = [load_ts_file(root / f"{name}_{s}.ts", name=name) for s in parts]
    X = np.concatenate([d.X for d in loaded])
    y = np.concatenate([d.y for d in loaded])
    import aeon

    return Dataset(
        X=X, y=y, name=name, target_names=sorted(map(str, np.unique(y))) if y.dtype.kind in "OUS" else None,
        description=f"{name} ({split}) from aeon's bundled UCR/UEA archive copy",
        provenance={"source": f"aeon.datasets data/{name}", "aeon": aeon.__version__, "split": split},
    )
