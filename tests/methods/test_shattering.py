"""Tests of trustlab.methods.shattering (issue 20): the cyclic KG, ROME / AlphaEdit / FT-L, R(D*), bad inputs."""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest

from trustlab.core.exceptions import InputError, TrustlabError, UnknownNameError, UnsupportedModelError
from trustlab.core.registry import METHODS
from trustlab.methods import shattering as sh
from trustlab.testing import parametrize_with_checks

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

EDITORS = ["ROME", "AlphaEdit", "FineTuneEdit"]


@parametrize_with_checks([METHODS.get(n) for n in EDITORS])
def test_editors_pass_common_checks(estimator, check):
    check(estimator)
