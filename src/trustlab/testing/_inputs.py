"""Default inputs per role for the common checks, and one way to call each role's verbs."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

__all__ = ["role_of", "default_inputs", "run_verbs", "bad_inputs", "tiny_torch_model", "fit_for_checks"]


def role_of(est: Any) -> str:
    role = type(est).get_tags().get("role") if hasattr(type(est), "get_tags") else None
    if role is None:
        raise TypeError(f"{type(est).__name__} has no 'role' tag; subclass a role from trustlab.core.roles.")
    return role


def tiny_torch_model(seed: int = 0) -> Any:
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def default_inputs(est: Any) -> dict[str, Any]:
    """The estimator's own ``_get_test_inputs()`` or small role defaults (fresh copies every call)."""
    own = type(est)._get_test_inputs()
    if own is not None:
        return copy.deepcopy(own)
    role = role_of(est)
    rng = np.random.default_rng(0)
    if role in ("predictor", "detector"):
        X = rng.normal(size=(40, 4))
        y = (X[:, 0] + 0.3 * rng.normal(size=40) > 0).astype(int)
        return {"X": X, "y": y}
    if role == "regressor":
        X = rng.normal(size=(40, 4))
        return {"X": X, "y": X[:, 0] - 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=40)}
    if role == "purifier":
        return {"X": rng.random((6, 8, 8))}
    if role == "aggregator":
        return {"updates": [{"w": rng.normal(size=(3, 4)), "b": rng.normal(size=4)} for _ in range(4)],
                "weights": np.array([1.0, 2.0, 1.0, 3.0])}
    if role == "router":
        return {"quality": rng.random((20, 3)), "cost": np.tile([1.0, 2.0, 4.0], (20, 1)),
                "queries": rng.random((5, 3)), "budget": 2.0}
    if role == "model_edit":
        return {"model": tiny_torch_model, "args": (), "kwargs": {}, "forward_input": rng.normal(size=(5, 4))}
    raise TypeError(
        f"{type(est).__name__} (role {role!r}) must define _get_test_inputs() for the common checks."
    )


def fit_for_checks(est: Any, inputs: dict[str, Any]) -> Any:
    role = role_of(est)
    if role in ("predictor", "regressor"):
        return est.fit(inputs["X"], inputs["y"])
    if role == "detector":
        return est.fit(inputs["X"], inputs.get("y"))
    if role == "router":
        return est.fit(inputs["quality"], inputs["cost"])
    return est


def _model(inputs: dict[str, Any]) -> Any:
    m = inputs["model"]
    return m() if callable(m) and not hasattr(m, "state_dict") else m


def run_verbs(est: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Call the role's verbs on ``inputs``; returns their outputs as comparable values."""
    role = role_of(est)
    if role == "predictor":
        est.fit(inputs["X"], inputs["y"])
        return {"predict_proba": est.predict_proba(inputs["X"]), "predict": est.predict(inputs["X"])}
    if role == "regressor":
        est.fit(inputs["X"], inputs["y"])
        return {"predict": est.predict(inputs["X"])}
    if role == "detector":
        est.fit(inputs["X"], inputs.get("y"))
        return {"score_samples": est.score_samples(inputs["X"]), "predict": est.predict(inputs["X"])}
    if role == "purifier":
        return {"transform": est.transform(inputs["X"])}
    if role == "aggregator":
        return {"aggregate": est.aggregate(inputs["updates"], inputs.get("weights"))}
    if role == "attack":
        res = est.generate(inputs["inputs"], inputs["budget"])
        return {"outputs": res.outputs, "cost": res.cost, "success": res.success}
    if role == "auditor":
        return {"audit": est.audit(*inputs.get("args", ()), **inputs.get("kwargs", {}))}
    if role == "router":
        est.fit(inputs["quality"], inputs["cost"])
        return {"route": est.route(inputs["queries"], inputs["budget"])}
    if role == "model_edit":
        import torch

        from trustlab.core.base import state_dict_hash

        model = _model(inputs)
        handle = est.apply(model, *inputs.get("args", ()), **inputs.get("kwargs", {}))
        x = torch.as_tensor(np.asarray(inputs["forward_input"], dtype=np.float32)) \
            if not isinstance(inputs["forward_input"], dict) else inputs["forward_input"]
        with torch.no_grad():
            out = model(**x) if isinstance(x, dict) else model(x)
        out = getattr(out, "logits", out)
        edited = state_dict_hash(model)
        handle.restore()
        return {"edited_output": out.detach().numpy(), "edited_hash": edited}
    raise TypeError(f"No common-check driver for role {role!r}.")


def bad_inputs(est: Any, inputs: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, inputs) pairs that must raise InputError, for roles with array inputs."""
    role = role_of(est)
    out: list[tuple[str, dict[str, Any]]] = []
    if role in ("predictor", "regressor", "detector") and isinstance(inputs.get("X"), np.ndarray):
        X, y = inputs["X"], inputs.get("y")
        nan = X.astype(float).copy()
        nan[0, 0] = np.nan
        inf = X.astype(float).copy()
        inf[-1, -1] = np.inf
        allow_nan = type(est).get_tags().get("allow_nan", False)
        out += [("empty X", {**inputs, "X": X[:0], "y": None if y is None else y[:0]}),
                *([] if allow_nan else [("NaN in X", {**inputs, "X": nan})]), ("inf in X", {**inputs, "X": inf}),
                ("1-d X", {**inputs, "X": X.reshape(len(X), -1)[:, 0]}),
                (f"{X.ndim + 1}-d X", {**inputs, "X": X[..., None]})]
        if y is not None:
            out.append(("mismatched lengths", {**inputs, "y": y[:-1]}))
        if role == "regressor" and y is not None:
            y_nan = np.asarray(y, dtype=float).copy()
            y_nan.flat[0] = np.nan
            out.append(("NaN in y", {**inputs, "y": y_nan}))
    elif role == "purifier" and isinstance(inputs.get("X"), np.ndarray):
        X = inputs["X"]
        nan = X.astype(float).copy()
        nan.flat[0] = np.nan
        out += [("empty X", {**inputs, "X": X[:0]}), ("NaN in X", {**inputs, "X": nan}),
                ("1-d X", {**inputs, "X": X.reshape(-1)})]
    elif role == "aggregator":
        ups = inputs["updates"]
        bad = copy.deepcopy(ups)
        first = bad[0]
        key = next(iter(first)) if isinstance(first, dict) else None
        if key is None:
            bad[0] = np.asarray(first, dtype=float).copy()
            bad[0].flat[0] = np.nan
        else:
            first[key] = np.asarray(first[key], dtype=float).copy()
            first[key].flat[0] = np.nan
        shape = copy.deepcopy(ups)
        if key is None:
            shape[1] = np.zeros(np.asarray(ups[1]).size + 1)
        else:
            shape[1][key] = np.zeros(np.asarray(ups[1][key]).size + 1)
        out += [("empty updates", {**inputs, "updates": []}), ("NaN in an update", {**inputs, "updates": bad}),
                ("mismatched shapes", {**inputs, "updates": shape}),
                ("mismatched weights", {**inputs, "weights": np.ones(len(ups) + 1)})]
    elif role == "router":
        q = inputs["quality"].astype(float).copy()
        q[0, 0] = np.nan
        out += [("NaN in quality", {**inputs, "quality": q}),
                ("mismatched shapes", {**inputs, "cost": inputs["cost"][:-1]})]
    return out
