"""Training loop shared by SoftShape and InceptionTimeLite: Adam, warm-up, early stopping on validation
loss, weights restored at the epoch of minimum validation loss (after warm-up when sparsifying)."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

__all__ = ["EpochLog", "train_net", "predict_logits", "split_validation"]


@dataclass
class EpochLog:
    """Per-epoch record of one network fit (``history_`` of SoftShapeClassifier and InceptionTimeLite):
    losses, wall time and warm-up flag per epoch, the selected epoch, early stopping and the MoE load.
    (Not ``trustlab.models.TrainHistory``, which records the shared minibatch-SGD loop.)"""

    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    epoch_time: list[float] = field(default_factory=list)
    warm: list[bool] = field(default_factory=list)
    best_epoch: int = -1
    stopped_early: bool = False
    expert_load: np.ndarray | None = None  # token counts per expert, summed over the last sparse epoch

    @property
    def n_epochs(self) -> int:
        return len(self.train_loss)

    def mean_epoch_time(self, warm: bool | None = None) -> float:
        t = [et for et, w in zip(self.epoch_time, self.warm) if warm is None or w == warm]
        return float(np.mean(t)) if t else float("nan")


def split_validation(y: np.ndarray, fraction: float, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Stratified (when possible) train/validation indices; empty validation when too few series."""
    n = len(y)
    n_val = int(round(fraction * n))
    idx = np.arange(n)
    if fraction <= 0 or n_val < 1 or n - n_val < 2:
        return idx, idx[:0]
    classes, counts = np.unique(y, return_counts=True)
    if counts.min() >= 2 and n_val >= len(classes):
        val = []
        for c in classes:  # proportional allocation, at least one per class, never the whole class
            members = gen.permutation(idx[y == c])
            take = min(len(members) - 1, max(1, int(round(fraction * len(members)))))
            val.extend(members[:take].tolist())
        val = np.sort(np.asarray(val))
    else:
        val = np.sort(gen.permutation(n)[:n_val])
    tr = np.setdiff1d(idx, val)
    return tr, val


def _batches(n: int, batch_size: int, gen: torch.Generator) -> list[torch.Tensor]:
    perm = torch.randperm(n, generator=gen)
    return [perm[i:i + batch_size] for i in range(0, n, batch_size)]


def predict_logits(net: torch.nn.Module, X: torch.Tensor, *, warm: bool = False, batch_size: int = 512
                   ) -> torch.Tensor:
    net.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(X), batch_size):
            out.append(net(X[i:i + batch_size], warm=warm)[0])
    return torch.cat(out) if out else torch.zeros(0)


def train_net(net: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, X_val: torch.Tensor | None,
              y_val: torch.Tensor | None, *, epochs: int, warm_up: int, patience: int, batch_size: int,
              lr: float, aux_rate: float, gen: torch.Generator, select_after_warm_up: bool,
              budget_check: Any = None) -> EpochLog:
    """Train in place; returns the history. Early stopping counts only after warm-up."""
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=0.0)
    hist = EpochLog()
    has_val = X_val is not None and len(X_val) > 0
    best, best_state, since_best = float("inf"), None, 0
    bs = max(1, min(batch_size, len(X)))
    for epoch in range(epochs):
        warm = epoch < warm_up
        net.train()
        t0 = time.perf_counter()
        total, loads = 0.0, None
        for b in _batches(len(X), bs, gen):
            if len(b) == 1 and len(X) > 1:  # BatchNorm cannot train on one series: skip it (reshuffled next epoch)
                continue
            logits, aux, info = net(X[b], warm=warm)
            loss = F.cross_entropy(logits, y[b]) + aux_rate * aux
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(b)
            if info is not None and info.load:
                lb = torch.stack(info.load).sum(0).numpy()
                loads = lb if loads is None else loads + lb
        hist.epoch_time.append(time.perf_counter() - t0)
        hist.train_loss.append(total / len(X))
        hist.warm.append(warm)
        if loads is not None:
            hist.expert_load = loads
        if has_val:
            net.eval()
            with torch.no_grad():
                vl = float(F.cross_entropy(net(X_val, warm=warm)[0], y_val))
        else:
            vl = hist.train_loss[-1]
        hist.val_loss.append(vl)
        eligible = not (select_after_warm_up and warm and epochs > warm_up)
        if eligible and vl < best - 1e-12:
            best, since_best, hist.best_epoch = vl, 0, epoch
            best_state = copy.deepcopy(net.state_dict())
        elif eligible:
            since_best += 1
        if not warm and since_best > patience:
            hist.stopped_early = True
            break
        if budget_check is not None:
            budget_check()
    if best_state is not None:
        net.load_state_dict(best_state)
    net.eval()
    return hist
