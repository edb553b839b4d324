"""The explainers behind :func:`~trustlab.explain.explain`: shap for any model, captum gradients for torch modules.

Every backend returns the attributions of one output per row (``target[i]``, the real model's predicted class
by default) as ``(n, p)`` values and ``(n,)`` base values, so the real explanation and the explanations of
the control models (randomised, refitted) are computed by the same code on the same rows and outputs.

* ``"tree"``: ``shap.TreeExplainer`` (interventional, on the background; ``model_output="probability"`` for
  probabilities). ``"permutation"``: ``shap.PermutationExplainer`` on the model's output function with an
  independent masker over the background. ``"shap"`` picks ``"tree"`` for scikit-learn tree models and
  ``"permutation"`` otherwise.
* ``"gradient"`` (captum ``Saliency``, signed), ``"input_x_gradient"`` (captum ``InputXGradient``) and
  ``"integrated_gradients"`` (captum ``IntegratedGradients`` from the background mean): torch modules only.
* A callable ``method(inp: ExplainerInput) -> (n, p) array`` is a user's explainer (for instance the
  audited pipeline explainer of X-hacking, or a deliberately broken one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.exceptions import InputError
from trustlab.explain._models import ModelAdapter, is_tree_model

__all__ = ["EXPLAINERS", "ExplainerInput", "RawExplanation", "resolve_method", "run_explainer"]

EXPLAINERS = ("shap", "tree", "permutation", "gradient", "input_x_gradient", "integrated_gradients")
_GRADIENT = ("gradient", "input_x_gradient", "integrated_gradients")


@dataclass(frozen=True)
class ExplainerInput:
    """What a custom explainer gets: the (possibly randomised) model, its output function and the rows."""

    model: Any
    predict: Callable[[np.ndarray], np.ndarray]
    X: np.ndarray
    background: np.ndarray
    target: np.ndarray
    seed: int
    output: str


@dataclass
class RawExplanation:
    values: np.ndarray
    base_values: np.ndarray
    backend: str
    config: dict[str, Any] = field(default_factory=dict)


def resolve_method(method: Any, adapter: ModelAdapter) -> str:
    """The concrete backend name (``"shap"`` resolved), or ``"custom"`` for a callable; checks applicability."""
    if callable(method):
        return "custom"
    if method == "shap":
        return "tree" if is_tree_model(adapter.model) else "permutation"
    if method == "tree" and not is_tree_model(adapter.model):
        raise InputError(f"The 'method' argument of {adapter.owner} is 'tree', which needs a scikit-learn tree model "
                         f"(forest, boosting, decision tree). Got a {type(adapter.model).__name__}; use 'shap' or "
                         "'permutation' instead.")
    if method in _GRADIENT and adapter.kind != "torch":
        raise InputError(f"The 'method' argument of {adapter.owner} is {method!r}, a gradient explainer, which needs a "
                         f"torch module. Got a {type(adapter.model).__name__}; use 'shap' or 'permutation' instead.")
    return str(method)


def _select(values: np.ndarray, base: np.ndarray, target: np.ndarray, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """``(n, p[, k])`` values and ``(n[, k])`` or ``(k,)`` base values -> the target output's ``(n, p)``, ``(n,)``."""
    n = values.shape[0]
    base = np.asarray(base, dtype=float)
    if values.ndim == 2:  # single output: base values are a scalar or one per row
        values, base = values[:, :, None], np.broadcast_to(base.reshape(-1, 1), (n, 1))
    elif base.ndim <= 1:  # multi-output: base values are one per output (shared by every row)
        base = np.broadcast_to(base.reshape(1, -1), (n, values.shape[2]))
    if values.shape[2] == 1 and n_out == 2:  # one-output binary model: class 0 is the complement of class 1
        values = np.concatenate([-values, values], axis=2)
        base = np.concatenate([1.0 - base, base], axis=1)
    if values.shape[2] != n_out:
        raise InputError(f"The explainer returned {values.shape[2]} output(s) but the model has {n_out}.")
    rows = np.arange(n)
    return np.asarray(values[rows, :, target], dtype=float), np.asarray(base[rows, target], dtype=float)


def _mean_output(adapter: ModelAdapter, bg: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Base values of explainers without their own: the mean of each row's target output over the background."""
    return np.asarray(adapter.outputs(bg).mean(axis=0)[target], dtype=float)


def _tree(adapter: ModelAdapter, X: np.ndarray, bg: np.ndarray, target: np.ndarray, n_out: int) -> RawExplanation:
    import shap

    mo = "probability" if adapter.output == "proba" else "raw"
    ex = shap.TreeExplainer(adapter.model, data=bg, feature_perturbation="interventional", model_output=mo)
    out = ex(X, check_additivity=False)
    v, b = _select(np.asarray(out.values, dtype=float), np.asarray(out.base_values, dtype=float), target, n_out)
    return RawExplanation(v, b, "shap.TreeExplainer", {"feature_perturbation": "interventional", "model_output": mo})


def _permutation(adapter: ModelAdapter, X: np.ndarray, bg: np.ndarray, target: np.ndarray, n_out: int, seed: int,
                 max_evals: int | None) -> RawExplanation:
    import shap

    evals = max_evals if max_evals is not None else 2 * X.shape[1] + 1
    ex = shap.PermutationExplainer(adapter.outputs, shap.maskers.Independent(bg, max_samples=len(bg)), seed=seed)
    out = ex(X, max_evals=evals, silent=True)
    v, b = _select(np.asarray(out.values, dtype=float), np.asarray(out.base_values, dtype=float), target, n_out)
    return RawExplanation(v, b, "shap.PermutationExplainer", {"max_evals": int(evals), "masker": "Independent"})


def _gradient(adapter: ModelAdapter, method: str, X: np.ndarray, bg: np.ndarray, target: np.ndarray,
              n_steps: int) -> RawExplanation:
    import torch
    from captum.attr import InputXGradient, IntegratedGradients, Saliency

    model = adapter.model
    param = next(model.parameters(), None)
    dtype = param.dtype if param is not None else torch.float32

    def forward(x: Any) -> Any:
        out = model(x)
        return torch.softmax(out, dim=1) if adapter.output == "proba" else out

    was_training = model.training
    model.eval()
    try:
        x = torch.as_tensor(X, dtype=dtype).requires_grad_(True)
        t = torch.as_tensor(target, dtype=torch.long)
        if method == "gradient":
            attr, cfg = Saliency(forward).attribute(x, target=t, abs=False), {"captum": "Saliency", "abs": False}
        elif method == "input_x_gradient":
            attr, cfg = InputXGradient(forward).attribute(x, target=t), {"captum": "InputXGradient"}
        else:
            base = torch.as_tensor(bg.mean(axis=0, keepdims=True), dtype=dtype)
            attr = IntegratedGradients(forward).attribute(x, baselines=base, target=t, n_steps=n_steps)
            cfg = {"captum": "IntegratedGradients", "n_steps": n_steps, "baseline": "background mean"}
    finally:
        model.train(was_training)
    values = attr.detach().double().cpu().numpy().reshape(len(X), -1)
    return RawExplanation(values, _mean_output(adapter, bg, target), f"captum.attr.{cfg['captum']}", cfg)


def run_explainer(method: Any, adapter: ModelAdapter, X: np.ndarray, background: np.ndarray, target: np.ndarray,
                  *, seed: int, n_outputs: int, max_evals: int | None = None, n_steps: int = 32) -> RawExplanation:
    """Explain ``target[i]`` of ``adapter``'s model on each row of ``X`` with the backend ``method``."""
    kind = resolve_method(method, adapter)
    if kind == "tree":
        return _tree(adapter, X, background, target, n_outputs)
    if kind == "permutation":
        return _permutation(adapter, X, background, target, n_outputs, seed, max_evals)
    if kind in _GRADIENT:
        return _gradient(adapter, kind, X, background, target, n_steps)
    inp = ExplainerInput(model=adapter.model, predict=adapter.outputs, X=X, background=background, target=target,
                         seed=seed, output=adapter.output)
    values = np.asarray(method(inp), dtype=float)
    if values.shape != X.shape:
        raise InputError(f"The 'method' argument of {adapter.owner} is a callable that must return an array of shape "
                         f"{X.shape} (one attribution per row and feature). Got shape {values.shape} instead.")
    name = getattr(method, "__qualname__", type(method).__name__)
    return RawExplanation(values, _mean_output(adapter, background, target), f"custom:{name}", {})
