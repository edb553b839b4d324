"""The units issue 29 lists go through the one executor interface: the fits of the multiplicity audit and
the lambda searches of a cascade policy's budget grid. Their results equal the in-process run's for the same
seeds, on the local executor and on a process pool (Ray: tests/scaleout, marker ``dist``)."""

from __future__ import annotations

import functools
import json
import warnings

import numpy as np
import pytest

from trustlab.core.executor import LocalExecutor, ProcessExecutor


class _Spy(LocalExecutor):
    """A local executor that records what it was asked to map."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []

    def map(self, fn, items, **kwargs):
        items = list(items)
        self.calls.append((kwargs.get("desc", ""), len(items)))
        return super().map(fn, items, **kwargs)


@pytest.fixture(scope="module")
def pool():
    with ProcessExecutor(2) as ex:
        yield ex


def _audit_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 4)).astype(np.float32)
    y = (X[:, 0] + 0.8 * rng.normal(size=150) > 0).astype(np.int64)
    return (X[:70], y[:70], X[70:110], y[70:110]), {"X_val": X[110:], "y_val": y[110:]}


def _report(audit, args, kw, **extra) -> str:
    d = audit.audit(*args, **kw, **extra).to_dict()
    d.pop("timings")  # wall times differ from run to run
    return json.dumps(d, sort_keys=True)


def _forest(seed: int):
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=8, max_features=1, random_state=seed)


@pytest.mark.parametrize("family", ["sklearn", "torch"])
def test_multiplicity_fits_through_an_executor_equal_the_in_process_audit(family, pool):
    from trustlab.experiments.multiplicity import _TorchMLP
    from trustlab.methods.multiplicity import MultiplicityAudit

    args, kw = _audit_data()
    factory = _forest if family == "sklearn" else functools.partial(_TorchMLP, epochs=3)
    audit = MultiplicityAudit(factory=factory, n_models=4, bootstrap=family == "sklearn", k=4, sigma=0.3,
                              relative=False, mc_masks=2 if family == "torch" else 0, random_state=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a degenerate toy model may be warned about
        base = _report(audit, args, kw)
        spy = _Spy()
        assert _report(audit, args, kw, executor=spy) == base
        assert spy.calls == [("multiplicity fits", 4)]  # one task per model
        assert _report(audit, args, kw, executor=pool) == base


def test_multiplicity_audit_refuses_a_non_executor():
    from trustlab.core.exceptions import InputError
    from trustlab.methods.multiplicity import MultiplicityAudit

    args, kw = _audit_data()
    with pytest.raises(InputError, match="'executor' argument of MultiplicityAudit.audit"):
        MultiplicityAudit(factory=_forest, n_models=2, mc_masks=0).audit(*args, **kw, executor="ray")


def _cascade():
    from trustlab.methods.cascade import SyntheticNoiseEstimator, budget_grid, synthetic_table

    est = SyntheticNoiseEstimator(noise="medium", random_state=0).estimate(synthetic_table(240, 3, random_state=0))
    tune, test = est.subset(np.arange(120)), est.subset(np.arange(120, 240))
    return tune, test, budget_grid(test.quality.mean(0), test.true_cost.mean(0), 3)


def _fitted(kind: str, tune):
    from trustlab.methods.cascade import CascadeRouter, ConstantSearch, ThresholdCascade

    cls = CascadeRouter if kind == "cascade routing" else ThresholdCascade
    extra = {"n_samples": 16, "max_depth": 2} if cls is CascadeRouter else {}
    return cls(search=[ConstantSearch(n_iter=6)], allow_in_sample=True, random_state=0, **extra).fit(
        tune.quality, tune.true_cost, estimates=tune)


@pytest.mark.parametrize("kind", ["cascade routing", "threshold cascade"])
def test_cascade_budget_grid_through_an_executor_equals_the_in_process_curve(kind, pool):
    from trustlab.methods.cascade import BudgetWarning, evaluate_policy

    tune, test, budgets = _cascade()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)
        base = evaluate_policy(_fitted(kind, tune), test, budgets)
        spy = _Spy()
        for ex in (spy, pool):
            policy = _fitted(kind, tune)
            cv = evaluate_policy(policy, test, budgets, executor=ex)
            np.testing.assert_array_equal(cv.per_query_cost, base.per_query_cost)
            np.testing.assert_array_equal(cv.per_query_quality, base.per_query_quality)
            assert sorted(policy.tuned_) == sorted({float(b) for b in budgets})
    assert spy.calls == [(f"{type(policy).__name__} budget grid", len(set(budgets.tolist())))]
    spy.calls.clear()
    policy.tune_grid(budgets, executor=spy)  # already tuned: nothing to map
    assert spy.calls == []


def test_an_infeasible_budget_tuned_on_a_worker_is_still_warned_about():
    from trustlab.methods.cascade import BudgetWarning

    tune, _, budgets = _cascade()
    policy = _fitted("threshold cascade", tune)
    with pytest.warns(BudgetWarning, match="below the cheapest expected cost"):
        policy.tune_grid([float(budgets.min()) / 100], executor=LocalExecutor())


def _tiny_llm_fine_tune(backbone, seed):
    from trustlab.methods.multiplicity import TabularLLMClassifier

    return TabularLLMClassifier(backbone=backbone, steps=2, batch_size=4, columns=["a", "b", "c"], random_state=seed)


def test_llm_fine_tunes_on_a_pool_come_back_as_adapters_on_this_processs_backbone(pool):
    """Issue 46: a fine-tune's backbone stays in the worker (built there once from its name); what comes back
    is the adapter, re-attached to the driver's backbone; the report equals the in-process audit."""
    import pickle

    from trustlab.methods.multiplicity import MultiplicityAudit, TabularLLM

    bb = TabularLLM("tiny")
    rng = np.random.default_rng(0)
    X = rng.integers(0, 50, size=(32, 3)).astype(float)
    y = (X[:, 0] > 25).astype(np.int64)
    fitted = _tiny_llm_fine_tune(bb, 3).fit(X[:16], y[:16])
    backbone_bytes = sum(p.numel() * p.element_size() for p in bb.model.parameters())
    assert len(pickle.dumps(fitted)) < backbone_bytes / 10  # the adapter and settings, not the backbone
    assert pickle.loads(pickle.dumps(fitted)).backbone_ is bb
    audit = MultiplicityAudit(factory=functools.partial(_tiny_llm_fine_tune, bb), n_models=2, k=2, mc_masks=0,
                              delta=1.0, rate_tolerance=1.0, random_state=5)
    args = (X[:16], y[:16], X[16:], y[16:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        on_pool = json.loads(_report(audit, args, {}, executor=pool))
        local = json.loads(_report(audit, args, {}, executor=LocalExecutor()))
    # identical fits and decisions; the driver's float32 forwards for S can differ by 1 ulp with the order in
    # which its backbone's replay caches were filled (here: by the pool run's predictions first)
    _assert_close(on_pool, local)


def _assert_close(a, b, path="report"):
    """Equal JSON values, floats within float32 rounding (rtol 1e-6); ints, strings and structure exactly."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            _assert_close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert abs(a - b) <= 1e-7 + 1e-6 * abs(b), (path, a, b)
    else:
        assert a == b, (path, a, b)
