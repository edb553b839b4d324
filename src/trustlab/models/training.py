"""A minimal, deterministic train/evaluate loop (no Lightning): progress bar, early stopping, threads."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.constraints import Interval, validate_value
from trustlab.core.optional import require
from trustlab.core.validation import check_array, check_X_y

torch = require("torch", purpose="trustlab.models")

__all__ = ["TrainConfig", "TrainHistory", "fit_model", "evaluate", "predict_proba"]


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of :func:`fit_model`.

    ``patience`` > 0 enables early stopping on the validation loss (best weights are restored).
    ``num_threads`` is passed to ``torch.set_num_threads`` for the duration of the call.
    """

    epochs: int = 30
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    optimizer: str = "adam"
    patience: int = 0
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
        validate_value(own, "patience", self.patience, [Interval(int, 0, None)])
        validate_value(own, "seed", self.seed, [Interval(int, 0, None)])
        validate_value(own, "num_threads", self.num_threads, [Interval(int, 1, None), None])


@dataclass
class TrainHistory:
    """Per-epoch losses/accuracies and where training stopped."""

    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    val_acc: list[float] = field(default_factory=list)
    best_epoch: int = -1
    stopped_early: bool = False


class _Threads:
    def __init__(self, n: int | None) -> None:
        self.n, self.old = n, torch.get_num_threads()

    def __enter__(self) -> None:
        if self.n is not None:
            torch.set_num_threads(self.n)

    def __exit__(self, *exc: Any) -> None:
        torch.set_num_threads(self.old)


def _tensors(X: Any, y: Any | None = None) -> tuple[Any, Any]:
    Xt = torch.as_tensor(np.asarray(X, dtype=np.float32))
    yt = None if y is None else torch.as_tensor(np.asarray(y, dtype=np.int64))
    return Xt, yt


def fit_model(
    model: Any, X: Any, y: Any, cfg: TrainConfig | None = None, *, X_val: Any = None, y_val: Any = None,
) -> TrainHistory:
    """Train ``model`` (a torch classifier returning logits) with cross-entropy; deterministic by ``cfg.seed``.

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
        raise ValueError("fit_model needs both X_val and y_val, or neither.")
    if cfg.patience and X_val is None:
        raise ValueError("fit_model: early stopping (patience > 0) needs X_val and y_val.")
    hist = TrainHistory()
    gen = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    Xt, yt = _tensors(X, y)
    opt_cls = torch.optim.Adam if cfg.optimizer == "adam" else torch.optim.SGD
    opt = opt_cls(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss()
    best_loss, best_state, bad = np.inf, None, 0
    epochs = range(cfg.epochs)
    if cfg.progress:
        from tqdm.auto import tqdm

        epochs = tqdm(epochs, desc="train", leave=False)
    with _Threads(cfg.num_threads):
        for epoch in epochs:
            model.train()
            perm = torch.randperm(len(Xt), generator=gen)
            total = 0.0
            for start in range(0, len(Xt), cfg.batch_size):
                idx = perm[start:start + cfg.batch_size]
                opt.zero_grad()
                loss = loss_fn(model(Xt[idx]), yt[idx])
                loss.backward()
                opt.step()
                total += loss.item() * len(idx)
            hist.train_loss.append(total / len(Xt))
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
    if cfg.patience and best_state is not None:
        model.load_state_dict(best_state)
    elif hist.best_epoch < 0:
        hist.best_epoch = len(hist.train_loss) - 1
    model.eval()
    return hist


@torch.no_grad()
def predict_proba(model: Any, X: Any, *, batch_size: int = 1024, num_threads: int | None = 1) -> np.ndarray:
    """Softmax probabilities of a logit model, in eval mode (the mode is restored afterwards)."""
    X = check_array(X, owner="predict_proba", ndim=(2, 3, 4))
    was_training = model.training
    model.eval()
    with _Threads(num_threads):
        Xt, _ = _tensors(X)
        out = torch.cat([torch.softmax(model(Xt[i:i + batch_size]), dim=1) for i in range(0, len(Xt), batch_size)])
    model.train(was_training)
    return out.numpy().astype(np.float64)


def evaluate(model: Any, X: Any, y: Any, *, num_threads: int | None = 1) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``model`` on (X, y)."""
    X, y = check_X_y(X, y, owner="evaluate", ndim=(2, 3, 4))
    p = predict_proba(model, X, num_threads=num_threads)
    y = np.asarray(y, dtype=int)
    loss = float(-np.mean(np.log(np.clip(p[np.arange(len(y)), y], 1e-12, None))))
    return loss, float(np.mean(p.argmax(1) == y))
