"""Core: exceptions, constraints, validation, registry, seeding, optional imports, base classes."""

from trustlab.core.base import Method, PaperInfo
from trustlab.core.constraints import Boolean, InstanceOf, Interval, Options, validate_params
from trustlab.core.exceptions import ConfigError, InputError, TrustlabError
from trustlab.core.registry import METHODS, Registry
from trustlab.core.roles import (
    ROLES,
    Aggregator,
    Attack,
    AttackResult,
    Auditor,
    Detector,
    EditHandle,
    ModelEdit,
    Predictor,
    Purifier,
    Router,
)

__all__ = [
    "Method", "PaperInfo", "Boolean", "InstanceOf", "Interval", "Options", "validate_params",
    "ConfigError", "InputError", "TrustlabError", "METHODS", "Registry", "ROLES", "Aggregator",
    "Attack", "AttackResult", "Auditor", "Detector", "EditHandle", "ModelEdit", "Predictor",
    "Purifier", "Router",
]
