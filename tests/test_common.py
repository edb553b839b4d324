"""The common checks (DESIGN section 7) over every registered method."""

from __future__ import annotations

import pytest

from trustlab.methods._discovery import method_classes
from trustlab.testing import parametrize_with_checks

CLASSES = list(method_classes().values())

if CLASSES:

    @parametrize_with_checks(CLASSES)
    def test_registered_methods_pass_common_checks(estimator, check):
        check(estimator)

else:

    @pytest.mark.skip(reason="no method is registered yet")
    def test_registered_methods_pass_common_checks():
        pass
