"""Toy methods: a correct one per role, and deliberately broken ones that the common checks must catch."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from trustlab.core.base import PaperInfo
from trustlab.core.constraints import Interval, Options
from trustlab.core.roles import (
    Aggregator,
    Attack,
    AttackResult,
    Auditor,
    Detector,
    ModelEdit,
    Predictor,
    Purifier,
    Regressor,
    Router,
)

TOY_PAPER = PaperInfo(title="Toy paper", venue="tests")


# ---------------------------------------------------------------------------------------------------
# correct toys
class ToyPredictor(Predictor):
    """Nearest-centroid with softmax over negative distances; ``noise`` jitters centroids (seeded)."""

    paper = TOY_PAPER
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "temperature": [Interval(float, 0, None, closed="neither")],
        "noise": [Interval(float, 0, None)],
        "random_state": ["random_state"],
    }

    def __init__(self, *, temperature: float = 1.0, noise: float = 0.0, random_state: Any = None):
        self.temperature = temperature
        self.noise = noise
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{}, {"temperature": 0.5, "noise": 0.1, "random_state": 0}]

    def _fit(self, X: np.ndarray, y: np.ndarray) -> None:
        self.centroids_ = np.stack([X[y == k].mean(0) for k in range(len(self.classes_))])
        self.centroids_ = self.centroids_ + self.noise * self._rng.normal(size=self.centroids_.shape)

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        d = -((X[:, None, :] - self.centroids_[None]) ** 2).sum(-1) / self.temperature
        d -= d.max(1, keepdims=True)
        p = np.exp(d)
        return p / p.sum(1, keepdims=True)


class ToyRegressor(Regressor):
    """Ridge regression in closed form (one column of coefficients per target)."""

    paper = TOY_PAPER
    _constraints: ClassVar[dict[str, list[Any]]] = {"alpha": [Interval(float, 0, None)]}

    def __init__(self, *, alpha: float = 1.0):
        self.alpha = alpha

    def _fit(self, X: np.ndarray, y: np.ndarray) -> None:
        self.x_mean_, self.y_mean_ = X.mean(0), y.mean(0)
        Xc = X - self.x_mean_
        self.coef_ = np.linalg.solve(Xc.T @ Xc + self.alpha * np.eye(X.shape[1]), Xc.T @ (y - self.y_mean_))

    def _predict(self, X: np.ndarray) -> np.ndarray:
        return (X - self.x_mean_) @ self.coef_ + self.y_mean_


class ToyDetector(Detector):
    """Distance to the training mean; threshold at a quantile."""

    paper = TOY_PAPER
    _constraints: ClassVar[dict[str, list[Any]]] = {"quantile": [Interval(float, 0, 1)]}

    def __init__(self, *, quantile: float = 0.9):
        self.quantile = quantile

    def _fit(self, X: np.ndarray, y: Any) -> None:
        self.mean_ = X.mean(0)
        self.threshold_ = float(np.quantile(self._score_samples(X), self.quantile))

    def _score_samples(self, X: np.ndarray) -> np.ndarray:
        return np.linalg.norm(X - self.mean_, axis=1)


class ToyPurifier(Purifier):
    """Shrinks toward 0.5 by ``strength``: keeps shape and [0, 1]."""

    paper = TOY_PAPER
    _constraints: ClassVar[dict[str, list[Any]]] = {"strength": [Interval(float, 0, 1)]}

    def __init__(self, *, strength: float = 0.5):
        self.strength = strength

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return (1 - self.strength) * X + self.strength * 0.5


class ToyAggregator(Aggregator):
    """Weighted mean, optionally clipped coordinate-wise."""

    paper = TOY_PAPER
    _constraints: ClassVar[dict[str, list[Any]]] = {"clip": [Interval(float, 0, None, closed="neither"), None]}

    def __init__(self, *, clip: float | None = None):
        self.clip = clip

    def _aggregate(self, updates: list[dict[str, np.ndarray]], weights: np.ndarray) -> dict[str, np.ndarray]:
        out = {k: sum(w * u[k] for w, u in zip(weights, updates)) for k in updates[0]}
        if self.clip is not None:
            out = {k: np.clip(v, -self.clip, self.clip) for k, v in out.items()}
        return out


class ToyAttack(Attack):
    """Adds a perturbation of L-inf norm ``budget * strength`` to each input."""

    paper = TOY_PAPER
    _constraints: ClassVar[dict[str, list[Any]]] = {"strength": [Interval(float, 0, 1)]}

    def __init__(self, *, strength: float = 1.0):
        self.strength = strength

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        return {"inputs": np.zeros((4, 3)), "budget": 0.5}

    def _generate(self, inputs: Any, budget: float) -> AttackResult:
        delta = budget * self.strength
        out = np.asarray(inputs) + delta
        return AttackResult(out, budget, np.full(len(out), delta), np.ones(len(out), bool))


class ToyModelEdit(ModelEdit):
    """Scales the first parameter by ``scale`` and adds an output hook that adds ``shift``."""

    paper = TOY_PAPER
    _constraints: ClassVar[dict[str, list[Any]]] = {"scale": [Interval(float, None, None)],
                                                     "shift": [Interval(float, None, None)]}

    def __init__(self, *, scale: float = 2.0, shift: float = 0.0):
        self.scale = scale
        self.shift = shift

    def _apply(self, model: Any, handle: Any) -> None:
        import torch

        with torch.no_grad():
            next(model.parameters()).mul_(self.scale)
        handle.add_hook(model.register_forward_hook(lambda m, i, o: o + self.shift))
        model(torch.zeros(1, 4))  # edits often run a forward (e.g. to calibrate)


class ToyAuditor(Auditor):
    """Reports the mean and spread of a vector."""

    paper = TOY_PAPER
    _constraints: ClassVar[dict[str, list[Any]]] = {"ddof": [Interval(int, 0, 1)]}

    def __init__(self, *, ddof: int = 0):
        self.ddof = ddof

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        return {"args": (np.arange(5.0),), "kwargs": {}}

    def _audit(self, values: Any) -> Any:
        from dataclasses import make_dataclass

        Report = make_dataclass("Report", [("mean", float), ("std", float)])
        v = np.asarray(values, dtype=float)
        return Report(float(v.mean()), float(v.std(ddof=self.ddof)))


class ToyRouter(Router):
    """Routes each query to the best model whose mean cost fits the budget."""

    paper = TOY_PAPER
    _constraints: ClassVar[dict[str, list[Any]]] = {"tie": [Options(["cheapest", "first"])]}

    def __init__(self, *, tie: str = "cheapest"):
        self.tie = tie

    def _fit(self, quality: np.ndarray, cost: np.ndarray) -> None:
        self.mean_quality_, self.mean_cost_ = quality.mean(0), cost.mean(0)

    def _route(self, queries: Any, budget: float) -> np.ndarray:
        ok = self.mean_cost_ <= budget
        best = int(np.argmax(np.where(ok, self.mean_quality_, -np.inf))) if ok.any() else int(np.argmin(self.mean_cost_))
        return np.full(len(queries), best)


GOOD_TOYS = [ToyPredictor, ToyRegressor, ToyDetector, ToyPurifier, ToyAggregator, ToyAttack, ToyModelEdit, ToyAuditor, ToyRouter]
