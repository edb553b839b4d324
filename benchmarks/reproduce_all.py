"""Benchmark (issue 46): ``trustlab reproduce --quick --all`` in one process, on a process pool and on Ray.

Run on both cores (no other job): ``python benchmarks/reproduce_all.py [--workers 2]``.

Three runs of every experiment's quick mode, one after another:

1. local, ``--threads-per-task 1`` (the experiments in this order, in one process, each unit with one thread:
   the setting whose results the other executors must equal);
2. ``--executor process --workers N``;
3. ``--executor ray --workers N`` (a local Ray runtime on 127.0.0.1).

For each experiment it records the wall time of the whole command, each experiment's own wall time, and
whether its claim outcomes (id, status, observed value) and its summary (minus wall-clock keys,
:func:`trustlab.results.compare.without_timing`) equal the local run's. Differences are reported, not fixed
here: the docs section lists which part differs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness  # noqa: E402

MODES = {"local": ("--threads-per-task", "1"), "process": ("--executor", "process"), "ray": ("--executor", "ray")}


def _run(mode: str, out: Path, workers: int) -> dict[str, Any]:
    from trustlab.results.compare import without_timing

    extra = list(MODES[mode]) + ([] if mode == "local" else ["--workers", str(workers)])
    cmd = [sys.executable, "-m", "trustlab", "reproduce", "--all", "--quick", "--no-progress", "--out", str(out), *extra]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    found: dict[str, Any] = {}
    for path in sorted(out.glob("*/quick/*.json")):
        d = json.loads(path.read_text())
        exp = path.parts[-3]
        found[exp] = {"claims": [(c["id"], c["passed"], c["observed"]) for c in d["claims"]],
                      "summary": without_timing(d["summary"]), "error": d["provenance"].get("error"),
                      "wall_s": d["provenance"].get("wall_time_s"),
                      "executor_tasks": d["provenance"].get("executor_tasks")}
    return {"wall_s": round(wall, 1), "rc": done.returncode, "experiments": found,
            "tail": (done.stdout + done.stderr)[-1500:]}


def _compare(ref: dict[str, Any], other: dict[str, Any]) -> dict[str, str]:
    """Per experiment: "equal", or which parts differ (claims, summary), or "missing"."""
    out = {}
    for exp, r in ref["experiments"].items():
        o = other["experiments"].get(exp)
        if o is None:
            out[exp] = "missing"
            continue
        parts = [p for p in ("claims", "summary") if r[p] != o[p]]
        out[exp] = "equal" if not parts else "differs: " + ", ".join(parts)
    return out


def run(bench: _harness.Bench) -> None:
    workers = int(bench.result["params"]["workers"])
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in MODES:
            runs[mode] = _run(mode, Path(tmp, mode), workers)
            print(f"reproduce --all --quick, {mode}: {runs[mode]['wall_s']:.0f} s (rc {runs[mode]['rc']})", flush=True)
    local = runs["local"]
    bench.put(walls={m: r["wall_s"] for m, r in runs.items()}, rc={m: r["rc"] for m, r in runs.items()},
              ratio={m: _harness.ratio(local["wall_s"], r["wall_s"]) for m, r in runs.items() if m != "local"},
              equal={m: _compare(local, r) for m, r in runs.items() if m != "local"},
              per_experiment_s={m: {e: v["wall_s"] for e, v in r["experiments"].items()} for m, r in runs.items()},
              executor_tasks={m: {e: v["executor_tasks"] for e, v in r["experiments"].items()}
                              for m, r in runs.items() if m != "local"},
              errors={m: {e: v["error"] for e, v in r["experiments"].items() if v["error"]} for m, r in runs.items()})


def render(r: dict[str, Any]) -> str:
    v = r["values"]
    w = r["params"]["workers"]
    lines = ["## `reproduce --quick --all`: local, process pool, Ray (issue 46)", "",
             f"`benchmarks/reproduce_all.py`: the same command three times; process and Ray with {w} workers "
             "(one experiment per task where the experiment maps nothing itself). Results compared with the local "
             "run at 1 thread per task (claims: id, outcome, observed; summary without wall-clock keys).", "",
             "| | local (1 thread per task) | process pool | Ray |", "|---|---:|---:|---:|",
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
    _harness.main("reproduce-all", ap.parse_args(), run, render)
