"""The one benchmark harness every ``benchmarks/*.py`` uses (issue 45).

What it does, so that no script repeats it:

- **timing**: :meth:`Bench.compare` runs the compared variants alternately (ABBA order, so load drift hits every
  variant alike) after a warm-up, and keeps every sample's wall and CPU seconds and their medians;
  :meth:`Bench.once` times a single call (a fresh-process run, a whole training);
- **setting**: thread environment variables, the BLAS/OpenMP pools and torch's intra-op threads
  (:func:`trustlab.core.threads.thread_state`), the load average at the start and at the end, Python / torch /
  trustlab versions, the git commit, the date and the total wall time;
- **output**: the JSON is written atomically to ``docs/benchmarks_files/<name>.json`` (committed: the docs tables
  are generated from it) and the script's ``render(result) -> markdown`` replaces the section between
  ``<!-- <name>:start -->`` and ``<!-- <name>:end -->`` of ``docs/benchmarks.md``;
  ``python benchmarks/X.py --render-only`` regenerates that section from the committed JSON without running.

Compare ratios, not seconds: the machine is a shared 2-core box. Wall-clock targets are reported, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
RESULTS = ROOT / "docs" / "benchmarks_files"
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def setting() -> dict[str, Any]:
    """The machine and thread facts a benchmark's numbers depend on."""
    from trustlab.core.threads import thread_state

    out: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "env": {k: os.environ.get(k) for k in THREAD_VARS}, **thread_state()}
    for mod in ("torch", "transformers", "numpy", "sklearn"):
        m = sys.modules.get(mod)
        if m is not None:
            out[f"{mod}_version"] = str(getattr(m, "__version__", "?"))
    try:
        from importlib.metadata import version

        out["trustlab_version"] = version("trustlab")
    except Exception:  # noqa: BLE001 - running from a source tree without metadata
        out["trustlab_version"] = "?"
    return out


def _summary(walls: list[float], cpus: list[float]) -> dict[str, Any]:
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpus), "walls": walls, "cpus": cpus,
            "min_wall": min(walls), "max_wall": max(walls)}


def ratio(a: float, b: float) -> float:
    """``a / b``, with ``inf`` for a zero denominator (a JSON-safe float either way)."""
    return float(a) / float(b) if b else float("inf")


class Bench:
    """One benchmark run: timings, values, the setting, then :meth:`finish` writes the JSON and the docs section.

    >>> b = Bench("example")                                                     # doctest: +SKIP
    >>> t = b.compare({"loop": slow, "vectorised": fast}, repeat=5)              # doctest: +SKIP
    >>> b.put(speedup=ratio(t["loop"]["wall"], t["vectorised"]["wall"]))         # doctest: +SKIP
    >>> b.finish(render)                                                         # doctest: +SKIP
    """

    def __init__(self, name: str, argv: list[str] | None = None, params: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.t0 = time.perf_counter()
        self.result: dict[str, Any] = {"benchmark": name, "params": dict(params or {}), "timings": {},
                                       "values": {}, "setting_start": {"load_average": os.getloadavg(),
                                                                      "date": _dt.datetime.now(_dt.UTC).isoformat(
                                                                          timespec="seconds")}}
        self.argv = list(sys.argv[1:] if argv is None else argv)

    # -- timing ---------------------------------------------------------------------------------------------------
    def compare(self, fns: Mapping[str, Callable[[], object]], repeat: int = 3, warmup: int = 1,
                key: str | None = None) -> dict[str, dict[str, Any]]:
        """Median wall / CPU seconds of each function, run alternately (ABBA) ``repeat`` times after ``warmup``
        calls of each. Stored under ``timings[key]`` (``key`` defaults to the variants' names joined)."""
        if repeat < 1 or warmup < 0:
            raise ValueError(f"repeat must be >= 1 and warmup >= 0; got repeat={repeat}, warmup={warmup}")
        for _ in range(warmup):
            for fn in fns.values():
                fn()
        samples: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in fns}
        order = list(fns.items())
        for i in range(repeat):
            for k, fn in order if i % 2 == 0 else order[::-1]:
                w, c = time.perf_counter(), time.process_time()
                fn()
                samples[k][0].append(time.perf_counter() - w)
                samples[k][1].append(time.process_time() - c)
        out = {k: _summary(w, c) for k, (w, c) in samples.items()}
        self.result["timings"][key or " vs ".join(fns)] = out
        return out

    def rounds(self, fns: Mapping[str, Callable[[], float | list[float]]], rounds: int = 2,
               key: str | None = None) -> dict[str, dict[str, Any]]:
        """For variants that time themselves (e.g. a training run returning its per-step seconds): call each once
        per round, alternating the order (ABBA); each returns seconds (a float or a list of per-step samples).
        Stored like :meth:`compare` (``wall`` = median of all samples; no CPU time)."""
        if rounds < 1:
            raise ValueError(f"rounds must be >= 1; got {rounds}")
        samples: dict[str, list[float]] = {k: [] for k in fns}
        order = list(fns.items())
        for i in range(rounds):
            for k, fn in order if i % 2 == 0 else order[::-1]:
                got = fn()
                samples[k] += [float(x) for x in (got if isinstance(got, (list, tuple)) else [got])]
        out = {k: {"wall": statistics.median(v), "walls": v, "min_wall": min(v), "max_wall": max(v)}
               for k, v in samples.items()}
        self.result["timings"][key or " vs ".join(fns)] = out
        return out

    def once(self, key: str, fn: Callable[[], Any]) -> tuple[Any, float]:
        """Run ``fn`` once; store and return its wall seconds (with its return value)."""
        w, c = time.perf_counter(), time.process_time()
        value = fn()
        wall, cpu = time.perf_counter() - w, time.process_time() - c
        self.result["timings"][key] = {"once": _summary([wall], [cpu])}
        return value, wall

    # -- values ---------------------------------------------------------------------------------------------------
    def put(self, **values: Any) -> None:
        """Record measured values (ratios, counts, equality checks) under ``values``."""
        self.result["values"].update(values)

    def print_ratio(self, label: str, value: float, target: str = "", met: bool | None = None) -> None:
        """Print one measured ratio the way every benchmark does: ``label: 12.3x (target >= 5x: met)``."""
        verdict = "" if met is None else (": met" if met else ": MISSED")
        tgt = f" (target {target}{verdict})" if target else ""
        print(f"{label}: {value:.3g}x{tgt}", flush=True)

    # -- output ---------------------------------------------------------------------------------------------------
    def finish(self, render: Callable[[dict[str, Any]], str] | None = None, json_path: str | Path | None = None,
               docs: bool = True) -> dict[str, Any]:
        """Add the end setting, write the JSON atomically and (``docs``) the docs section from it."""
        from trustlab.core.files import atomic_write_text, to_jsonable

        self.result["setting_end"] = {**setting(), "load_average": os.getloadavg(), "commit": _git_commit(),
                                      "total_s": time.perf_counter() - self.t0, "argv": self.argv}
        path = Path(json_path) if json_path else RESULTS / f"{self.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(to_jsonable(self.result), indent=1) + "\n")
        print(f"wrote {path}", flush=True)
        if docs and render is not None and json_path is None:
            write_docs(self.name, render(self.result))
        return self.result


def setting_line(result: Mapping[str, Any]) -> str:
    """One prose line of the setting a result was measured in (for the docs section's footer)."""
    s, e = result.get("setting_start", {}), result.get("setting_end", {})
    env = e.get("env", {})
    parts = [f"measured {s.get('date', '?')} at {e.get('commit', '?')}",
             f"Python {e.get('python', '?')}", f"{e.get('cpus', '?')} CPUs"]
    if "torch_version" in e:
        parts.append(f"torch {e['torch_version']} ({e.get('torch_num_threads', '?')} intra-op threads outside the timed "
                     "blocks)")
    parts.append(", ".join(f"{k}={v}" for k, v in env.items() if v is not None) or "no thread variables set")
    la0, la1 = s.get("load_average", [float("nan")])[0], e.get("load_average", [float("nan")])[0]
    parts.append(f"load average {la0:.1f} at the start, {la1:.1f} at the end")
    parts.append(f"total {e.get('total_s', float('nan')):.0f} s")
    return "Setting: " + "; ".join(parts) + "."


def write_docs(name: str, body: str) -> None:
    """Replace ``docs/benchmarks.md``'s section of ``name`` by ``body`` (markers added here), atomically."""
    from trustlab.core.files import atomic_write_text

    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{body.strip()}\n{end}"
    doc = DOC.read_text(encoding="utf-8")
    if start in doc and end in doc:
        doc = doc[: doc.index(start)] + block + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    atomic_write_text(DOC, doc)


def load(name: str) -> dict[str, Any]:
    """The committed JSON of a benchmark (what ``--render-only`` renders)."""
    return json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))


def parser(description: str | None) -> argparse.ArgumentParser:
    """An argument parser with the harness's own options: ``--json PATH`` (write there, docs untouched),
    ``--no-docs`` and ``--render-only``."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default=None, help="write the result here instead of docs/benchmarks_files/ "
                                                 "(the docs section is then left as it is)")
    ap.add_argument("--no-docs", action="store_true", help="do not rewrite the docs section")
    ap.add_argument("--render-only", action="store_true",
                    help="regenerate the docs section from the committed JSON, run nothing")
    return ap


def main(name: str, args: argparse.Namespace, run: Callable[[Bench], None],
         render: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    """The body of every benchmark's ``__main__``: ``--render-only`` or run, then write."""
    if args.render_only:
        result = load(name)
        write_docs(name, render(result))
        return result
    params = {k: v for k, v in vars(args).items() if k not in ("json", "no_docs", "render_only")}
    bench = Bench(name, params=params)
    run(bench)
    return bench.finish(render, json_path=args.json, docs=not args.no_docs)


@contextlib.contextmanager
def threads(n: int | None) -> Iterator[None]:
    """``trustlab.core.threads.limit_threads`` (BLAS pools and torch), re-exported for the scripts.

    ``limit_threads`` changes torch's threads only when torch is already imported; a benchmark imports it lazily
    inside the block, so torch is imported here first (when installed) and the limit holds for it too."""
    import importlib.util

    from trustlab.core.threads import limit_threads

    if n is not None and importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401

    with limit_threads(n):
        yield


def flops(fn: Callable[[], Any]) -> float:
    """FLOPs of one call of ``fn`` (matmuls and attention, forward + backward), counted by torch's
    ``FlopCounterMode``."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fc:
        fn()
    return float(fc.get_total_flops())


def fmt_s(seconds: float) -> str:
    """Seconds for a table: 3 significant figures, ms below 1 s."""
    if seconds < 1:
        return f"{1000 * seconds:.3g} ms"
    return f"{seconds:.3g} s"
