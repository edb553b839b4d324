"""Benchmark (issue 46): ``trustlab reproduce --quick --all`` in one process, on a process pool and on Ray.

Run on both cores (no other job): ``python benchmarks/reproduce_all.py [--workers 2]``.

Three runs of every experiment's quick mode, one after another:

1. local with the default thread settings (each experiment in a fresh process, one after another; its mapped
   units with one thread each): the run whose results the other executors must equal;
2. ``--executor process --workers N``;
3. ``--executor ray --workers N`` (a local Ray runtime on 127.0.0.1).

For each experiment it records the wall time of the whole command, each experiment's own wall time, and
whether what must not depend on the executor (:func:`trustlab.results.compare.comparable`: untimed claims'
id, status and observed value; the summary without wall-clock keys) equals the local run's. Differences are reported, not fixed
here: the docs section lists which part differs.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness  # noqa: E402

from trustlab.results.runs import ReproduceRun, compare_runs, reproduce_quick  # noqa: E402

MODES = {"local": (), "process": ("--executor", "process"), "ray": ("--executor", "ray")}


def _run(mode: str, out: Path, workers: int) -> ReproduceRun:
    extra = list(MODES[mode]) + ([] if mode == "local" else ["--workers", str(workers)])
    return reproduce_quick([], out, extra, check=False)


def run(bench: _harness.Bench) -> None:
    workers = int(bench.result["params"]["workers"])
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in MODES:
            runs[mode] = _run(mode, Path(tmp, mode), workers)
            print(f"reproduce --all --quick, {mode}: {runs[mode].wall_s:.0f} s (rc {runs[mode].rc})", flush=True)
    local = runs["local"]
    bench.put(walls={m: r.wall_s for m, r in runs.items()}, rc={m: r.rc for m, r in runs.items()},
              ratio={m: _harness.ratio(local.wall_s, r.wall_s) for m, r in runs.items() if m != "local"},
              equal={m: compare_runs(local, r) for m, r in runs.items() if m != "local"},
              per_experiment_s={m: {e: v["wall_s"] for e, v in r.experiments.items()} for m, r in runs.items()},
              executor_tasks={m: {e: v["executor_tasks"] for e, v in r.experiments.items()}
                              for m, r in runs.items() if m != "local"},
              errors={m: {e: v["error"] for e, v in r.experiments.items() if v["error"]} for m, r in runs.items()})


def _local_threads(r: dict[str, Any]) -> str:
    """How the recorded local run set threads (runs before the default-threads change used 1 per task)."""
    return "default threads" if r["params"].get("local") == "default" else "1 thread per task"


def render(r: dict[str, Any]) -> str:
    v = r["values"]
    w = r["params"]["workers"]
    lines = ["## `reproduce --quick --all`: local, process pool, Ray (issue 46)", "",
             f"`benchmarks/reproduce_all.py`: the same command three times; process and Ray with {w} workers "
             "(one experiment per task where the experiment maps nothing itself). Results compared with the local "
             "run (`trustlab.results.compare.comparable`: untimed claims' id, outcome, observed; summary without "
             "wall-clock keys).", "",
             f"| | local ({_local_threads(r)}) | process pool | Ray |", "|---|---:|---:|---:|",
             f"| wall | {v['walls']['local']:.0f} s | {v['walls']['process']:.0f} s | {v['walls']['ray']:.0f} s |",
             f"| speed-up over local | 1 | {v['ratio']['process']:.2f}x | {v['ratio']['ray']:.2f}x |",
             f"| exit code | {v['rc']['local']} | {v['rc']['process']} | {v['rc']['ray']} |"]
    for m in ("process", "ray"):
        n = sum(s == "equal" for s in v["equal"][m].values())
        lines.append(f"| equal to local | | {n} of {len(v['equal'][m])} |" if m == "process"
                     else f"| equal to local | | | {n} of {len(v['equal'][m])} |")
    lines += ["", "| experiment | local s | process s | Ray s | process vs local | Ray vs local |",
              "|---|---:|---:|---:|---|---|"]
    pe = v["per_experiment_s"]
    for exp in pe["local"]:
        cells = [f"{pe[m].get(exp, float('nan')):.0f}" if pe[m].get(exp) is not None else "-" for m in MODES]
        lines.append(f"| `{exp}` | " + " | ".join(cells) + f" | {v['equal']['process'].get(exp, '-')} | "
                     f"{v['equal']['ray'].get(exp, '-')} |")
    errs = {m: e for m, e in v["errors"].items() if e}
    if errs:
        lines += ["", "Errors: " + "; ".join(f"{m}: {', '.join(f'{k} ({x})' for k, x in e.items())}"
                                             for m, e in errs.items())]
    lines += ["", _harness.setting_line(r)]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--local", choices=["default"], default="default", help="the local run's thread setting")
    _harness.main("reproduce-all", ap.parse_args(), run, render)
