"""Unlearning data container, forget-index validation and the small SGD training loop used by AMUN.

Indices are *global*: ``X``/``y`` hold a pool (for example all 1,797 digits), ``train_idx`` the points the
original model was trained on and ``test_idx`` the held-out ones. Forget indices must be a subset of
``train_idx``; the retain set D_R is ``train_idx`` minus the forget set.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.optional import require
from trustlab.core.seeding import as_seed, seed_alias
from trustlab.models import MLP, TrainConfig, TrainingDivergedError, fit_model, predict_logits

torch = require("torch", purpose="trustlab.methods.amun")

__all__ = ["UnlearningData", "SGDSpec", "sgd_train", "check_forget_idx", "as_unlearning_data",
           "UnlearningDivergedError"]


class UnlearningDivergedError(TrainingDivergedError):
    """A fine-tuning loss became NaN or infinite (typically gradient ascent with too large a learning rate)."""


@dataclass(frozen=True)
class UnlearningData:
    """A pool of labelled inputs with the original model's train / test split.

    Parameters
    ----------
    X : array (n, ...) of inputs inside ``input_range``.
    y : array (n,) of integer labels in ``0..num_classes-1``.
    train_idx : indices of the original training set (default: every point).
    test_idx : indices of held-out points (default: none). Must not overlap ``train_idx``.
    input_range : (lo, hi) box of valid inputs; adversarial examples are clamped to it.
    num_classes : number of classes (default: ``max(y) + 1``).
    """

    X: Any
    y: Any
    train_idx: Any = None
    test_idx: Any = None
    input_range: tuple[float, float] = (0.0, 1.0)
    num_classes: int | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    @validate_args(forget_idx=[ArrayLike(ndim=1, dtype="integer", low=0, min_len=0)])
    def retain_idx(self, forget_idx: np.ndarray) -> np.ndarray:
        return np.setdiff1d(np.asarray(self.train_idx), forget_idx)


def as_int64(arr: np.ndarray, rule: str) -> np.ndarray:
    """``arr`` as int64, accepting whole-valued finite floats; otherwise InputError ``"{rule}. Got dtype ..."``."""
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        return arr.astype(np.int64)
    raise InputError(f"{rule}. Got dtype {arr.dtype}.")


def _int_index(values: Any, name: str, owner: str, n: int, *, allow_empty: bool) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InputError(f"The '{name}' argument of {owner} must be a 1-d array of indices. Got shape {arr.shape}.")
    if arr.size == 0:
        if allow_empty:
            return arr.astype(np.int64)
        raise InputError(f"The '{name}' argument of {owner} must be non-empty.")
    if arr.dtype.kind == "b":
        raise InputError(f"The '{name}' argument of {owner} must hold integer indices, not a boolean mask.")
    arr = as_int64(arr, f"The '{name}' argument of {owner} must hold integer indices")
    if arr.min() < 0 or arr.max() >= n:
        bad = arr[(arr < 0) | (arr >= n)][:5].tolist()
        raise InputError(f"The '{name}' argument of {owner} has indices out of range [0, {n}): {bad}.")
    if len(np.unique(arr)) != len(arr):
        vals, counts = np.unique(arr, return_counts=True)
        raise InputError(f"The '{name}' argument of {owner} has duplicated indices: {vals[counts > 1][:5].tolist()}.")
    return arr


def as_unlearning_data(data: Any, owner: str) -> UnlearningData:
    """Validate ``data`` (an :class:`UnlearningData` or an ``(X, y)`` pair) and return a normalised copy."""
    if isinstance(data, tuple | list) and len(data) == 2:
        data = UnlearningData(X=data[0], y=data[1])
    if not isinstance(data, UnlearningData):
        raise InputError(f"The 'data' argument of {owner} must be an UnlearningData or an (X, y) pair. "
                         f"Got {type(data).__name__}.")
    X = np.asarray(data.X)
    if X.dtype.kind not in "fiu" or X.ndim < 2:
        raise InputError(f"The 'X' of {owner}'s data must be a numeric array of ndim >= 2. Got {X.dtype}, {X.shape}.")
    X = X.astype(np.float32)
    n = len(X)
    if n < 2:
        raise InputError(f"The data of {owner} must hold at least 2 points. Got {n}.")
    if not np.all(np.isfinite(X)):
        raise InputError(f"The 'X' of {owner}'s data contains NaN or infinite values.")
    y = np.asarray(data.y)
    if y.ndim != 1 or len(y) != n:
        raise InputError(f"The 'y' of {owner}'s data must be 1-d with {n} labels. Got shape {y.shape}.")
    y = as_int64(y, f"The 'y' of {owner}'s data must hold integer class labels")
    k = int(y.max()) + 1 if data.num_classes is None else data.num_classes
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 2:
        raise InputError(f"The 'num_classes' of {owner}'s data must be an int >= 2. Got {data.num_classes!r}.")
    if y.min() < 0 or y.max() >= k:
        raise InputError(f"The labels of {owner}'s data must lie in [0, {k}). Got range [{y.min()}, {y.max()}].")
    lo, hi = (float(v) for v in data.input_range)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise InputError(f"The 'input_range' of {owner}'s data must be finite (lo, hi) with lo < hi. Got {data.input_range}.")
    tol = 1e-6 * (hi - lo)
    if X.min() < lo - tol or X.max() > hi + tol:
        raise InputError(
            f"The inputs of {owner}'s data lie outside the declared input_range {(lo, hi)} "
            f"(min {float(X.min()):.4g}, max {float(X.max()):.4g}); rescale them or declare the right range."
        )
    X = np.clip(X, lo, hi)
    train = np.arange(n) if data.train_idx is None else _int_index(data.train_idx, "train_idx", owner, n,
                                                                   allow_empty=False)
    test = np.zeros(0, np.int64) if data.test_idx is None else _int_index(data.test_idx, "test_idx", owner, n,
                                                                          allow_empty=True)
    if np.intersect1d(train, test).size:
        raise InputError(f"The train_idx and test_idx of {owner}'s data overlap.")
    return UnlearningData(X=X, y=y, train_idx=np.sort(train), test_idx=np.sort(test), input_range=(lo, hi),
                          num_classes=int(k), meta=dict(data.meta))


def check_forget_idx(forget_idx: Any, data: UnlearningData, owner: str) -> np.ndarray:
    """Validate forget indices against a validated ``data``: non-empty, unique, in range, inside
    ``train_idx`` (so never in ``test_idx``) and leaving at least one retained point."""
    n = len(data.X)
    f = _int_index(forget_idx, "forget_idx", owner, n, allow_empty=False)
    overlap = np.intersect1d(f, data.test_idx)
    if overlap.size:
        raise InputError(f"The 'forget_idx' argument of {owner} overlaps the test set at {overlap[:5].tolist()}; "
                         "only training points can be forgotten.")
    outside = np.setdiff1d(f, data.train_idx)
    if outside.size:
        raise InputError(f"The 'forget_idx' argument of {owner} holds points that are not in the training set: "
                         f"{outside[:5].tolist()}.")
    if len(f) >= len(data.train_idx):
        raise InputError(f"The 'forget_idx' argument of {owner} covers the whole training set; nothing would be "
                         "retained (retrain from scratch on nothing is undefined).")
    return np.sort(f)


@dataclass(frozen=True)
class SGDSpec:
    """The SGD recipe of the original model, Retrain and the reference models: ``lr_step`` epochs per StepLR
    drop by ``gamma`` (None = constant lr). :meth:`train_config` turns it into a
    :class:`trustlab.models.TrainConfig` for the shared training loop."""

    epochs: int = 60
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 0.0
    batch_size: int = 64
    lr_step: int | None = None
    gamma: float = 0.1

    @seed_alias
    @validate_args(random_state=["random_state"], num_threads=[Interval(int, 1, None), None],
                   target_accuracy=[Interval("real", 0, 1, closed="right"), None])
    def train_config(self, random_state: Any = 0, num_threads: int | None = 1,
                     target_accuracy: float | None = None) -> TrainConfig:
        """The :class:`trustlab.models.TrainConfig` of this recipe, seeded by ``random_state`` (an int is kept, a
        Generator or None drawn once; ``seed=`` is its deprecated name)."""
        return TrainConfig(epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, weight_decay=self.weight_decay,
                           optimizer="sgd", momentum=self.momentum, lr_step=self.lr_step, gamma=self.gamma,
                           target_accuracy=target_accuracy, seed=as_seed(random_state), num_threads=num_threads)


#: the rule of every ``model`` argument: a torch module
MODEL_RULE = [Satisfies(lambda m: isinstance(m, torch.nn.Module), "a torch.nn.Module", [None, "not-a-model", 3.5])]
#: a finite number > 0 (``Interval`` admits inf)
POSITIVE_FINITE = Satisfies(lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
                            and v > 0, "a finite float > 0", ["x", 0.0, -1.0, float("inf"), float("nan")], valid=1.0)
#: an input box (lo, hi)
RANGE_RULE = Satisfies(lambda v: len(v) == 2 and all(math.isfinite(float(b)) for b in v) and float(v[0]) < float(v[1]),
                       "a pair (lo, hi) of finite floats with lo < hi", [(1.0, 0.0), (0.0, float("inf")), "abc", None],
                       valid=(0.0, 1.0))


def check_finite(loss: Any, owner: str, what: str) -> None:
    """Raise :class:`UnlearningDivergedError` when a loss is NaN or infinite."""
    if not bool(np.isfinite(float(loss))):
        raise UnlearningDivergedError(
            f"{owner}: the {what} loss became {float(loss)}; the model diverged. Lower 'lr' or 'epochs' "
            "(the weights were restored)."
        )


def _sgd_example() -> dict[str, Any]:
    return {"model": MLP(2, 2, hidden=(2,)), "X": np.zeros((4, 2)), "y": np.array([0, 1, 0, 1])}


@seed_alias
@validate_args(_sgd_example, model=MODEL_RULE, X=[ArrayLike(ndim=(2, 3, 4))],
               y=[ArrayLike(ndim=1, dtype="integer", low=0)], spec=[InstanceOf(SGDSpec), None],
               random_state=["random_state"], num_threads=[Interval(int, 1, None), None],
               target_accuracy=[Interval("real", 0, 1, closed="right"), None])
def sgd_train(model: Any, X: Any, y: Any, spec: SGDSpec | None = None, *, random_state: Any = 0,
              num_threads: int | None = 1, target_accuracy: float | None = None) -> Any:
    """Train ``model`` with cross-entropy and SGD(momentum) by ``spec``; deterministic by ``random_state`` (an int;
    ``seed=`` is its deprecated name).

    Returns a :class:`~trustlab.models.TrainHistory` (a dataclass; it used to be a dict).

    The loop is :func:`trustlab.models.fit_model` (one loop for every trainer): ``train_loss`` per epoch and
    ``wall_time_s``; the model is left in eval mode; a non-finite loss raises :class:`UnlearningDivergedError`.
    ``target_accuracy`` stops after the first epoch whose training accuracy reaches it (at most
    ``spec.epochs``).
    """
    spec = spec or SGDSpec()
    try:
        return fit_model(model, X, y, spec.train_config(random_state, num_threads, target_accuracy))
    except TrainingDivergedError as exc:
        raise UnlearningDivergedError(f"sgd_train: {exc}") from exc


def logits_of(model: Any, X: Any) -> np.ndarray:
    """Eval-mode logits as float64 in one batch of 2048 (the mode is restored); validated inputs only."""
    return predict_logits(model, X, batch_size=2048, num_threads=None)
