"""Optional imports that fail with a message naming the extra to install."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from trustlab.core.exceptions import MissingDependencyError

__all__ = ["require", "is_available", "EXTRAS"]

#: import name -> (pip distribution, trustlab extra)
EXTRAS: dict[str, tuple[str, str]] = {
    "torch": ("torch==2.13.0", "torch"),
    "transformers": ("transformers", "llm"),
    "accelerate": ("accelerate", "llm"),
    "gguf": ("gguf", "llm"),
    "peft": ("peft", "llm"),
    "sentence_transformers": ("sentence-transformers", "llm"),
    "trl": ("trl", "llm"),
    "flwr": ("flwr[simulation]", "fl"),
    "opacus": ("opacus", "fl"),
    "aeon": ("aeon", "ts"),
    "shap": ("shap", "xai"),
    "optuna": ("optuna", "xai"),
    "gosdt": ("gosdt", "trees"),
    "treefarms": ("treefarms", "trees"),
    "licketysplit": ("licketysplit", "trees"),
}


def is_available(module: str) -> bool:
    """True when ``module`` can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(module: str, *, extra: str | None = None, purpose: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        dist, default_extra = EXTRAS.get(top, (top, None))
        extra = extra or default_extra
        hint = f"pip install 'trustlab[{extra}]'" if extra else f"pip install {dist}"
        if top == "torch":
            hint = "pip install torch==2.13.0 (CPU build), or " + hint
        what = f" (needed for {purpose})" if purpose else ""
        raise MissingDependencyError(
            f"The optional dependency '{top}'{what} is not installed. Install it with: {hint}."
        ) from exc
