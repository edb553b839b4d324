"""Lambda searches: choose the per-step trade-offs so that the expected cost on the tuning rows meets a budget.

``execute(lambdas) -> (mean cost, mean quality)`` runs the policy on the tuning rows with the realised
costs and qualities. Cost falls as lambda grows. Three strategies, as in the official code:

* :class:`ConstantSearch` -- all lambdas equal; lambda = 0 first (if that is within budget the budget does
  not bind), else start at ``max_lambda``, double while over budget, then bisect ``n_iter`` times keeping
  the feasible end. The final interval brackets the budget: its infeasible end is kept so the policy can
  mix the two ends to spend the budget exactly.
* :class:`RepetitiveConstantSearch` -- the same with ``[lambda] * d + [None] * (D - d)`` (stop after ``d``
  models) for every depth ``d``; the best feasible depth wins.
* :class:`TPESearch` -- optuna's TPE over the lambdas (optionally the depth), warm-started from the best
  result so far, objective ``-quality + (q0 / c0) * max(0, cost - c0)`` as in the official code; the best
  feasible trial wins. The official upper bound ``max(0, (1 - max_factor) * lambda0)`` is always 0 (and so
  fell back to ``max_lambda``); ours is ``max_factor * max(lambda0)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, InstanceOf, Interval, validate_value
from trustlab.core.seeding import as_seed, seed_alias

__all__ = ["ConstantSearch", "RepetitiveConstantSearch", "TPESearch", "SearchResult", "run_searches"]

Execute = Callable[[tuple[float | None, ...]], tuple[float, float]]
#: how far the doubling phase may go above the starting lambda
_MAX_DOUBLINGS = 60


@dataclass(frozen=True)
class SearchResult:
    """A lambda vector with its tuning cost and quality; ``lo_*`` is the infeasible end of the final
    bisection interval (None when there is none)."""

    lambdas: tuple[float | None, ...]
    cost: float
    quality: float
    budget: float
    lo_lambdas: tuple[float | None, ...] | None = None
    lo_cost: float | None = None
    lo_quality: float | None = None
    strategy: str = ""
    binding: bool = True
    evaluations: int = 0

    @property
    def feasible(self) -> bool:
        return self.cost <= self.budget * (1 + 1e-12) + 1e-300

    @property
    def gamma(self) -> float:
        """Probability of playing the infeasible end so that the expected tuning cost is the budget."""
        if self.lo_cost is None or self.lo_cost <= self.cost or not self.feasible:
            return 0.0
        return float(np.clip((self.budget - self.cost) / (self.lo_cost - self.cost), 0.0, 1.0))

    @property
    def expected_cost(self) -> float:
        g = self.gamma
        return self.cost if g == 0 else (1 - g) * self.cost + g * float(self.lo_cost)

    @property
    def expected_quality(self) -> float:
        g = self.gamma
        return self.quality if g == 0 else (1 - g) * self.quality + g * float(self.lo_quality)


def _bisect(execute: Execute, make: Callable[[float], tuple[float | None, ...]], budget: float, max_lambda: float,
            n_iter: int, name: str) -> SearchResult:
    c0, q0 = execute(make(0.0))
    evals = 1
    if c0 <= budget:
        return SearchResult(make(0.0), c0, q0, budget, strategy=name, binding=False, evaluations=evals)
    lo, hi = (0.0, c0, q0), None
    lam = max_lambda
    for _ in range(_MAX_DOUBLINGS):
        c, q = execute(make(lam))
        evals += 1
        if c <= budget:
            hi = (lam, c, q)
            break
        lo, lam = (lam, c, q), lam * 2
    if hi is None:  # over budget even at the largest lambda: the cheapest plan, infeasible
        return SearchResult(make(lo[0]), lo[1], lo[2], budget, strategy=name, evaluations=evals)
    for _ in range(n_iter):
        mid = (lo[0] + hi[0]) / 2
        c, q = execute(make(mid))
        evals += 1
        if c <= budget:
            hi = (mid, c, q)
        else:
            lo = (mid, c, q)
    return SearchResult(make(hi[0]), hi[1], hi[2], budget, make(lo[0]), lo[1], lo[2], name, evaluations=evals)


def _check(owner: str, **values: Any) -> None:
    rules = {"n_iter": [Interval(int, 0, None)], "n_trials": [Interval(int, 1, None)],
             "max_lambda": [None, Interval("real", 0, None, closed="neither")],
             "max_factor": [Interval("real", 0, None, closed="neither")], "from_scratch": [Boolean()],
             "optimize_depth": [Boolean()]}
    for name, value in values.items():
        validate_value(owner, name, value, rules[name])


#: the rules of ``search(execute, n, budget, max_lambda, init, random_state)`` (the policy's tuning call)
_SEARCH_ARGS: dict[str, list[Any]] = {
    "execute": ["callable"], "n": [Interval(int, 1, None)], "budget": [Interval("real", 0, None)],
    "max_lambda": [Interval("real", 0, None, closed="neither")], "init": [None, InstanceOf(SearchResult)],
    "random_state": ["random_state"]}


def _search_args(fn: Any) -> Any:
    """``seed_alias`` over ``validate_args(**_SEARCH_ARGS)``: the declaration every ``search`` shares."""
    return seed_alias(validate_args(**_SEARCH_ARGS)(fn))


@dataclass(frozen=True)
class ConstantSearch:
    """One lambda for every step: doubling from ``max_lambda`` (default: the policy's), then ``n_iter``
    bisection steps."""

    n_iter: int = 30
    max_lambda: float | None = None

    def __post_init__(self) -> None:
        _check(type(self).__name__, n_iter=self.n_iter, max_lambda=self.max_lambda)

    @_search_args
    def search(self, execute: Execute, n: int, budget: float, max_lambda: float, init: SearchResult | None,
               random_state: Any) -> SearchResult:
        """The bisection result (``init`` and ``random_state`` are not used: the search is deterministic)."""
        return _bisect(execute, lambda lam: (lam,) * n, budget, self.max_lambda or max_lambda, self.n_iter,
                       "constant")


@dataclass(frozen=True)
class RepetitiveConstantSearch(ConstantSearch):
    """``[lambda] * d + [None] * (n - d)`` for each depth ``d``: stop after ``d`` models."""

    @_search_args
    def search(self, execute: Execute, n: int, budget: float, max_lambda: float, init: SearchResult | None,
               random_state: Any) -> SearchResult:
        """The best depth's bisection result (``init`` and ``random_state`` are not used)."""
        results = [_bisect(execute, lambda lam, d=d: (lam,) * d + (None,) * (n - d), budget,
                           self.max_lambda or max_lambda, self.n_iter, f"repetitive(d={d})") for d in range(1, n + 1)]
        return best_of(results, budget)


@dataclass(frozen=True)
class TPESearch:
    """optuna TPE over the lambdas (each in ``[0, upper]``), warm-started from the best result so far.

    ``upper`` is ``max_factor * max(lambda0)`` (``max_lambda`` when ``from_scratch`` or without a start);
    ``optimize_depth`` also searches the number of steps.
    """

    n_trials: int = 50
    max_lambda: float | None = None
    max_factor: float = 4.0
    from_scratch: bool = False
    optimize_depth: bool = False

    def __post_init__(self) -> None:
        _check("TPESearch", n_trials=self.n_trials, max_lambda=self.max_lambda, max_factor=self.max_factor,
               from_scratch=self.from_scratch, optimize_depth=self.optimize_depth)

    @validate_args(init=_SEARCH_ARGS["init"], max_lambda=_SEARCH_ARGS["max_lambda"])
    def upper_bound(self, init: SearchResult | None, max_lambda: float) -> float:
        start = [v for v in (init.lambdas if init else ()) if v is not None]
        if self.from_scratch or not start or max(start) <= 0:
            return float(self.max_lambda or max_lambda)
        return float(self.max_factor * max(start))

    @_search_args
    def search(self, execute: Execute, n: int, budget: float, max_lambda: float, init: SearchResult | None,
               random_state: Any) -> SearchResult:
        """The best feasible TPE trial (optuna's sampler seeded with ``as_seed(random_state)``), else ``init``."""
        from trustlab.core.optional import require

        optuna = require("optuna", extra="xai", purpose="the TPE lambda search")
        upper = self.upper_bound(init, max_lambda)
        if init is None:
            c0, q0 = execute((upper,) * n)
            init = SearchResult((upper,) * n, c0, q0, budget, strategy="tpe-start")
        c0, q0 = init.cost, init.quality
        weight = q0 / c0 if c0 > 0 else 0.0
        trials: list[SearchResult] = []

        def objective(trial: Any) -> float:
            lams = [trial.suggest_float(f"lambda_{i}", 0.0, upper) for i in range(n)]
            depth = trial.suggest_int("depth", 1, n) if self.optimize_depth else n
            vec = tuple(lams[i] if i < depth else None for i in range(n))
            c, q = execute(vec)
            trials.append(SearchResult(vec, c, q, budget, strategy="tpe"))
            return -q + weight * max(0.0, c - c0)

        start = {f"lambda_{i}": float(min(v if v is not None else upper, upper)) for i, v in enumerate(init.lambdas)}
        if self.optimize_depth:
            start["depth"] = next((i for i, v in enumerate(init.lambdas) if v is None), n)
        verbosity = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        try:
            study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=as_seed(random_state)))
            study.enqueue_trial(start)
            study.optimize(objective, n_trials=self.n_trials)
        finally:
            optuna.logging.set_verbosity(verbosity)
        feasible = [t for t in trials if t.feasible]
        if not feasible:
            return init
        best = max(feasible, key=lambda t: t.quality)
        return SearchResult(best.lambdas, best.cost, best.quality, budget, strategy="tpe", evaluations=len(trials))


def best_of(results: Sequence[SearchResult], budget: float) -> SearchResult:
    """The feasible result of highest quality (its bracket kept); if none is feasible, the cheapest."""
    feasible = [r for r in results if r.feasible]
    if feasible:
        return max(feasible, key=lambda r: (r.quality, -r.cost))
    return min(results, key=lambda r: r.cost)


def run_searches(strategies: Sequence[Any], execute: Execute, n: int, budget: float, max_lambda: float,
                 seed: int) -> SearchResult:
    """Run the strategies in order (each warm-starts from the best so far) and keep the best feasible."""
    results: list[SearchResult] = []
    for i, strategy in enumerate(strategies):
        init = best_of(results, budget) if results else None
        results.append(strategy.search(execute, n, budget, max_lambda, init, seed + i))
    return best_of(results, budget)
