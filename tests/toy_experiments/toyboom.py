"""A toy experiment that raises inside run (runner and CLI tests)."""

from __future__ import annotations

from dataclasses import dataclass

from trustlab.core.base import PaperInfo
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, RunContext
from trustlab.results.result import Result

PAPER = PaperInfo(title="Toy experiment that raises", venue="tests")
QUICK_EXPECTED_PASS: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config(ExperimentConfig):
    pass


def run(cfg: Config, ctx: RunContext) -> Result:
    raise RuntimeError("toyboom went wrong on purpose")


CLAIMS = [Claim("B1", "never checked", lambda r: CheckResult(True, 1, 1))]
