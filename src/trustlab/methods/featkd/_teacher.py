"""The TabNet teacher (pytorch-tabnet): fitting with early stopping, step outputs, step masks, head.

The step outputs are read from the library's own encoder: ``network.tabnet.encoder(network.embedder(x))``
returns the list of ``d_k = ReLU(out_k[:, :n_d])`` that ``TabNetNoEmbeddings.forward`` sums before its
linear head (``y = W_final · sum_k d_k``, no bias), so nothing of TabNet is re-implemented here.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["TeacherSettings", "fit_teacher", "step_outputs", "step_masks", "head_weights", "n_parameters"]


@dataclass(frozen=True)
class TeacherSettings:
    """TabNet's hyper-parameters as FEAT-KD passes them (library defaults unless the user changes them)."""

    n_d: int = 8
    n_a: int = 8
    n_steps: int = 3
    gamma: float = 1.3
    lambda_sparse: float = 1e-3
    learning_rate: float = 2e-2
    max_epochs: int = 100
    patience: int = 15
    batch_size: int = 256
    virtual_batch_size: int = 128


def fit_teacher(X_fit: np.ndarray, Y_fit: np.ndarray, X_val: np.ndarray, Y_val: np.ndarray,
                settings: TeacherSettings, seed: int) -> Any:
    """A ``TabNetRegressor`` fitted on standardized inputs/targets, early-stopped on the validation rows
    (the best epoch's weights are kept, as pytorch-tabnet does). Deterministic torch kernels are asked for
    during the fit and the previous setting is restored."""
    import torch

    from trustlab.core.optional import require

    tab_model = require("pytorch_tabnet.tab_model", extra="symbolic", purpose="FEAT-KD's TabNet teacher")
    s = settings
    teacher = tab_model.TabNetRegressor(
        n_d=s.n_d, n_a=s.n_a, n_steps=s.n_steps, gamma=s.gamma, lambda_sparse=s.lambda_sparse, seed=int(seed),
        verbose=0, device_name="cpu", optimizer_params={"lr": s.learning_rate})
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        # pytorch-tabnet prints its early-stopping notice and warns about the best epoch's weights
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            teacher.fit(X_fit.astype(np.float32), Y_fit.astype(np.float32),
                        eval_set=[(X_val.astype(np.float32), Y_val.astype(np.float32))], eval_name=["val"],
                        eval_metric=["mse"], max_epochs=s.max_epochs, patience=s.patience,
                        batch_size=min(s.batch_size, len(X_fit)), virtual_batch_size=s.virtual_batch_size,
                        drop_last=True, compute_importance=False)
    finally:
        torch.use_deterministic_algorithms(before)
    return teacher


def _forward_steps(teacher: Any, Xs: np.ndarray) -> list[Any]:
    import torch

    net = teacher.network
    net.eval()
    with torch.no_grad():
        x = torch.from_numpy(np.ascontiguousarray(Xs, dtype=np.float32))
        steps, _ = net.tabnet.encoder(net.embedder(x))
    return steps


def step_outputs(teacher: Any, Xs: np.ndarray) -> np.ndarray:
    """``d_k(x)`` for every step: shape ``(n_steps, n_rows, n_d)`` (float64)."""
    return np.stack([d.numpy() for d in _forward_steps(teacher, Xs)]).astype(np.float64)


def step_masks(teacher: Any, Xs: np.ndarray) -> np.ndarray:
    """Mean feature mask ``E_x[M_k(x)]`` per step from ``teacher.explain``: shape ``(n_steps, n_inputs)``."""
    _, masks = teacher.explain(np.ascontiguousarray(Xs, dtype=np.float32))
    return np.stack([np.asarray(masks[k]).mean(axis=0) for k in sorted(masks)]).astype(np.float64)


def head_weights(teacher: Any) -> np.ndarray:
    """The final linear map ``W_final``: shape ``(n_outputs, n_d)``."""
    return teacher.network.tabnet.final_mapping.weight.detach().numpy().astype(np.float64)


def n_parameters(teacher: Any) -> int:
    """Trainable parameters of the teacher network."""
    return int(sum(p.numel() for p in teacher.network.parameters() if p.requires_grad))
