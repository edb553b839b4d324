"""Every exported public function declares its argument rules, and refuses each rule's invalid values."""

from __future__ import annotations

import pytest

from trustlab.core.arguments import declared_args
from trustlab.testing.functions import check_function_refuses_invalid, public_functions

FUNCTIONS = public_functions()
DECLARED = {k: f for k, f in FUNCTIONS.items() if declared_args(f) is not None}

#: TRANSITIONAL (issue 15): functions not yet declared; this list must end empty.
PENDING: set[str] = {
    "trustlab.methods.softshape.evaluate",
    "trustlab.methods.softshape.mask_top_steps",
    "trustlab.methods.softshape.p1_split",
    "trustlab.methods.softshape.p2_splits",
    "trustlab.methods.softshape.plot_shape_scores",
    "trustlab.methods.softshape.soft_sparsify",
    "trustlab.methods.softshape.tokens_to_steps",
    "trustlab.methods.split.fit_cart",
    "trustlab.methods.split.fit_gosdt",
    "trustlab.methods.split.fit_licketysplit_package",
    "trustlab.methods.split.fit_treefarms",
    "trustlab.methods.split.tree_objective",
    "trustlab.methods.xhacking.achievable_drop",
    "trustlab.methods.xhacking.build_pipeline",
    "trustlab.methods.xhacking.default_space",
    "trustlab.methods.xhacking.explain_pipeline",
    "trustlab.methods.xhacking.make_redundant_classification",
    "trustlab.methods.xhacking.redundancy",
    "trustlab.methods.xhacking.reference_config",
    "trustlab.methods.xhacking.speedup_ci",
    "trustlab.methods.xhacking.tiny_space",
    "trustlab.methods.xhacking.tts_summary",
    "trustlab.methods.xhacking.verify_report",
    "trustlab.methods.xhacking.xhack",
}


def test_every_public_function_declares_its_arguments():
    undeclared = sorted(k for k in FUNCTIONS if k not in DECLARED and k not in PENDING)
    assert not undeclared, (
        f"{len(undeclared)} exported function(s) declare no argument rules (use "
        f"trustlab.core.arguments.validate_args): {undeclared}"
    )
    stale = sorted(k for k in PENDING if k in DECLARED or k not in FUNCTIONS)
    assert not stale, f"remove from PENDING (declared now or gone): {stale}"


@pytest.mark.parametrize("qualname", sorted(DECLARED))
def test_public_function_refuses_invalid_values(qualname):
    check_function_refuses_invalid(DECLARED[qualname])
