"""Methods: one package per paper, each exporting reusable library objects and registering them.

A method package exports its public objects through one lazy map and registers its method classes from
the same map (see ``docs/design.md``, "Adding a paper")::

    _LAZY = {"PAPER": "_paper", "SPLITClassifier": "_tree"}
    __all__ = sorted(_LAZY)
    METHODS.register_exports(__name__, _LAZY, ["SPLITClassifier"], paper="split", role="predictor")
    __getattr__, __dir__ = lazy_exports(__name__, _LAZY)

Packages never import each other (checked by import-linter).
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports

_LAZY = {"METHODS": "trustlab.core.registry", "discover_methods": "_discovery"}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
