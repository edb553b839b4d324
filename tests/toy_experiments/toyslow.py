"""A toy experiment that overruns a tiny budget, part of it in an untimed block (budget tests)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from trustlab.core.base import PaperInfo
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, RunContext
from trustlab.results.result import Result

PAPER = PaperInfo(title="Toy slow experiment", venue="tests")
QUICK_EXPECTED_PASS = ("S1",)


@dataclass(frozen=True)
class Config(ExperimentConfig):
    prep_s: float = 0.3
    work_s: float = 0.2
    budgets: ClassVar[dict[str, float | None]] = {"quick": 0.1, "default": 0.1, "paper": None}


def run(cfg: Config, ctx: RunContext) -> Result:
    with ctx.untimed("prepare toy model"):
        time.sleep(cfg.prep_s)
    time.sleep(cfg.work_s)
    ctx.check_budget("toy work")
    res = Result("toyslow", "", {})
    res.add(metric="slept", value=cfg.work_s)
    res.summary["elapsed"] = ctx.elapsed
    return res


CLAIMS = [Claim("S1", "the run finishes", lambda r: CheckResult(True, r.summary["elapsed"], "> 0", unit="s"))]
