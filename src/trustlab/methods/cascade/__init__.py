"""Cascade routing: optimal routing, cascading and cascade routing for LLMs (Dekoninck et al., ICML 2025).

Public objects (imported on first access, so ``import trustlab.methods.cascade`` stays light):

* :class:`SelectionTable` -- per-query, per-model answers, quality, cost and features; loaders
  :func:`load_selection_table` (our long JSONL/CSV, wide tables), :func:`load_routerbench` (the RouterBench
  schema from the user's path) and :func:`synthetic_table` (the B1 generator); :func:`save_selection_table`.
* Policies (``Router`` role: ``fit``, ``route``, ``decide``): :class:`OptimalRouter`, :class:`ThresholdCascade`,
  :class:`OptimalCascade`, :class:`CascadeRouter` (max_depth, greedy, beam, pruning, cascade mode).
* Estimators: :class:`SyntheticNoiseEstimator` (RouterBench protocol), :class:`ClassificationEstimator`,
  :class:`OpenFormEstimator`; :class:`QualityEstimates`, :func:`expected_max` (Sobol E[max]).
* Lambda searches: :class:`ConstantSearch`, :class:`RepetitiveConstantSearch`, :class:`TPESearch` (optuna).
* Evaluation: :func:`budget_grid`, :func:`auc`, :func:`hull_models`, :func:`evaluate_policy`,
  :func:`linear_curve`, :func:`bootstrap_auc`, :func:`routellm_metrics`.
* Live pools: :func:`classifier_pool` (B2, scikit-learn) and :func:`llm_pool` (B3, verifiable tasks).
* Serialisation: :func:`policy_to_json`, :func:`policy_from_json`.
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS
from trustlab.methods.cascade._paper import PAPER

__all__ = ["PAPER", "SelectionTable", "load_selection_table", "load_routerbench", "save_selection_table",
           "synthetic_table", "QualityEstimates", "expected_max", "sobol_normal", "SyntheticNoiseEstimator",
           "ClassificationEstimator", "OpenFormEstimator", "NOISE_LEVELS", "OptimalRouter", "ThresholdCascade",
           "OptimalCascade", "CascadeRouter", "BudgetWarning", "fit_policy", "ConstantSearch",
           "RepetitiveConstantSearch", "TPESearch", "SearchResult", "Curve", "BootstrapResult", "hull_models",
           "budget_grid", "auc", "linear_curve", "evaluate_policy", "bootstrap_auc", "cost_to_reach",
           "routellm_metrics", "aiq", "classifier_pool", "llm_pool", "verifiable_items", "heuristic_solver",
           "policy_to_json", "policy_from_json"]

_WHERE = {
    "SelectionTable": "trustlab.methods.cascade._table:SelectionTable",
    "synthetic_table": "trustlab.methods.cascade._table:synthetic_table",
    "load_selection_table": "trustlab.methods.cascade._io:load_selection_table",
    "load_routerbench": "trustlab.methods.cascade._io:load_routerbench",
    "save_selection_table": "trustlab.methods.cascade._io:save_selection_table",
    "QualityEstimates": "trustlab.methods.cascade._estimates:QualityEstimates",
    "expected_max": "trustlab.methods.cascade._estimates:expected_max",
    "sobol_normal": "trustlab.methods.cascade._estimates:sobol_normal",
    "SyntheticNoiseEstimator": "trustlab.methods.cascade._estimators:SyntheticNoiseEstimator",
    "ClassificationEstimator": "trustlab.methods.cascade._estimators:ClassificationEstimator",
    "OpenFormEstimator": "trustlab.methods.cascade._estimators:OpenFormEstimator",
    "OptimalRouter": "trustlab.methods.cascade._policies:OptimalRouter",
    "ThresholdCascade": "trustlab.methods.cascade._policies:ThresholdCascade",
    "OptimalCascade": "trustlab.methods.cascade._policies:OptimalCascade",
    "CascadeRouter": "trustlab.methods.cascade._policies:CascadeRouter",
    "BudgetWarning": "trustlab.methods.cascade._policies:BudgetWarning",
    "ConstantSearch": "trustlab.methods.cascade._lambda:ConstantSearch",
    "RepetitiveConstantSearch": "trustlab.methods.cascade._lambda:RepetitiveConstantSearch",
    "TPESearch": "trustlab.methods.cascade._lambda:TPESearch",
    "SearchResult": "trustlab.methods.cascade._lambda:SearchResult",
    "NOISE_LEVELS": "trustlab.methods.cascade._estimators:NOISE_LEVELS",
    "fit_policy": "trustlab.methods.cascade._policies:fit_policy",
    "classifier_pool": "trustlab.methods.cascade._pools:classifier_pool",
    "llm_pool": "trustlab.methods.cascade._llm_pool:llm_pool",
    "verifiable_items": "trustlab.methods.cascade._llm_pool:verifiable_items",
    "heuristic_solver": "trustlab.methods.cascade._llm_pool:heuristic_solver",
    "policy_to_json": "trustlab.methods.cascade._serialize:policy_to_json",
    "policy_from_json": "trustlab.methods.cascade._serialize:policy_from_json",
    **{name: f"trustlab.methods.cascade._evaluate:{name}" for name in (
        "Curve", "BootstrapResult", "hull_models", "budget_grid", "auc", "linear_curve", "evaluate_policy",
        "bootstrap_auc", "cost_to_reach", "routellm_metrics", "aiq")},
}

for _name in ("OptimalRouter", "ThresholdCascade", "OptimalCascade", "CascadeRouter"):
    METHODS.register(_name, _WHERE[_name], paper="cascade", role="router")

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
