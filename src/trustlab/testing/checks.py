"""Common checks every trustlab method must pass (DESIGN section 7).

``check_method(Cls)`` runs them all; ``parametrize_with_checks([Cls, ...])`` makes one pytest case per
(instance, check). Each check raises ``AssertionError`` with a message saying what broke. The checks
are themselves tested against deliberately broken toy methods (tests/test_checks.py).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
from sklearn.base import clone

from trustlab.core.arguments import AnyValue, SequenceOf, validate_args
from trustlab.core.base import Method
from trustlab.core.constraints import Interval, Satisfies, invalid_values
from trustlab.core.exceptions import ConfigError, InputError, NotFittedError, TrustlabError
from trustlab.testing._classifier import check_classifier_semantics
from trustlab.testing._inputs import _model, bad_inputs, default_inputs, fit_for_checks, role_of, run_verbs

__all__ = ["ALL_CHECKS", "check_method", "parametrize_with_checks", "instances", "assert_outputs_equal"]


#: a trustlab method class (its test-params sets make the instances the checks run on)
_METHOD_CLASS = Satisfies(lambda v: isinstance(v, type) and issubclass(v, Method), "a trustlab Method class",
                          invalid=[None, "Cls", int], valid=Method)
_OUTPUT = [AnyValue("any verb output: arrays, dicts, dataclasses and scalars are compared structurally")]
_TOL = [Interval(float, 0, None)]


@validate_args(cls=[_METHOD_CLASS])
def instances(cls: type) -> list[Any]:
    """One instance per test-params set of ``cls``."""
    return [cls(**params) for params in cls._get_test_params()]


@validate_args(a=_OUTPUT, b=_OUTPUT, what=[Satisfies(lambda v: isinstance(v, str), "a str (what the message names)",
                                                     invalid=[None, 3], valid="output")], rtol=_TOL, atol=_TOL)
def assert_outputs_equal(a: Any, b: Any, what: str, *, rtol: float = 1e-7, atol: float = 1e-9) -> None:
    """Structural equality of verb outputs (arrays, dicts, dataclasses, scalars)."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        a, b = dataclasses.asdict(a), dataclasses.asdict(b)
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{what}: keys differ ({sorted(a)} vs {sorted(b)})"
        for k in a:
            assert_outputs_equal(a[k], b[k], f"{what}[{k!r}]", rtol=rtol, atol=atol)
        return
    if isinstance(a, list | tuple) and not (a and np.isscalar(a[0])):
        assert len(a) == len(b), f"{what}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_outputs_equal(x, y, f"{what}[{i}]", rtol=rtol, atol=atol)
        return
    try:
        aa, bb = np.asarray(a), np.asarray(b)
    except Exception:  # noqa: BLE001
        assert a == b, f"{what}: {a!r} != {b!r}"
        return
    if aa.dtype.kind in "fc" and bb.dtype.kind in "fc":
        assert aa.shape == bb.shape and np.allclose(aa, bb, rtol=rtol, atol=atol, equal_nan=True), \
            f"{what}: values differ (max abs diff {np.nanmax(np.abs(aa - bb)) if aa.shape == bb.shape else 'shape'})"
    else:
        assert aa.shape == bb.shape and (aa == bb).all(), f"{what}: {a!r} != {b!r}"


def _base_init_attrs(cls: type) -> set[str]:
    """Attributes the parent ``__init__`` sets on a bare instance (aeon's BaseClassifier: is_fitted,
    metadata_, classes_...); empty for plain trustlab methods, whose parents set nothing."""
    bare = cls.__new__(cls)
    try:
        super(cls, bare).__init__()
    except TypeError:
        return set()
    return set(vars(bare))


# --------------------------------------------------------------------------------------------------
# the checks
def check_init_stores_params(est: Any) -> None:
    """``__init__`` stores every hyper-parameter unchanged and nothing else (no work, no validation)."""
    cls = type(est)
    sig = inspect.signature(cls.__init__)
    bad_kinds = [n for n, p in sig.parameters.items() if n != "self" and p.kind is not p.KEYWORD_ONLY]
    assert not bad_kinds, f"{cls.__name__}.__init__ parameters {bad_kinds} must be keyword-only."
    params = est.get_params(deep=False)
    stored = {k: v for k, v in vars(est).items()}
    extra = sorted(set(stored) - set(params) - _base_init_attrs(cls))
    assert not extra, f"{cls.__name__}.__init__ sets attributes that are not parameters: {extra}."
    sentinels = {name: object() for name in sig.parameters if name != "self"}
    try:
        fresh = cls(**sentinels)
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(
            f"{cls.__name__}.__init__ does work or validation ({type(exc).__name__}: {exc}); it must only "
            "store its arguments. Validate in the public verb."
        ) from exc
    for name, value in sentinels.items():
        assert getattr(fresh, name, None) is value, (
            f"{cls.__name__}.__init__ changed the parameter '{name}'; store hyper-parameters unchanged and "
            "validate them in the public verb."
        )


def check_get_set_params_clone(est: Any) -> None:
    """get_params/set_params round-trip; ``clone`` gives an unfitted copy with equal parameters."""
    params = est.get_params(deep=False)
    est2 = clone(est)
    assert est2 is not est
    assert_outputs_equal({k: repr(v) for k, v in est2.get_params(deep=False).items()},
                         {k: repr(v) for k, v in params.items()}, "clone params")
    est2.set_params(**params)
    assert est2.get_params(deep=False).keys() == params.keys()
    allowed = _base_init_attrs(type(est))
    fitted = [k for k in vars(est2) if k.endswith("_") and not k.startswith("_") and k not in allowed]
    assert not fitted, f"clone of {type(est).__name__} carries fitted attributes {fitted}."


def check_constraints_cover_params(est: Any) -> None:
    """Every hyper-parameter has a rule list in ``_constraints`` (and no rule names a missing parameter)."""
    params = set(est.get_params(deep=False))
    rules = set(type(est)._constraints)
    assert params <= rules, f"{type(est).__name__} has parameters without _constraints: {sorted(params - rules)}."
    assert rules <= params, f"{type(est).__name__}._constraints names unknown parameters: {sorted(rules - params)}."


def _call_first_verb(est: Any, inputs: dict[str, Any]) -> None:
    run_verbs(est, inputs)


def check_invalid_params_raise(est: Any) -> None:
    """A generated invalid value for every constrained parameter raises ConfigError with the template."""
    cls = type(est)
    for name, rules in cls._constraints.items():
        if rules == "no_validation":
            continue
        for bad in invalid_values(list(rules))[:3]:
            broken = clone(est).set_params(**{name: bad})
            try:
                _call_first_verb(broken, default_inputs(broken))
            except ConfigError as exc:
                pattern = rf"The '{re.escape(name)}' parameter of {re.escape(cls.__name__)} must be .+ Got .+ instead\."
                assert re.search(pattern, str(exc)), f"ConfigError for '{name}'={bad!r} lacks the template: {exc}"
                continue
            except Exception as exc:  # noqa: BLE001
                raise AssertionError(
                    f"{cls.__name__}: '{name}'={bad!r} raised {type(exc).__name__} ({exc}) instead of ConfigError."
                ) from exc
            raise AssertionError(f"{cls.__name__} accepted the invalid value {bad!r} for '{name}'.")


#: the verb that predicts from a fitted estimator's X, per role with tabular inputs
_PREDICT_VERB = {"predictor": "predict_proba", "regressor": "predict", "detector": "score_samples"}


def check_bad_inputs_raise(est: Any) -> None:
    """Empty, NaN/inf, wrong ndim and mismatched-length inputs raise InputError."""
    good = default_inputs(est)
    for label, inputs in bad_inputs(est, good):
        try:
            run_verbs(clone(est), inputs)
        except InputError:
            continue
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{type(est).__name__} raised {type(exc).__name__} ({exc}) for {label}, "
                                 "not InputError.") from exc
        raise AssertionError(f"{type(est).__name__} accepted bad input silently: {label}.")
    if role_of(est) in _PREDICT_VERB and isinstance(good.get("X"), np.ndarray):
        fitted = fit_for_checks(clone(est), good)
        verb = getattr(fitted, _PREDICT_VERB[role_of(est)])
        if type(est).get_tags().get("allow_nan", False):  # NaN is data here (e.g. a train-mean fill)
            X = good["X"].astype(float).copy()
            X[0, 0] = np.nan
            assert np.isfinite(verb(X)).all(), f"{type(est).__name__} allows NaN but gave non-finite outputs."
            return
        X = good["X"].astype(float).copy()
        X[0, 0] = np.nan
        try:
            verb(X)
        except InputError:
            pass
        else:
            raise AssertionError(f"{type(est).__name__} predicted on NaN input silently.")


def check_not_fitted(est: Any) -> None:
    """Predicting before ``fit`` raises NotFittedError."""
    role = role_of(est)
    verbs = {**_PREDICT_VERB, "router": "route"}
    if role not in verbs:
        return
    inputs = default_inputs(est)
    arg = inputs.get("X", inputs.get("queries"))
    try:
        getattr(clone(est), verbs[role])(*([arg, inputs["budget"]] if role == "router" else [arg]))
    except NotFittedError:
        return
    raise AssertionError(f"{type(est).__name__}.{verbs[role]} did not raise NotFittedError before fit.")


def _with_seed(est: Any, seed: int) -> Any:
    e = clone(est)
    if "random_state" in e.get_params(deep=False):
        e.set_params(random_state=seed)
    return e


def check_deterministic(est: Any) -> None:
    """The same ``random_state`` (or none, for deterministic methods) gives the same outputs."""
    a = run_verbs(_with_seed(est, 0), default_inputs(est))
    b = run_verbs(_with_seed(est, 0), default_inputs(est))
    assert_outputs_equal(a, b, f"{type(est).__name__} outputs under the same random_state")


def check_inputs_not_mutated(est: Any) -> None:
    """Verbs leave their inputs unchanged."""
    inputs = default_inputs(est)
    snapshot = copy.deepcopy({k: v for k, v in inputs.items() if k != "model"})
    run_verbs(clone(est), inputs)
    for k, v in snapshot.items():
        assert_outputs_equal(inputs[k], v, f"{type(est).__name__} mutated its input '{k}'", rtol=0, atol=0)


def check_pickle_roundtrip(est: Any) -> None:
    """A fitted (or used) method survives pickling and gives the same outputs afterwards."""
    inputs = default_inputs(est)
    e = _with_seed(est, 0)
    fit_for_checks(e, inputs)
    try:
        e2 = pickle.loads(pickle.dumps(e))
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"{type(est).__name__} cannot be pickled: {type(exc).__name__}: {exc}") from exc
    role = role_of(est)
    if role == "predictor":
        assert_outputs_equal(e.predict_proba(inputs["X"]), e2.predict_proba(inputs["X"]), "proba after pickle")
    elif role == "regressor":
        assert_outputs_equal(e.predict(inputs["X"]), e2.predict(inputs["X"]), "predictions after pickle")
    elif role == "detector":
        assert_outputs_equal(e.score_samples(inputs["X"]), e2.score_samples(inputs["X"]), "scores after pickle")
    elif role == "router":
        assert_outputs_equal(e.route(inputs["queries"], inputs["budget"]), e2.route(inputs["queries"], inputs["budget"]),
                             "routes after pickle")


def _pools(state: dict[str, Any]) -> dict[tuple[str, str], int]:
    return {(api, path): n for api, path, n in state.get("threadpools", [])}


def check_no_global_side_effects(est: Any) -> None:
    """Calling the public verbs leaves the global Python/NumPy/torch RNG states and every thread count
    (torch intra-op, BLAS/OpenMP pools) as they were."""
    import importlib.util

    from trustlab.core.seeding import global_rng_state, isolated_global_rng, same_global_rng_state
    from trustlab.core.threads import thread_state

    if "torch" not in sys.modules and importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401 - imported first, so a verb that imports torch and leaks its state is seen
    with isolated_global_rng(int(np.random.default_rng().integers(2**31))):  # a state no verb would seed
        _check_no_global_side_effects(est, global_rng_state, same_global_rng_state, thread_state)


def _check_no_global_side_effects(est: Any, global_rng_state: Any, same_global_rng_state: Any,
                                  thread_state: Any) -> None:
    from trustlab.core.constraints import make_constraint

    rules = type(est)._constraints.get("random_state", [None])
    seeds = (0, None) if any(make_constraint(r).is_satisfied_by(None) for r in rules) else (0,)
    for seed in seeds:
        e = clone(est)
        if "random_state" in e.get_params(deep=False):
            e.set_params(random_state=seed)
        inputs = default_inputs(e)
        if "model" in inputs:  # build the model first: its initialisation is the test's, not the verb's
            inputs = {**inputs, "model": _model(inputs)}
        rng_before, threads_before = global_rng_state(), thread_state()
        run_verbs(e, inputs)
        rng_after, threads_after = global_rng_state(), thread_state()
        assert same_global_rng_state(rng_before, rng_after), (
            f"{type(est).__name__} changed the global RNG state (random/np.random/torch) in a public verb; "
            "draw from a local generator made from random_state (trustlab.core.seeding)."
        )
        if "torch_num_threads" in threads_before:
            assert threads_after.get("torch_num_threads") == threads_before["torch_num_threads"], (
                f"{type(est).__name__} left torch at {threads_after.get('torch_num_threads')} threads "
                f"(was {threads_before['torch_num_threads']}); use trustlab.core.threads.limit_threads."
            )
        after = _pools(threads_after)
        changed = {k: (n, after[k]) for k, n in _pools(threads_before).items() if k in after and after[k] != n}
        assert not changed, (
            f"{type(est).__name__} left BLAS/OpenMP thread pools changed {changed}; use "
            "trustlab.core.threads.limit_threads, which restores them."
        )


def check_role_invariants(est: Any) -> None:
    """Role properties: see :mod:`trustlab.testing.properties` (hypothesis-driven)."""
    from trustlab.testing.properties import ROLE_PROPERTIES

    prop = ROLE_PROPERTIES.get(role_of(est))
    if prop is not None:
        try:
            prop(est, default_inputs(est))
        except TrustlabError as exc:  # the role's public verb caught a broken invariant at run time
            raise AssertionError(f"{type(est).__name__} broke a role invariant: {exc}") from exc


ALL_CHECKS: tuple[Callable[[Any], None], ...] = (
    check_init_stores_params,
    check_get_set_params_clone,
    check_constraints_cover_params,
    check_invalid_params_raise,
    check_bad_inputs_raise,
    check_not_fitted,
    check_deterministic,
    check_inputs_not_mutated,
    check_pickle_roundtrip,
    check_no_global_side_effects,
    check_role_invariants,
    check_classifier_semantics,
)


def _cases(classes: Iterable[type]) -> Iterator[tuple[Any, Callable[[Any], None]]]:
    for cls in classes:
        for est in instances(cls):
            for check in ALL_CHECKS:
                yield est, check


@validate_args(cls=[_METHOD_CLASS], checks=[SequenceOf("callable", min_len=0)])
def check_method(cls: type, *, checks: Iterable[Callable[[Any], None]] = ALL_CHECKS) -> None:
    """Run every common check on every test-params instance of ``cls``; raises AssertionError on failure."""
    for est in instances(cls):
        for check in checks:
            try:
                check(clone(est))
            except Exception as exc:  # noqa: BLE001 - any error inside a check is a failure of the method
                raise AssertionError(f"{check.__name__} failed for {est!r}: {type(exc).__name__}: {exc}") from exc


@validate_args(classes=[SequenceOf(_METHOD_CLASS, min_len=0)])
def parametrize_with_checks(classes: Iterable[type]) -> Any:
    """A pytest ``parametrize`` decorator over (instance, check) for the given classes."""
    import pytest

    cases = list(_cases(classes))
    ids = [f"{type(e).__name__}({i})-{c.__name__}" for i, (e, c) in enumerate(cases)]
    return pytest.mark.parametrize(("estimator", "check"), cases, ids=ids)
