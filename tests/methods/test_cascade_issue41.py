"""Issue 41: the supermodel bound that grows with memory, the B1-tasks generator, online budget control."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest

from trustlab.core.exceptions import InputError, TrustlabError
from trustlab.methods.cascade import (
    BudgetWarning,
    CascadeRouter,
    ConstantSearch,
    OptimalCascade,
    OptimalRouter,
    SyntheticNoiseEstimator,
    ThresholdCascade,
    budget_grid,
    decide_controlled,
    synthetic_table,
)
from trustlab.methods.cascade._engine import Space, max_columns, space_bytes

KW = {"allow_in_sample": True, "random_state": 0, "search": [ConstantSearch(n_iter=20)]}


def test_supermodel_bound_follows_memory(monkeypatch):
    import trustlab.methods.cascade._engine as engine

    rank = np.arange(12)
    monkeypatch.setattr(engine, "_available_bytes", lambda: 4 * 13 * 3000**2)
    assert max_columns() == 3000
    assert Space(12, 6, rank).U == 2510  # over the old fixed bound of 2048
    monkeypatch.setattr(engine, "_available_bytes", lambda: 4 * 13 * 2000**2)
    with pytest.raises(TrustlabError, match=r"max_depth=6 gives 2510 supermodels.*max_depth <= 5"):
        Space(12, 6, rank)
    assert space_bytes(11, 5) == 13 * 1024**2


def test_eleven_models_at_the_papers_depth_runs():
    t = synthetic_table(120, 11, cost_ratio=1.5, random_state=0)
    e = SyntheticNoiseEstimator(noise="low", random_state=0).estimate(t)
    tune, test = e.subset(np.arange(60)), e.subset(np.arange(60, 120))
    p = CascadeRouter(max_depth=5, **KW).fit(tune.quality, tune.true_cost, estimates=tune)
    assert p.space_.U == 1024
    b = float(budget_grid(tune.quality.mean(0), tune.true_cost.mean(0))[10])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)
        d = p.decide(test, b)
    assert d.run.sum(1).max() <= 5 and d.run[np.arange(60), d.answer].all()


def test_synthetic_tasks_generator():
    plain = synthetic_table(300, 5, random_state=3)
    same = synthetic_table(300, 5, n_tasks=1, task_skill=2.0, random_state=3)
    np.testing.assert_array_equal(plain.quality, same.quality)
    np.testing.assert_array_equal(plain.cost, same.cost)
    assert plain.features is None
    t = synthetic_table(20000, 5, n_tasks=5, task_skill=4.0, random_state=3)
    task = t.features.argmax(1)
    assert t.features.shape == (20000, 5) and set(np.unique(t.features)) == {0.0, 1.0}
    best = [int(t.quality[task == k].mean(0).argmax()) for k in range(5)]
    assert best == [0, 1, 2, 3, 4]  # each model is the best on its own type
    # the specialty bonus averages to zero over types: mean accuracies stay in B1's range and keep their order
    assert np.all(np.diff(t.mean_quality()) > 0)
    np.testing.assert_array_equal(np.sort(t.mean_cost()), t.mean_cost())


def _shifted(seed: int = 0):
    """Tuning rows from one table; test rows whose costs are 25 % higher (a shift the tuning rows cannot see)."""
    e = SyntheticNoiseEstimator(noise="low", random_state=seed).estimate(synthetic_table(1600, 4, random_state=seed))
    tune, test = e.subset(np.arange(600)), e.subset(np.arange(600, 1600))
    return tune, replace(test, true_cost=test.true_cost * 1.25)


@pytest.mark.parametrize("cls", [OptimalRouter, ThresholdCascade, OptimalCascade, CascadeRouter])
def test_controller_meets_a_shifted_budget(cls):
    tune, test = _shifted()
    p = cls(**KW).fit(tune.quality, tune.true_cost, estimates=tune)
    budgets = budget_grid(tune.quality.mean(0), tune.true_cost.mean(0), 3)[1:-2]
    plain_err, ctl_err = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)
        for b in budgets:
            plain = p.decide(test, float(b))
            d = decide_controlled(p, test, float(b), batch=25)
            if not d.info["binding"]:
                continue
            assert d.info["scale"][0] == 1.0
            first = slice(0, 25)
            np.testing.assert_array_equal(d.run[first], plain.run[first])  # the first batch is the tuned policy
            plain_err.append(abs(plain.cost(test.true_cost).mean() / b - 1))
            ctl_err.append(abs(d.cost(test.true_cost).mean() / b - 1))
    assert ctl_err and np.mean(plain_err) > 0.1
    assert np.mean(np.array(ctl_err) <= 0.05) >= 0.8 and np.mean(ctl_err) < np.mean(plain_err) / 2


def test_controller_refuses_estimates_without_costs_and_keeps_non_binding_budgets():
    tune, test = _shifted()
    p = OptimalRouter(**KW).fit(tune.quality, tune.true_cost, estimates=tune)
    with pytest.raises(InputError, match="true_cost"):
        decide_controlled(p, replace(test, true_cost=None), 1e-3)
    top = float(tune.true_cost.sum(1).mean() * 2)  # never binds
    d, plain = decide_controlled(p, test, top), p.decide(test, top)
    assert not d.info["binding"]
    np.testing.assert_array_equal(d.run, plain.run)
    with pytest.raises(TrustlabError, match="batch"):
        decide_controlled(p, test, 1e-3, batch=0)
