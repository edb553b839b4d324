"""Evaluation: budget grids between hull costs, AUC over the budget range, the linear baseline, bootstrap CIs.

* :func:`hull_models` -- the models on the non-decreasing concave quality-cost hull (the official
  ``remove_redundant_models``: dominated models and models under a chord of two others are dropped).
* :func:`budget_grid` -- ``n_per_segment`` equally spaced budgets between each pair of consecutive hull costs.
* :func:`auc` -- the paper's metric: the quality-cost curve linearly interpolated, extended flat to the
  right, starting from the worst model's quality at the cheapest model's cost, integrated over
  ``[c_min, c_max]`` of the individual models and divided by the range ("average quality over the budget
  range"; x100 in the paper's tables).
* :func:`linear_curve` -- the convex-hull "linear" baseline (randomised mixing of single models).
* :func:`evaluate_policy` -- a policy's realised (cost, quality) per budget; :func:`bootstrap_auc` -- AUC
  (or the paired AUC difference of two curves) over query resamples.
* :func:`cost_to_reach`, :func:`routellm_metrics`, :func:`aiq` -- the budget that reaches a target quality,
  RouteLLM's CPT / APGR and RouterBench's AIQ on the same curves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, HasMethods, validate_args
from trustlab.core.constraints import InstanceOf, Interval, RandomStateRule, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.executor import Executor
from trustlab.core.seeding import check_random_state

__all__ = ["Curve", "BootstrapResult", "hull_models", "budget_grid", "auc", "linear_curve", "evaluate_policy",
           "bootstrap_auc", "cost_to_reach", "routellm_metrics", "aiq"]

_VEC = [ArrayLike(ndim=1)]


@dataclass
class Curve:
    """A policy's realised mean cost and quality at each budget (and per query, for the bootstrap)."""

    name: str
    budgets: np.ndarray
    cost: np.ndarray
    quality: np.ndarray
    per_query_cost: np.ndarray | None = None
    per_query_quality: np.ndarray | None = None
    binding: np.ndarray | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BootstrapResult:
    """Bootstrap mean and percentile interval of an AUC (or of an AUC difference)."""

    estimate: float
    mean: float
    low: float
    high: float
    n_boot: int


def _pairs(mean_quality: Any, mean_cost: Any) -> tuple[np.ndarray, np.ndarray]:
    q, c = np.asarray(mean_quality, dtype=float), np.asarray(mean_cost, dtype=float)
    if q.shape != c.shape:
        raise InputError(f"The 'mean_quality' and 'mean_cost' arguments must have the same length. Got {q.shape} and "
                         f"{c.shape}.")
    return q, c


@validate_args(mean_quality=_VEC, mean_cost=[ArrayLike(ndim=1, low=0)])
def hull_models(mean_quality: Any, mean_cost: Any) -> np.ndarray:
    """Indices of the models on the non-decreasing concave hull, sorted by cost.

    Examples
    --------
    >>> hull_models([0.5, 0.55, 0.8], [1.0, 2.0, 3.0]).tolist()  # the middle model is under the chord
    [0, 2]
    """
    q, c = _pairs(mean_quality, mean_cost)
    order = sorted(range(len(q)), key=lambda i: (c[i], -q[i], i))
    kept: list[int] = []
    for i in order:
        if kept and (q[i] <= q[kept[-1]] or c[i] == c[kept[-1]]):
            continue  # dominated: costs at least as much for no more quality
        while len(kept) >= 2:
            a, b = kept[-2], kept[-1]
            if (q[b] - q[a]) * (c[i] - c[a]) < (q[i] - q[a]) * (c[b] - c[a]):
                kept.pop()  # b lies strictly under the chord a-i
            else:
                break
        kept.append(i)
    return np.asarray(kept, dtype=np.int64)


@validate_args(mean_quality=_VEC, mean_cost=[ArrayLike(ndim=1, low=0)], n_per_segment=[Interval(int, 2, None)])
def budget_grid(mean_quality: Any, mean_cost: Any, n_per_segment: int = 10) -> np.ndarray:
    """``n_per_segment`` budgets between each pair of consecutive hull costs (joints counted once).

    Examples
    --------
    >>> budget_grid([0.5, 0.8], [1.0, 3.0], n_per_segment=3).tolist()
    [1.0, 2.0, 3.0]
    """
    q, c = _pairs(mean_quality, mean_cost)
    h = hull_models(q, c)
    if len(h) < 2:
        raise InputError("The budget grid needs at least two models on the quality-cost hull (one model dominates "
                         f"all others here: {int(h[0])}); there is nothing to trade off.")
    segs = [np.linspace(c[a], c[b], n_per_segment) for a, b in zip(h[:-1], h[1:])]
    return np.unique(np.concatenate(segs))


@validate_args(costs=_VEC, qualities=_VEC, c_min=[Interval("real", None, None)], c_max=[Interval("real", None, None)],
               q_min=[Interval("real", None, None)],
               _example=lambda: {"costs": np.array([1.0, 2.0]), "qualities": np.array([0.5, 0.7]), "c_min": 1.0,
                                 "c_max": 2.0, "q_min": 0.5})
def auc(costs: Any, qualities: Any, *, c_min: float, c_max: float, q_min: float) -> float:
    """Average quality over ``[c_min, c_max]`` of the curve through ``(costs, qualities)`` (see module docs).

    Examples
    --------
    >>> round(auc([1.0, 2.0], [0.5, 0.7], c_min=1.0, c_max=3.0, q_min=0.5), 4)
    0.65
    """
    x, y = np.asarray(costs, dtype=float), np.asarray(qualities, dtype=float)
    if x.shape != y.shape or not x.size:
        raise InputError(f"The 'costs' and 'qualities' arguments of auc must be non-empty and of equal length. Got "
                         f"{x.shape} and {y.shape}.")
    if not c_max > c_min:
        raise InputError(f"auc needs c_max > c_min (a budget range). Got c_min={c_min}, c_max={c_max}: every model "
                         "costs the same.")
    pts = np.unique(np.column_stack([x, y]), axis=0)
    x, y = pts[:, 0], pts[:, 1]
    o = np.argsort(x, kind="stable")
    x, y = x[o], y[o]
    if x[-1] < c_max:
        x, y = np.append(x, c_max), np.append(y, y[-1])
    if x[0] > c_min:
        x, y = np.insert(x, 0, c_min), np.insert(y, 0, q_min)
    grid = np.unique(np.concatenate([[c_min, c_max], x[(x > c_min) & (x < c_max)]]))
    vals = np.interp(grid, x, y)
    return float(np.trapezoid(vals, grid) / (c_max - c_min))


def _ref(mean_quality: Any, mean_cost: Any) -> dict[str, float]:
    q, c = _pairs(mean_quality, mean_cost)
    return {"c_min": float(c.min()), "c_max": float(c.max()), "q_min": float(q.min())}


@validate_args(mean_quality=_VEC, mean_cost=[ArrayLike(ndim=1, low=0)])
def linear_curve(mean_quality: Any, mean_cost: Any) -> Curve:
    """The "linear" baseline: the hull models' (cost, quality), reachable by mixing single models."""
    q, c = _pairs(mean_quality, mean_cost)
    h = hull_models(q, c)
    return Curve("linear", c[h].copy(), c[h].copy(), q[h].copy(), binding=np.ones(len(h), bool))


def _truth(queries: Any) -> tuple[np.ndarray, np.ndarray]:
    from trustlab.methods.cascade._estimates import QualityEstimates
    from trustlab.methods.cascade._table import SelectionTable

    if isinstance(queries, QualityEstimates):
        q, c = queries.quality, queries.true_cost
    elif isinstance(queries, SelectionTable):
        q, c = queries.quality, queries.cost
    else:
        raise InputError(f"The 'queries' argument must be a SelectionTable or QualityEstimates. Got "
                         f"{type(queries).__name__}.")
    if q is None or c is None:
        raise InputError("Evaluating a policy needs the queries' true quality and cost.")
    return q, c


def _is_queries(v: Any) -> bool:
    from trustlab.methods.cascade._estimates import QualityEstimates
    from trustlab.methods.cascade._table import SelectionTable

    return isinstance(v, SelectionTable | QualityEstimates)


def _example_queries() -> dict[str, Any]:
    from trustlab.methods.cascade._policies import OptimalRouter
    from trustlab.methods.cascade._table import synthetic_table

    return {"policy": OptimalRouter(), "queries": synthetic_table(20, 2, random_state=0)}


@validate_args(policy=[HasMethods("decide", what="a fitted cascade policy")],
               queries=[Satisfies(_is_queries, "a SelectionTable or QualityEstimates (with the true quality and cost)",
                                  [None, "queries", 3])],
               budgets=[ArrayLike(ndim=1, low=0)], name=[None, InstanceOf(str)], executor=[None, InstanceOf(Executor)],
               _example=_example_queries)
def evaluate_policy(policy: Any, queries: Any, budgets: Any, *, name: str | None = None,
                    executor: Executor | None = None) -> Curve:
    """Run a fitted policy at every budget on ``queries`` (with true quality and cost) and record the
    realised mean cost and quality (and per-query values). ``executor`` (:mod:`trustlab.core.executor`)
    searches the lambdas of the budget grid as parallel tasks first (policies with ``tune_grid``); the curve
    is the same as without it."""
    q, c = _truth(queries)
    if executor is not None and hasattr(policy, "tune_grid"):
        policy.tune_grid(budgets, executor=executor)
    pc, pq, binding, tuned = [], [], [], []
    for b in np.asarray(budgets, dtype=float):
        d = policy.decide(queries, float(b))
        pc.append(d.cost(c))
        pq.append(d.quality(q))
        binding.append(bool(d.info.get("binding", True)))
        tuned.append(float(d.info.get("tuning_cost", np.nan)))
    pc_a, pq_a = np.asarray(pc), np.asarray(pq)
    return Curve(name or type(policy).__name__, np.asarray(budgets, dtype=float), pc_a.mean(axis=1), pq_a.mean(axis=1),
                 pc_a, pq_a, np.asarray(binding), {"tuning_cost": np.asarray(tuned)})


def _auc_of(curve: Curve, ref: dict[str, float], idx: np.ndarray | None = None) -> float:
    if idx is None or curve.per_query_cost is None:
        return auc(curve.cost, curve.quality, **ref)
    return auc(curve.per_query_cost[:, idx].mean(axis=1), curve.per_query_quality[:, idx].mean(axis=1), **ref)


@validate_args(curve=[InstanceOf(Curve)], mean_quality=_VEC, mean_cost=[ArrayLike(ndim=1, low=0)],
               other=[None, InstanceOf(Curve)], n_boot=[Interval(int, 1, None)], level=[Interval("real", 0, 1,
               closed="neither")], random_state=[RandomStateRule()],
               _example=lambda: {"curve": Curve("x", np.array([1.0]), np.array([1.0]), np.array([0.5]),
                                                np.array([[1.0, 1.0]]), np.array([[0.5, 0.5]])),
                                 "mean_quality": np.array([0.4, 0.6]), "mean_cost": np.array([1.0, 2.0])})
def bootstrap_auc(curve: Curve, mean_quality: Any, mean_cost: Any, *, other: Curve | None = None, n_boot: int = 500,
                  level: float = 0.95, random_state: Any = 0) -> BootstrapResult:
    """Bootstrap of ``AUC(curve)`` (or ``AUC(curve) - AUC(other)`` on the same resamples) over queries.

    The reference range and worst quality come from the single models' ``mean_quality`` / ``mean_cost``
    (fixed, as in the official notebook); every resample redraws the queries of every budget together.
    """
    ref = _ref(mean_quality, mean_cost)
    curves = [curve] + ([other] if other is not None else [])
    if any(cv.per_query_cost is None for cv in curves):
        raise InputError("bootstrap_auc needs curves with per-query values (from evaluate_policy).")
    n = curve.per_query_cost.shape[1]
    if other is not None and other.per_query_cost.shape[1] != n:
        raise InputError("bootstrap_auc: the two curves were evaluated on different numbers of queries.")
    rng = check_random_state(random_state)

    def stat(idx: np.ndarray | None) -> float:
        v = _auc_of(curve, ref, idx)
        return v - _auc_of(other, ref, idx) if other is not None else v

    vals = np.array([stat(rng.integers(0, n, n)) for _ in range(n_boot)])
    a = (1 - level) / 2
    return BootstrapResult(stat(None), float(vals.mean()), float(np.quantile(vals, a)), float(np.quantile(vals, 1 - a)),
                           n_boot)


@validate_args(costs=_VEC, qualities=_VEC, target=[Interval("real", None, None)],
               _example=lambda: {"costs": np.array([1.0, 2.0]), "qualities": np.array([0.5, 0.7]), "target": 0.6})
def cost_to_reach(costs: Any, qualities: Any, target: float) -> float | None:
    """The smallest cost at which the linearly interpolated curve reaches ``target`` quality (None if never).

    Examples
    --------
    >>> cost_to_reach([1.0, 2.0], [0.5, 0.7], 0.6)
    1.5
    """
    x, y = np.asarray(costs, dtype=float), np.asarray(qualities, dtype=float)
    o = np.argsort(x, kind="stable")
    x, y = x[o], y[o]
    if y[0] >= target:
        return float(x[0])
    for i in range(1, len(x)):
        if y[i] >= target:
            return float(x[i - 1] + (target - y[i - 1]) / (y[i] - y[i - 1]) * (x[i] - x[i - 1]))
    return None


@validate_args(costs=_VEC, qualities=_VEC, mean_quality=_VEC, mean_cost=[ArrayLike(ndim=1, low=0)],
               _example=lambda: {"costs": np.array([1.0, 2.0]), "qualities": np.array([0.5, 0.7]),
                                 "mean_quality": np.array([0.5, 0.7]), "mean_cost": np.array([1.0, 2.0])})
def routellm_metrics(costs: Any, qualities: Any, mean_quality: Any, mean_cost: Any) -> dict[str, float | None]:
    """RouteLLM's metrics on a cost axis: APGR (AUC minus the cheapest model's quality over the gap to the
    best model) and CPT(20/50/80 %) (the cost, as a fraction of the range, that recovers that share of the gap)."""
    mq, mc = _pairs(mean_quality, mean_cost)
    weak, strong = float(mq[np.argmin(mc)]), float(mq.max())
    if strong <= weak:
        raise InputError("routellm_metrics needs a best model better than the cheapest one.")
    ref = _ref(mq, mc)
    out: dict[str, float | None] = {"apgr": (auc(costs, qualities, **ref) - weak) / (strong - weak)}
    for share in (20, 50, 80):
        c = cost_to_reach(costs, qualities, weak + share / 100 * (strong - weak))
        out[f"cpt{share}"] = None if c is None else (c - ref["c_min"]) / (ref["c_max"] - ref["c_min"])
    return out


@validate_args(costs=_VEC, qualities=_VEC)
def aiq(costs: Any, qualities: Any) -> float:
    """RouterBench's AIQ: the area under the non-decreasing concave hull of the (cost, quality) points,
    over their cost range, divided by that range."""
    x, y = np.asarray(costs, dtype=float), np.asarray(qualities, dtype=float)
    h = hull_models(y, x - x.min())
    if len(h) < 2:
        return float(y.max())
    return float(np.trapezoid(y[h], x[h]) / (x[h][-1] - x[h][0]))
