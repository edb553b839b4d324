"""Argument rules shared by the FedCEO modules (``Interval`` admits inf; these do not)."""

from __future__ import annotations

import math
import numbers
from typing import Any

from trustlab.core.constraints import Satisfies

__all__ = ["FINITE_POSITIVE", "FINITE_NONNEGATIVE"]


def _finite(v: Any, low: float, strict: bool) -> bool:
    return (isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
            and (v > low if strict else v >= low))


FINITE_POSITIVE = Satisfies(lambda v: _finite(v, 0.0, True), "a finite float > 0",
                            ["x", 0.0, -1.0, float("inf"), float("nan")], valid=1.0)
FINITE_NONNEGATIVE = Satisfies(lambda v: _finite(v, 0.0, False), "a finite float >= 0",
                               ["x", -1.0, float("inf"), float("nan")], valid=1.0)
