"""Run ``trustlab reproduce`` in a subprocess and collect what each experiment's run must share across executors.

One helper for the equality test (``tests/scaleout``) and the scale-out benchmarks: each experiment's
:func:`trustlab.results.compare.comparable` view (untimed claims, summary without timing), its error, its own
wall time and how many executor tasks it mapped.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, InstanceOf, Interval

__all__ = ["ReproduceRun", "reproduce_quick", "compare_runs"]


@dataclass
class ReproduceRun:
    """One ``trustlab reproduce --quick`` command: its wall time, exit code, output tail and per-experiment data."""

    wall_s: float
    rc: int
    tail: str
    experiments: dict[str, dict[str, Any]] = field(default_factory=dict)


@validate_args(lambda: {"ids": ["licensing"], "out": Path("runs")},
               ids=[InstanceOf(list, tuple)], out=[InstanceOf(Path, str)],
               extra=[InstanceOf(list, tuple)], timeout_s=[Interval(float, 0, None, closed="neither"), None],
               check=[Boolean()])
def reproduce_quick(ids: list[str] | tuple[str, ...], out: Path | str, extra: list[str] | tuple[str, ...] = (), *,
                    timeout_s: float | None = None, check: bool = True) -> ReproduceRun:
    """``trustlab reproduce IDS --quick --no-progress --out OUT *EXTRA`` (``ids`` empty: ``--all``).

    With ``check`` an exit code other than 0 or 1 (claims that FAIL are exit 1) raises ``RuntimeError``
    with the output's tail.
    """
    from trustlab.results.compare import comparable

    out = Path(out)
    cmd = [sys.executable, "-m", "trustlab", "reproduce", *(ids or ["--all"]), "--quick", "--no-progress",
           "--out", str(out), *extra]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout_s)
    run = ReproduceRun(round(time.perf_counter() - t0, 1), done.returncode, (done.stdout + done.stderr)[-3000:])
    if check and done.returncode not in (0, 1):
        raise RuntimeError(f"reproduce exited {done.returncode}:\n{run.tail}")
    for path in sorted(out.glob("*/quick/*.json")):
        doc = json.loads(path.read_text())
        run.experiments[path.parts[-3]] = {
            **comparable(doc), "error": doc["provenance"].get("error"),
            "wall_s": doc["provenance"].get("wall_time_s"), "executor_tasks": doc["provenance"].get("executor_tasks")}
    return run


@validate_args(lambda: {"ref": ReproduceRun(0.0, 0, ""), "other": ReproduceRun(0.0, 0, "")},
               ref=[InstanceOf(ReproduceRun)], other=[InstanceOf(ReproduceRun)])
def compare_runs(ref: ReproduceRun, other: ReproduceRun) -> dict[str, str]:
    """Per experiment of ``ref``: "equal", "missing", or "differs: " and the parts (claims, summary) that differ."""
    verdict = {}
    for exp, r in ref.experiments.items():
        o = other.experiments.get(exp)
        if o is None:
            verdict[exp] = "missing"
            continue
        parts = [p for p in ("claims", "summary") if r[p] != o[p]]
        verdict[exp] = "equal" if not parts else "differs: " + ", ".join(parts)
    return verdict
