"""Experiments: one module per paper reproducing its claims (see :mod:`trustlab.experiments.base`)."""

from trustlab.experiments.base import MODES, Claim, ExperimentConfig, RunContext, evaluate_claims
from trustlab.experiments.runner import (
    Experiment,
    apply_overrides,
    experiment_ids,
    get_experiment,
    run_experiment,
)

__all__ = [
    "MODES", "Claim", "ExperimentConfig", "RunContext", "evaluate_claims", "Experiment", "apply_overrides",
    "experiment_ids", "get_experiment", "run_experiment",
]
