"""Benchmark (issue 29): the Ray executor against the local one, with equal results.

Run on both cores (no other job): ``python benchmarks/scale_out.py [--skip reproduce] [--repeat 3]``.

1. Executor overhead per task: 1000 tiny tasks (``abs``) on local, process (2 workers) and ray (2 workers);
   the runtime start is timed separately and not counted (target <= 5 ms per task).
2. RMIA reference models: ``fit_reference_models`` with AMUN's default setting (16 MLPs 64-256-256-10, 60
   epochs on noisy digits), local vs process and ray with 2 workers, 1 thread per task; the logits must be equal.
3. ``trustlab reproduce --quick`` wall time, local vs ``--executor ray --workers 2`` (both 1 thread per
   experiment); claim outcomes and summaries (minus wall-clock keys) compared. Default set, by rule: every
   experiment whose extras do not include ``llm`` (``--all`` for every experiment). Target >= 1.6x on 2 cores.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import _harness  # noqa: E402


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


def rmia_refs(bench: _harness.Bench, n_refs: int = 16, epochs: int = 60, repeat: int = 1) -> dict[str, Any]:
    """16 RMIA reference models on local, process (2 workers) and ray (2 workers); runtimes started (and warmed)
    before the clock, the executors alternating when ``repeat`` > 1; the logits must be equal."""
    from trustlab.core.executor import make_executor
    from trustlab.data import load_digits_images
    from trustlab.methods.amun import SGDSpec, fit_reference_models
    from trustlab.models import MLP

    ds = load_digits_images(noise=0.35, random_state=0)
    X, y = ds.X.astype(np.float32), np.asarray(ds.y, np.int64)
    spec = SGDSpec(epochs=epochs, lr=0.05, momentum=0.9, batch_size=64)

    def make():
        return MLP(64, 10, hidden=(256, 256))

    logits: dict[str, Any] = {}
    with make_executor("local") as loc, make_executor("process", workers=2) as proc, \
            make_executor("ray", workers=2) as ray:
        for ex in (proc, ray):
            ex.map(abs, [-1, -2])  # start the pool / runtime and warm the workers: not counted

        def fit(kind: str, ex: Any) -> Any:
            def go() -> None:
                logits[kind] = fit_reference_models(make, X, y, n_refs, spec=spec, random_state=0, executor=ex).logits
            return go

        t = bench.compare({"local": fit("local", loc), "process": fit("process", proc), "ray": fit("ray", ray)},
                          repeat=repeat, warmup=0, key="rmia")
    out = {"n_refs": n_refs, "epochs": epochs, **{f"{k}_s": t[k]["wall"] for k in t},
           "ratio_ray": t["local"]["wall"] / t["ray"]["wall"], "ratio_process": t["local"]["wall"] / t["process"]["wall"],
           "equal_logits": {k: bool(np.array_equal(logits["local"], logits[k])) for k in ("process", "ray")}}
    bench.print_ratio("RMIA 16 reference models, local / ray (2 workers)", out["ratio_ray"], ">= 1.6x",
                      out["ratio_ray"] >= 1.6)
    bench.print_ratio("RMIA 16 reference models, local / process (2 workers)", out["ratio_process"])
    return out


def reproduce(all_: bool, workers: int = 2) -> dict:
    from trustlab.experiments.runner import experiment_ids, get_experiment

    ids = [e for e in experiment_ids() if all_ or "llm" not in get_experiment(e).extras]
    from trustlab.results.runs import compare_runs, reproduce_quick

    with tempfile.TemporaryDirectory() as tmp:
        loc = reproduce_quick(ids, Path(tmp, "local"), ["--threads-per-task", "1"])
        print(f"reproduce local: {loc.wall_s:.1f} s", flush=True)
        ray = reproduce_quick(ids, Path(tmp, "ray"), ["--executor", "ray", "--workers", str(workers)])
        print(f"reproduce ray ({workers} workers): {ray.wall_s:.1f} s", flush=True)
    same = {e: v == "equal" for e, v in compare_runs(loc, ray).items()}
    errors = {e: loc.experiments[e]["error"] or ray.experiments.get(e, {}).get("error") for e in ids}
    return {"experiments": ids, "local_s": loc.wall_s, "ray_s": ray.wall_s,
            "ratio": round(loc.wall_s / ray.wall_s, 2), "equal_results": same,
            "errors": {e: x for e, x in errors.items() if x}}


def run(bench: _harness.Bench) -> None:
    p = bench.result["params"]
    if "overhead" not in p["skip"]:
        bench.put(overhead=overhead())
    if "rmia" not in p["skip"]:
        bench.put(rmia=rmia_refs(bench, repeat=p["repeat"]))
    if "reproduce" not in p["skip"]:
        bench.put(reproduce=reproduce(p["all"]))


def render(r: dict[str, Any]) -> str:
    v = r["values"]
    lines = ["## Scale-out (issues 29, 45)", "",
             "`benchmarks/scale_out.py`; compare the ratios, not the seconds. Every task runs with 1 BLAS/torch "
             "thread on every executor (what makes results equal); the local run is in the same process.", ""]
    if "rmia" in v:
        m = v["rmia"]
        eq = ", ".join(f"{k} {'yes' if e else 'NO'}" for k, e in m["equal_logits"].items())
        lines += ["| RMIA: 16 reference models (MLP 64-256-256-10, 60 epochs, noisy digits) | local | process (2) | "
                  "ray (2) | target |", "|---|---:|---:|---:|---|",
                  f"| wall (median of {r['params']['repeat']}, executors alternating) | {m['local_s']:.1f} s | "
                  f"{m['process_s']:.1f} s | {m['ray_s']:.1f} s | |",
                  f"| speed-up over local | 1 | {m['ratio_process']:.2f}x | **{m['ratio_ray']:.2f}x** | ray >= 1.6x: "
                  f"**{'met' if m['ratio_ray'] >= 1.6 else 'missed'}** |",
                  f"| logits equal to local | | | | {eq} |", ""]
    if "overhead" in v:
        o = v["overhead"]
        lines += ["| executor overhead per task, 1000 tiny tasks (`abs`) | " + " | ".join(
            f"{k}: {o[k]['per_task_ms']:.2f} ms (start {o[k]['start_s']:.2f} s)" for k in o) + " |", "|---|---|---|---|", ""]
    if "reproduce" in v:
        q = v["reproduce"]
        same = sum(q["equal_results"].values())
        lines += [f"`reproduce --quick` of {len(q['experiments'])} experiments: local {q['local_s']:.0f} s, ray "
                  f"{q['ray_s']:.0f} s ({q['ratio']:.2f}x); equal results {same} of {len(q['experiments'])}.", ""]
    lines += [_harness.setting_line(r), "", NOTES]
    return "\n".join(lines)


NOTES = """History (issue 29, 2026-12-01, other sessions active, load average 1.7-2.6, one run each): executor
overhead per task local 0.17 ms, process 1.33 ms, ray 3.35 ms (target <= 5 ms: met; runtime start 0.08 / 0.42 /
5.26 s); RMIA local 28.2 s vs ray 23.2 s (**1.22x**, the row of issue 45); `reproduce --quick` of the 8
experiments without the llm extra 287.2 s local vs 177.1 s on ray (1.62x), equal results 5 of 8 (featkd, softshape
and split differed; issue 46). `reproduce --quick --all` was not measured.

Where the RMIA time goes: each reference model is 1.1-1.8 s of one-thread MLP training and the tasks exchange
nothing beyond the 1,797-point pool, so the ideal on 2 free cores is 2x. On this machine the two workers share the
two cores with the driver, Ray's raylet / GCS and anything else running: the measured ratio is a statement about
how free the two cores were (the load average is in the setting line), not about the executor's overhead (a few
ms per task, above). Issue 45's run (2026-12-03, medians of 3 alternating rounds, no other timing job on the
machine) meets 1.6x with almost no margin; the process pool, with no daemons of its own, is faster than Ray on the
same two workers, and that difference (about 1 s of 8) is Ray's raylet and GCS processes taking CPU from the
workers on a 2-core machine. The first round of every executor was the slowest (warm-up of the workers' imports
and allocator), which is why the rounds alternate and the median is reported."""


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--all", action="store_true", help="reproduce every experiment (default: those without llm)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["overhead", "rmia", "reproduce"])
    ap.add_argument("--repeat", type=int, default=1, help="RMIA repeats per executor (alternating)")
    _harness.main("scaleout", ap.parse_args(), run, render)
