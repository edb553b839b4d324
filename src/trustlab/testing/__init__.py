"""Test utilities: the common checks every method passes (DESIGN section 7)."""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports

_LAZY = dict.fromkeys(("ALL_CHECKS", "check_method", "parametrize_with_checks", "instances", "assert_outputs_equal"),
                      "checks")
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
