"""X-hacking: AutoML searches that manipulate SHAP explanations, and the defensive X-hacking audit.

Sharma et al., "X-Hacking: The Threat of Misguided AutoML", ICML 2025 (arXiv:2401.08513).
"""

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

METHODS.register("XHackingAudit", "trustlab.methods.xhacking._audit:XHackingAudit", paper="xhacking", role="auditor")

__all__ = ["XHackingAudit", "XHackingReport", "FeatureInterval", "verify_report", "xhack", "XHackResult",
           "SearchSpace", "default_space", "tiny_space", "build_pipeline", "redundancy",
           "make_redundant_classification", "SearchContext", "EvalSettings", "explain_pipeline",
           "tts_summary", "speedup_ci", "reference_config", "achievable_drop"]

_LAZY = {
    "XHackingAudit": "_audit", "XHackingReport": "_audit", "FeatureInterval": "_audit", "verify_report": "_audit",
    "xhack": "_search", "XHackResult": "_search", "achievable_drop": "_search", "SearchSpace": "_space", "default_space": "_space",
    "tiny_space": "_space", "build_pipeline": "_space", "redundancy": "_data",
    "make_redundant_classification": "_data", "SearchContext": "_problem", "EvalSettings": "_problem",
    "tts_summary": "_problem", "speedup_ci": "_problem", "reference_config": "_problem",
    "explain_pipeline": "_explain",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
