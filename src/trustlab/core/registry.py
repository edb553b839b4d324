"""Registries with lazy dotted paths, duplicate refusal and "did you mean" suggestions.

Method packages register themselves in their ``__init__`` with a dotted path
(``"trustlab.methods.split._tree:SPLITClassifier"``), so listing what exists imports no heavy
dependency; the object is imported on first ``get``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from trustlab.core._declare import takes_any
from trustlab.core.exceptions import UnknownNameError, did_you_mean

__all__ = [ "Entry", "METHODS", "load_dotted", "discover"]


@takes_any(path="a dotted 'module:attr' path (str); importlib checks it; this module stays import-light (numpy-free), below the rule classes (method discovery)")
def load_dotted(path: str) -> Any:
    """Import ``"package.module:attr"`` (or ``"package.module.attr"``) and return the attribute."""
    if ":" in path:
        mod_name, _, attr = path.partition(":")
    else:
        mod_name, _, attr = path.rpartition(".")
    obj: Any = importlib.import_module(mod_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass
class Entry:
    """A registered name: its dotted path, metadata, and the object once loaded."""

    name: str
    target: str | Any
    meta: dict[str, Any] = field(default_factory=dict)
    _obj: Any = None

    def load(self) -> Any:
        if self._obj is None:
            self._obj = load_dotted(self.target) if isinstance(self.target, str) else self.target
        return self._obj


class Registry:
    """A name -> object table. ``kind`` is used in messages ("Unknown method 'x'")."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def register(self, name: str, target: str | Any, *, replace: bool = False, **meta: Any) -> None:
        """Register ``target`` (an object or a lazy dotted path) under ``name``."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"A {self.kind} name must be a non-empty str. Got {name!r} instead.")
        existing = self._entries.get(name)
        if existing is not None and not replace and existing.target != target:
            raise ValueError(
                f"The {self.kind} '{name}' is already registered (to {existing.target!r}). "
                "Pick another name or pass replace=True."
            )
        self._entries[name] = Entry(name, target, dict(meta))

    def register_exports(self, package: str, exports: Mapping[str, str], names: Iterable[str], **meta: Any) -> None:
        """Register ``names`` at the dotted paths their package's lazy export map gives them.

        One source for class paths: a method package writes each path once, in the map it passes to
        :func:`~trustlab.core.lazy.lazy_exports`, and registers from the same map::

            _LAZY = {"AMUN": "_methods", "Retrain": "_methods", "adversarial_set": "_adversarial"}
            METHODS.register_exports(__name__, _LAZY, ["AMUN", "Retrain"], paper="amun", role="model_edit")
        """
        from trustlab.core.lazy import resolve_export

        for name in names:
            if name not in exports:
                raise KeyError(f"register_exports: {name!r} is not in the export map of {package}.")
            module, attr = resolve_export(package, name, exports[name])
            self.register(name, f"{module}:{attr}", **meta)

    def unregister(self, name: str) -> None:
        self.entry(name)
        del self._entries[name]

    def entry(self, name: str) -> Entry:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UnknownNameError(
                f"Unknown {self.kind} '{name}'.{did_you_mean(str(name), self._entries)}"
                f" Known: {', '.join(sorted(self._entries)) or 'none registered'}."
            ) from None

    def get(self, name: str) -> Any:
        return self.entry(name).load()

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)


#: Every reusable method object, registered by ``trustlab.methods.<id>``.
METHODS = Registry("method")


@takes_any(package="a package name (str); importlib.import_module checks it; this module stays import-light (numpy-free), below the rule classes (method discovery)")
def discover(package: str) -> list[str]:
    """Import every direct sub-module of ``package`` not starting with '_' and return their names.

    Used to make registrations happen without a central list: adding a paper adds one folder.
    """
    pkg = importlib.import_module(package)
    found = []
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_"):
            continue
        importlib.import_module(f"{package}.{info.name}")
        found.append(info.name)
    return sorted(found)
