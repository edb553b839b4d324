"""Finding the method packages: import each so that its registrations run."""

from __future__ import annotations

from trustlab.core.arguments import validate_args
from trustlab.core.registry import METHODS, discover

__all__ = ["discover_methods", "method_classes"]


@validate_args()
def discover_methods() -> list[str]:
    """Import every method package so that its registrations run; returns the package ids."""
    return discover("trustlab.methods")


@validate_args()
def method_classes() -> dict[str, type]:
    """name -> class for every registered method object (imports them)."""
    discover_methods()
    return {name: METHODS.get(name) for name in METHODS.names()}
