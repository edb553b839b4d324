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
* Online budget control: :func:`decide_controlled` (lambdas rescaled on the realised spend of a stream).
* Evaluation: :func:`budget_grid`, :func:`auc`, :func:`hull_models`, :func:`evaluate_policy`,
  :func:`linear_curve`, :func:`bootstrap_auc`, :func:`routellm_metrics`.
* Live pools: :func:`classifier_pool` (B2, scikit-learn) and :func:`llm_pool` (B3, verifiable tasks).
* Serialisation: :func:`policy_to_json`, :func:`policy_from_json`.
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    **dict.fromkeys(("SelectionTable", "synthetic_table"), "_table"),
    **dict.fromkeys(("load_selection_table", "load_routerbench", "save_selection_table"), "_io"),
    **dict.fromkeys(("QualityEstimates", "expected_max", "sobol_normal"), "_estimates"),
    **dict.fromkeys(("SyntheticNoiseEstimator", "ClassificationEstimator", "OpenFormEstimator"), "_estimators"),
    **dict.fromkeys(("OptimalRouter", "ThresholdCascade", "OptimalCascade", "CascadeRouter", "BudgetWarning", "fit_policy"), "_policies"),
    **dict.fromkeys(("ConstantSearch", "RepetitiveConstantSearch", "TPESearch"), "_lambda"),
    "decide_controlled": "_control",
    "classifier_pool": "_pools",
    **dict.fromkeys(("llm_pool", "verifiable_items"), "_llm_pool"),
    **dict.fromkeys(("policy_to_json", "policy_from_json"), "_serialize"),
    **dict.fromkeys(("hull_models", "budget_grid", "auc", "linear_curve", "evaluate_policy", "bootstrap_auc", "cost_to_reach", "routellm_metrics", "aiq"), "_evaluate"),
}
__all__ = sorted(_LAZY)
METHODS.register_exports(__name__, _LAZY, ["OptimalRouter", "ThresholdCascade", "OptimalCascade", "CascadeRouter"],
                         paper="cascade", role="router")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
