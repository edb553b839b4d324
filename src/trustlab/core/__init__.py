"""Core: exceptions, constraints, validation, registry, seeding, optional imports, base classes.

Names are loaded lazily so that ``import trustlab.core.exceptions`` (used everywhere, e.g. by the LLM
loader) does not pay for scikit-learn's import through :mod:`trustlab.core.base`.
"""

from __future__ import annotations

from trustlab.core.exceptions import ERROR_NAMES
from trustlab.core.lazy import lazy_exports

_LAZY = {
    "Method": "trustlab.core.base",
    "PaperInfo": "trustlab.core.base",
    "Boolean": "trustlab.core.constraints",
    "InstanceOf": "trustlab.core.constraints",
    "Interval": "trustlab.core.constraints",
    "Options": "trustlab.core.constraints",
    "validate_params": "trustlab.core.constraints",
    **dict.fromkeys(ERROR_NAMES, "trustlab.core.exceptions"),
    "METHODS": "trustlab.core.registry",


    "Aggregator": "trustlab.core.roles",
    "Attack": "trustlab.core.roles",
    "AttackResult": "trustlab.core.roles",
    "Auditor": "trustlab.core.roles",
    "Detector": "trustlab.core.roles",
    "EditHandle": "trustlab.core.roles",
    "ModelEdit": "trustlab.core.roles",
    "Predictor": "trustlab.core.roles",
    "Purifier": "trustlab.core.roles",
    "Regressor": "trustlab.core.roles",
    "Router": "trustlab.core.roles",
    "RouteDecision": "trustlab.core.roles",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
