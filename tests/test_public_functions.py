"""Every exported public function declares its argument rules, and refuses each rule's invalid values."""

from __future__ import annotations

import pytest

from trustlab.core.arguments import declared_args
from trustlab.testing.functions import check_function_refuses_invalid, public_functions

FUNCTIONS = public_functions()
DECLARED = {k: f for k, f in FUNCTIONS.items() if declared_args(f) is not None}

def test_every_public_function_declares_its_arguments():
    undeclared = sorted(k for k in FUNCTIONS if k not in DECLARED)
    assert not undeclared, (
        f"{len(undeclared)} exported function(s) declare no argument rules (use "
        f"trustlab.core.arguments.validate_args): {undeclared}"
    )


@pytest.mark.parametrize("qualname", sorted(DECLARED))
def test_public_function_refuses_invalid_values(qualname):
    check_function_refuses_invalid(DECLARED[qualname])
