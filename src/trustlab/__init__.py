"""trustlab: trustworthy-ML methods from ICML 2025 papers as reusable, tested software.

``import trustlab`` is light: heavy dependencies (torch, transformers) load only when a name that needs
them is first used. Commonly used names are available lazily from the top level.
"""

from __future__ import annotations

from trustlab.core.exceptions import ERROR_NAMES
from trustlab.core.lazy import lazy_exports

__version__ = "0.1.0"

_LAZY = {
    # errors and warnings (one list: trustlab.core.exceptions.ERROR_NAMES)
    **dict.fromkeys(ERROR_NAMES, "trustlab.core.exceptions"),
    # registry and results
    "METHODS": "trustlab.core.registry",
    "Result": "trustlab.results.result",
    # experiments
    "run_experiment": "trustlab.experiments.runner",
    # data
    "load_tabular": "trustlab.data",
    "load_table": "trustlab.data",
    "load_digits_images": "trustlab.data",
    "load_timeseries": "trustlab.data",
    "load_text": "trustlab.data",
}

__all__ = ["__version__", *_LAZY]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
