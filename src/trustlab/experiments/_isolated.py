"""Run one experiment in its own Python process, so no global state leaks from one experiment into the next.

``reproduce`` calls :func:`run_isolated` for each experiment. The child (``python -m
trustlab.experiments._isolated REQUEST``) runs :func:`~trustlab.experiments.runner.run_experiment` and
writes a small reply file: the result's path, or the error's type, message and traceback. A child that
dies without replying (killed, out of memory) is reported as an error too. Errors become a saved
``Result`` with ``provenance["error"]`` and no claims, so the report shows an ERROR row for that run and
the other experiments go on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trustlab.results.result import Result

__all__ = ["Outcome", "run_isolated", "error_result", "reproduce_task", "thread_env"]


@dataclass(frozen=True)
class Outcome:
    """What one isolated run gave: its Result (an error Result when it raised) and where it was saved."""

    result: Result
    path: Path | None
    seconds: float


def error_result(exp_id: str, mode: str, exc_type: str, message: str, tb: str = "", *,
                 config: dict[str, Any] | None = None) -> Result:
    """A Result standing for a run that raised: no claims, the error in ``provenance["error"]``."""
    from trustlab.experiments.runner import _provenance

    res = Result(exp_id, mode, dict(config or {}))
    res.provenance.update(_provenance(), error={"type": exc_type, "message": message, "traceback": tb})
    res.notes.append(f"error: the experiment raised {exc_type}: {message}")
    return res


def _config_of(exp_id: str, mode: str) -> dict[str, Any]:
    try:
        from trustlab.experiments.runner import get_experiment

        return get_experiment(exp_id).config_cls.for_mode(mode).to_dict()
    except Exception:  # noqa: BLE001 - the config is only context for an error record
        return {}


def run_isolated(exp_id: str, mode: str = "quick", *, out_dir: str | Path | None = "runs",
                 overrides: tuple[str, ...] = (), budget_s: float | None = None, strict_budget: bool = False,
                 show_progress: bool = True, timeout_s: float | None = None,
                 env: dict[str, str] | None = None, knockout: bool = False) -> Outcome:
    """Run ``exp_id`` in a fresh Python process; never raises for the experiment's own errors.

    ``env`` adds (or replaces) environment variables of the child process only (e.g. :func:`thread_env`).
    """
    import trustlab.experiments as pkg
    from trustlab.experiments.runner import _save

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="trustlab-run-") as tmp:
        request = {"exp_id": exp_id, "mode": mode, "out_dir": None if out_dir is None else str(out_dir),
                   "overrides": list(overrides), "budget_s": budget_s, "strict_budget": strict_budget,
                   "show_progress": show_progress, "experiments_path": list(pkg.__path__), "knockout": knockout,
                   "reply": str(Path(tmp) / "reply.json")}
        req_path = Path(tmp) / "request.json"
        req_path.write_text(json.dumps(request))
        cmd = [sys.executable, "-m", "trustlab.experiments._isolated", str(req_path)]
        try:
            child_env = None if env is None else {**os.environ, **env}
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, timeout=timeout_s, check=False, env=child_env)
            code: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            code = f"timeout after {timeout_s} s"
        reply_path = Path(request["reply"])
        reply = json.loads(reply_path.read_text()) if reply_path.is_file() else None
    seconds = time.perf_counter() - t0
    if reply is not None and reply.get("ok"):
        path = Path(reply["path"]) if reply.get("path") else None
        result = Result.load(path) if path is not None else Result.from_dict(reply["result"])
        return Outcome(result, path, seconds)
    if reply is not None:
        result = error_result(exp_id, mode, reply["type"], reply["message"], reply.get("traceback", ""),
                              config=_config_of(exp_id, mode))
    else:
        why = code if isinstance(code, str) else f"exit code {code}" + (" (killed by a signal)" if code < 0 else "")
        result = error_result(exp_id, mode, "WorkerDied", f"the experiment's process ended without a result ({why})",
                              config=_config_of(exp_id, mode))
    return Outcome(result, _save(result, out_dir), seconds)


def thread_env(threads: int | None) -> dict[str, str] | None:
    """Environment that starts a child's BLAS/OpenMP/torch pools with ``threads`` threads (None: inherit)."""
    if threads is None:
        return None
    return {k: str(int(threads)) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def reproduce_task(exp_id: str, *, mode: str, budget_s: float | None, strict_budget: bool,
                   threads: int | None, knockout: bool = False) -> dict[str, Any]:
    """One experiment of ``reproduce`` as an executor task: run isolated, return the Result as a dict.

    Nothing is written where the task runs (a worker may be another machine); the caller saves the result.
    """
    out = run_isolated(exp_id, mode, out_dir=None, budget_s=budget_s, strict_budget=strict_budget,
                       show_progress=False, env=thread_env(threads), knockout=knockout)
    return out.result.to_dict()


def _child(request_path: str) -> int:
    from trustlab.core.seeding import set_runtime_env

    set_runtime_env()  # before anything imports torch
    request = json.loads(Path(request_path).read_text())
    import trustlab.experiments as pkg

    pkg.__path__[:] = request["experiments_path"]
    reply: dict[str, Any]
    try:
        from trustlab.experiments.runner import run_experiment

        result, path = run_experiment(
            request["exp_id"], request["mode"], overrides=request["overrides"], out_dir=request["out_dir"],
            budget_s=request["budget_s"], strict_budget=request["strict_budget"],
            show_progress=request["show_progress"], knockout=request.get("knockout", False))
        reply = {"ok": True, "path": None if path is None else str(path)}
        if path is None:
            reply["result"] = result.to_dict()
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the parent
        reply = {"ok": False, "type": type(exc).__name__, "message": str(exc) or repr(exc),
                 "traceback": "".join(traceback.format_exception(exc))}
    from trustlab.core.files import atomic_write_text

    atomic_write_text(request["reply"], json.dumps(reply))
    return 0 if reply["ok"] else 1


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
