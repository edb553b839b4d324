"""``trustlab audit``: one command that audits a user's own classifier and data with every applicable method.

A layer above the methods (import-linter: ``cli > audit | experiments > methods``): it composes the methods'
public APIs and never re-implements them. Checks (each run only where it applies; the report says why one
was skipped): data quality (duplicates and KNN-Shapley noisy-label flags, ``methods.licensing``), target
leakage (one-split trees), membership risk (RMIA and a loss-threshold attack with reference models,
``methods.amun``), multiplicity over refits (``methods.multiplicity``), explanation stability (X-hacking
intervals, ``methods.xhacking``), explanation controls (``trustlab.explain``) and the interpretability gap
(an optimal sparse tree, ``methods.split``). See docs/audit.md.

Importing this package is light: the methods load when a check runs.
"""

from trustlab.core.lazy import lazy_exports

_LAZY = {
    "audit": "_audit", "resolve_checks": "_audit", "parse_fail_on": "_gate", "evaluate_fail_on": "_gate",
    "parse_settings": "_gate", "FailRule": "_gate", "AuditCrashError": "_gate",
    "AuditReport": "_report", "CheckOutcome": "_report",
    "CHECKS": "_checks", "DEFAULTS": "_checks",
    "read_table": "_inputs", "load_model": "_inputs", "parse_estimator": "_inputs", "example_table": "_inputs",
    "load_torch_classifier": "_inputs", "LoadedModel": "_inputs", "TorchClassifier": "_inputs",
    "ESTIMATOR_MODULES": "_inputs",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
