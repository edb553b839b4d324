"""One minimal, deterministic minibatch loop (no Lightning) that every small-model trainer in trustlab uses.

* :func:`train_epoch` -- one pass of minibatch gradient steps over ``(X, y)`` in an order drawn from a local
  ``torch.Generator``; options for a signed loss (gradient ascent), an extra loss term (an l1 penalty), a hook
  after ``backward`` (gradient masks) and a check of every step's loss. ``fit_model`` and the unlearning
  methods of ``trustlab.methods.amun`` are all built on it.
* :func:`fit_model` -- epochs of :func:`train_epoch` with Adam or SGD (momentum, StepLR), early stopping on a
  validation loss or stopping at a training accuracy, thread limits restored on exit.
* :func:`predict_logits`, :func:`predict_proba`, :func:`evaluate` -- eval-mode inference (mode restored).

Nothing global is changed: torch's global RNG is seeded only inside
:func:`~trustlab.core.seeding.isolated_global_rng` (for dropout) and restored afterwards.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Satisfies, validate_value
from trustlab.core.exceptions import InputError, TrustlabError
from trustlab.core.optional import require
from trustlab.core.seeding import isolated_global_rng
from trustlab.core.threads import limit_threads
from trustlab.core.validation import check_array, check_X_y

torch = require("torch", purpose="trustlab.models")

__all__ = ["TrainConfig", "TrainHistory", "TrainingDivergedError", "fit_model", "train_epoch", "make_optimizer",
           "device_of", "evaluate", "predict_proba", "predict_logits"]


class TrainingDivergedError(TrustlabError, FloatingPointError):
    """A training loss became NaN or infinite (lower the learning rate or the number of epochs)."""


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of :func:`fit_model`.

    ``optimizer`` "adam" or "sgd" (with ``momentum``); ``lr_step`` > 0 multiplies the lr by ``gamma`` every
    ``lr_step`` epochs (StepLR); ``patience`` > 0 enables early stopping on the validation loss (best weights
    are restored); ``target_accuracy`` stops after the first epoch whose training-set accuracy reaches it
    (e.g. "retrain until as accurate as the original model"). ``num_threads`` limits torch and BLAS threads
    for the duration of the call (restored afterwards; None leaves them alone). ``seed`` seeds the batch
    order (a local generator) and, inside an isolated scope, the global RNG that dropout draws from.
    """

    epochs: int = 30
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    optimizer: str = "adam"
    momentum: float = 0.0
    lr_step: int | None = None
    gamma: float = 0.1
    patience: int = 0
    target_accuracy: float | None = None
    seed: int = 0
    num_threads: int | None = 1
    progress: bool = False

    def validate(self) -> None:
        own = "TrainConfig"
        validate_value(own, "epochs", self.epochs, [Interval(int, 1, None)])
        validate_value(own, "batch_size", self.batch_size, [Interval(int, 1, None)])
        validate_value(own, "lr", self.lr, [Interval("real", 0, None, closed="neither")])
        validate_value(own, "weight_decay", self.weight_decay, [Interval("real", 0, None)])
        validate_value(own, "optimizer", self.optimizer, [{"adam", "sgd"}])
        validate_value(own, "momentum", self.momentum, [Interval("real", 0, 1, closed="left")])
        validate_value(own, "lr_step", self.lr_step, [Interval(int, 1, None), None])
        validate_value(own, "gamma", self.gamma, [Interval("real", 0, 1, closed="right")])
        validate_value(own, "patience", self.patience, [Interval(int, 0, None)])
        validate_value(own, "target_accuracy", self.target_accuracy, [Interval("real", 0, 1, closed="right"), None])
        validate_value(own, "seed", self.seed, [Interval(int, 0, 2**32 - 1)])
        validate_value(own, "num_threads", self.num_threads, [Interval(int, 1, None), None])
        validate_value(own, "progress", self.progress, ["boolean"])


@dataclass
class TrainHistory:
    """What :func:`fit_model` did: per-epoch losses/accuracies and where and why training stopped.

    ``train_loss``: mean training loss per epoch; ``val_loss``/``val_acc``: per epoch when validation data
    was given; ``train_acc``: per epoch when ``target_accuracy`` was set; ``best_epoch``: the restored epoch
    under early stopping (else the last); ``stopped_early``: early stopping or the accuracy target ended
    training before ``epochs``; ``wall_time_s``: the call's wall time.
    """

    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    val_acc: list[float] = field(default_factory=list)
    train_acc: list[float] = field(default_factory=list)
    best_epoch: int = -1
    stopped_early: bool = False
    wall_time_s: float = 0.0

    @property
    def epochs_run(self) -> int:
        return len(self.train_loss)


_MODULE = [Satisfies(lambda m: isinstance(m, torch.nn.Module), "a torch.nn.Module", [None, "not-a-model", 3.5])]
_CONFIG = [InstanceOf(TrainConfig), None]


@validate_args(model=_MODULE)
def device_of(model: Any) -> Any:
    """The device of a module's first parameter (CPU for a module without parameters)."""
    p = next(iter(model.parameters()), None)
    return p.device if p is not None else torch.device("cpu")


def _tiny_model_example() -> dict[str, Any]:
    from trustlab.models.nets import MLP

    return {"model": MLP(2, 2, hidden=(2,)), "cfg": TrainConfig()}


@validate_args(_tiny_model_example, model=_MODULE, cfg=[InstanceOf(TrainConfig)])
def make_optimizer(model: Any, cfg: TrainConfig) -> tuple[Any, Any]:
    """The optimizer (Adam, or SGD with momentum) and StepLR scheduler (None without ``lr_step``) of ``cfg``.

    Examples
    --------
    >>> from trustlab.models import MLP, TrainConfig, make_optimizer
    >>> opt, sched = make_optimizer(MLP(4, 2, hidden=(3,)), TrainConfig(optimizer="sgd", lr=0.1, lr_step=5))
    >>> type(opt).__name__, type(sched).__name__
    ('SGD', 'StepLR')
    """
    cfg.validate()
    if cfg.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=cfg.lr_step, gamma=cfg.gamma) if cfg.lr_step else None
    return opt, sched


def _example_epoch() -> dict[str, Any]:
    from trustlab.models.nets import MLP

    net = MLP(2, 2, hidden=(2,))
    return {"model": net, "X": torch.zeros(4, 2), "y": torch.zeros(4, dtype=torch.long),
            "optimizer": torch.optim.SGD(net.parameters(), lr=0.1), "generator": torch.Generator()}


@validate_args(_example_epoch, model=_MODULE,
               X=[Satisfies(lambda v: isinstance(v, torch.Tensor) and v.ndim >= 2 and len(v) > 0,
                            "a non-empty float tensor of ndim >= 2", [None, "x", 3.0])],
               y=[Satisfies(lambda v: isinstance(v, torch.Tensor) and v.ndim == 1 and v.dtype == torch.long,
                            "a 1-d int64 tensor", [None, "y", 3.0])],
               optimizer=[Satisfies(lambda v: isinstance(v, torch.optim.Optimizer), "a torch optimizer",
                                    [None, "sgd"])],
               batch_size=[Interval(int, 1, None)],
               generator=[Satisfies(lambda v: isinstance(v, torch.Generator), "a torch.Generator", [None, 0])],
               sign=[Interval("real", -1, 1)], loss_fn=["callable", None], after_step=["callable", None],
               extra_loss=["callable", None], after_backward=["callable", None], check_loss=["callable", None])
def train_epoch(model: Any, X: Any, y: Any, optimizer: Any, *, generator: Any, batch_size: int = 64,
                sign: float = 1.0, extra_loss: Callable[[], Any] | None = None,
                after_backward: Callable[[], None] | None = None,
                check_loss: Callable[[Any], None] | None = None,
                loss_fn: Callable[[Any, Any, Any], Any] | None = None,
                after_step: Callable[[float], None] | None = None) -> float:
    """One pass of minibatch gradient steps with cross-entropy over ``(X, y)``; returns the mean loss.

    The order is ``torch.randperm(len(X), generator=generator)``; each step computes
    ``sign * cross_entropy(model(X[b]), y[b]) (+ extra_loss())``, calls ``check_loss(loss)`` (which may
    raise), ``backward``, ``after_backward()`` (e.g. multiply gradients by a mask), ``optimizer.step()``
    and ``after_step(loss)`` (e.g. an EMA of the weights). The model's train/eval mode is left to the
    caller. ``sign=-1`` is gradient ascent. ``loss_fn(model, X[b], y[b])`` replaces the cross-entropy
    (an unsupervised objective such as a diffusion model's noise-prediction loss; ``y`` then only has to
    match ``X`` in length).

    Examples
    --------
    >>> import torch
    >>> from trustlab.models import MLP, train_epoch
    >>> net = MLP(4, 2, hidden=(3,)); opt = torch.optim.SGD(net.parameters(), lr=0.1)
    >>> loss = train_epoch(net, torch.zeros(8, 4), torch.zeros(8, dtype=torch.long), opt, batch_size=4,
    ...                    generator=torch.Generator().manual_seed(0))
    >>> loss > 0
    True
    """
    if len(y) != len(X):
        raise InputError(f"The 'y' argument of train_epoch must have {len(X)} labels like X. Got {len(y)} instead.")
    perm = torch.randperm(len(X), generator=generator).to(X.device)
    total = 0.0
    for s in range(0, len(X), batch_size):
        idx = perm[s:s + batch_size]
        optimizer.zero_grad()
        if loss_fn is None:
            loss = torch.nn.functional.cross_entropy(model(X[idx]), y[idx])
        else:
            loss = loss_fn(model, X[idx], y[idx])
        if sign != 1.0:
            loss = sign * loss
        if extra_loss is not None:
            loss = loss + extra_loss()
        if check_loss is not None:
            check_loss(loss.detach())
        loss.backward()
        if after_backward is not None:
            after_backward()
        optimizer.step()
        if after_step is not None:
            after_step(float(loss.detach()))
        total += float(loss.detach()) * len(idx)
    return total / len(X)


def _tensors(X: Any, y: Any | None = None, device: Any = None) -> tuple[Any, Any]:
    Xt = torch.as_tensor(np.asarray(X, dtype=np.float32), device=device)
    yt = None if y is None else torch.as_tensor(np.asarray(y, dtype=np.int64), device=device)
    return Xt, yt


def _fit_example() -> dict[str, Any]:
    from trustlab.models.nets import MLP

    return {"model": MLP(2, 2, hidden=(2,)), "X": np.zeros((4, 2)), "y": np.array([0, 1, 0, 1])}


@validate_args(_fit_example, model=_MODULE, X=[ArrayLike(ndim=(2, 3, 4))], y=[ArrayLike(ndim=1, dtype="integer")],
               cfg=_CONFIG, X_val=[ArrayLike(ndim=(2, 3, 4)), None], y_val=[ArrayLike(ndim=1, dtype="integer"), None])
def fit_model(
    model: Any, X: Any, y: Any, cfg: TrainConfig | None = None, *, X_val: Any = None, y_val: Any = None,
) -> TrainHistory:
    """Train ``model`` (a torch classifier returning logits) with cross-entropy; deterministic by ``cfg.seed``.

    Raises :class:`TrainingDivergedError` when an epoch's mean loss is not finite.

    Examples
    --------
    >>> from trustlab.models import MLP, fit_model, TrainConfig, evaluate
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((64, 4)); y = (X[:, 0] > 0.5).astype(int)
    >>> hist = fit_model(MLP(4, 2, hidden=(8,)), X, y, TrainConfig(epochs=2))
    >>> len(hist.train_loss)
    2
    """
    cfg = cfg or TrainConfig()
    cfg.validate()
    X, y = check_X_y(X, y, owner="fit_model", ndim=(2, 3, 4))
    if (X_val is None) != (y_val is None):
        raise InputError("fit_model needs both X_val and y_val, or neither.")
    if cfg.patience and X_val is None:
        raise InputError("fit_model: early stopping (patience > 0) needs X_val and y_val.")
    t0 = time.perf_counter()
    hist = TrainHistory()
    with limit_threads(cfg.num_threads), isolated_global_rng(cfg.seed):
        _fit_epochs(model, X, y, cfg, hist, X_val, y_val)
    hist.wall_time_s = time.perf_counter() - t0
    model.eval()
    return hist


def _fit_epochs(model: Any, X: Any, y: Any, cfg: TrainConfig, hist: TrainHistory, X_val: Any, y_val: Any) -> None:
    gen = torch.Generator().manual_seed(cfg.seed)
    Xt, yt = _tensors(X, y, device_of(model))
    opt, sched = make_optimizer(model, cfg)
    best_loss, best_state, bad = np.inf, None, 0
    epochs: Any = range(cfg.epochs)
    if cfg.progress:
        from tqdm.auto import tqdm

        epochs = tqdm(epochs, desc="train", leave=False)
    for epoch in epochs:
        model.train()
        mean_loss = train_epoch(model, Xt, yt, opt, batch_size=cfg.batch_size, generator=gen)
        if not np.isfinite(mean_loss):
            raise TrainingDivergedError(f"fit_model: the training loss became {mean_loss} at epoch {epoch}; the "
                                        "model diverged. Lower 'lr' or 'epochs'.")
        hist.train_loss.append(mean_loss)
        if sched is not None:
            sched.step()
        if X_val is not None:
            vl, va = evaluate(model, X_val, y_val, num_threads=None)
            hist.val_loss.append(vl)
            hist.val_acc.append(va)
            if vl < best_loss - 1e-6:
                best_loss, bad, hist.best_epoch = vl, 0, epoch
                best_state = copy.deepcopy(model.state_dict())
            else:
                bad += 1
                if cfg.patience and bad >= cfg.patience:
                    hist.stopped_early = True
                    break
        if cfg.target_accuracy is not None:
            acc = float((_logits(model, Xt).argmax(1) == yt).float().mean())
            hist.train_acc.append(acc)
            if acc >= cfg.target_accuracy:
                hist.stopped_early = epoch < cfg.epochs - 1
                break
    if cfg.patience and best_state is not None:
        model.load_state_dict(best_state)
    elif hist.best_epoch < 0:
        hist.best_epoch = len(hist.train_loss) - 1


@torch.no_grad()
def _logits(model: Any, Xt: Any, batch_size: int = 1024) -> Any:
    """Eval-mode logits of a tensor, batched (the caller restores the mode)."""
    was_training = model.training
    model.eval()
    try:
        return torch.cat([model(Xt[i:i + batch_size]) for i in range(0, len(Xt), batch_size)])
    finally:
        model.train(was_training)


def _predict_example() -> dict[str, Any]:
    from trustlab.models.nets import MLP

    return {"model": MLP(2, 2, hidden=(2,)), "X": np.zeros((3, 2))}


_PREDICT_RULES: dict[str, Any] = {"model": _MODULE, "X": [ArrayLike(ndim=(2, 3, 4))],
                                  "batch_size": [Interval(int, 1, None)], "num_threads": [Interval(int, 1, None), None]}


@validate_args(_predict_example, **_PREDICT_RULES)
def predict_logits(model: Any, X: Any, *, batch_size: int = 1024, num_threads: int | None = 1) -> np.ndarray:
    """Eval-mode logits as float64 (the module's mode is restored), computed on the model's device."""
    X = check_array(X, owner="predict_logits", ndim=(2, 3, 4))
    with limit_threads(num_threads):
        Xt, _ = _tensors(X, device=device_of(model))
        out = _logits(model, Xt, batch_size)
    return out.detach().cpu().numpy().astype(np.float64)


@validate_args(_predict_example, **_PREDICT_RULES)
def predict_proba(model: Any, X: Any, *, batch_size: int = 1024, num_threads: int | None = 1) -> np.ndarray:
    """Softmax probabilities of a logit model, in eval mode (the mode is restored)."""
    X = check_array(X, owner="predict_proba", ndim=(2, 3, 4))
    with limit_threads(num_threads):
        Xt, _ = _tensors(X, device=device_of(model))
        out = torch.softmax(_logits(model, Xt, batch_size), dim=1)
    return out.detach().cpu().numpy().astype(np.float64)


def _evaluate_example() -> dict[str, Any]:
    return {**_predict_example(), "y": np.array([0, 1, 0])}


@validate_args(_evaluate_example, model=_MODULE, X=[ArrayLike(ndim=(2, 3, 4))],
               y=[ArrayLike(ndim=1, dtype="integer", low=0)], num_threads=[Interval(int, 1, None), None])
def evaluate(model: Any, X: Any, y: Any, *, num_threads: int | None = 1) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``model`` on (X, y); labels must index the model's outputs."""
    X, y = check_X_y(X, y, owner="evaluate", ndim=(2, 3, 4))
    p = predict_proba(model, X, num_threads=num_threads)
    y = np.asarray(y, dtype=int)
    if y.size and y.max() >= p.shape[1]:
        raise InputError(f"The 'y' argument of evaluate holds the label {int(y.max())}, but the model has only "
                         f"{p.shape[1]} outputs (labels must lie in [0, {p.shape[1]})).")
    loss = float(-np.mean(np.log(np.clip(p[np.arange(len(y)), y], 1e-12, None))))
    return loss, float(np.mean(p.argmax(1) == y))
