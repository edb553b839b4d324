"""A toy experiment following the contract, used to test the runner, report and CLI."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trustlab.core.base import PaperInfo
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, RunContext
from trustlab.results.plots import bar_plot
from trustlab.results.result import Result

PAPER = PaperInfo(title="Toy experiment", venue="tests")
TITLE = "Toy: coin means"
EXTRAS: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config(ExperimentConfig):
    n: int = 200
    p: float = 0.7
    threshold: float = 0.6
    label: str = "coins"

    @classmethod
    def quick(cls) -> Config:
        return cls(n=50)

    def validate(self) -> None:
        super().validate()
        from trustlab.core.constraints import Interval, validate_value

        validate_value("toyexp.Config", "n", self.n, [Interval(int, 1, None)])
        validate_value("toyexp.Config", "p", self.p, [Interval(float, 0, 1)])


def run(cfg: Config, ctx: RunContext) -> Result:
    res = Result("toyexp", "", {})
    for seed in ctx.progress(cfg.seeds, desc="seeds"):
        flips = np.random.default_rng(seed).random(cfg.n) < cfg.p
        res.add(method="coin", seed=seed, metric="mean", value=float(flips.mean()))
        res.add(method="fair", seed=seed, metric="mean", value=0.5)
    res.summary["mean"] = float(np.mean([r["value"] for r in res.records if r["method"] == "coin"]))
    ctx.note("toy note")
    return res


def _above(result: Result) -> CheckResult:
    obs = result.summary["mean"]
    thr = result.config["threshold"]
    return CheckResult(obs >= thr, obs, f">= {thr}", baseline=0.5, unit="heads/flip")


def _never(result: Result) -> CheckResult:
    return CheckResult(False, {"mean": result.summary["mean"], "third": 1 / 3}, "> 1", detail="a secondary line")


CLAIMS = [
    Claim("C1", "the coin mean reaches the threshold", _above, scale_note=lambda cfg: f"toy, {cfg['n']} flips",
          paper_value=0.7),
    Claim("C2", "only checked in paper mode", _above, modes=("paper",)),
    Claim("C3", "a secondary line that always fails", _never, secondary=True),
]
QUICK_EXPECTED_PASS = ("C1",)


def PLOTS(result: Result) -> dict:
    return {"means": bar_plot(result, x="method")}
