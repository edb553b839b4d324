"""Role invariants as hypothesis properties (used by ``check_role_invariants``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from trustlab.testing._inputs import run_verbs

__all__ = ["ROLE_PROPERTIES"]

_SETTINGS = settings(max_examples=8, deadline=None, derandomize=True, database=None,
                     suppress_health_check=list(HealthCheck))


def _predictor(est: Any, inputs: dict[str, Any]) -> None:
    e = clone(est).fit(inputs["X"], inputs["y"])
    P = e.predict_proba(inputs["X"])
    assert np.all(P >= -1e-12) and np.all(P <= 1 + 1e-12), "probabilities outside [0, 1]"
    assert np.allclose(P.sum(axis=1), 1.0, atol=1e-6), f"probabilities do not sum to 1 (max dev {np.abs(P.sum(1) - 1).max():.3g})"
    pred = e.predict(inputs["X"])
    assert set(np.unique(pred)) <= set(e.classes_.tolist()), "predict returned labels not in classes_"


def _regressor(est: Any, inputs: dict[str, Any]) -> None:
    from sklearn.metrics import r2_score

    X, y = inputs["X"], np.asarray(inputs["y"], dtype=float)
    e = clone(est).fit(X, y)
    pred = e.predict(X)
    assert pred.shape == y.shape, f"predict returned shape {pred.shape} for a y of shape {y.shape}"
    assert np.isfinite(pred).all(), "predict returned non-finite values"
    assert np.isclose(e.score(X, y), r2_score(y, pred)), "score is not the R² of predict"
    y2 = y.reshape(len(y), -1)
    Y = np.column_stack([y2[:, 0], -2.0 * y2[:, 0] + 1.0])  # two targets: the shape must follow y
    P = clone(est).fit(X, Y).predict(X)
    assert P.shape == Y.shape, f"predict returned shape {P.shape} for a 2-d y of shape {Y.shape}"
    assert np.isfinite(P).all(), "predict returned non-finite values for a 2-d y"


def _detector(est: Any, inputs: dict[str, Any]) -> None:
    e = clone(est).fit(inputs["X"], inputs.get("y"))
    s, p = e.score_samples(inputs["X"]), e.predict(inputs["X"])
    assert set(np.unique(p)) <= {0, 1}, "predict must return 0/1"
    assert np.array_equal(p, (s > e.threshold_).astype(int)), "predict disagrees with score_samples > threshold_"


def _purifier(est: Any, inputs: dict[str, Any]) -> None:
    lo, hi = type(est).get_tags().get("input_range", (None, None))
    X = inputs["X"]
    out = clone(est).transform(X)
    assert out.shape == X.shape, f"transform changed the shape {X.shape} -> {out.shape}"
    if lo is not None:
        assert out.min() >= lo - 1e-6 and out.max() <= hi + 1e-6, f"transform left the range [{lo}, {hi}]"


def _as_dicts(updates: list[Any]) -> list[dict[str, np.ndarray]]:
    return [u if isinstance(u, dict) else {"": np.asarray(u)} for u in updates]


def _aggregator(est: Any, inputs: dict[str, Any]) -> None:
    updates, weights = inputs["updates"], inputs.get("weights")
    n = len(updates)

    @_SETTINGS
    @given(st.permutations(list(range(n))))
    def order_invariant(perm: list[int]) -> None:
        a = clone(est).aggregate(updates, weights)
        w = None if weights is None else np.asarray(weights)[perm]
        b = clone(est).aggregate([updates[i] for i in perm], w)
        for k in _as_dicts([a])[0]:
            np.testing.assert_allclose(_as_dicts([b])[0][k], _as_dicts([a])[0][k], rtol=1e-6, atol=1e-8,
                                       err_msg="aggregate depends on the order of the clients")

    order_invariant()
    if not type(est).get_tags().get("consensus_fixed_point", True):
        return  # a shrinking denoiser (declared by its tag) need not return identical updates unchanged
    same = [updates[0]] * n
    out = _as_dicts([clone(est).aggregate(same, weights)])[0]
    for k, v in _as_dicts([updates[0]])[0].items():
        np.testing.assert_allclose(out[k], v, rtol=1e-6, atol=1e-8,
                                   err_msg="aggregate of identical updates must return that update")


def _attack(est: Any, inputs: dict[str, Any]) -> None:
    base = float(inputs["budget"])

    @_SETTINGS
    @given(st.floats(min_value=0.0, max_value=1.0))
    def within_budget(frac: float) -> None:
        res = clone(est).generate(inputs["inputs"], base * frac)
        assert np.all(np.asarray(res.cost) <= base * frac + 1e-9), "attack exceeded its budget"

    within_budget()


def _hook_count(model: Any) -> int:
    n = 0
    for m in model.modules():
        for attr in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_full_backward_hooks",
                     "_full_backward_pre_hooks", "_forward_hooks_with_kwargs"):
            n += len(getattr(m, attr, {}) or {})
    return n


def _model_edit(est: Any, inputs: dict[str, Any]) -> None:
    from trustlab.core.base import state_dict_hash

    factory = inputs["model"]
    model = factory() if callable(factory) and not hasattr(factory, "state_dict") else factory
    before, hooks = state_dict_hash(model), _hook_count(model)
    handle = clone(est).apply(model, *inputs.get("args", ()), **inputs.get("kwargs", {}))
    handle.restore()
    assert _hook_count(model) == hooks, "a hook survived restore()"
    assert state_dict_hash(model) == before, "restore() did not give back the exact original weights"
    # a forward that raises inside apply must leave no hook and the weights intact
    original_forward = model.forward

    def exploding(*a: Any, **k: Any) -> Any:
        raise RuntimeError("forward failed on purpose")

    model.forward = exploding
    try:
        clone(est).apply(model, *inputs.get("args", ()), **inputs.get("kwargs", {})).restore()
    except RuntimeError:
        pass
    finally:
        model.forward = original_forward
    assert _hook_count(model) == hooks, "a hook survived an exception inside apply()"
    assert state_dict_hash(model) == before, "weights changed after an exception inside apply()"


def _auditor(est: Any, inputs: dict[str, Any]) -> None:
    report = run_verbs(clone(est), inputs)["audit"]
    assert dataclasses.is_dataclass(report), "audit must return a report dataclass"


def _router(est: Any, inputs: dict[str, Any]) -> None:
    e = clone(est).fit(inputs["quality"], inputs["cost"])

    @_SETTINGS
    @given(st.floats(min_value=0.0, max_value=10.0))
    def in_range(budget: float) -> None:
        r = e.route(inputs["queries"], budget)
        assert r.shape[0] == len(inputs["queries"]), "route must return one model per query"

    in_range()


ROLE_PROPERTIES: dict[str, Callable[[Any, dict[str, Any]], None]] = {
    "predictor": _predictor,
    "regressor": _regressor,
    "detector": _detector,
    "purifier": _purifier,
    "aggregator": _aggregator,
    "attack": _attack,
    "model_edit": _model_edit,
    "auditor": _auditor,
    "router": _router,
}
