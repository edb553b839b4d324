"""Generated invalid-input tests for public functions declared with :func:`~trustlab.core.arguments.validate_args`.

``public_functions()`` lists every function exported through an ``__all__`` of a public trustlab module;
``invalid_calls(fn)`` yields, for each declared argument, calls with one of that argument's generated
invalid values (the other declared arguments valid); each must raise a :class:`TrustlabError` whose
message follows the template.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from typing import Any

from trustlab.core.arguments import declared_args, example_call
from trustlab.core.constraints import NO_EXAMPLE, invalid_values
from trustlab.core.exceptions import TrustlabError

__all__ = ["public_functions", "invalid_calls", "check_function_refuses_invalid"]

_SENTINEL = object()


def _is_function(obj: Any) -> bool:
    return inspect.isfunction(obj) and not isinstance(obj, type)


def public_functions() -> dict[str, Any]:
    """``"module.name" -> function`` for every function in the ``__all__`` of a public trustlab module
    (no underscore in the module path), each function listed once under the first module exporting it.

    ``trustlab.core`` and ``trustlab.testing`` are excluded: they are the toolkit method authors build
    with (validators, constraint helpers, check drivers), not functions our users call on their data.
    """
    import trustlab

    found: dict[int, tuple[str, Any]] = {}
    names = ["trustlab"] + [m.name for m in pkgutil.walk_packages(trustlab.__path__, "trustlab.")
                            if not any(p.startswith("_") for p in m.name.split("."))]
    for modname in sorted(names):
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name, None)
            home = getattr(obj, "__module__", "") or ""
            if home.startswith(("trustlab.core", "trustlab.testing")) or not home.startswith("trustlab"):
                continue
            if _is_function(obj) and id(obj) not in found:
                found[id(obj)] = (f"{modname}.{name}", obj)
    return dict(sorted(found.values(), key=lambda kv: kv[0]))


def invalid_calls(fn: Any, per_arg: int = 3) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """``(argument, invalid value, kwargs)`` for each declared argument of ``fn``."""
    table = declared_args(fn) or {}
    base = example_call(fn)
    missing = [n for n, v in base.items() if v is NO_EXAMPLE]
    sig = inspect.signature(fn)
    for name, rules in table.items():
        if rules == "no_validation":
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
                elif p.name in base and base[p.name] is not NO_EXAMPLE:
                    kwargs[p.name] = base[p.name]
                elif p.default is p.empty:
                    kwargs[p.name] = _SENTINEL
            yield name, bad, kwargs


def check_function_refuses_invalid(fn: Any) -> int:
    """Run every generated invalid call of ``fn``; returns the number of cases. Raises AssertionError."""
    owner = fn.__trustlab_owner__
    n = 0
    for name, bad, kwargs in invalid_calls(fn):
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
