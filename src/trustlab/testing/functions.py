"""Generated invalid-input tests for public functions declared with :func:`~trustlab.core.arguments.validate_args`.

``public_functions()`` lists every function exported through an ``__all__`` of a public trustlab module,
``public_methods()`` every public method of the trustlab classes exported so, and ``undeclared(fn)`` the
arguments of one that have no rule (``"no_validation"`` counts as none). ``invalid_calls(fn)`` yields, for
each declared argument, calls with one of that argument's generated invalid values (the other declared
arguments valid); each must raise a :class:`TrustlabError` whose message follows the template.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from typing import Any

from trustlab.core.arguments import AnyValue, declared_args, example_call, runtime_owner, validate_args
from trustlab.core.constraints import NO_EXAMPLE, Interval, Satisfies, invalid_values
from trustlab.core.exceptions import TrustlabError

__all__ = ["public_functions", "public_methods", "undeclared", "invalid_calls", "check_function_refuses_invalid"]

_SENTINEL = object()


def _is_function(obj: Any) -> bool:
    return inspect.isfunction(obj) and not isinstance(obj, type)


def _public_objects() -> list[tuple[str, Any]]:
    import trustlab

    names = ["trustlab"] + [m.name for m in pkgutil.walk_packages(trustlab.__path__, "trustlab.")
                            if not any(p.startswith("_") for p in m.name.split("."))]
    out = []
    for modname in sorted(names):
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name, None)
            if (getattr(obj, "__module__", "") or "").startswith("trustlab"):
                out.append((f"{modname}.{name}", obj))
    return out


def public_functions() -> dict[str, Any]:
    """``"module.name" -> function`` for every function in the ``__all__`` of a public trustlab module
    (no underscore in the module path; ``trustlab.core`` and ``trustlab.testing`` included), each function
    listed once under the first module exporting it."""
    found: dict[int, tuple[str, Any]] = {}
    for qualname, obj in _public_objects():
        if _is_function(obj) and id(obj) not in found:
            found[id(obj)] = (qualname, obj)
    return dict(sorted(found.values(), key=lambda kv: kv[0]))


def public_methods() -> dict[str, tuple[type, Any]]:
    """``"module.Class.method" -> (class, function)`` for every public method (no leading underscore;
    static and class methods included) defined by a trustlab class in the MRO of an exported class, listed
    once under the class defining it (the role verbs once, under their role)."""
    found: dict[int, tuple[str, tuple[type, Any]]] = {}
    classes = {id(o): o for _, o in _public_objects() if isinstance(o, type)}
    for cls in classes.values():
        for klass in cls.__mro__:
            if not (klass.__module__ or "").startswith("trustlab"):
                continue
            for name, raw in vars(klass).items():
                fn = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
                if not name.startswith("_") and inspect.isfunction(fn) and id(fn) not in found:
                    found[id(fn)] = (f"{klass.__module__}.{klass.__qualname__}.{name}", (klass, fn))
    return dict(sorted(found.values(), key=lambda kv: kv[0]))


@validate_args(fn=[Satisfies(inspect.isfunction, "a function", invalid=[None, "f"])])
def undeclared(fn: Any) -> list[str]:
    """The arguments of ``fn`` (``self``/``cls`` and ``*args``/``**kwargs`` aside) without a declared rule;
    an argument marked ``"no_validation"`` counts as undeclared (give it a rule or ``AnyValue(reason)``)."""
    table = declared_args(fn) or {}
    params = list(inspect.signature(fn).parameters.values())
    if params and params[0].name in ("self", "cls") and "." in fn.__qualname__:
        params = params[1:]
    return [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            and (p.name not in table or table[p.name] == "no_validation")]


def is_anything(rules: Any) -> bool:
    """Whether a declared rule list is only ``AnyValue`` markers (an argument that takes any value)."""
    return isinstance(rules, list) and bool(rules) and all(isinstance(r, AnyValue) for r in rules)


def _example_fn(x: Any = None) -> None:
    return None


_FN = Satisfies(callable, "a function declared with validate_args", invalid=[None, "f"], valid=_example_fn)


@validate_args(fn=[_FN], per_arg=[Interval(int, 1, None)], instance=[AnyValue("the object a method is called on")])
def invalid_calls(fn: Any, per_arg: int = 3, *, instance: Any = None) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """``(argument, invalid value, kwargs)`` for each declared argument of ``fn``; for a method, pass the
    ``instance`` (or class) it is called on, which the kwargs then hold as ``self``/``cls``."""
    table = declared_args(fn) or {}
    base = example_call(fn)
    missing = [n for n, v in base.items() if v is NO_EXAMPLE]
    sig = inspect.signature(fn)
    first = next(iter(sig.parameters), None)
    for name, rules in table.items():
        if rules == "no_validation" or is_anything(rules):
            continue
        before = list(table)[: list(table).index(name)]
        lacking = [n for n in before if n in missing]
        if lacking:
            raise AssertionError(
                f"{fn.__qualname__}: no valid example for {lacking}; pass _example=lambda: {{...}} to validate_args "
                "so the generated test can reach the later arguments."
            )
        for bad in invalid_values(rules)[:per_arg]:
            kwargs: dict[str, Any] = {}
            for p in sig.parameters.values():
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    continue
                if p.name == name:
                    kwargs[p.name] = bad
                elif instance is not None and p.name == first:
                    kwargs[p.name] = instance
                elif p.name in base and base[p.name] is not NO_EXAMPLE:
                    kwargs[p.name] = base[p.name]
                elif p.default is p.empty:
                    kwargs[p.name] = _SENTINEL
            yield name, bad, kwargs


@validate_args(fn=[_FN], instance=[AnyValue("the object a method is called on")])
def check_function_refuses_invalid(fn: Any, *, instance: Any = None) -> int:
    """Run every generated invalid call of ``fn`` (a method: on ``instance``); returns the number of cases.
    Raises AssertionError."""
    owner = runtime_owner(fn, instance)
    n = 0
    for name, bad, kwargs in invalid_calls(fn, instance=instance):
        n += 1
        try:
            fn(**kwargs)
        except TrustlabError as exc:
            pattern = rf"The '{re.escape(name)}' argument of {re.escape(owner)} must be .+ Got .+ instead\."
            assert re.search(pattern, str(exc), re.S), f"{owner}: error for {name}={bad!r} lacks the template: {exc}"
            continue
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{owner}: {name}={bad!r} raised {type(exc).__name__} ({exc}), not TrustlabError") from exc
        raise AssertionError(f"{owner} accepted the invalid value {bad!r} for '{name}'.")
    return n
