"""The common checks are themselves tested: correct toys pass, each broken toy fails its check."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

from trustlab.core.roles import Predictor
from trustlab.testing import ALL_CHECKS, check_method, instances, parametrize_with_checks
from trustlab.testing import checks as checks_mod

from broken import BROKEN
from toys import GOOD_TOYS, ToyPredictor


@pytest.fixture(autouse=True)
def _restore_threads():
    """The thread-leaking toys change this process's thread counts on purpose: put them back."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    with threadpool_limits(limits=None):  # restores every BLAS/OpenMP pool on exit
        yield
    torch.set_num_threads(before)


@parametrize_with_checks(GOOD_TOYS)
def test_good_toys_pass(estimator, check):
    check(estimator)


@pytest.mark.parametrize("broken_cls", list(BROKEN), ids=lambda c: c.__name__)
def test_broken_toy_is_caught_by_its_check(broken_cls):
    check = getattr(checks_mod, BROKEN[broken_cls])
    failures = 0
    for est in instances(broken_cls):
        try:
            check(est)
        except AssertionError:
            failures += 1
    assert failures, f"{check.__name__} did not catch {broken_cls.__name__}"


@pytest.mark.parametrize("broken_cls", list(BROKEN), ids=lambda c: c.__name__)
def test_check_method_fails_on_broken_toys(broken_cls):
    with pytest.raises(AssertionError):
        check_method(broken_cls)


def test_check_method_passes_good_toys():
    for cls in GOOD_TOYS:
        check_method(cls)


def test_every_check_is_exercised_by_a_broken_toy():
    exercised = set(BROKEN.values())
    names = {c.__name__ for c in ALL_CHECKS}
    # check_get_set_params_clone and check_not_fitted are enforced by the role classes themselves
    assert names - exercised <= {"check_get_set_params_clone", "check_not_fitted"}


def test_public_verbs_are_final():
    with pytest.raises(TypeError, match="public verb"):
        class Overrides(Predictor):  # noqa: F841
            def predict(self, X):
                return X


def test_clone_of_fitted_toy_is_unfitted():
    est = ToyPredictor().fit(np.eye(4), [0, 1, 0, 1])
    assert not hasattr(clone(est), "classes_")
