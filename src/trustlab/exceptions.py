"""Public home of the trustlab exceptions (defined in :mod:`trustlab.core.exceptions`)."""

from trustlab.core.exceptions import (  # noqa: F401
    AssetNotFoundError,
    BudgetExceededError,
    ConfigError,
    ConvergenceWarning,
    InputError,
    MissingDependencyError,
    NotFittedError,
    ScaleWarning,
    TrustlabError,
    UnknownNameError,
    UnsupportedModelError,
)

__all__ = [
    "TrustlabError",
    "ConfigError",
    "InputError",
    "NotFittedError",
    "UnsupportedModelError",
    "MissingDependencyError",
    "AssetNotFoundError",
    "UnknownNameError",
    "BudgetExceededError",
    "ScaleWarning",
    "ConvergenceWarning",
]
