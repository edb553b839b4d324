"""Declared argument rules for public functions (not only estimator verbs).

``@validate_args(x=[ArrayLike(ndim=2)], k=[Interval(int, 1, None)])`` declares each argument's rules
once, exactly as a Method's ``_constraints`` do; the wrapper validates the arguments in declaration
order before the body runs and raises the template message
``The 'k' argument of top_k must be an int in [1, inf). Got 0 instead.``. The rules are kept on the
function (``__trustlab_args__``) so a generated test can feed each argument its invalid values, and a
coverage test fails for any exported function that declares nothing.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.constraints import (
    NO_EXAMPLE,
    AnyValue,
    Constraint,
    InstanceOf,
    make_constraint,
    short_repr,
    valid_example,
    validate_value,
)
from trustlab.core.exceptions import InputError

__all__ = ["validate_args", "ArrayLike", "SequenceOf", "HasMethods", "PATH", "AnyValue", "takes_any",
           "declared_args", "NO_EXAMPLE"]

_RULE_INPUT = "a rule tests any value"

F = TypeVar("F", bound=Callable[..., Any])


def _as_array(value: Any) -> np.ndarray | None:
    if value is None or isinstance(value, str | bytes | dict):
        return None
    if hasattr(value, "to_numpy") and not isinstance(value, np.ndarray):
        value = value.to_numpy()
    torch_like = type(value).__module__.startswith("torch") and hasattr(value, "detach")
    if torch_like:
        value = value.detach().cpu().numpy()
    try:
        return np.asarray(value)
    except Exception:  # noqa: BLE001 - ragged or odd input: not an array
        return None


class ArrayLike(Constraint):
    """An array-like (list, numpy array, DataFrame, torch tensor) with shape/dtype/value rules.

    ``dtype``: "numeric" (int/float/bool), "integer" (ints, or floats holding whole numbers), "any".
    ``finite``: no NaN or inf. ``ndim``: allowed numbers of dimensions. ``min_len``: minimum first
    dimension. ``low``/``high``: inclusive value range. Errors are :class:`InputError`.
    """

    error_class = InputError

    def __init__(self, *, ndim: int | Sequence[int] | None = None, dtype: str = "numeric", finite: bool = True,
                 min_len: int = 1, low: float | None = None, high: float | None = None) -> None:
        self.ndim = None if ndim is None else ((ndim,) if isinstance(ndim, int) else tuple(ndim))
        self.dtype, self.finite, self.min_len, self.low, self.high = dtype, finite, min_len, low, high

    @takes_any(value=_RULE_INPUT)
    def why_not(self, value: Any) -> str:
        from trustlab.core.validation import (
            non_numeric_columns,  # validation declares its rules with this module
        )

        if self.dtype != "any" and (why := non_numeric_columns(value)):
            return why
        arr = _as_array(value)
        if arr is None or arr.dtype == object and self.dtype != "any":
            return "" if arr is None else "it holds values that are not numbers"
        if self.ndim is not None and arr.ndim not in self.ndim:
            return f"it has shape {arr.shape}"
        if arr.ndim and len(arr) < self.min_len:
            return f"it has {len(arr)} entries"
        if self.dtype in ("numeric", "integer") and arr.dtype.kind not in "biuf":
            return f"dtype {arr.dtype}"
        if self.finite and arr.dtype.kind == "f" and not np.isfinite(arr).all():
            return f"{int((~np.isfinite(arr)).sum())} NaN or infinite value(s)"
        if self.dtype == "integer" and arr.dtype.kind == "f" and arr.size and not (arr == np.round(arr)).all():
            return "non-integer values"
        if self.low is not None and arr.size and np.nanmin(arr) < self.low:
            return f"minimum {np.nanmin(arr)!r}"
        if self.high is not None and arr.size and np.nanmax(arr) > self.high:
            return f"maximum {np.nanmax(arr)!r}"
        return ""

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        arr = _as_array(value)
        if arr is None or (arr.dtype == object and self.dtype != "any"):
            return False
        if self.ndim is not None and arr.ndim not in self.ndim:
            return False
        return self.why_not(value) == ""

    def describe(self) -> str:
        parts = []
        if self.finite and self.dtype != "any":
            parts.append("finite")
        parts.append({"numeric": "numeric", "integer": "integer", "any": ""}[self.dtype])
        text = " ".join(p for p in parts if p) + " array-like"
        if self.ndim is not None:
            text += " with " + " or ".join(str(d) for d in self.ndim) + " dimension(s)"
        if self.min_len > 1:
            text += f" and at least {self.min_len} entries"
        elif self.min_len == 1:
            text += " (non-empty)"
        if self.low is not None or self.high is not None:
            lo = "-inf" if self.low is None else short_repr(self.low)
            hi = "inf" if self.high is None else short_repr(self.high)
            text += f" with values in [{lo}, {hi}]"
        return "a " + text

    def invalid_examples(self) -> list[Any]:
        nd = self.ndim[0] if self.ndim else 1
        shape = (max(self.min_len, 2),) + (2,) * (nd - 1)
        out: list[Any] = [None, "not-an-array"]
        if self.finite and self.dtype != "any":
            bad = np.zeros(shape)
            bad.flat[0] = np.nan
            out.append(bad)
        if self.ndim is not None:
            wrong = next(d for d in (1, 2, 3, 0) if d not in self.ndim)
            out.append(np.zeros((2,) * wrong) if wrong else np.float64(0.0))
        if self.min_len >= 1:
            out.append(np.zeros((0,) + shape[1:]))
        if self.low is not None:
            out.append(np.full(shape, self.low - 1.0))
        if self.high is not None:
            out.append(np.full(shape, self.high + 1.0))
        if self.dtype == "integer":
            out.append(np.full(shape, 0.5 if self.low is None or self.low <= 0.5 else self.low + 0.5))
        return out

    def valid_example(self) -> Any:
        nd = self.ndim[0] if self.ndim else 1
        shape = (max(self.min_len, 2),) + (2,) * (nd - 1) if nd else ()
        fill = self.low if self.low is not None else (self.high if self.high is not None and self.high < 0 else 0)
        arr = np.full(shape, fill, dtype=np.int64 if self.dtype == "integer" else np.float64)
        return arr


class SequenceOf(Constraint):
    """A list or tuple (not a string) of at least ``min_len`` items, each satisfying ``rule``."""

    def __init__(self, rule: Any, *, min_len: int = 1, unique: bool = False) -> None:
        self.rule, self.min_len, self.unique = make_constraint(rule), min_len, unique

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        if not isinstance(value, list | tuple) or len(value) < self.min_len:
            return False
        if self.unique and len({repr(v) for v in value}) != len(value):
            return False
        return all(self.rule.is_satisfied_by(v) for v in value)

    def describe(self) -> str:
        n = f"at least {self.min_len} " if self.min_len > 1 else ("one or more " if self.min_len == 1 else "")
        u = "distinct " if self.unique else ""
        return f"a list of {n}{u}items, each {self.rule.describe()}"

    def invalid_examples(self) -> list[Any]:
        out: list[Any] = ["a-string"]
        if self.min_len >= 1:
            out.append([])
        out.extend([[v] * max(1, self.min_len) for v in self.rule.invalid_examples()[:2]])
        return out

    def valid_example(self) -> Any:
        v = self.rule.valid_example()
        if v is NO_EXAMPLE:
            return NO_EXAMPLE
        if self.unique and self.min_len > 1:
            return NO_EXAMPLE
        return [v] * max(1, self.min_len)


class HasMethods(Constraint):
    """An object with the named methods (duck typing: a torch module, a tokenizer, a fitted estimator).

    ``HasMethods("state_dict", "parameters", what="a torch.nn.Module")``: ``what`` is how the message names it.
    """

    def __init__(self, *methods: str, what: str) -> None:
        self.methods, self.what = methods, what

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        return not isinstance(value, type) and all(callable(getattr(value, m, None)) for m in self.methods)

    def describe(self) -> str:
        return f"{self.what} (an object with {', '.join(self.methods)})"

    def invalid_examples(self) -> list[Any]:
        return [None, "__not_an_object_with_methods__", 3]


#: a file or folder path: a str or an os.PathLike (pathlib.Path)
PATH = InstanceOf(str, os.PathLike)


def _owner_of(fn: Callable[..., Any]) -> str:
    return fn.__qualname__.replace(".<locals>", "")


def _bound_name(fn: Callable[..., Any], sig: inspect.Signature) -> str | None:
    """``"self"``/``"cls"`` for a method defined in a class body (its owner is named after the instance)."""
    first = next(iter(sig.parameters), None)
    return first if first in ("self", "cls") and "." in _owner_of(fn) else None


def runtime_owner(fn: Any, bound: Any = None) -> str:
    """How messages name ``fn``: ``Class.method`` with the class of ``bound`` (an instance or a class) for a
    method, else the function's qualified name."""
    if bound is None:
        return getattr(fn, "__trustlab_owner__", None) or _owner_of(fn)
    cls = bound if isinstance(bound, type) else type(bound)
    return f"{cls.__name__}.{fn.__name__}"


def _table(rules: dict[str, Any]) -> dict[str, Any]:
    return {n: (r if r == "no_validation" else [make_constraint(x) for x in (r if isinstance(r, list) else [r])])
            for n, r in rules.items()}


@takes_any(_example="a factory of example keyword arguments", rules="each is checked by make_constraint",
           _enforced_by_body="a flag: the rules are recorded, the function's own body enforces them")
def validate_args(_example: Callable[[], dict[str, Any]] | None = None, *, _enforced_by_body: bool = False,
                  **rules: Any) -> Callable[[F], F]:
    """Declare and enforce the rules of a function's or method's arguments (see the module docstring).

    Each keyword names an argument of the decorated function and gives its rule list (a single rule is
    accepted too). ``AnyValue("reason")`` records an argument that accepts any object by design (a payload,
    or a value the body validates, e.g. a role's ``_validate_X``); a function whose rules are all
    ``AnyValue`` is not wrapped at all. ``"no_validation"`` is the legacy marker: it is not checked and the
    coverage test counts it as undeclared. ``_example`` optionally returns valid keyword arguments, used by
    the generated invalid-input test as the base call where the rules alone cannot make up valid values.
    On a method the message names ``Class.method`` with the instance's own class.
    ``_enforced_by_body=True`` records the rules without wrapping, for a hot helper whose body already checks
    them with the template message (e.g. ``check_random_state``, which names its caller's parameter); the
    generated invalid-input test holds the body to the recorded rules.
    """

    def deco(fn: F) -> F:
        sig = inspect.signature(fn)
        unknown = [n for n in rules if n not in sig.parameters]
        if unknown:
            raise TypeError(f"validate_args on {fn.__qualname__}: no argument(s) named {unknown}.")
        table = _table(rules)
        owner, bound_to = _owner_of(fn), _bound_name(fn, sig)
        checked = {n: c for n, c in table.items() if c != "no_validation" and not all(isinstance(x, AnyValue) for x in c)}
        if not checked or _enforced_by_body:
            fn.__trustlab_args__, fn.__trustlab_owner__ = table, owner  # type: ignore[attr-defined]
            fn.__trustlab_example__ = _example  # type: ignore[attr-defined]
            return fn

        params = sig.parameters
        positional = [n for n, p in params.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        keywords = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        required = {n for n, p in params.items() if p.default is p.empty
                    and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        simple = not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values())
        # a default that satisfies its rules needs no check at call time (the rules are pure)
        good_defaults = {n: params[n].default for n, c in checked.items() if params[n].default is not params[n].empty
                         and any(x.is_satisfied_by(params[n].default) for x in c)}

        def bind(args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
            # the plain case without inspect's general binding (the per-call cost of a declared function)
            if simple and len(args) <= len(positional) and kwargs.keys() <= keywords:
                values = dict(zip(positional, args))
                if not values.keys() & kwargs.keys():
                    values.update(kwargs)
                    if required <= values.keys():
                        return values
            try:
                return sig.bind(*args, **kwargs).arguments
            except TypeError as exc:
                raise TypeError(f"{owner}: {exc}") from None

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = bind(args, kwargs)
            who = None
            for name, cons in checked.items():
                if name in values:
                    value = values[name]
                elif name in good_defaults:
                    continue
                else:
                    value = params[name].default
                if any(c.is_satisfied_by(value) for c in cons):
                    continue
                if who is None:
                    who = owner if bound_to is None else runtime_owner(wrapper, values.get(bound_to))
                validate_value(who, name, value, cons, noun="argument")
            return fn(*args, **kwargs)

        wrapper.__trustlab_args__ = table  # type: ignore[attr-defined]
        wrapper.__trustlab_owner__ = owner  # type: ignore[attr-defined]
        wrapper.__trustlab_example__ = _example  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return deco


@takes_any(fn="any object: None when it declares nothing")
def declared_args(fn: Any) -> dict[str, Any] | None:
    """The rule table a function declared with :func:`validate_args` or :func:`takes_any`, or None."""
    table = getattr(fn, "__trustlab_args__", None)
    reasons = getattr(fn, "__trustlab_any__", None)
    if reasons is None:
        return table
    return {**{n: [AnyValue(r)] for n, r in reasons.items()}, **(table or {})}


@takes_any(fn="a function declared with validate_args")
def example_call(fn: Any) -> dict[str, Any]:
    """Valid keyword arguments for ``fn`` built from its example or its rules (NO_EXAMPLE where none)."""
    base = dict(fn.__trustlab_example__()) if getattr(fn, "__trustlab_example__", None) else {}
    for name, cons in (declared_args(fn) or {}).items():
        if name not in base and cons != "no_validation":
            base[name] = valid_example(cons)
    return base
