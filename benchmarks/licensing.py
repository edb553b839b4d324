"""Speed of the licensing valuations (issue 22). Not a test.

* ``knn``: exact KNN-Shapley on 10,000 training x 1,000 validation points (64 continuous features, 10
  classes, k = 5): our vectorised recursion against pyDVL 0.10.0's ``KNNShapleyValuation`` (run in its own
  numpy<2 venv, see ``licensing_pydvl_env.sh``; skipped when absent, and the docs then say "not re-run"), with the
  max abs difference of the values (continuous features: no distance ties, so the two must agree to rounding).
* ``owner``: the exact owner game with 12 owners and the KNN utility (4,096 coalitions), on the same data
  and on the demo size (1,000 x 300); target <= 10 s.
* ``report``: one full ``compensation_report`` on the demo scenario (dedup + counterfactual + flags), the
  ``knn_shapley`` and ``owner_shapley_exact`` methods alternating.

Medians of ``--repeats`` after one warm-up call (``bench.compare``). Usage::

    python benchmarks/licensing.py [--repeats 3] [--sections knn owner report] [--json out.json]
    TRUSTLAB_PYDVL_PYTHON=/path/to/venv/bin/python python benchmarks/licensing.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import _harness  # noqa: E402

NAME = "licensing"
HERE = Path(__file__).resolve().parent
NOTES = """On digits (pixels on a 1/16 grid, many distance ties) pyDVL's values differ from ours by up to 1.1e-4
(correlation 0.99994): pyDVL orders tied points as `KNeighborsClassifier.kneighbors` returns them, we by row
contents, label and index so that exact duplicates stay symmetric; on continuous data (no ties) the two agree to
rounding.

History (pre-harness script, medians of 3 under the CPU lock, load average 3.4 at the end, pyDVL in its venv):
KNN-Shapley 2.98 s vs pyDVL 40.0 s (13.4x faster, max abs difference 2.7e-19); owner game 3.78 s (10,000 x 1,000)
and 0.51 s (1,000 x 300); `compensation_report` 0.25 s (`knn_shapley`) and 0.41 s (`owner_shapley_exact`)."""


def _data(n: int, n_val: int, d: int = 64, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=1.5, size=(10, d))
    y, yv = rng.integers(0, 10, n), rng.integers(0, 10, n_val)
    return centers[y] + rng.normal(size=(n, d)), y, centers[yv] + rng.normal(size=(n_val, d)), yv


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


def bench_knn(bench: _harness.Bench, repeats: int) -> dict[str, Any]:
    from trustlab.methods.licensing import KNNUtility, knn_shapley

    X, y, Xv, yv = _data(10_000, 1_000)
    got: dict[str, Any] = {}
    t = bench.compare({"ours": lambda: got.update(phi=knn_shapley(X, y, Xv, yv, k=5))}, repeat=repeats,
                      key="knn_shapley 10000 x 1000")
    ours, phi = t["ours"]["wall"], got["phi"]
    row: dict[str, Any] = {"n": 10_000, "n_val": 1_000, "ours_s": ours,
                           "efficiency_residual": float(phi.sum() - KNNUtility(5).game(
                               X, y, Xv, yv, np.zeros(len(X), dtype=np.int64)).v_full)}
    ref = _pydvl(X, y, Xv, yv, 5)
    if ref is not None:
        row.update(pydvl_s=ref["seconds"], pydvl_wall_s=ref["wall"], pydvl_version=ref["version"],
                   max_abs_diff=float(np.max(np.abs(phi - ref["values"]))), speedup=ref["seconds"] / ours)
        bench.print_ratio("KNN-Shapley, pyDVL / ours", row["speedup"])
    return row


def bench_owner(bench: _harness.Bench, repeats: int) -> list[dict[str, Any]]:
    from trustlab.methods.licensing import KNNUtility, exact_shapley

    rows = []
    for n, n_val in ((10_000, 1_000), (1_000, 300)):
        X, y, Xv, yv = _data(n, n_val)
        owner = np.arange(n) % 12
        got: dict[str, Any] = {}
        t = bench.compare({"owner_game": lambda X=X, y=y, Xv=Xv, yv=yv, o=owner, got=got: got.update(res=exact_shapley(
            KNNUtility(5).game(X, y, Xv, yv, o)))}, repeat=repeats, key=f"owner game {n} x {n_val}")
        rows.append({"n": n, "n_val": n_val, "owners": 12, "coalitions": 4096, "seconds": t["owner_game"]["wall"],
                     "efficiency_residual": got["res"].efficiency_residual})
    return rows


def bench_report(bench: _harness.Bench, repeats: int) -> dict[str, Any]:
    from trustlab.experiments.licensing import Config, make_demo
    from trustlab.methods.licensing import compensation_report

    d = make_demo(Config(), 0)
    args = (d["X_demo"], d["y_demo"], d["owner_demo"], d["X_val"], d["y_val"], 100000)
    t = bench.compare({"knn_shapley": lambda: compensation_report(*args),
                       "owner_shapley_exact": lambda: compensation_report(*args, method="owner_shapley_exact")},
                      repeat=repeats, key="compensation_report")
    return {"knn_shapley_s": t["knn_shapley"]["wall"], "owner_shapley_exact_knn_s": t["owner_shapley_exact"]["wall"],
            "rows": len(d["y_demo"])}


def run(bench: _harness.Bench, repeats: int, sections: list[str]) -> None:
    import json

    for name, fn in (("knn", bench_knn), ("owner", bench_owner), ("report", bench_report)):
        if name in sections:
            bench.put(**{name: fn(bench, repeats)})
            print(f"{name}:", json.dumps(bench.result["values"][name]), flush=True)
    if "owner" in sections:
        t = bench.result["values"]["owner"][0]["seconds"]
        print(f"owner game 10,000 x 1,000: {t:.2f} s (target <= 10 s: {'met' if t <= 10 else 'MISSED'})")


def render(result: dict[str, Any]) -> str:
    p, v = result["params"], result["values"]
    lines = ["## Licensing (data valuation for compensation reports)", "",
             f"`benchmarks/licensing.py` (issue 22), medians of {p['repeats']} repeats after a warm-up; compare the "
             "ratios, not the seconds (shared 2-core machine). pyDVL 0.10.0 runs in its own numpy<2 venv "
             "(`bash benchmarks/licensing_pydvl_env.sh`; its own timer, one run).", "",
             "| measurement | ours | pyDVL 0.10.0 | ratio |", "|---|---:|---:|---:|"]
    if "knn" in v:
        k = v["knn"]
        ref = (f"{k['pydvl_s']:.3g} s", f"{k['speedup']:.1f}x faster; max abs difference of the values "
               f"{k['max_abs_diff']:.2g}") if "pydvl_s" in k else ("not re-run (pyDVL venv absent)", "-")
        lines.append(f"| exact KNN-Shapley, {k['n']:,} training x {k['n_val']:,} validation points, 64 continuous "
                     f"features, k = 5 | {k['ours_s']:.3g} s | {ref[0]} | {ref[1]} |")
    for i, o in enumerate(v.get("owner", [])):
        what = (f"exact owner game, {o['owners']} owners, KNN utility ({o['coalitions']:,} coalitions), "
                f"{o['n']:,} x {o['n_val']:,}") if i == 0 else f"same, {o['n']:,} x {o['n_val']:,} (demo size)"
        tgt = f"target <= 10 s: {'met' if o['seconds'] <= 10 else 'missed'}" if i == 0 else ""
        ref = "- (its KNN-Shapley rejects grouped data)" if i == 0 else "-"
        lines.append(f"| {what} | {o['seconds']:.3g} s | {ref} | {tgt} |")
    if "report" in v:
        r = v["report"]
        lines += [f"| full `compensation_report` on the demo ({r['rows']:,} rows: dedup, flags, counterfactual), "
                  f"`knn_shapley` | {r['knn_shapley_s']:.3g} s | - | |",
                  f"| same with `owner_shapley_exact` (KNN utility, 10 owners) | {r['owner_shapley_exact_knn_s']:.3g} s "
                  "| - | |"]
    res = [f"{v['knn']['efficiency_residual']:.2g} (KNN-Shapley)"] if "knn" in v else []
    res += [f"{o['efficiency_residual']:.2g} (owner game {o['n']:,})" for o in v.get("owner", [])]
    lines += ["", f"Efficiency residuals in the same run: {', '.join(res) or '-'}.", "", NOTES, "",
              _harness.setting_line(result)]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sections", nargs="*", default=["knn", "owner", "report"])
    a = ap.parse_args()
    _harness.main(NAME, a, lambda b: run(b, a.repeats, a.sections), render)
