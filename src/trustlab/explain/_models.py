"""One view of the models an explanation can be about: scikit-learn estimators, torch modules, plain callables.

:class:`ModelAdapter` gives every model the same output function ``outputs(Z) -> (m, C)`` (probabilities or
raw scores), which the explainers, the faithfulness curves and the linear baseline all call. A model's
fingerprint for the provenance card is :func:`model_hash`.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from trustlab.core.exceptions import InputError
from trustlab.core.hashing import content_hash, state_dict_hash

__all__ = ["ModelAdapter", "model_kind", "model_hash", "is_tree_model", "TREE_MODELS"]

#: scikit-learn tree models explained by shap's TreeExplainer (and randomised by leaves and splits)
TREE_MODELS = ("DecisionTreeClassifier", "DecisionTreeRegressor", "ExtraTreeClassifier", "ExtraTreeRegressor",
               "RandomForestClassifier", "RandomForestRegressor", "ExtraTreesClassifier", "ExtraTreesRegressor",
               "GradientBoostingClassifier", "GradientBoostingRegressor")


def model_kind(model: Any) -> str:
    """``"torch"`` for a torch module, ``"sklearn"`` for an object with ``predict``, ``"callable"`` otherwise."""
    mro = [f"{c.__module__}.{c.__name__}" for c in type(model).__mro__]
    if "torch.nn.modules.module.Module" in mro:
        return "torch"
    if hasattr(model, "predict"):
        return "sklearn"
    if callable(model):
        return "callable"
    raise InputError(f"The 'model' argument must be a fitted scikit-learn estimator, a torch module or a callable "
                     f"returning model outputs. Got {type(model).__name__} instead.")


def is_tree_model(model: Any) -> bool:
    return type(model).__name__ in TREE_MODELS


def model_hash(model: Any) -> str:
    """SHA-256 of a model: a torch module's state dict, a scikit-learn estimator's pickle, a callable's code."""
    kind = model_kind(model)
    name = f"{type(model).__module__}.{type(model).__qualname__}"
    if kind == "torch":
        return content_hash(name, state_dict_hash(model))
    if kind == "sklearn":
        try:
            return content_hash(name, pickle.dumps(model, protocol=4))
        except Exception:  # noqa: BLE001 - an estimator that cannot be pickled is hashed by its parameters
            return content_hash(name, repr(getattr(model, "get_params", lambda: {})()))
    code = getattr(model, "__code__", None)
    return content_hash(name, getattr(model, "__qualname__", ""), code.co_code if code is not None else repr(model))


class ModelAdapter:
    """``outputs(Z)``: a ``(m, C)`` float array of the model's probabilities (``"proba"``) or raw scores.

    ``output="auto"`` picks ``"proba"`` for torch modules (softmax of the logits) and estimators with
    ``predict_proba``, and ``"raw"`` otherwise (``decision_function``, or ``predict`` for regressors). A
    callable's return value is used as it is. ``owner`` names the public function in error messages.
    """

    def __init__(self, model: Any, output: str = "auto", *, owner: str = "explain") -> None:
        self.model, self.kind, self.owner = model, model_kind(model), owner
        if output == "auto":
            output = "proba" if self.kind == "torch" or hasattr(model, "predict_proba") else "raw"
        if output == "proba" and self.kind == "sklearn" and not hasattr(model, "predict_proba"):
            raise InputError(
                f"The 'model' argument of {owner} must have predict_proba for output='proba' (a probability "
                f"explainer). Got {type(model).__name__}, which has no predict_proba; use output='raw' to explain "
                "its decision_function/predict, or calibrate it (sklearn.calibration.CalibratedClassifierCV).")
        if output == "proba" and self.kind == "callable":
            raise InputError(f"The 'output' argument of {owner} must be 'auto' or 'raw' for a callable model (its "
                             "return value is explained as it is). Got 'proba' instead.")
        self.output = output

    def with_model(self, model: Any) -> ModelAdapter:
        """The same output rule for another model (a control model: randomised or refitted)."""
        return ModelAdapter(model, self.output, owner=self.owner)

    def outputs(self, Z: Any, batch_size: int = 4096) -> np.ndarray:
        Z = np.asarray(Z, dtype=float)
        if self.kind == "torch":
            return np.concatenate([self._torch(Z[i:i + batch_size]) for i in range(0, len(Z), batch_size)]) \
                if len(Z) else np.zeros((0, 1))
        if self.kind == "callable":
            out = np.asarray(self.model(Z), dtype=float)
        elif self.output == "proba":
            out = np.asarray(self.model.predict_proba(Z), dtype=float)
        elif hasattr(self.model, "decision_function"):
            out = np.asarray(self.model.decision_function(Z), dtype=float)
        else:
            out = np.asarray(self.model.predict(Z), dtype=float)
        return out.reshape(len(Z), -1)

    def _torch(self, Z: np.ndarray) -> np.ndarray:
        import torch

        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                param = next(self.model.parameters(), None)
                dtype = param.dtype if param is not None else torch.float32
                out = self.model(torch.as_tensor(Z, dtype=dtype))
                if self.output == "proba":
                    out = torch.softmax(out, dim=1)
            return out.detach().double().cpu().numpy().reshape(len(Z), -1)
        finally:
            self.model.train(was_training)

    def target_values(self, Z: Any, target: np.ndarray) -> np.ndarray:
        """The explained output of each row: ``outputs(Z)[i, target[i]]`` (``target`` broadcast to rows)."""
        out = self.outputs(Z)
        t = np.broadcast_to(np.asarray(target, dtype=int), (len(out),))
        return out[np.arange(len(out)), t]

    def class_names(self) -> list[str] | None:
        classes = getattr(self.model, "classes_", None)
        return None if classes is None else [str(c) for c in classes]
