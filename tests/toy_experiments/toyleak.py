"""A toy experiment that changes every global setting it can and restores none (isolation tests)."""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass

import numpy as np

from trustlab.core.base import PaperInfo
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, RunContext
from trustlab.results.result import Result

PAPER = PaperInfo(title="Toy experiment leaking global state", venue="tests")
QUICK_EXPECTED_PASS: tuple[str, ...] = ()
EXTRAS = ("torch",)


@dataclass(frozen=True)
class Config(ExperimentConfig):
    pass


def run(cfg: Config, ctx: RunContext) -> Result:
    import matplotlib
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(123)
    np.random.seed(123)
    random.seed(123)
    warnings.simplefilter("ignore")
    matplotlib.rcParams["lines.linewidth"] = 9.0
    res = Result("toyleak", "", {})
    res.add(metric="leaked", value=1)
    return res


CLAIMS = [Claim("L1", "ran", lambda r: CheckResult(True, 1, 1))]
