"""A toy experiment whose primary claim FAILs (runner and CLI tests)."""

from __future__ import annotations

from dataclasses import dataclass

from trustlab.core.base import PaperInfo
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, RunContext
from trustlab.results.result import Result

PAPER = PaperInfo(title="Toy failing experiment", venue="tests")
QUICK_EXPECTED_PASS: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config(ExperimentConfig):
    value: float = 0.25


def run(cfg: Config, ctx: RunContext) -> Result:
    res = Result("toyfail", "", {})
    res.add(metric="value", value=cfg.value)
    res.summary["value"] = cfg.value
    return res


CLAIMS = [Claim("F1", "the value reaches 0.5",
                lambda r: CheckResult(r.summary["value"] >= 0.5, r.summary["value"], ">= 0.5", unit="points"))]
