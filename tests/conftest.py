"""Shared test setup: thread/telemetry settings before torch can start, toy modules on the path."""

import sys
from pathlib import Path

from trustlab.core.seeding import set_runtime_env  # before anything imports torch

set_runtime_env()

sys.path.insert(0, str(Path(__file__).parent))

from hypothesis import settings  # noqa: E402

settings.register_profile("trustlab", max_examples=25, deadline=None)
settings.load_profile("trustlab")

import pytest  # noqa: E402

TOY_EXPERIMENTS = str(Path(__file__).parent / "toy_experiments")


@pytest.fixture
def toy_experiment(monkeypatch):
    """Make tests/toy_experiments/toyexp.py visible as the experiment 'toyexp'."""
    import trustlab.experiments as pkg

    monkeypatch.setattr(pkg, "__path__", [*pkg.__path__, TOY_EXPERIMENTS])
    yield "toyexp"
    sys.modules.pop("trustlab.experiments.toyexp", None)
