"""Online budget control: meet a budget on a stream of new queries, not only on the tuning rows.

A tuned policy spends exactly ``B`` per query *in expectation on its tuning rows*; on new rows its realised mean
cost differs by the sampling error of the tuning rows and by any shift between tuning and new queries (the
default-mode B1 run missed +-5 % at half of its grid points). :func:`decide_controlled` runs the tuned policy on
the new queries in their order, a batch at a time, with every lambda multiplied by a scale ``s``:

1. on the tuning rows, the policy's mean cost ``c(s)`` is measured once for a ladder of scales
   ``2^(-2) .. 2^2`` (``c(1)`` is the tuned expected cost, ``B``);
2. after each batch the controller knows the realised cost of the queries decided so far (what a deployment
   observes after running its models) and estimates the stream's cost ratio ``rho = spent / predicted``
   (``predicted`` = the sum of ``c(s)`` of the scales played; one batch of prior weight at ``rho = 1``);
3. the next batch plays the scale whose predicted cost meets the *remaining* budget,
   ``rho * c(s) = (B * n - spent) / (n - seen)`` (log-linear interpolation between ladder points, clipped to
   the ladder).

Only past queries of the stream are used: the first batch is decided with the tuned lambdas, and no query's
own cost affects its own decision. A budget that does not bind on the tuning rows (lambda = 0) has nothing to
rescale and is run as tuned.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf, Interval, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.roles import RouteDecision
from trustlab.core.seeding import derive_seed
from trustlab.methods.cascade._estimates import QualityEstimates, mask_bits
from trustlab.methods.cascade._table import SelectionTable

__all__ = ["decide_controlled"]

#: the ladder of lambda scales measured on the tuning rows (log2 from -2 to 2 in quarter steps)
_LADDER = 2.0 ** np.arange(-2.0, 2.01, 0.25)


def _scale(lams: tuple[float | None, ...] | None, factor: float) -> tuple[float | None, ...] | None:
    return None if lams is None else tuple(None if v is None else float(v) * factor for v in lams)


def _example() -> dict[str, Any]:
    from trustlab.methods.cascade._estimators import SyntheticNoiseEstimator
    from trustlab.methods.cascade._policies import OptimalRouter
    from trustlab.methods.cascade._table import synthetic_table

    est = SyntheticNoiseEstimator(random_state=0).estimate(synthetic_table(80, 3, random_state=0))
    tune, new = est.subset(np.arange(40)), est.subset(np.arange(40, 80))
    pol = OptimalRouter(allow_in_sample=True, random_state=0).fit(tune.quality, tune.true_cost, estimates=tune)
    return {"policy": pol, "queries": new, "budget": float(tune.true_cost.mean(0)[1])}


_POLICY = Satisfies(lambda v: hasattr(v, "tune") and hasattr(v, "_trajectory") and hasattr(v, "seed_"),
                    "a fitted cascade policy (OptimalRouter, ThresholdCascade, OptimalCascade, CascadeRouter)",
                    [None, "policy"])


def _ladder_costs(policy: Any, res: Any) -> np.ndarray:
    """Mean tuning-row cost of the policy with its lambdas scaled by each ladder factor (1: the tuned cost)."""
    engine = policy._engine(policy.tuning_)
    return np.array([res.expected_cost if f == 1.0 else policy._execute(engine, _scale(res.lambdas, float(f)))[0]
                     for f in _LADDER])


def _next_scale(ladder: np.ndarray, target: float) -> float:
    """The scale whose tuning cost is ``target`` (costs fall as the scale grows; log-linear interpolation)."""
    c = np.minimum.accumulate(ladder)  # enforce the non-increasing shape against rounding
    if target >= c[0]:
        return float(_LADDER[0])
    if target <= c[-1]:
        return float(_LADDER[-1])
    i = int(np.flatnonzero(c <= target)[0])  # c[i-1] > target >= c[i]
    w = (c[i - 1] - target) / max(c[i - 1] - c[i], 1e-300)
    return float(2.0 ** ((1 - w) * np.log2(_LADDER[i - 1]) + w * np.log2(_LADDER[i])))


@validate_args(policy=[_POLICY], queries=[InstanceOf(SelectionTable, QualityEstimates)],
               budget=[Interval("real", 0, None, closed="neither")], batch=[Interval(int, 1, None)],
               _example=_example)
def decide_controlled(policy: Any, queries: Any, budget: float, *, batch: int = 25) -> RouteDecision:
    """The policy's decisions on ``queries`` (in their order) under online budget control (module docstring).

    ``queries`` must carry the realised costs (QualityEstimates with ``true_cost``, or a SelectionTable with
    costs): the controller reads them after each ``batch`` of queries. The policy must still hold its tuning
    rows (a fitted policy, not one loaded from JSON). ``info["scale"]`` holds the lambda scale of each batch.

    Examples
    --------
    >>> kw = _example()
    >>> d = decide_controlled(kw["policy"], kw["queries"], kw["budget"], batch=10)
    >>> d.run.shape, len(d.info["scale"])
    ((40, 3), 4)
    """
    est = policy.estimate(queries)
    if est.true_cost is None:
        raise InputError("The 'queries' argument of decide_controlled must carry realised costs (true_cost): the "
                         "controller reads them after each batch. Got estimates without true_cost.")
    if getattr(policy, "tuning_", None) is None:
        raise InputError("The 'policy' argument of decide_controlled must hold its tuning rows (fit it; a policy "
                         "loaded from JSON has none): the controller measures its cost ladder on them.")
    res = policy.tune(float(budget))
    ladder = _ladder_costs(policy, res) if res.binding else None
    engine = policy._engine(est)
    n, k, b = est.n, est.k, float(budget)
    g = res.gamma
    coin = (np.random.default_rng(derive_seed(policy.seed_, "mix", repr(res.budget))).random(n) < g) if g > 0 \
        else np.zeros(n, dtype=bool)
    masks = np.zeros(n, dtype=np.int64)
    order = np.full((n, k), -1, dtype=np.int64)
    answer = np.zeros(n, dtype=np.int64)
    factor, spent, predicted, scales = 1.0, 0.0, 0.0, []
    for start in range(0, n, batch):
        rows = np.arange(start, min(start + batch, n))
        scales.append(factor)
        for pick, lams in ((~coin[rows], res.lambdas), (coin[rows], res.lo_lambdas)):
            if pick.any():
                t = policy._trajectory(engine, _scale(lams, factor), rows[pick])
                masks[rows[pick]], order[rows[pick]], answer[rows[pick]] = t.masks, t.order, t.answer
        spent += float((mask_bits(masks[rows], k) * est.true_cost[rows]).sum())
        seen = int(rows[-1]) + 1
        if ladder is None or seen == n:
            continue
        predicted += len(rows) * float(np.interp(np.log2(factor), np.log2(_LADDER), ladder))
        rho = (spent + batch * b) / (predicted + batch * b)
        factor = _next_scale(ladder, max(b * n - spent, 0.0) / (n - seen) / rho)
    info = {"budget": res.budget, "lambdas": res.lambdas, "lo_lambdas": res.lo_lambdas, "gamma": g,
            "tuning_cost": res.expected_cost, "binding": res.binding, "feasible": res.feasible, "scale": scales,
            "batch": batch}
    return RouteDecision(answer, mask_bits(masks, k), order, info)
