"""Core: exceptions, constraints and the template message, validation, registry, seeding, optional imports."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustlab.core.constraints import (
    Boolean,
    InstanceOf,
    Interval,
    Options,
    RandomStateRule,
    invalid_values,
    validate_params,
    validate_value,
)
from trustlab.core.exceptions import (
    AssetNotFoundError,
    BudgetExceededError,
    ConfigError,
    InputError,
    MissingDependencyError,
    NotFittedError,
    TrustlabError,
    UnknownNameError,
    UnsupportedModelError,
    did_you_mean,
)
from trustlab.core.optional import is_available, require
from trustlab.core.registry import Registry, load_dotted
from trustlab.core.seeding import as_generator, derive_seed, seed_everything
from trustlab.core.validation import check_array, check_is_fitted, check_X_y


@pytest.mark.parametrize(("exc", "builtin"), [
    (ConfigError, ValueError), (ConfigError, TypeError), (InputError, ValueError),
    (NotFittedError, AttributeError), (UnsupportedModelError, TypeError), (MissingDependencyError, ImportError),
    (AssetNotFoundError, FileNotFoundError), (UnknownNameError, KeyError), (BudgetExceededError, TimeoutError),
])
def test_errors_are_builtins_too(exc, builtin):
    assert issubclass(exc, TrustlabError) and issubclass(exc, builtin)


def test_unknown_name_error_message_is_not_quoted():
    assert str(UnknownNameError("Unknown x 'a'.")) == "Unknown x 'a'."


def test_did_you_mean():
    assert did_you_mean("fedcoe", ["fedceo", "amun"]) == " Did you mean 'fedceo'?"
    assert did_you_mean("zzzz", ["fedceo"]) == ""


def test_template_message():
    with pytest.raises(ConfigError, match=r"^The 'rank' parameter of FedCEO must be an int in \[1, inf\)\. Got 0 instead\.$"):
        validate_value("FedCEO", "rank", 0, [Interval(int, 1, None)])
    with pytest.raises(ConfigError, match=r"must be one of \{'a', 'b'\} or None\. Got 'c' instead"):
        validate_value("M", "kind", "c", [Options(["a", "b"]), None])


@pytest.mark.parametrize(("rule", "good", "bad"), [
    (Interval(int, 1, 10), [1, 10, 5], [0, 11, 1.5, True, "3", float("nan")]),
    (Interval(float, 0, 1, closed="neither"), [0.5, 1e-9], [0.0, 1.0, -1, "x"]),
    (Interval("real", None, 0, closed="right"), [0, -5.5], [0.1]),
    (Options(["lr", "mms"]), ["lr"], ["LR", 1, None]),
    (InstanceOf(int, float), [1, 2.0], [True, "1", None]),
    (Boolean(), [True, np.bool_(False)], [1, "yes"]),
    (RandomStateRule(), [None, 0, np.random.default_rng(0)], [-1, 1.5, "s"]),
])
def test_constraints(rule, good, bad):
    for v in good:
        assert rule.is_satisfied_by(v), v
    for v in bad:
        assert not rule.is_satisfied_by(v), v


@given(st.integers(-5, 5), st.integers(0, 5))
def test_invalid_values_break_every_rule(lo, width):
    rules = [Interval(int, lo, lo + width), None]
    vals = invalid_values(rules)
    assert vals
    for v in vals:
        with pytest.raises(ConfigError):
            validate_value("X", "p", v, rules)


def test_validate_params_checks_only_constrained():
    validate_params("M", {"a": 1, "free": object()}, {"a": [Interval(int, 0, None)]})
    with pytest.raises(ConfigError):
        validate_params("M", {"a": -1}, {"a": [Interval(int, 0, None)]})


def test_check_array_errors():
    with pytest.raises(InputError, match="must be a 2-d array"):
        check_array([1, 2, 3], owner="M")
    with pytest.raises(InputError, match="finite"):
        check_array([[1.0, np.nan]])
    with pytest.raises(InputError, match="at least 1 sample"):
        check_array(np.zeros((0, 3)))
    with pytest.raises(InputError, match="numbers"):
        check_array([["a", "b"]])
    with pytest.raises(InputError, match="None"):
        check_array(None)
    assert check_array(pd.DataFrame({"a": [1, 2]})).shape == (2, 1)


def test_check_X_y_lengths_and_fitted():
    with pytest.raises(InputError, match="same number of samples"):
        check_X_y(np.zeros((3, 2)), [0, 1])
    with pytest.raises(InputError, match="1-d"):
        check_X_y(np.zeros((3, 2)), np.zeros((3, 2)))

    class Thing:
        pass

    with pytest.raises(NotFittedError, match="not fitted"):
        check_is_fitted(Thing())


def test_registry_lazy_duplicates_and_suggestions():
    reg = Registry("method")
    reg.register("Interval", "trustlab.core.constraints:Interval", paper="core")
    assert reg.get("Interval") is Interval
    reg.register("Interval", "trustlab.core.constraints:Interval")  # same target: idempotent
    with pytest.raises(ValueError, match="already registered"):
        reg.register("Interval", "trustlab.core.constraints:Options")
    with pytest.raises(UnknownNameError, match="Did you mean 'Interval'"):
        reg.get("Intreval")
    assert load_dotted("trustlab.core.constraints.Options") is Options
    assert reg.names() == ["Interval"] and "Interval" in reg and len(reg) == 1


def test_seeding_is_deterministic():
    assert derive_seed(3, "client", 1) == derive_seed(3, "client", 1)
    assert derive_seed(3, "client", 1) != derive_seed(3, "client", 2)
    a = seed_everything(5).random(3)
    b = seed_everything(5).random(3)
    assert np.array_equal(a, b)
    g = np.random.default_rng(1)
    assert as_generator(g) is g
    with pytest.raises(ConfigError, match="must be None, an int in"):
        as_generator(np.random.RandomState(0))  # one random_state rule everywhere: int, Generator or None


def test_optional_require_names_extra(monkeypatch):
    from trustlab.core import optional

    assert is_available("numpy") and not is_available("surely_not_a_module_xyz")
    monkeypatch.setitem(optional.EXTRA_MODULES, "xai", [*optional.EXTRA_MODULES["xai"], "surely_not_a_module_xyz"])
    with pytest.raises(MissingDependencyError, match=r"pip install 'trustlab\[xai\]'"):
        require("surely_not_a_module_xyz", purpose="testing")
    assert require("numpy") is np


def test_extra_modules_mirror_pyproject():
    import re
    import tomllib
    from pathlib import Path

    from trustlab.core.optional import EXTRA_MODULES

    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, modules in EXTRA_MODULES.items():
        dists = {re.split(r"[\[<>=!~ ]", req, maxsplit=1)[0].replace("-", "_") for req in extras[extra]}
        dists.discard("numba")  # an accelerator of the trees extra, not a module trustlab requires
        dists = {{"mlflow_skinny": "mlflow"}.get(d, d) for d in dists}  # the distribution that provides `mlflow`
        assert dists == set(modules), f"extra '{extra}': pyproject {sorted(dists)} vs EXTRA_MODULES {sorted(modules)}"


def test_two_threads_fitting_at_once_give_the_sequential_results():
    """Issue 43: verbs seed and restore the process-wide RNGs; two threads doing that at once must not interleave
    (a re-entrant lock in isolated_global_rng), so each fit equals the same fit run alone."""
    import threading
    import time

    from toys import ToyPredictor

    class GlobalDraws(ToyPredictor):  # draws from numpy's global RNG inside the verb, as third-party code does
        def _fit(self, X, y):
            super()._fit(X, y)
            parts = []
            for _ in range(5):
                parts.append(np.random.normal(size=3))
                time.sleep(0.002)  # let the other thread run in between
            self.draws_ = np.concatenate(parts)

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 3)), np.arange(30) % 2
    alone = {s: GlobalDraws(random_state=s).fit(X, y).draws_ for s in (1, 2)}
    for _ in range(5):
        got = {}
        threads = [threading.Thread(target=lambda s=s, got=got: got.__setitem__(
            s, GlobalDraws(random_state=s).fit(X, y).draws_)) for s in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in (1, 2):
            np.testing.assert_array_equal(got[s], alone[s])


def test_seed_alias_maps_the_deprecated_keyword_and_keeps_the_rules():
    import warnings

    from trustlab.core.arguments import declared_args, validate_args
    from trustlab.core.constraints import RandomStateRule
    from trustlab.core.exceptions import ConfigError
    from trustlab.core.seeding import seed_alias

    @seed_alias
    @validate_args(random_state=[RandomStateRule()])
    def draw(*, random_state=None):
        return np.random.default_rng(random_state).integers(1000)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert draw(random_state=3) == draw(random_state=3)
    with pytest.warns(FutureWarning, match="random_state"):
        assert draw(seed=3) == draw(random_state=3)
    with pytest.raises(ConfigError, match="both 'seed' and 'random_state'"):
        draw(seed=1, random_state=1)
    assert "random_state" in declared_args(draw)
