"""Deliberately broken toy methods: each must make the matching common check fail."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from trustlab.core.constraints import Interval
from trustlab.core.roles import AttackResult
from trustlab.core.validation import check_array

from toys import ToyAggregator, ToyAttack, ToyModelEdit, ToyPredictor, ToyPurifier, ToyRegressor


class ValidatesInInit(ToyPredictor):
    def __init__(self, *, temperature: float = 1.0, noise: float = 0.0, random_state: Any = None):
        if not temperature > 0:
            raise ValueError("temperature must be positive")
        super().__init__(temperature=temperature, noise=noise, random_state=random_state)


class SetsAttributeInInit(ToyPredictor):
    def __init__(self, *, temperature: float = 1.0, noise: float = 0.0, random_state: Any = None):
        super().__init__(temperature=temperature, noise=noise, random_state=random_state)
        self.history_: list[float] = []


class MutatesInput(ToyPredictor):
    def _fit(self, X: np.ndarray, y: np.ndarray) -> None:
        X -= X.mean(0)  # in place: changes the caller's array
        super()._fit(X, y)


class IgnoresRandomState(ToyPredictor):
    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"noise": 0.1, "random_state": 0}]

    def _fit(self, X: np.ndarray, y: np.ndarray) -> None:
        self._rng = np.random.default_rng()  # ignores random_state
        super()._fit(X, y)


class AcceptsNaN(ToyPredictor):
    def _validate_X(self, X: Any, *, reset: bool) -> Any:
        arr = check_array(X, allow_nan=True)
        if reset:
            self.n_features_in_ = arr.shape[1]
        return np.nan_to_num(arr)


class NaNLeakingPredictor(ToyPredictor):
    """Declares NaN as valid input (tag allow_nan) but lets it reach its outputs."""

    tags: ClassVar[dict[str, Any]] = {"allow_nan": True}

    def _validate_X(self, X: Any, *, reset: bool) -> Any:
        arr = check_array(X, allow_nan=True)
        if reset:
            self.n_features_in_ = arr.shape[1]
        return arr

    def _fit(self, X: np.ndarray, y: np.ndarray) -> None:
        super()._fit(np.nan_to_num(X), y)


class SkipsValidation(ToyPredictor):
    def _validate_params(self) -> None:
        pass


class WrongErrorType(ToyPredictor):
    def _validate_params(self) -> None:
        if not (isinstance(self.temperature, float) and self.temperature > 0):
            raise ValueError("bad temperature")


class MissingConstraint(ToyPredictor):
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "temperature": [Interval(float, 0, None, closed="neither")], "random_state": ["random_state"],
    }


class UnnormalisedProba(ToyPredictor):
    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return super()._predict_proba(X) * 1.5


class Unpicklable(ToyPredictor):
    def _fit(self, X: np.ndarray, y: np.ndarray) -> None:
        super()._fit(X, y)
        self.scorer_ = lambda z: z  # lambdas cannot be pickled


class NonFiniteRegressor(ToyRegressor):
    """Lets an overflow through: predictions of +inf where the first feature is large."""

    def _predict(self, X: np.ndarray) -> np.ndarray:
        out = super()._predict(X)
        with np.errstate(over="ignore"):
            return out * np.where(X[:, :1] > 1.0, np.exp(1e4), 1.0).reshape((-1,) + (1,) * (out.ndim - 1))


class FirstTargetOnlyRegressor(ToyRegressor):
    """Fits every target but predicts only the first one for a 2-d y."""

    def _predict(self, X: np.ndarray) -> np.ndarray:
        out = super()._predict(X)
        return out[:, 0] if out.ndim == 2 else out


class OrderDependentAggregator(ToyAggregator):
    def _aggregate(self, updates: list[dict[str, np.ndarray]], weights: np.ndarray) -> dict[str, np.ndarray]:
        mean = super()._aggregate(updates, weights)
        return {k: 0.5 * v + 0.5 * updates[0][k] for k, v in mean.items()}


class OrderDependentShrinker(OrderDependentAggregator):
    """Declares itself a shrinking denoiser: the order-invariance check must still apply."""

    tags: ClassVar[dict[str, Any]] = {"consensus_fixed_point": False}


class SumAggregator(ToyAggregator):
    def _aggregate(self, updates: list[dict[str, np.ndarray]], weights: np.ndarray) -> dict[str, np.ndarray]:
        return {k: sum(u[k] for u in updates) for k in updates[0]}


class OverBudgetAttack(ToyAttack):
    def _generate(self, inputs: Any, budget: float) -> AttackResult:
        res = super()._generate(inputs, budget)
        res.cost = res.cost + 0.1
        return res


class LeakyModelEdit(ToyModelEdit):
    def _apply(self, model: Any, handle: Any) -> None:
        model.register_forward_hook(lambda m, i, o: o)  # not registered with the handle: survives restore()
        super()._apply(model, handle)


class NonRestoringEdit(ToyModelEdit):
    _modifies_weights = False  # claims a hook-only edit, but changes weights


class RangeBreakingPurifier(ToyPurifier):
    def _transform(self, X: np.ndarray) -> np.ndarray:
        return X * 2.0


class ShapeChangingPurifier(ToyPurifier):
    def _transform(self, X: np.ndarray) -> np.ndarray:
        return X[:, :-1]


class SeedsGlobalRNG(ToyPredictor):
    """Bypasses the role's scope and seeds numpy's global RNG, as a verb outside the roles would."""

    def _verb_scope(self) -> Any:
        import contextlib

        @contextlib.contextmanager
        def scope() -> Any:
            self._begin()
            np.random.seed(0)
            yield self._rng

        return scope()


class LeaksBLASThreads(ToyPredictor):
    """Limits the BLAS/OpenMP pools to one thread and never restores them."""

    def _fit(self, X: np.ndarray, y: np.ndarray) -> None:
        from threadpoolctl import threadpool_info, threadpool_limits

        counts = {p["num_threads"] for p in threadpool_info()}
        threadpool_limits(limits=max(counts) + 1 if counts else 1)  # not as a context: the change persists
        super()._fit(X, y)


class LeaksTorchThreads(ToyPredictor):
    """Bypasses the role's scope (which restores torch's thread count) and sets torch's intra-op threads
    for good, as a verb outside the roles would (what amun's experiment once did)."""

    def _verb_scope(self) -> Any:
        import contextlib

        import torch

        @contextlib.contextmanager
        def scope() -> Any:
            self._begin()
            torch.set_num_threads(torch.get_num_threads() + 1)  # not restored: the change persists
            yield self._rng

        return scope()


#: broken class -> the check that must fail on it
class InvertedDecisionFunction(ToyPredictor):
    """decision_function positive for classes_[0] (what DeceptionProbe did with its default string labels)."""

    def decision_function(self, X: Any) -> np.ndarray:
        P = self.predict_proba(X)
        return P[:, 0] - P[:, 1]


class SwappedProbaColumns(ToyPredictor):
    """predict is right, but predict_proba's columns are in the reverse order of classes_."""

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return super()._predict_proba(X)[:, ::-1]

    def _predict(self, X: np.ndarray) -> np.ndarray:
        return super()._predict_proba(X).argmax(axis=1)


BROKEN = {
    ValidatesInInit: "check_init_stores_params",
    SetsAttributeInInit: "check_init_stores_params",
    MutatesInput: "check_inputs_not_mutated",
    IgnoresRandomState: "check_deterministic",
    AcceptsNaN: "check_bad_inputs_raise",
    NaNLeakingPredictor: "check_bad_inputs_raise",
    SkipsValidation: "check_invalid_params_raise",
    WrongErrorType: "check_invalid_params_raise",
    MissingConstraint: "check_constraints_cover_params",
    UnnormalisedProba: "check_role_invariants",
    InvertedDecisionFunction: "check_classifier_semantics",
    SwappedProbaColumns: "check_classifier_semantics",
    NonFiniteRegressor: "check_role_invariants",
    FirstTargetOnlyRegressor: "check_role_invariants",
    Unpicklable: "check_pickle_roundtrip",
    OrderDependentAggregator: "check_role_invariants",
    OrderDependentShrinker: "check_role_invariants",
    SumAggregator: "check_role_invariants",
    OverBudgetAttack: "check_role_invariants",
    LeakyModelEdit: "check_role_invariants",
    NonRestoringEdit: "check_role_invariants",
    RangeBreakingPurifier: "check_role_invariants",
    ShapeChangingPurifier: "check_role_invariants",
    SeedsGlobalRNG: "check_no_global_side_effects",
    LeaksBLASThreads: "check_no_global_side_effects",
    LeaksTorchThreads: "check_no_global_side_effects",
}
