"""A fitted policy as JSON: parameters, the fitted estimator, Sobol samples and every tuned budget.

The JSON routes new queries without the training table: the estimator turns the new queries' answers into
estimates, and each tuned budget keeps its lambdas, the bracket's other end and the mixing probability.
A budget that was not tuned uses the largest tuned budget below it (with a warning).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf
from trustlab.core.exceptions import InputError
from trustlab.methods.cascade._estimators import estimator_from_dict
from trustlab.methods.cascade._lambda import ConstantSearch, RepetitiveConstantSearch, SearchResult, TPESearch
from trustlab.methods.cascade._policies import (
    POLICY,
    CascadeRouter,
    OptimalCascade,
    OptimalRouter,
    ThresholdCascade,
    _check_fitted_policy,
)

__all__ = ["policy_to_json", "policy_from_json", "FORMAT"]

FORMAT = "trustlab-cascade-policy/1"
_CLASSES = {c.__name__: c for c in (OptimalRouter, ThresholdCascade, OptimalCascade, CascadeRouter)}
_SEARCHES = {c.__name__: c for c in (ConstantSearch, RepetitiveConstantSearch, TPESearch)}


def _lams(v: Any) -> list[float | None] | None:
    return None if v is None else [None if x is None else float(x) for x in v]


@validate_args(policy=[POLICY])
def policy_to_json(policy: Any) -> str:
    """The fitted ``policy`` (its estimator included) as a JSON string."""
    _check_fitted_policy(policy)
    params = {k: v for k, v in policy.get_params(deep=False).items() if k not in ("estimator", "search")}
    if not isinstance(params.get("random_state"), int | type(None)):
        params["random_state"] = None
    search = None if policy.search is None else [{"type": type(s).__name__, **s.__dict__} for s in policy.search]
    tuned = [{"budget": b, "lambdas": _lams(r.lambdas), "cost": r.cost, "quality": r.quality,
              "lo_lambdas": _lams(r.lo_lambdas), "lo_cost": r.lo_cost, "lo_quality": r.lo_quality,
              "strategy": r.strategy, "binding": r.binding, "evaluations": r.evaluations}
             for b, r in sorted(policy.tuned_.items())]
    doc = {"format": FORMAT, "class": type(policy).__name__, "params": params, "search": search,
           "estimator": None if policy.estimator_ is None else policy.estimator_.to_dict(),
           "models": list(policy.models_), "rank": policy.rank_.tolist(), "mean_cost": policy.mean_cost_.tolist(),
           "mean_quality": policy.mean_quality_.tolist(), "seed": int(policy.seed_),
           "samples": None if policy.samples_ is None else policy.samples_.tolist(),
           "max_lambda": policy.max_lambda_, "tuned": tuned}
    return json.dumps(doc)


@validate_args(text=[InstanceOf(str)])
def policy_from_json(text: str) -> Any:
    """Rebuild a policy written by :func:`policy_to_json`; it routes new queries (a SelectionTable with the
    models' answers, or QualityEstimates) at its tuned budgets, without its training table."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"The policy JSON is not valid JSON: {exc.msg}.") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("class") not in _CLASSES:
        raise InputError(f"Not a trustlab cascade policy (expected format {FORMAT!r} and a class among "
                         f"{sorted(_CLASSES)}).")
    cls = _CLASSES[doc["class"]]
    search = None if doc["search"] is None else [_SEARCHES[s.pop("type")](**s) for s in doc["search"]]
    est = None if doc["estimator"] is None else estimator_from_dict(doc["estimator"])
    policy = cls(**doc["params"], search=search, estimator="auto" if est is None else est)
    policy.estimator_ = est
    policy.models_ = tuple(doc["models"])
    policy.n_models_ = len(policy.models_)
    policy.rank_ = np.asarray(doc["rank"], dtype=np.int64)
    policy.mean_cost_ = np.asarray(doc["mean_cost"], dtype=np.float64)
    policy.mean_quality_ = np.asarray(doc["mean_quality"], dtype=np.float64)
    policy.seed_ = int(doc["seed"])
    policy.samples_ = None if doc["samples"] is None else np.asarray(doc["samples"], dtype=np.float64)
    policy.max_lambda_ = float(doc["max_lambda"])
    policy.tuning_ = None
    policy.tuned_ = {}

    def tup(v: Any) -> tuple[Any, ...] | None:
        return None if v is None else tuple(v)

    for r in doc["tuned"]:
        policy.tuned_[float(r["budget"])] = SearchResult(tup(r["lambdas"]), r["cost"], r["quality"], float(r["budget"]),
                                                         tup(r["lo_lambdas"]), r["lo_cost"], r["lo_quality"],
                                                         r["strategy"], r["binding"], r["evaluations"])
    policy._reset_caches()
    policy._prepare()
    policy.max_lambda_ = float(doc["max_lambda"])
    return policy
