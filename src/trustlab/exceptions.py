"""Public home of the trustlab exceptions and warnings (defined in :mod:`trustlab.core.exceptions`)."""

from __future__ import annotations

from trustlab.core.exceptions import ERROR_NAMES
from trustlab.core.lazy import lazy_exports

_LAZY = dict.fromkeys(ERROR_NAMES, "trustlab.core.exceptions")

__all__ = list(ERROR_NAMES)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
