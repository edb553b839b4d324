"""Fine-tuning multiplicity in tabular LLMs: the local-stability measure, its guarantee, and a multiplicity audit.

Hamman et al., "Quantifying Prediction Consistency Under Fine-tuning Multiplicity in Tabular LLMs",
ICML 2025 (arXiv:2407.04173). Exports load lazily: importing this package imports neither torch nor peft.
"""

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "TabularLLM": "_tabllm", "TabularLLMClassifier": "_tabllm",
    "serialize_rows": "_serialize", "verbalizer_ids": "_serialize", "balanced_shots": "_serialize",
    "local_stability": "_stability", "StabilityResult": "_stability", "bernstein_bound": "_stability",
    "stability_terms": "_stability",
    "multiplicity_metrics": "_metrics", "MultiplicityMetrics": "_metrics", "rashomon_filter": "_metrics",
    "RashomonSet": "_metrics", "confidence_score": "_metrics", "entropy_score": "_metrics",
    "tercile_gap": "_metrics", "mc_dropout_proba": "_audit",
    "MultiplicityAudit": "_audit", "MultiplicityReport": "_audit",
}

METHODS.register_exports(__name__, _LAZY, ["TabularLLMClassifier"], paper="multiplicity", role="predictor")
METHODS.register_exports(__name__, _LAZY, ["MultiplicityAudit"], paper="multiplicity", role="auditor")

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
