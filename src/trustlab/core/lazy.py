"""Lazy package namespaces: names are imported on first use, so importing a package stays light."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from trustlab.core._declare import takes_any

__all__ = ["lazy_exports", "resolve_export"]


@takes_any(package="a package name (str) from a package __init__; runs at import, below the rule classes",
           name="a public name (str) of the export map; runs at import, below the rule classes",
           target="an export map entry (str, 'module[:attr]'); runs at import, below the rule classes")
def resolve_export(package: str, name: str, target: str) -> tuple[str, str]:
    """``(module, attribute)`` of an entry of an export map (see :func:`lazy_exports` for the notation)."""
    module, _, attr = target.partition(":")
    if not module.startswith("trustlab."):
        module = f"{package}.{module}"
    return module, attr or name


@takes_any(package="the calling package's __name__; importlib.import_module refuses a non-package; runs "
           "at every package import, which must not load the rule classes",
           exports="a mapping of public name -> module (str); read lazily at attribute access")
def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for ``package`` whose public names live in sub-modules.

    ``exports`` maps a public name to the module defining it: absolute (``"trustlab.results.result"``) or
    relative to ``package`` (``"_methods"``); ``"module:attr"`` exports ``attr`` under another name.
    A loaded name is cached in the package's namespace, so ``__getattr__`` runs once per name.

    Examples
    --------
    In a package ``__init__.py``::

        _LAZY = {"AMUN": "_methods", "Result": "trustlab.results.result"}
        __all__ = sorted(_LAZY)
        __getattr__, __dir__ = lazy_exports(__name__, _LAZY)
    """
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attr = resolve_export(package, name, target)
        value = getattr(importlib.import_module(module), attr)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
