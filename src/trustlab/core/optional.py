"""Optional imports that fail with a message naming the extra to install."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from trustlab.core._declare import takes_any
from trustlab.core.exceptions import MissingDependencyError

__all__ = ["require", "is_available", "EXTRA_MODULES", "extra_of"]

#: trustlab extra -> the import names it provides (mirrors pyproject's optional-dependencies; one table
#: for ``require``'s hints and for ``trustlab list`` / ``doctor``)
EXTRA_MODULES: dict[str, list[str]] = {
    "torch": ["torch"],
    "llm": ["torch", "transformers", "accelerate", "gguf", "peft", "sentence_transformers"],
    "fl": ["torch", "flwr", "opacus", "prv_accountant"],
    "ts": ["torch", "aeon"],
    "xai": ["shap", "optuna"],
    "xai-torch": ["shap", "torch", "captum", "quantus"],
    "trees": ["gosdt", "treefarms", "licketysplit"],
    "valuation": ["cleanlab"],
    "symbolic": ["torch", "pytorch_tabnet", "gplearn", "sympy", "statsmodels"],
    "dist": ["ray", "cloudpickle"],
    "attacks": ["torch", "torchattacks"],
    "audit": ["skops", "shap", "optuna", "torch", "playwright", "fairlearn", "cleanlab"],
    "track": ["mlflow"],
    "topo": ["torch", "ripser", "persim", "torchattacks", "sentence_transformers"],
}
#: import name -> pip requirement, where it differs from the import name
_DISTRIBUTIONS = {"torch": "torch==2.13.0", "sentence_transformers": "sentence-transformers",
                  "flwr": "flwr[simulation]", "pytorch_tabnet": "pytorch-tabnet",
                  "mlflow": "mlflow-skinny"}


@takes_any(module="an import name (str); split on '.' and looked up in EXTRA_MODULES; this module stays import-light (numpy-free), below the rule classes")
def extra_of(module: str) -> str | None:
    """The first trustlab extra that provides the top-level ``module`` (None if no extra does)."""
    top = module.split(".")[0]
    return next((extra for extra, mods in EXTRA_MODULES.items() if top in mods), None)


@takes_any(module="an import name (str); find_spec's errors mean not available; this module stays import-light (numpy-free), below the rule classes")
def is_available(module: str) -> bool:
    """True when ``module`` can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@takes_any(module="an import name (str); importlib.import_module checks it; this module stays import-light (numpy-free), below the rule classes",
           extra="None or the extra (str) named in the install hint; only formatted into the message",
           purpose="None or a phrase (str) shown in the message; only formatted into it")
def require(module: str, *, extra: str | None = None, purpose: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        extra = extra or extra_of(top)
        hint = f"pip install 'trustlab[{extra}]'" if extra else f"pip install {_DISTRIBUTIONS.get(top, top)}"
        if top == "torch":
            hint = "pip install torch==2.13.0 (CPU build), or " + hint
        what = f" (needed for {purpose})" if purpose else ""
        raise MissingDependencyError(
            f"The optional dependency '{top}'{what} is not installed. Install it with: {hint}."
        ) from exc
