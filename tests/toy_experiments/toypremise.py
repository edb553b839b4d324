"""A toy experiment with a premise, a claim resting on it and a knockout (tests of premises and VOID)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trustlab.core.base import PaperInfo
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, Premise, RunContext
from trustlab.results.result import Result

PAPER = PaperInfo(title="Toy experiment with a premise", venue="tests")
EXTRAS: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config(ExperimentConfig):
    n: int = 400
    p: float = 0.8  # the coin's bias: the "mechanism" (0.5 switches it off)


def run(cfg: Config, ctx: RunContext) -> Result:
    res = Result("toypremise", "", {})
    for seed in cfg.seeds:
        res.add(seed=seed, metric="mean", value=float((np.random.default_rng(seed).random(cfg.n) < cfg.p).mean()))
    res.summary["mean"] = float(np.mean([r["value"] for r in res.records]))
    return res


def _biased(result: Result) -> CheckResult:
    m = result.summary["mean"]
    return CheckResult(abs(m - 0.5) >= 0.1, m, "|mean - 0.5| >= 0.1")


def _heads(result: Result) -> CheckResult:
    m = result.summary["mean"]
    return CheckResult(m >= 0.45, m, ">= 0.45")


CLAIMS = [
    Premise("pre-biased", "the coin is biased (the mechanism ran)", _biased),
    Claim("C1", "heads come up at least 45 % of the time", _heads, requires=("pre-biased",)),
    Claim("C2", "the same, resting on nothing", _heads),
]
QUICK_EXPECTED_PASS = ("pre-biased", "C1")
KNOCKOUT = ("p=0.5",)
