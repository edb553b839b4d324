"""Declarative parameter rules and the one validator that produces the template message.

Each Method lists ``_constraints = {"param": [rule, ...]}``; a value is valid when it satisfies
*any* rule of its list. ``None`` in a list means "None is allowed". Every rule can also generate a
value that breaks it, which the common checks use to test that invalid values are refused.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable as _CallableABC
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.exceptions import ConfigError

__all__ = [
    "Constraint",
    "Interval",
    "Options",
    "InstanceOf",
    "Boolean",
    "CallableRule",
    "RandomStateRule",
    "Satisfies",
    "AnyValue",
    "NONE",
    "NO_EXAMPLE",
    "valid_example",
    "make_constraint",
    "validate_params",
    "validate_value",
    "short_repr",
    "invalid_values",
]

_NOT_SET = object()
#: why the rule machinery below takes any value: it is the validator (checking it with itself would recurse)
_RULE_INPUT = "a rule tests any value"
_MACHINERY = "part of the validator itself; checking it with the rules would recurse"


class _NoExample:
    def __repr__(self) -> str:
        return "NO_EXAMPLE"


#: returned by :meth:`Constraint.valid_example` when a rule cannot make up a valid value
NO_EXAMPLE: Any = _NoExample()


class Constraint:
    """Base class of a rule: ``is_satisfied_by(v)``, ``describe()`` and ``invalid_example()``."""

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def invalid_examples(self) -> list[Any]:
        """Values that break this rule (used to build values that break a whole rule list)."""
        return [object()]

    def valid_example(self) -> Any:
        """A value that satisfies this rule, or :data:`NO_EXAMPLE` when none can be made up."""
        return NO_EXAMPLE


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


@dataclass(frozen=True)
class Interval(Constraint):
    """A number in an interval. ``kind`` is ``int``, ``float`` (a real, ints accepted) or "real"."""

    kind: Any
    left: float | None
    right: float | None
    closed: str = "both"  # "both", "left", "right", "neither"

    def __post_init__(self) -> None:
        if self.kind not in (int, float, "real"):
            raise TypeError(f"Interval kind must be int, float or 'real'; got {self.kind!r}")
        if self.closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"Interval closed must be both/left/right/neither; got {self.closed!r}")

    def _type_ok(self, v: Any) -> bool:
        return _is_int(v) if self.kind is int else _is_real(v)

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        if not self._type_ok(value):
            return False
        v = float(value)
        if math.isnan(v):
            return False
        lo_closed = self.closed in ("both", "left")
        hi_closed = self.closed in ("both", "right")
        if self.left is not None and (v < self.left or (v == self.left and not lo_closed)):
            return False
        if self.right is not None and (v > self.right or (v == self.right and not hi_closed)):
            return False
        return True

    def describe(self) -> str:
        lb = "[" if (self.closed in ("both", "left") and self.left is not None) else "("
        rb = "]" if (self.closed in ("both", "right") and self.right is not None) else ")"
        lo = "-inf" if self.left is None else _fmt(self.left)
        hi = "inf" if self.right is None else _fmt(self.right)
        noun = "an int" if self.kind is int else "a float"
        return f"{noun} in {lb}{lo}, {hi}{rb}"

    def invalid_examples(self) -> list[Any]:
        out: list[Any] = ["not-a-number"]
        if self.left is not None:
            out.append(self.left - 1 if self.kind is int else self.left - 1.0)
            if self.closed in ("right", "neither"):
                out.append(int(self.left) if self.kind is int else float(self.left))
        if self.right is not None:
            out.append(self.right + 1 if self.kind is int else self.right + 1.0)
            if self.closed in ("left", "neither"):
                out.append(int(self.right) if self.kind is int else float(self.right))
        if self.kind is int:
            out.append(1.5)
        out.append(float("nan"))
        return out

    def valid_example(self) -> Any:
        lo, hi = self.left, self.right
        if lo is not None and hi is not None:
            v = (lo + hi) / 2
        elif lo is not None:
            v = lo + 1
        elif hi is not None:
            v = hi - 1
        else:
            v = 1
        if self.kind is int:
            v = int(math.ceil(v)) if lo is not None else int(math.floor(v))
            if not self.is_satisfied_by(v):
                v = int(lo) + 1 if lo is not None else int(hi) - 1
        return v if self.kind is int else float(v)


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


@dataclass(frozen=True)
class Options(Constraint):
    """One of a fixed set of values (usually strings)."""

    values: tuple

    def __init__(self, values: Iterable[Any]) -> None:
        object.__setattr__(self, "values", tuple(values))

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        try:
            return any(value == v and type(value) is type(v) for v in self.values)
        except Exception:  # noqa: BLE001 - arrays etc. are simply not options
            return False

    def describe(self) -> str:
        return "one of {" + ", ".join(repr(v) for v in self.values) + "}"

    @takes_any(value=_RULE_INPUT)
    def why_not(self, value: Any) -> str:
        """A "did you mean" hint for a misspelt string option ("" otherwise)."""
        from trustlab.core.exceptions import did_you_mean

        strings = [v for v in self.values if isinstance(v, str)]
        return did_you_mean(value, strings).strip() if isinstance(value, str) and strings else ""

    def invalid_examples(self) -> list[Any]:
        return ["__invalid_option__", -12345]

    def valid_example(self) -> Any:
        return self.values[0] if self.values else NO_EXAMPLE


@dataclass(frozen=True)
class InstanceOf(Constraint):
    """An instance of one of the given types."""

    types: tuple

    def __init__(self, *types: type) -> None:
        object.__setattr__(self, "types", tuple(types))

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        if bool not in self.types and isinstance(value, bool) and any(
            t in (int, float, numbers.Integral, numbers.Real) for t in self.types
        ):
            return False
        return isinstance(value, self.types)

    def describe(self) -> str:
        names = [getattr(t, "__name__", str(t)) for t in self.types]
        return "an instance of " + " or ".join(f"'{n}'" for n in names)

    def invalid_examples(self) -> list[Any]:
        return [object(), "__invalid__", 3.25]

    def valid_example(self) -> Any:
        for t in self.types:
            try:
                v = t()
            except Exception:  # noqa: BLE001 - a type that cannot be built without arguments
                continue
            if self.is_satisfied_by(v):
                return v
        return NO_EXAMPLE


class Boolean(Constraint):
    """A bool (numpy bools included)."""

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, bool | np.bool_)

    def describe(self) -> str:
        return "a bool"

    def invalid_examples(self) -> list[Any]:
        return ["yes", 2]

    def valid_example(self) -> Any:
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Boolean)

    def __hash__(self) -> int:
        return hash("Boolean")


class CallableRule(Constraint):
    """A callable."""

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        return callable(value)

    def describe(self) -> str:
        return "a callable"

    def invalid_examples(self) -> list[Any]:
        return ["__not_callable__"]

    def valid_example(self) -> Any:
        return _noop


class RandomStateRule(Constraint):
    """``None``, an int in [0, 2**32 - 1] or a numpy ``Generator`` (the one random_state rule)."""

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        if value is None or isinstance(value, np.random.Generator):
            return True
        return _is_int(value) and 0 <= int(value) <= 2**32 - 1

    def describe(self) -> str:
        return "None, an int in [0, 4294967295] or a numpy Generator"

    def invalid_examples(self) -> list[Any]:
        return [-1, "seed", 1.5, np.random.RandomState(0)]

    def valid_example(self) -> Any:
        return 0


class Satisfies(Constraint):
    """Any predicate with its own description, for rules the classes above cannot express."""

    def __init__(self, predicate: _CallableABC[[Any], bool], description: str, invalid: list[Any],
                 valid: Any = NO_EXAMPLE):
        self.predicate, self.description, self.invalid, self.valid = predicate, description, list(invalid), valid

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        try:
            return bool(self.predicate(value))
        except Exception:  # noqa: BLE001 - a predicate that errors means "not satisfied"
            return False

    def describe(self) -> str:
        return self.description

    def invalid_examples(self) -> list[Any]:
        return self.invalid

    def valid_example(self) -> Any:
        return self.valid


class AnyValue(Constraint):
    """Accepts every value: the written decision that an argument takes any object, with its reason.

    ``AnyValue("a constraint tests any value")``. The reason is required, so every "anything goes" in a
    declaration says why (the value is a payload, or the body validates it, e.g. a role's ``_validate_X``).
    No invalid value exists, so the generated invalid-input test has no case for such an argument.
    """

    def __init__(self, reason: str, example: Any = None) -> None:
        if not isinstance(reason, str) or not reason.strip():
            raise TypeError("AnyValue needs a reason: AnyValue('why this argument accepts any value').")
        self.reason, self.example = reason, example

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        return True

    def describe(self) -> str:
        return f"any value ({self.reason})"

    def invalid_examples(self) -> list[Any]:
        return []

    def valid_example(self) -> Any:
        return self.example

    def __repr__(self) -> str:
        return f"AnyValue({self.reason!r})"


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


class _NoneRule(Constraint):
    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        return value is None

    def describe(self) -> str:
        return "None"

    def invalid_examples(self) -> list[Any]:
        return ["__not_none__"]

    def valid_example(self) -> Any:
        return None


NONE = _NoneRule()


@takes_any(rule=_MACHINERY)
def make_constraint(rule: Any) -> Constraint:
    """Turn shorthand into a Constraint: None, "boolean", "callable", "random_state", a type, a set."""
    if isinstance(rule, Constraint):
        return rule
    if rule is None:
        return NONE
    if rule == "boolean":
        return Boolean()
    if rule == "callable":
        return CallableRule()
    if rule == "random_state":
        return RandomStateRule()
    if isinstance(rule, type):
        return InstanceOf(rule)
    if isinstance(rule, set | frozenset | list | tuple):
        return Options(sorted(rule, key=repr))
    raise TypeError(f"Cannot make a constraint from {rule!r}")


def _describe_all(rules: list[Constraint]) -> str:
    descs = [r.describe() for r in rules if r is not NONE]
    text = descs[0] if len(descs) == 1 else ", ".join(descs[:-1]) + " or " + descs[-1] if descs else ""
    if any(r is NONE for r in rules):
        text = f"{text} or None" if text else "None"
    return text


@takes_any(value=_MACHINERY, limit=_MACHINERY)
def short_repr(value: Any, limit: int = 120) -> str:
    """``repr(value)`` cut to ``limit`` characters; arrays are summarised by dtype and shape."""
    if isinstance(value, np.ndarray) and value.size > 8:
        return f"array(shape={value.shape}, dtype={value.dtype})"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__
        text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@takes_any(owner=_MACHINERY, name=_MACHINERY, value=_MACHINERY, rules=_MACHINERY, noun=_MACHINERY)
def validate_value(owner: str, name: str, value: Any, rules: list[Any], *, noun: str = "parameter") -> None:
    """Raise the template error unless ``value`` satisfies a rule of ``rules``.

    The error is :class:`ConfigError`, or the ``error_class`` of the rules (e.g. InputError for array
    rules). ``noun`` is "parameter" for hyper-parameters and "argument" for function arguments.
    """
    cons = [make_constraint(r) for r in rules]
    if any(c.is_satisfied_by(value) for c in cons):
        return
    err = next((c.error_class for c in cons if getattr(c, "error_class", None) is not None), ConfigError)
    detail = next((d for c in cons if (d := getattr(c, "why_not", lambda v: "")(value))), "")
    raise err(
        f"The '{name}' {noun} of {owner} must be {_describe_all(cons)}. Got {short_repr(value)} instead."
        + (f" ({detail})" if detail else "")
    )


@takes_any(owner=_MACHINERY, params=_MACHINERY, constraints=_MACHINERY)
def validate_params(owner: str, params: Mapping[str, Any], constraints: Mapping[str, list[Any]]) -> None:
    """Validate every parameter that has rules; parameters without rules are not checked."""
    for name, rules in constraints.items():
        if rules == "no_validation":
            continue
        if name not in params:
            continue
        validate_value(owner, name, params[name], list(rules))


@takes_any(rules=_MACHINERY)
def invalid_values(rules: list[Any]) -> list[Any]:
    """Values that break *every* rule of the list (empty when none can be generated)."""
    cons = [make_constraint(r) for r in rules]
    candidates: list[Any] = []
    for c in cons:
        candidates.extend(c.invalid_examples())
    candidates.extend([object(), "__trustlab_invalid__", -(10**9), float("nan")])
    out, seen = [], set()
    for v in candidates:
        key = repr(v) if isinstance(v, str | int | float) else id(v)
        if key in seen:
            continue
        if not any(c.is_satisfied_by(v) for c in cons):
            seen.add(key)
            out.append(v)
    return out


@takes_any(rules=_MACHINERY)
def valid_example(rules: list[Any]) -> Any:
    """A value satisfying at least one rule of the list (None allowed last), or :data:`NO_EXAMPLE`."""
    cons = [make_constraint(r) for r in rules]
    for c in [c for c in cons if c is not NONE] + [c for c in cons if c is NONE]:
        v = c.valid_example()
        if v is not NO_EXAMPLE and c.is_satisfied_by(v):
            return v
    return NO_EXAMPLE
