"""Experiments: one module per paper reproducing its claims (see :mod:`trustlab.experiments.base`)."""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports

_LAZY = {

    "Claim": "base",
    "CheckResult": "base",
    "ExperimentConfig": "base",
    "RunContext": "base",
    "Experiment": "runner",
    "experiment_ids": "runner",
    "get_experiment": "runner",
    "run_experiment": "runner",
    "exit_status": "runner",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
