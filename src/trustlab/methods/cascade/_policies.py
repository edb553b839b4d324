"""The four policies as Routers: optimal routing, the threshold cascade, the optimal cascade, cascade routing.

Each is fitted on a table (``fit(quality, cost, answers=..., features=...)`` or with precomputed
``estimates=``): the quality estimator is fitted on one part of the rows and the lambdas are tuned on the
other (the spec: estimators and lambdas never on the same rows unless ``allow_in_sample``). A budget is
tuned on first use (``tune(budget)``, cached) and ``decide(queries, budget)`` / ``route(queries, budget)``
run the policy on new queries (a SelectionTable, or QualityEstimates).

Budget mixing: the constant search ends on a bracket ``[lambda_feasible, lambda_over]``; every query plays
the over-budget end with probability ``gamma = (B - c_feasible) / (c_over - c_feasible)``, so the expected
cost on the tuning rows is exactly ``B``. This is the paper's tie mixing (cheapest maximiser with
probability ``1 - gamma``, most expensive with ``gamma``) in the limit of a bracket shrunk to the breakpoint,
without relying on rounding the trade-offs to create ties. (The official ``Router`` used ``1 - gamma`` for
the expensive model.)
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np
from sklearn.base import clone

from trustlab.core.arguments import ArrayLike, HasMethods, SequenceOf, validate_args
from trustlab.core.constraints import Boolean, InstanceOf, Interval, Options, RandomStateRule, Satisfies
from trustlab.core.exceptions import InputError, NotFittedError
from trustlab.core.executor import Executor
from trustlab.core.roles import RouteDecision
from trustlab.core.roles import Router as RouterRole
from trustlab.core.seeding import derive_seed, spawn_seed
from trustlab.core.validation import check_is_fitted
from trustlab.methods.cascade._engine import Engine, Space, Trajectory, select_answer, set_costs
from trustlab.methods.cascade._estimates import QualityEstimates, mask_bits, sobol_normal
from trustlab.methods.cascade._estimators import QualityEstimator, SyntheticNoiseEstimator, auto_estimator
from trustlab.methods.cascade._lambda import (
    ConstantSearch,
    RepetitiveConstantSearch,
    SearchResult,
    TPESearch,
    run_searches,
)
from trustlab.methods.cascade._paper import PAPER
from trustlab.methods.cascade._table import SelectionTable, synthetic_table

__all__ = ["OptimalRouter", "ThresholdCascade", "OptimalCascade", "CascadeRouter", "BudgetWarning", "fit_policy"]


class BudgetWarning(UserWarning):
    """A budget the policy cannot meet on its tuning rows (it then runs its cheapest plan)."""


_SEARCHES = (ConstantSearch, RepetitiveConstantSearch, TPESearch)
_COMMON: dict[str, list[Any]] = {
    "estimator": [Options(["auto"]), InstanceOf(QualityEstimator)],
    "search": [None, SequenceOf(InstanceOf(*_SEARCHES))],
    "max_lambda": [None, Interval("real", 0, None, closed="neither")],
    "estimator_fraction": [Interval("real", 0, 1, closed="neither")],
    "allow_in_sample": [Boolean()],
    "random_state": [RandomStateRule()],
}
_SUPERMODEL: dict[str, list[Any]] = {
    "n_samples": [Interval(int, 1, 65536)], "use_uncertainty": [Boolean()], "correlated": [Boolean()],
    "max_depth": [None, Interval(int, 1, None)],
}
_CACHE = 4


def _test_inputs() -> dict[str, Any]:
    t = synthetic_table(60, 3, base_cost=1.0, cost_ratio=2.0, random_state=0)
    q = synthetic_table(20, 3, base_cost=1.0, cost_ratio=2.0, random_state=1)
    return {"quality": t.quality, "cost": t.cost, "queries": SelectionTable(quality=q.quality, cost=q.cost),
            "budget": 2.0}


class _Policy(RouterRole):
    """Shared machinery: fitting the estimator, tuning budgets, mixing, routing new queries."""

    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {"stochastic": True}
    _constraints: ClassVar[dict[str, list[Any]]] = dict(_COMMON)
    _default_search: ClassVar[tuple[Any, ...]] = (ConstantSearch(n_iter=30),)
    _uses_samples: ClassVar[bool] = False

    def __init__(self, *, estimator: Any = "auto", search: Any = None, max_lambda: float | None = None,
                 estimator_fraction: float = 0.5, allow_in_sample: bool = False, random_state: Any = None) -> None:
        self.estimator = estimator
        self.search = search
        self.max_lambda = max_lambda
        self.estimator_fraction = estimator_fraction
        self.allow_in_sample = allow_in_sample
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"estimator": SyntheticNoiseEstimator(noise="low", random_state=0), "allow_in_sample": True,
                 "search": [ConstantSearch(n_iter=8)], "random_state": 0}]

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        return _test_inputs()

    # ---------------------------------------------------------------------------------- fitting
    def _fit(self, quality: np.ndarray, cost: np.ndarray, *, answers: Any = None, features: Any = None,
             estimates: QualityEstimates | None = None, queries: Any = None, models: Any = None) -> None:
        if models is None and isinstance(estimates, QualityEstimates):
            models = estimates.models
        table = SelectionTable(quality=quality, cost=cost, answers=answers, features=features, queries=queries,
                               models=models)
        if table.n_queries < 2:
            raise InputError(f"{type(self).__name__}.fit needs at least 2 queries. Got {table.n_queries}.")
        if estimates is not None:
            if not isinstance(estimates, QualityEstimates) or (estimates.n, estimates.k) != quality.shape:
                raise InputError(f"The 'estimates' argument of {type(self).__name__}.fit must be QualityEstimates for "
                                 f"the same {quality.shape} table.")
            tuning, self.estimator_ = replace(estimates, quality=table.quality, true_cost=table.cost), None
        else:
            est = auto_estimator(table) if isinstance(self.estimator, str) else clone(self.estimator)
            if est.needs_fit:
                perm = self._rng.permutation(table.n_queries)
                n_fit = int(np.clip(round(self.estimator_fraction * table.n_queries), 1, table.n_queries - 1))
                est.fit(table.subset(np.sort(perm[:n_fit])))
                table = table.subset(np.sort(perm[n_fit:]))
            tuning, self.estimator_ = est.estimate(table), est
        if tuning.in_sample.any() and not self.allow_in_sample:
            raise InputError(f"{int(tuning.in_sample.sum())} of the {tuning.n} tuning rows were used to fit the quality "
                             "estimator: lambdas tuned on them are biased. Fit the estimator on other rows, or pass "
                             "allow_in_sample=True (e.g. for the RouterBench synthetic-noise protocol).")
        self.tuning_ = tuning
        self.models_ = tuple(table.models)
        self.mean_cost_ = tuning.true_cost.mean(axis=0)
        self.mean_quality_ = tuning.quality.mean(axis=0)
        self.rank_ = np.empty(table.n_models, dtype=np.int64)
        self.rank_[np.argsort(self.mean_cost_, kind="stable")] = np.arange(table.n_models)
        self.seed_ = spawn_seed(self._rng)
        k = table.n_models
        self.samples_ = sobol_normal(self.n_samples, k, self._rng, centre=True) if self._uses_samples and self.use_uncertainty \
            else None
        positive = self.mean_cost_[self.mean_cost_ > 0]
        self.max_lambda_ = float(self.max_lambda or (10.0 / positive.min() if positive.size else 1.0))
        self.tuned_: dict[float, SearchResult] = {}
        self._reset_caches()
        self._prepare()

    def _prepare(self) -> None:
        """Build configuration-dependent structures after fit (or after loading)."""

    def _reset_caches(self) -> None:
        self._engines: list[tuple[Any, Engine]] = []
        self._estimates: list[tuple[Any, QualityEstimates]] = []

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())  # a copy: object.__getstate__ returns the live __dict__
        state.pop("_engines", None)
        state.pop("_estimates", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._reset_caches()

    # ---------------------------------------------------------------------------------- engines
    def _engine(self, est: QualityEstimates) -> Engine:
        if not hasattr(self, "_engines"):
            self._reset_caches()
        for obj, eng in self._engines:
            if obj is est:
                return eng
        view = est if getattr(self, "use_uncertainty", True) else est.without_uncertainty()
        eng = Engine(view, self.samples_, correlated=getattr(self, "correlated", True))
        self._engines = [*self._engines[-(_CACHE - 1):], (est, eng)]
        return eng

    @validate_args(queries=[InstanceOf(SelectionTable, QualityEstimates)])
    def estimate(self, queries: Any) -> QualityEstimates:
        """QualityEstimates of ``queries`` (a SelectionTable) from the fitted estimator, or ``queries`` itself."""
        check_is_fitted(self, "n_models_")
        if isinstance(queries, QualityEstimates):
            if queries.models != self.models_:
                raise InputError(f"The queries' estimates are for models {list(queries.models)}; this "
                                 f"{type(self).__name__} was fitted on {list(self.models_)}.")
            return queries
        if not isinstance(queries, SelectionTable):
            raise InputError(f"The 'queries' argument of {type(self).__name__} must be a SelectionTable or "
                             f"QualityEstimates. Got {type(queries).__name__} instead.")
        if queries.models != self.models_:
            raise InputError(f"The queries table has models {list(queries.models)}; this {type(self).__name__} was "
                             f"fitted on {list(self.models_)}.")
        if self.estimator_ is None:
            raise InputError(f"This {type(self).__name__} was fitted on precomputed estimates; pass QualityEstimates "
                             "for new queries too.")
        for obj, est in self._estimates:
            if obj is queries:
                return est
        est = self.estimator_.estimate(queries)
        self._estimates = [*self._estimates[-(_CACHE - 1):], (queries, est)]
        return est

    # ---------------------------------------------------------------------------------- budgets
    def _n_lambdas(self) -> int:
        return 1

    def _execute(self, engine: Engine, lambdas: tuple[float | None, ...]) -> tuple[float, float]:
        est = engine.est
        rows = np.arange(est.n)
        traj = self._trajectory(engine, lambdas, rows)
        cost = (traj.run(est.k) * est.true_cost).sum(axis=1).mean()
        return float(cost), float(est.quality[rows, traj.answer].mean())

    @validate_args(budget=[Interval("real", 0, None)])
    def tune(self, budget: float) -> SearchResult:
        """The lambdas for ``budget`` (searched on the tuning rows once, then cached)."""
        check_is_fitted(self, "n_models_")
        b = float(budget)
        if b in self.tuned_:
            return self.tuned_[b]
        if getattr(self, "tuning_", None) is None:
            below = [x for x in self.tuned_ if x <= b]
            if not below:
                raise InputError(f"This {type(self).__name__} was loaded without its tuning rows and knows only the "
                                 f"budgets {sorted(self.tuned_)}; {b} is below all of them.")
            near = max(below)
            warnings.warn(f"Budget {b} was not tuned; using the largest tuned budget below it, {near}.", BudgetWarning,
                          stacklevel=3)
            return self.tuned_[near]
        engine = self._engine(self.tuning_)
        search = list(self.search) if self.search is not None else list(self._default_search)
        res = run_searches(search, lambda lams: self._execute(engine, lams), self._n_lambdas(), b,
                           self.max_lambda_, derive_seed(self.seed_, "tpe"))
        if not res.feasible:
            self._warn_infeasible(b, res)
        self.tuned_[b] = res
        return res

    def _warn_infeasible(self, b: float, res: SearchResult) -> None:
        warnings.warn(f"{type(self).__name__}: budget {b:.6g} is below the cheapest expected cost this policy "
                      f"reaches on its tuning rows ({res.cost:.6g}); it runs that cheapest plan instead.",
                      BudgetWarning, stacklevel=4)

    @validate_args(budgets=[ArrayLike(low=0, min_len=0)], executor=[None, InstanceOf(Executor)])
    def tune_grid(self, budgets: Any, *, executor: Any = None) -> list[SearchResult]:
        """``[tune(b) for b in budgets]``; with an ``executor`` (:mod:`trustlab.core.executor`) the budgets not
        tuned yet are searched as parallel tasks (one per budget; the same lambdas as in this process, since
        each search is seeded from the policy's seed alone) and cached as :meth:`tune` would."""
        check_is_fitted(self, "n_models_")
        bs = [float(b) for b in np.asarray(budgets, dtype=float).ravel()]
        todo = [b for b in dict.fromkeys(bs) if b not in self.tuned_]
        if executor is not None and todo and getattr(self, "tuning_", None) is not None:
            found = executor.map(functools.partial(_tune_quietly, self), todo, seed=int(self.seed_) % 2**32,
                                 desc=f"{type(self).__name__} budget grid")
            for b, res in zip(todo, found):
                if not res.feasible:
                    self._warn_infeasible(b, res)
                self.tuned_[b] = res
        return [self.tune(b) for b in bs]

    # ---------------------------------------------------------------------------------- deciding
    def _decide(self, queries: Any, budget: float) -> RouteDecision:
        est = self.estimate(queries)
        res = self.tune(budget)
        engine = self._engine(est)
        rows = np.arange(est.n)
        g = res.gamma
        coin = (np.random.default_rng(derive_seed(self.seed_, "mix", repr(res.budget))).random(est.n) < g) if g > 0 \
            else np.zeros(est.n, dtype=bool)
        masks = np.zeros(est.n, dtype=np.int64)
        order = np.full((est.n, est.k), -1, dtype=np.int64)
        answer = np.zeros(est.n, dtype=np.int64)
        for pick, lams in ((~coin, res.lambdas), (coin, res.lo_lambdas)):
            if pick.any():
                t = self._trajectory(engine, lams, rows[pick])
                masks[pick], order[pick], answer[pick] = t.masks, t.order, t.answer
        info = {"budget": res.budget, "lambdas": res.lambdas, "lo_lambdas": res.lo_lambdas, "gamma": g,
                "tuning_cost": res.expected_cost, "tuning_quality": res.expected_quality, "binding": res.binding,
                "feasible": res.feasible, "strategy": res.strategy, "mixed": coin}
        return RouteDecision(answer, mask_bits(masks, est.k), order, info)

    def _route(self, queries: Any, budget: float) -> np.ndarray:
        return self._decide(queries, budget).answer

    def _trajectory(self, engine: Engine, lambdas: tuple[float | None, ...], rows: np.ndarray) -> Trajectory:
        raise NotImplementedError  # pragma: no cover - abstract

    def _order(self) -> np.ndarray:
        return np.argsort(self.rank_, kind="stable")


class OptimalRouter(_Policy):
    """Optimal routing under a budget: ``argmax_j q_j(x) - lambda c_j(x)`` on the ex-ante estimates.

    Ties go to the cheapest estimated cost (then the lowest index); the budget is met exactly in
    expectation by mixing the two ends of the final lambda bracket (see the module docstring).
    Parameters: ``estimator`` ("auto" or a quality estimator), ``search`` (lambda searches; default a
    constant search with 50 bisection steps), ``max_lambda`` (default ``10 / min mean cost``),
    ``estimator_fraction`` (rows that fit the estimator), ``allow_in_sample``, ``random_state``.
    """

    _default_search: ClassVar[tuple[Any, ...]] = (ConstantSearch(n_iter=50),)

    def _trajectory(self, engine: Engine, lambdas: tuple[float | None, ...], rows: np.ndarray) -> Trajectory:
        est = engine.est
        mu, chat = est.mean_for(0, rows), est.cost[rows]
        tau = mu - float(lambdas[0]) * chat
        tie = tau == tau.max(axis=1, keepdims=True)
        cmin = np.where(tie, chat, np.inf).min(axis=1, keepdims=True)
        choice = np.where(tie & (chat == cmin), self.rank_[None, :], est.k).argmin(axis=1)
        order = np.full((len(rows), est.k), -1, dtype=np.int64)
        order[:, 0] = choice
        return Trajectory(np.left_shift(1, choice).astype(np.int64), order, choice)


class ThresholdCascade(_Policy):
    """The threshold cascade baseline: run models in cost order; after model ``j`` stop iff its post-hoc
    estimate ``q_j >= 1 - lambda_j``; answer with the last model run. ``lambda_j`` in [0, 1]
    (``max_lambda=1``); one per step. Quality estimates must lie in [0, 1]."""

    def _prepare(self) -> None:
        self.max_lambda_ = float(self.max_lambda or 1.0)

    def _n_lambdas(self) -> int:
        return max(self.n_models_ - 1, 1)

    def _trajectory(self, engine: Engine, lambdas: tuple[float | None, ...], rows: np.ndarray) -> Trajectory:
        est, order_models = engine.est, self._order()
        n, k = len(rows), est.k
        masks = np.zeros(n, dtype=np.int64)
        order = np.full((n, k), -1, dtype=np.int64)
        answer = np.zeros(n, dtype=np.int64)
        active = np.ones(n, dtype=bool)
        for j, m in enumerate(order_models):
            idx = np.flatnonzero(active)
            if not idx.size:
                break
            masks[idx] |= 1 << int(m)
            order[idx, j] = m
            answer[idx] = m
            if j == k - 1 or lambdas[min(j, len(lambdas) - 1)] is None:
                break
            q = est.mean_rows(masks[idx], rows[idx])[:, m]
            active[idx[q >= 1.0 - float(lambdas[j])]] = False
        return Trajectory(masks, order, answer)


class _SupermodelPolicy(_Policy):
    """Policies that value supermodels by E[max] (Sobol samples drawn at fit)."""

    _constraints: ClassVar[dict[str, list[Any]]] = {**_COMMON, **_SUPERMODEL}
    _uses_samples: ClassVar[bool] = True

    def __init__(self, *, estimator: Any = "auto", search: Any = None, max_lambda: float | None = None,
                 estimator_fraction: float = 0.5, allow_in_sample: bool = False, n_samples: int = 128,
                 use_uncertainty: bool = True, correlated: bool = True, max_depth: int | None = None,
                 random_state: Any = None) -> None:
        super().__init__(estimator=estimator, search=search, max_lambda=max_lambda,
                         estimator_fraction=estimator_fraction, allow_in_sample=allow_in_sample,
                         random_state=random_state)
        self.n_samples = n_samples
        self.use_uncertainty = use_uncertainty
        self.correlated = correlated
        self.max_depth = max_depth


class OptimalCascade(_SupermodelPolicy):
    """The paper's optimal cascade: models in cost order; after ``j`` models, compare the prefixes
    ``M_{1:j} .. M_{1:depth}`` by ``E[max quality] - lambda_j * cost`` with the current estimates and stop iff
    the current prefix is best; answer with the best post-hoc estimate among the models run.

    Extra parameters: ``n_samples`` (Sobol points for E[max]), ``use_uncertainty`` (False: E[max] = max of
    the means, the ablation), ``correlated`` (False: only the variances), ``max_depth`` (None: all models).
    """

    def _depth(self) -> int:
        return min(self.max_depth or self.n_models_, self.n_models_)

    def _n_lambdas(self) -> int:
        return self._depth()

    def _trajectory(self, engine: Engine, lambdas: tuple[float | None, ...], rows: np.ndarray) -> Trajectory:
        est, om, depth = engine.est, self._order(), self._depth()
        n, k = len(rows), est.k
        prefix = np.concatenate([[0], np.cumsum(np.left_shift(1, om))]).astype(np.int64)
        masks = np.zeros(n, dtype=np.int64)
        order = np.full((n, k), -1, dtype=np.int64)
        active = np.ones(n, dtype=bool)
        stop_at = min(depth, next((i for i, v in enumerate(lambdas) if v is None), len(lambdas)))
        for j in range(stop_at):
            idx = np.flatnonzero(active)
            if not idx.size:
                break
            cand = np.arange(max(j, 1), depth + 1)
            cmasks = prefix[cand]
            parents = np.arange(len(cand)) - 1
            V = engine.values(int(prefix[j]), cmasks, parents, rows[idx], ("oc", j, depth))
            C = set_costs(est.cost[rows[idx]], mask_bits(cmasks, k))
            tau = V - float(lambdas[j]) * C
            tie = tau == tau.max(axis=1, keepdims=True)
            cmin = np.where(tie, C, np.inf).min(axis=1, keepdims=True)
            best = cand[(tie & (C == cmin)).argmax(axis=1)]
            stop = best == j
            active[idx[stop]] = False
            go = idx[~stop]
            masks[go] |= 1 << int(om[j])
            order[go, j] = om[j]
        return Trajectory(masks, order, select_answer(est, masks, rows))


class CascadeRouter(_SupermodelPolicy):
    """Cascade routing (the paper's method): at each step consider every supermodel that contains the
    models run so far (at most ``max_depth`` models), pick the best ``E[max quality] - lambda_j * cost``, stop
    if it is the current set, else run its cheapest not-yet-run model; answer with the best post-hoc
    estimate among the models run.

    Extra parameters (beyond :class:`OptimalCascade`'s): ``greedy`` (look one model ahead), ``force_order``
    (only models after every model run so far, in cost order), ``top_k`` (beam width of the breadth-first
    search), ``prune`` (the pruning lemma; identical decisions, less work), ``cascade`` (candidates are the
    cost-order prefixes: the optimal cascade run through this search).
    """

    _constraints: ClassVar[dict[str, list[Any]]] = {
        **_COMMON, **_SUPERMODEL, "greedy": [Boolean()], "force_order": [Boolean()],
        "top_k": [None, Interval(int, 1, None)], "prune": [Boolean()], "cascade": [Boolean()]}

    def __init__(self, *, estimator: Any = "auto", search: Any = None, max_lambda: float | None = None,
                 estimator_fraction: float = 0.5, allow_in_sample: bool = False, n_samples: int = 128,
                 use_uncertainty: bool = True, correlated: bool = True, max_depth: int | None = None,
                 greedy: bool = False, force_order: bool = False, top_k: int | None = None, prune: bool = True,
                 cascade: bool = False, random_state: Any = None) -> None:
        super().__init__(estimator=estimator, search=search, max_lambda=max_lambda,
                         estimator_fraction=estimator_fraction, allow_in_sample=allow_in_sample,
                         n_samples=n_samples, use_uncertainty=use_uncertainty, correlated=correlated,
                         max_depth=max_depth, random_state=random_state)
        self.greedy = greedy
        self.force_order = force_order
        self.top_k = top_k
        self.prune = prune
        self.cascade = cascade

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        base = super()._get_test_params()[0]
        return [base, {**base, "max_depth": 2, "top_k": 2, "greedy": True}]

    def _prepare(self) -> None:
        depth = min(self.max_depth or self.n_models_, self.n_models_)
        self.space_ = Space(self.n_models_, depth, self.rank_, mode="cascade" if self.cascade else "cr",
                            force_order=self.force_order or self.cascade, greedy=self.greedy)

    def _n_lambdas(self) -> int:
        return self.space_.depth

    def _trajectory(self, engine: Engine, lambdas: tuple[float | None, ...], rows: np.ndarray) -> Trajectory:
        return engine.run_cr(self.space_, lambdas, rows, prune=self.prune, top_k=self.top_k)


@validate_args(policy=[HasMethods("fit", what="a cascade policy (OptimalRouter, ThresholdCascade, OptimalCascade, "
                                                "CascadeRouter)")], table=[InstanceOf(SelectionTable)], estimates=[None, InstanceOf(QualityEstimates)],
               _example=lambda: {"policy": OptimalRouter(estimator=SyntheticNoiseEstimator(), allow_in_sample=True),
                                 "table": synthetic_table(20, 2, random_state=0)})
def fit_policy(policy: Any, table: SelectionTable, *, estimates: QualityEstimates | None = None) -> Any:
    """``policy.fit`` with everything a SelectionTable holds (quality, cost, answers, features, ids, names)."""
    if not isinstance(table, SelectionTable):
        raise InputError(f"The 'table' argument of fit_policy must be a SelectionTable. Got {type(table).__name__}.")
    table.require("quality", "cost")
    return policy.fit(table.quality, table.cost, answers=table.answers, features=table.features,
                      queries=table.queries, models=table.models, estimates=estimates)


#: the policies :func:`~trustlab.methods.cascade.policy_to_json` writes (fitted ones: checked by the body)
POLICY = Satisfies(lambda v: isinstance(v, _Policy),
                   "a cascade policy (OptimalRouter, ThresholdCascade, OptimalCascade, CascadeRouter)",
                   [None, "policy", 3])


def _check_fitted_policy(policy: Any) -> None:
    if not isinstance(policy, _Policy):
        raise InputError(f"Expected a cascade policy (OptimalRouter, ThresholdCascade, OptimalCascade, CascadeRouter). "
                         f"Got {type(policy).__name__}.")
    if not hasattr(policy, "n_models_"):
        raise NotFittedError(f"This {type(policy).__name__} is not fitted yet; call fit(...) first.")


def _tune_quietly(policy: _Policy, budget: float) -> SearchResult:
    """One budget's lambda search (an executor task); an infeasible budget is warned about by the caller."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)
        return policy.tune(budget)
