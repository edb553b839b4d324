"""What ``trustlab route TABLE`` does: fit a policy on a user's table, report its curve, save or reuse it."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf, Interval, Options
from trustlab.core.exceptions import InputError

__all__ = ["RouteReport", "route_table", "route_saved", "POLICY_NAMES", "ESTIMATOR_NAMES"]

POLICY_NAMES = ("cascade-router", "optimal-cascade", "router", "threshold")
ESTIMATOR_NAMES = ("auto", "classification", "open-form", "synthetic-low", "synthetic-medium", "synthetic-high")
_PATH = [InstanceOf(str, Path)]


@dataclass
class RouteReport:
    """A fitted policy with its held-out quality-cost curve."""

    policy: Any
    budgets: np.ndarray
    cost: np.ndarray
    quality: np.ndarray
    auc: float
    linear_auc: float
    model_quality: dict[str, float]
    model_cost: dict[str, float]
    target: float | None
    budget_for_target: float | None
    n_train: int
    n_test: int

    def lines(self) -> list[str]:
        """The report as text lines (what the command prints)."""
        p = self.policy
        out = [f"policy: {type(p).__name__}({', '.join(f'{k}={v!r}' for k, v in p.get_params(deep=False).items() if k not in ('estimator', 'search'))})",
               f"estimator: {type(p.estimator_).__name__ if p.estimator_ is not None else 'precomputed'}; "
               f"fitted on {self.n_train} rows, evaluated on {self.n_test} held-out rows",
               "models (held-out mean quality, mean cost): " + ", ".join(
                   f"{m} {self.model_quality[m]:.4f} / {self.model_cost[m]:.4g}" for m in self.model_quality),
               f"AUC (average quality over the budget range): {100 * self.auc:.2f} vs linear baseline "
               f"{100 * self.linear_auc:.2f}",
               "budget        cost          quality"]
        out += [f"{b:<13.6g} {c:<13.6g} {q:.4f}" for b, c, q in zip(self.budgets, self.cost, self.quality)]
        if self.target is not None:
            out.append(f"budget that reaches quality {self.target}: " + (
                f"{self.budget_for_target:.6g}" if self.budget_for_target is not None else "not reached on this grid"))
        return out


def _make_policy(policy: str, estimator: str, max_depth: int | None, seed: int) -> Any:
    from trustlab.methods.cascade._estimators import (
        ClassificationEstimator,
        OpenFormEstimator,
        SyntheticNoiseEstimator,
    )
    from trustlab.methods.cascade._policies import (
        CascadeRouter,
        OptimalCascade,
        OptimalRouter,
        ThresholdCascade,
    )

    est: Any = {"auto": "auto", "classification": ClassificationEstimator(), "open-form": OpenFormEstimator()}.get(
        estimator) or SyntheticNoiseEstimator(noise=estimator.split("-")[1], random_state=seed)
    kw: dict[str, Any] = {"estimator": est, "random_state": seed, "allow_in_sample": estimator.startswith("synthetic")}
    if policy == "cascade-router":
        return CascadeRouter(max_depth=max_depth, **kw)
    if policy == "optimal-cascade":
        return OptimalCascade(max_depth=max_depth, **kw)
    return (OptimalRouter if policy == "router" else ThresholdCascade)(**kw)


@validate_args(path=_PATH, policy=[Options(list(POLICY_NAMES))], estimator=[Options(list(ESTIMATOR_NAMES))],
               test_size=[Interval("real", 0, 1, closed="neither")], target=[None, Interval("real", None, None)],
               n_per_segment=[Interval(int, 2, None)], max_depth=[None, Interval(int, 1, None)],
               random_state=[Interval(int, 0, None)])
def route_table(path: str | Path, *, policy: str = "cascade-router", estimator: str = "auto", test_size: float = 0.5,
                target: float | None = None, n_per_segment: int = 10, max_depth: int | None = None,
                random_state: int = 0) -> RouteReport:
    """Fit ``policy`` on part of the user's table and evaluate it on the held-out rows at every budget of the
    grid between the hull models' costs. A table without answers needs a ``synthetic-*`` estimator (a
    simulation that reads the true quality)."""
    from trustlab.methods.cascade._evaluate import (
        auc,
        budget_grid,
        cost_to_reach,
        evaluate_policy,
        linear_curve,
    )
    from trustlab.methods.cascade._io import load_selection_table
    from trustlab.methods.cascade._policies import BudgetWarning, fit_policy

    table = load_selection_table(path)
    if table.answers is None and not estimator.startswith("synthetic"):
        raise InputError(f"The table {str(path)!r} has no 'answer' column, so no quality estimator can be fitted; "
                         "add the models' answers, or simulate estimates with --estimator synthetic-low/medium/high.")
    train, test = table.split(test_size, random_state=random_state)
    p = fit_policy(_make_policy(policy, estimator, max_depth, random_state), train)
    mq, mc = test.mean_quality(), test.mean_cost()
    budgets = budget_grid(mq, mc, n_per_segment)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)
        cv = evaluate_policy(p, test, budgets)
    ref = {"c_min": float(mc.min()), "c_max": float(mc.max()), "q_min": float(mq.min())}
    lin = linear_curve(mq, mc)
    reach = None if target is None else cost_to_reach(cv.cost, cv.quality, target)
    return RouteReport(p, budgets, cv.cost, cv.quality, auc(cv.cost, cv.quality, **ref),
                       auc(lin.cost, lin.quality, **ref), dict(zip(table.models, mq.tolist())),
                       dict(zip(table.models, mc.tolist())), target, reach, train.n_queries, test.n_queries)


@validate_args(policy_path=_PATH, table_path=_PATH, budget=[Interval("real", 0, None)])
def route_saved(policy_path: str | Path, table_path: str | Path, budget: float) -> tuple[Any, Any]:
    """Load a policy JSON and route the table's queries at ``budget``: returns (table, RouteDecision)."""
    from trustlab.methods.cascade._io import load_selection_table
    from trustlab.methods.cascade._serialize import policy_from_json

    p = Path(policy_path)
    if not p.is_file():
        raise InputError(f"The policy file {str(p)!r} does not exist.")
    policy = policy_from_json(p.read_text())
    table = load_selection_table(table_path)
    return table, policy.decide(table, float(budget))
