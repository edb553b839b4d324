"""Methods: one package per paper, each exporting reusable library objects and registering them.

A method package registers its public objects in its ``__init__`` with lazy dotted paths::

    from trustlab.core.registry import METHODS
    METHODS.register("SPLITClassifier", "trustlab.methods.split._tree:SPLITClassifier", paper="split")

Packages never import each other (checked by import-linter).
"""

from __future__ import annotations

from trustlab.core.arguments import validate_args
from trustlab.core.registry import METHODS, discover

__all__ = ["METHODS", "discover_methods", "method_classes"]


@validate_args()
def discover_methods() -> list[str]:
    """Import every method package so that its registrations run; returns the package ids."""
    return discover("trustlab.methods")


@validate_args()
def method_classes() -> dict[str, type]:
    """name -> class for every registered method object (imports them)."""
    discover_methods()
    return {name: METHODS.get(name) for name in METHODS.names()}
