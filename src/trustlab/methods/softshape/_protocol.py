"""The two evaluation protocols: P1 the standard UCR train/test split, P2 the paper's merged 5-fold
60/20/20 split (StratifiedKFold(5) over train+test; inside each fold's 80 %, the first split of
StratifiedKFold(4) gives train/validation)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import InstanceOf, Interval
from trustlab.core.exceptions import InputError
from trustlab.core.seeding import as_seed

__all__ = ["Split", "p1_split", "p2_splits", "evaluate", "FitScore"]


@dataclass(frozen=True)
class Split:
    """Index arrays into the (merged) data; ``val`` may be empty (P1)."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    fold: int = 0


@dataclass(frozen=True)
class FitScore:
    """What :func:`evaluate` measured: test ``accuracy`` and ``fit_s`` seconds of fitting."""

    accuracy: float
    fit_s: float


@validate_args(n_train=[Interval(int, 1, None)], n_test=[Interval(int, 1, None)])
def p1_split(n_train: int, n_test: int) -> Split:
    """Indices into ``concat(train, test)`` for the standard UCR split."""
    return Split(np.arange(n_train), np.arange(0), np.arange(n_train, n_train + n_test))


@validate_args(y=[ArrayLike(ndim=1, dtype="any")], n_folds=[Interval(int, 2, None)],
               random_state=["random_state"], max_folds=[None, Interval(int, 1, None)])
def p2_splits(y: Any, n_folds: int = 5, *, random_state: Any = 0, max_folds: int | None = None
              ) -> Iterator[Split]:
    """The paper's protocol on merged data: fold f tests on 1/n_folds, and splits the rest 3:1 into
    train/validation (60/20/20 for 5 folds). Raises InputError when a class has fewer members than folds."""
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(y)
    _, counts = np.unique(y, return_counts=True)
    if len(counts) < 2:
        raise InputError(f"p2_splits needs at least 2 classes. Got {len(counts)}.")
    if counts.min() < n_folds:
        raise InputError(f"p2_splits: every class needs at least n_folds={n_folds} members for StratifiedKFold. "
                         f"The smallest class has {int(counts.min())}; use fewer folds.")
    random_state = as_seed(random_state)  # the outer and inner folds share one int seed, as before
    outer = StratifiedKFold(n_folds, shuffle=True, random_state=random_state)
    for f, (rest, test) in enumerate(outer.split(np.zeros(len(y)), y)):
        if max_folds is not None and f >= max_folds:
            return
        _, rc = np.unique(y[rest], return_counts=True)
        inner_k = max(2, min(n_folds - 1, int(rc.min())))
        inner = StratifiedKFold(inner_k, shuffle=True, random_state=random_state)
        tr, va = next(iter(inner.split(np.zeros(len(rest)), y[rest])))
        yield Split(rest[tr], rest[va], test, f)


def _example_split() -> dict[str, Any]:
    return {"split": Split(np.arange(2), np.arange(0), np.arange(2, 4))}


@validate_args(_example=_example_split, make=["callable"], X=[ArrayLike(ndim=(2, 3), finite=False)],
               y=[ArrayLike(ndim=1, dtype="any")], split=[InstanceOf(Split)])
def evaluate(make: Callable[[], Any], X: np.ndarray, y: np.ndarray, split: Split) -> FitScore:
    """Fit ``make()`` on the split's train and validation parts and return its test accuracy and fit
    seconds. The indices of ``split`` must lie inside ``X``."""
    import time

    X, y = np.asarray(X), np.asarray(y)
    top = max((int(a.max()) for a in (split.train, split.val, split.test) if a.size), default=-1)
    if len(X) != len(y) or top >= len(X):
        raise InputError(f"The 'X' ({len(X)} series) and 'y' ({len(y)} labels) arguments of evaluate must have the "
                         f"same length and cover the split's indices (largest {top}).")
    est = make()
    idx = np.concatenate([split.train, split.val])
    t0 = time.perf_counter()
    est.fit(X[idx], y[idx])
    fit_s = time.perf_counter() - t0
    acc = float(np.mean(est.predict(X[split.test]) == y[split.test]))
    return FitScore(accuracy=acc, fit_s=fit_s)
