"""Record-only declarations for arguments that accept any value by design (imports nothing).

``@takes_any(value="a rule tests any value")`` writes one reason per argument on the function; the
rule table (:func:`trustlab.core.arguments.declared_args`) turns each into an
:class:`~trustlab.core.constraints.AnyValue` rule. It is what :func:`~trustlab.core.arguments.validate_args`
records when every rule of a function is ``AnyValue``, usable also by the modules that sit below the rule
classes (``core.lazy``, ``core.exceptions``, ``core.constraints``), which must import neither numpy nor
the rules. Nothing is wrapped: a function that takes anything pays nothing at call time.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

__all__: list[str] = []

F = TypeVar("F", bound=Callable[..., Any])


def takes_any(**reasons: str) -> Callable[[F], F]:
    """Record that each named argument accepts any value, for the written ``reason``."""

    def deco(fn: F) -> F:
        names = inspect.signature(fn).parameters
        unknown = [n for n in reasons if n not in names]
        blank = [n for n, r in reasons.items() if not isinstance(r, str) or not r.strip()]
        if unknown or blank:
            raise TypeError(f"takes_any on {fn.__qualname__}: unknown argument(s) {unknown}, "
                            f"argument(s) without a reason {blank}.")
        fn.__trustlab_any__ = {**getattr(fn, "__trustlab_any__", {}), **reasons}  # type: ignore[attr-defined]
        return fn

    return deco
