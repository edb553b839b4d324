"""The cross-cutting contract: local randomness, restored threads, declared argument rules, typed results."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from trustlab.core.arguments import ArrayLike, SequenceOf, example_call, validate_args
from trustlab.core.constraints import NO_EXAMPLE, Interval, Options, invalid_values, valid_example
from trustlab.core.exceptions import ConfigError, InputError, TrustlabError
from trustlab.core.seeding import (
    check_random_state,
    global_rng_state,
    isolated_global_rng,
    same_global_rng_state,
    torch_generator,
)
from trustlab.core.threads import limit_threads, thread_state
from trustlab.experiments.base import CheckResult, Claim, evaluate_claims
from trustlab.results.result import Result

from toys import ToyModelEdit, ToyPredictor


def test_check_random_state_types():
    g = np.random.default_rng(0)
    assert check_random_state(g) is g
    assert check_random_state(3).random() == np.random.default_rng(3).random()
    for bad in (-1, 1.5, "0", True, np.random.RandomState(0)):
        with pytest.raises(ConfigError, match=r"The 'random_state' argument of check_random_state must be None, an int"):
            check_random_state(bad)


def test_isolated_global_rng_restores_and_seeds():
    import torch

    before = global_rng_state()
    with isolated_global_rng(7):
        a = (random.random(), np.random.rand(), float(torch.rand(1)))
    assert same_global_rng_state(before, global_rng_state())
    with isolated_global_rng(7):
        b = (random.random(), np.random.rand(), float(torch.rand(1)))
    assert a == b
    with pytest.raises(RuntimeError), isolated_global_rng(1):
        np.random.rand()
        raise RuntimeError("restored even when the block raises")
    assert same_global_rng_state(before, global_rng_state())


def test_torch_generator_is_local():
    import torch

    before = torch.get_rng_state()
    x = torch.rand(3, generator=torch_generator(5))
    y = torch.rand(3, generator=torch_generator(5))
    assert torch.equal(x, y) and torch.equal(before, torch.get_rng_state())


def test_limit_threads_restores():
    import torch

    before = thread_state()
    with limit_threads(1):
        assert torch.get_num_threads() == 1
    assert thread_state() == before
    with pytest.raises(ValueError), limit_threads(1):
        raise ValueError("restored on error")
    assert thread_state() == before
    with pytest.raises(ConfigError, match="The 'n' argument of limit_threads"):
        with limit_threads(0):
            pass


def test_verbs_are_reproducible_without_touching_globals():
    X = np.random.default_rng(0).normal(size=(20, 3))
    y = np.arange(20) % 2
    np.random.seed(123)
    before = global_rng_state()
    p1 = ToyPredictor(noise=0.5, random_state=4).fit(X, y).predict_proba(X)
    p2 = ToyPredictor(noise=0.5, random_state=4).fit(X, y).predict_proba(X)
    assert np.array_equal(p1, p2)
    assert same_global_rng_state(before, global_rng_state())


def test_edit_info_is_typed():
    import torch

    model = torch.nn.Linear(4, 2)
    handle = ToyModelEdit(scale=3.0).apply(model)
    assert handle.info.method == "ToyModelEdit" and handle.info.n_hooks == 1
    assert handle.info.changed_params == ("weight",)
    handle.restore()


# -- declared argument rules --------------------------------------------------------------------------
@validate_args(x=[ArrayLike(ndim=2)], k=[Interval(int, 1, None)], how=[Options(["a", "b"])],
               names=[SequenceOf(str), None])
def _top(x, k=1, how="a", names=None):
    return np.asarray(x)[:k]


def test_validate_args_template_and_types():
    assert _top(np.zeros((3, 2)), k=2).shape == (2, 2)
    with pytest.raises(ConfigError, match=r"^The 'k' argument of _top must be an int in \[1, inf\)\. Got 0 instead\."):
        _top(np.zeros((3, 2)), k=0)
    with pytest.raises(InputError, match=r"The 'x' argument of _top must be a finite numeric array-like"):
        _top([[1.0, np.nan]])
    with pytest.raises(InputError, match=r"Got array\(shape=\(3,\), dtype=float64\) instead|Got array"):
        _top(np.zeros(3))
    with pytest.raises(TypeError, match="_top"):
        _top()


def test_generated_invalid_values_are_refused():
    """The mechanism the per-function generated test uses: every declared rule's invalid values raise."""
    base = example_call(_top)
    assert all(v is not NO_EXAMPLE for v in base.values())
    _top(**base)
    for name, rules in _top.__trustlab_args__.items():
        for bad in invalid_values(rules)[:4]:
            with pytest.raises(TrustlabError) as info:
                _top(**{**base, name: bad})
            assert re.search(rf"The '{name}' argument of _top must be .+ Got .+ instead\.", str(info.value))


def test_valid_examples_satisfy_rules():
    for rules in ([Interval(int, 1, None)], [Interval(float, 0, 1, closed="neither")], [Options(["x"])],
                  [ArrayLike(ndim=(1, 2), dtype="integer", low=0)], [SequenceOf(Interval(int, 0, 5), min_len=2)],
                  [None]):
        v = valid_example(rules)
        assert v is not NO_EXAMPLE or rules == [None]


def test_validate_args_rejects_unknown_names():
    with pytest.raises(TypeError, match="no argument"):
        @validate_args(nope=[Interval(int, 0, None)])
        def f(x):
            return x


# -- typed claim results -----------------------------------------------------------------------------
def test_claims_return_check_results():
    r = Result("toy", "quick", {"n": 3})
    ok = Claim("C1", "toy", lambda res: CheckResult(True, 1.0, ">= 0.5", baseline=0.2, unit="x"),
               scale_note=lambda cfg: f"{cfg['n']} seeds")
    broken = Claim("C2", "toy", lambda res: {"not": "a CheckResult"})
    out = evaluate_claims(r, [ok, broken])
    assert out[0].status == "PASS" and out[0].unit == "x" and out[0].scale_note == "3 seeds"
    assert out[1].status == "FAIL" and "CheckResult" in out[1].detail


def test_functions_with_random_state_take_a_generator_and_keep_int_seeds():
    """Issue 14 item 1: fit_cart, p2_splits and redundancy took int seeds only; a Generator now works and an
    int seed gives what it gave before (it reaches scikit-learn unchanged)."""
    from sklearn.model_selection import KFold

    from trustlab.methods.softshape import p2_splits
    from trustlab.methods.split import fit_cart
    from trustlab.methods.xhacking import redundancy

    rng = np.random.default_rng(0)
    Xb, y = rng.integers(0, 2, size=(40, 4)).astype(bool), rng.integers(0, 2, 40)
    assert fit_cart(Xb, y, reg=0.01, depth_budget=3, random_state=np.random.default_rng(1)).objective > 0
    folds = list(p2_splits(np.arange(40) % 2, 4, random_state=np.random.default_rng(1)))
    assert len(folds) == 4 and all(len(f.test) == 10 for f in folds)
    X = rng.normal(size=(60, 3))
    assert np.isfinite(redundancy(X, 0, random_state=np.random.default_rng(1)))
    from sklearn.linear_model import RidgeCV
    from sklearn.model_selection import cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    pred = cross_val_predict(make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))), X[:, 1:],
                             X[:, 0], cv=KFold(5, shuffle=True, random_state=7))
    expected = 1.0 - np.sum((X[:, 0] - pred) ** 2) / np.sum((X[:, 0] - X[:, 0].mean()) ** 2)
    assert redundancy(X, 0, random_state=7) == pytest.approx(expected, rel=1e-12)  # the int reached KFold as is
