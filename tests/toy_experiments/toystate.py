"""A toy experiment that records the global state it starts from (isolation tests)."""

from __future__ import annotations

import hashlib
import random
import warnings
from dataclasses import dataclass

import numpy as np

from trustlab.core.base import PaperInfo
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, RunContext
from trustlab.results.result import Result

PAPER = PaperInfo(title="Toy experiment recording global state", venue="tests")
QUICK_EXPECTED_PASS: tuple[str, ...] = ()
EXTRAS = ("torch",)


@dataclass(frozen=True)
class Config(ExperimentConfig):
    pass


def _digest(obj: object) -> str:
    return hashlib.sha256(repr(obj).encode()).hexdigest()[:16]


def run(cfg: Config, ctx: RunContext) -> Result:
    import matplotlib
    import torch

    res = Result("toystate", "", {})
    res.summary.update(
        torch_threads=torch.get_num_threads(),
        torch_rng=hashlib.sha256(torch.get_rng_state().numpy().tobytes()).hexdigest()[:16],
        numpy_rng=_digest(np.random.get_state()[1].tolist()), python_rng=_digest(random.getstate()),
        warnings_filters=len(warnings.filters), lines_linewidth=float(matplotlib.rcParams["lines.linewidth"]),
    )
    res.add(metric="torch_threads", value=res.summary["torch_threads"])
    return res


CLAIMS = [Claim("T1", "recorded", lambda r: CheckResult(None, r.summary["torch_threads"], "-"))]
