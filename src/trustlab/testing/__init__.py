"""Test utilities: the common checks every method passes (DESIGN section 7)."""

from trustlab.testing.checks import (
    ALL_CHECKS,
    assert_outputs_equal,
    check_method,
    instances,
    parametrize_with_checks,
)

__all__ = ["ALL_CHECKS", "check_method", "parametrize_with_checks", "instances", "assert_outputs_equal"]
