"""X-hacking: AutoML searches that manipulate SHAP explanations, and the defensive X-hacking audit.

Sharma et al., "X-Hacking: The Threat of Misguided AutoML", ICML 2025 (arXiv:2401.08513).
Exports load lazily: importing this package imports neither shap nor optuna.
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "XHackingAudit": "_audit",
    "verify_report": "_verify", "SoundnessCheck": "_verify",
    "xhack": "_search", "achievable_drop": "_search", "Vulnerability": "_search",
    "SearchSpace": "_space", "default_space": "_space", "audit_space": "_space", "tiny_space": "_space",
    "redundancy": "_data", "make_redundant_classification": "_data",
    "SearchContext": "_problem", "EvalSettings": "_problem", "reference_config": "_problem",
    "tts_summary": "_problem", "speedup_ci": "_problem", "TrialsToSuccess": "_problem", "SpeedupCI": "_problem",
}

__all__ = sorted(_LAZY)
METHODS.register_exports(__name__, _LAZY, ["XHackingAudit"], paper="xhacking", role="auditor")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
