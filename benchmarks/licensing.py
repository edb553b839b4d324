"""Speed of the licensing valuations (issue 22). Not a test.

* ``knn``: exact KNN-Shapley on 10,000 training x 1,000 validation points (64 continuous features, 10
  classes, k = 5): our vectorised recursion against pyDVL 0.10.0's ``KNNShapleyValuation`` (run in its own
  numpy<2 venv, see ``licensing_pydvl_env.sh``; skipped when absent), with the max abs difference of the
  values (continuous features: no distance ties, so the two must agree to rounding).
* ``owner``: the exact owner game with 12 owners and the KNN utility (4,096 coalitions), on the same data
  and on the demo size (1,000 x 300); target <= 10 s.
* ``report``: one full ``compensation_report`` on the demo scenario (dedup + counterfactual + flags).

Usage::

    python benchmarks/licensing.py [--repeats 3] [--json out.json]
    TRUSTLAB_PYDVL_PYTHON=/path/to/venv/bin/python python benchmarks/licensing.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.methods.licensing import KNNUtility, compensation_report, exact_shapley, knn_shapley

HERE = Path(__file__).resolve().parent


def _data(n: int, n_val: int, d: int = 64, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=1.5, size=(10, d))
    y, yv = rng.integers(0, 10, n), rng.integers(0, 10, n_val)
    return centers[y] + rng.normal(size=(n, d)), y, centers[yv] + rng.normal(size=(n_val, d)), yv


def _median_time(fn: Any, repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _pydvl(X: np.ndarray, y: np.ndarray, Xv: np.ndarray, yv: np.ndarray, k: int) -> dict[str, Any] | None:
    py = os.environ.get("TRUSTLAB_PYDVL_PYTHON", "/tmp/trustlab-pydvl/bin/python")
    if not Path(py).is_file():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(Path(tmp) / "in.npz", X=X, y=y, X_val=Xv, y_val=yv, k=k)
        t0 = time.perf_counter()
        subprocess.run([py, str(HERE / "licensing_pydvl_oracle.py"), str(Path(tmp) / "in.npz"),
                        str(Path(tmp) / "out.npz")], check=True, capture_output=True, timeout=3600)
        wall = time.perf_counter() - t0
        out = np.load(Path(tmp) / "out.npz")
        return {"values": out["values"], "seconds": float(out["seconds"]), "wall": wall,
                "version": str(out["pydvl"]), "numpy": str(out["numpy"])}


def bench_knn(repeats: int) -> dict[str, Any]:
    X, y, Xv, yv = _data(10_000, 1_000)
    ours, phi = _median_time(lambda: knn_shapley(X, y, Xv, yv, k=5), repeats)
    row: dict[str, Any] = {"n": 10_000, "n_val": 1_000, "ours_s": ours,
                           "efficiency_residual": float(phi.sum() - KNNUtility(5).game(
                               X, y, Xv, yv, np.zeros(len(X), dtype=np.int64)).v_full)}
    ref = _pydvl(X, y, Xv, yv, 5)
    if ref is not None:
        row.update(pydvl_s=ref["seconds"], pydvl_wall_s=ref["wall"], pydvl_version=ref["version"],
                   max_abs_diff=float(np.max(np.abs(phi - ref["values"]))), speedup=ref["seconds"] / ours)
    return row


def bench_owner(repeats: int) -> list[dict[str, Any]]:
    rows = []
    for n, n_val in ((10_000, 1_000), (1_000, 300)):
        X, y, Xv, yv = _data(n, n_val)
        owner = np.arange(n) % 12

        t, res = _median_time(lambda X=X, y=y, Xv=Xv, yv=yv, o=owner: exact_shapley(
            KNNUtility(5).game(X, y, Xv, yv, o)), repeats)
        rows.append({"n": n, "n_val": n_val, "owners": 12, "coalitions": 4096, "seconds": t,
                     "efficiency_residual": res.efficiency_residual})
    return rows


def bench_report(repeats: int) -> dict[str, Any]:
    from trustlab.experiments.licensing import Config, make_demo

    d = make_demo(Config(), 0)
    args = (d["X_demo"], d["y_demo"], d["owner_demo"], d["X_val"], d["y_val"], 100000)
    t, _ = _median_time(lambda: compensation_report(*args), repeats)
    t_exact, _ = _median_time(lambda: compensation_report(*args, method="owner_shapley_exact"), repeats)
    return {"knn_shapley_s": t, "owner_shapley_exact_knn_s": t_exact, "rows": len(d["y_demo"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sections", nargs="*", default=["knn", "owner", "report"])
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    out: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count()}
    if "knn" in a.sections:
        out["knn"] = bench_knn(a.repeats)
        print("knn:", json.dumps(out["knn"]))
    if "owner" in a.sections:
        out["owner"] = bench_owner(a.repeats)
        print("owner:", json.dumps(out["owner"]))
    if "report" in a.sections:
        out["report"] = bench_report(a.repeats)
        print("report:", json.dumps(out["report"]))
    out["load_average"] = os.getloadavg()[0]
    print("load average at end:", out["load_average"])
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
