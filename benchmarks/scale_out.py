"""Benchmark (issue 29): the Ray executor against the local one, with equal results.

Run on both cores (no other job): ``OMP_NUM_THREADS=2 .venv/bin/python benchmarks/scale_out.py [--out f.json]``.

1. Executor overhead per task: 1000 tiny tasks (``abs``) on local, process (2 workers) and ray (2 workers);
   the runtime start is timed separately and not counted (target <= 5 ms per task).
2. RMIA reference models: ``fit_reference_models`` with AMUN's default setting (16 MLPs 64-256-256-10, 60
   epochs on noisy digits), local vs ray with 2 workers, 1 thread per task; the logits must be equal.
3. ``trustlab reproduce --quick`` wall time, local vs ``--executor ray --workers 2`` (both 1 thread per
   experiment); claim outcomes and summaries (minus wall-clock keys) compared. Default set, by rule: every
   experiment whose extras do not include ``llm`` (``--all`` for every experiment). Target >= 1.6x on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def overhead(n: int = 1000) -> dict[str, dict[str, float]]:
    from trustlab.core.executor import make_executor

    out = {}
    for kind in ("local", "process", "ray"):
        t0 = time.perf_counter()
        with make_executor(kind, workers=None if kind == "local" else 2) as ex:
            ex.map(abs, [-1, -2])  # starts the pool / runtime and warms the workers
            start = time.perf_counter() - t0
            t1 = time.perf_counter()
            res = ex.map(abs, list(range(-n, 0)))
            per_task = (time.perf_counter() - t1) / n
        assert res == list(range(n, 0, -1))
        out[kind] = {"start_s": round(start, 3), "per_task_ms": round(per_task * 1e3, 3)}
        print(f"overhead {kind}: start {start:.2f} s, {per_task * 1e3:.3f} ms per task", flush=True)
    return out


def rmia_refs(n_refs: int = 16, epochs: int = 60) -> dict[str, float]:
    from trustlab.core.executor import make_executor
    from trustlab.data import load_digits_images
    from trustlab.methods.amun import SGDSpec, fit_reference_models
    from trustlab.models import MLP

    ds = load_digits_images(noise=0.35, random_state=0)
    X, y = ds.X.astype(np.float32), np.asarray(ds.y, np.int64)
    spec = SGDSpec(epochs=epochs, lr=0.05, momentum=0.9, batch_size=64)

    def make():
        return MLP(64, 10, hidden=(256, 256))

    times, logits = {}, {}
    for kind in ("local", "ray"):
        with make_executor(kind, workers=None if kind == "local" else 2) as ex:
            if kind == "ray":
                ex.map(abs, [-1, -2])  # runtime start not counted
            t0 = time.perf_counter()
            refs = fit_reference_models(make, X, y, n_refs, spec=spec, random_state=0, executor=ex)
            times[kind] = time.perf_counter() - t0
            logits[kind] = refs.logits
        print(f"rmia {n_refs} refs {kind}: {times[kind]:.1f} s", flush=True)
    equal = bool(np.array_equal(logits["local"], logits["ray"]))
    return {"n_refs": n_refs, "epochs": epochs, "local_s": round(times["local"], 2), "ray_s": round(times["ray"], 2),
            "ratio": round(times["local"] / times["ray"], 2), "equal_logits": equal}


def _reproduce(ids: list[str], out: Path, *extra: str) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "trustlab", "reproduce", *ids, "--quick", "--no-progress", "--out", str(out), *extra]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stdout[-3000:] + done.stderr[-3000:])
    found = {}
    for exp in ids:
        (path,) = (out / exp / "quick").glob("*.json")
        d = json.loads(path.read_text())
        found[exp] = {"claims": [(c["id"], c["passed"]) for c in d["claims"]], "error": d["provenance"].get("error"),
                      "summary": {k: v for k, v in d["summary"].items() if not _TIMING.search(k)}}
    return wall, found


#: summary keys that hold wall-clock times (never equal between two runs)
_TIMING = re.compile(r"(time|_s$|_s_|speed|warmup|seconds|per_ref)")


def reproduce(all_: bool, workers: int = 2) -> dict:
    from trustlab.experiments.runner import experiment_ids, get_experiment

    ids = [e for e in experiment_ids() if all_ or "llm" not in get_experiment(e).extras]
    with tempfile.TemporaryDirectory() as tmp:
        t_loc, loc = _reproduce(ids, Path(tmp, "local"), "--threads-per-task", "1")
        print(f"reproduce local: {t_loc:.1f} s", flush=True)
        t_ray, ray = _reproduce(ids, Path(tmp, "ray"), "--executor", "ray", "--workers", str(workers))
        print(f"reproduce ray ({workers} workers): {t_ray:.1f} s", flush=True)
    same = {e: loc[e] == ray[e] for e in ids}
    return {"experiments": ids, "local_s": round(t_loc, 1), "ray_s": round(t_ray, 1),
            "ratio": round(t_loc / t_ray, 2), "equal_results": same,
            "errors": {e: loc[e]["error"] or ray[e]["error"] for e in ids if loc[e]["error"] or ray[e]["error"]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="reproduce every experiment (default: those without llm)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["overhead", "rmia", "reproduce"])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    res = {"cpus": os.cpu_count(), "threads_env": os.environ.get("OMP_NUM_THREADS")}
    if "overhead" not in args.skip:
        res["overhead"] = overhead()
    if "rmia" not in args.skip:
        res["rmia"] = rmia_refs()
    if "reproduce" not in args.skip:
        res["reproduce"] = reproduce(args.all)
    print(json.dumps(res, indent=1))
    if args.out:
        args.out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
