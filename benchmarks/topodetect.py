"""topodetect speed: persistence diagrams per second for clouds of 64-256 points (H0 via the minimum spanning
tree vs ripser's full Rips H0, same bars; ripser H0+H1), and the cost of one topology-augmented SAMMD test vs
plain SAMMD (with and without computing the per-sample topological features of the test sets).

Standalone: ``python benchmarks/topodetect.py [--repeats 3] [--threads 1]``. Prints a table and writes
``benchmarks/results/topodetect.json``. Clouds are embedding-like (points around 10 class centres on the unit
sphere, d = 32, as MiniCLIP embeddings), plus one random Gaussian cloud (the worst case for H1).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

from trustlab.core.threads import limit_threads  # noqa: E402
from trustlab.methods.topodetect import SAMMD, TopoSAMMD, h0_deaths, persistence_diagrams, topo_features  # noqa: E402


def _median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _clustered(n: int, d: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(10, d))
    X = c[rng.integers(0, 10, n)] + 0.3 * rng.normal(size=(n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _diagrams(repeats: int) -> list[dict]:
    rows = []
    for n in (64, 128, 256):
        for kind, X in (("clustered", _clustered(n)), ("gaussian", np.random.default_rng(1).normal(size=(n, 32)))):
            same = bool(np.allclose(np.sort(persistence_diagrams(X, maxdim=0)[0][:, 1]), h0_deaths(X), atol=1e-5))
            t_mst = _median_time(lambda X=X: h0_deaths(X), repeats)
            t_r0 = _median_time(lambda X=X: persistence_diagrams(X, maxdim=0), repeats)
            t_r1 = _median_time(lambda X=X: persistence_diagrams(X, maxdim=1), max(1, repeats // 2))
            rows.append({"n": n, "cloud": kind, "mst_h0_per_s": 1 / t_mst, "ripser_h0_per_s": 1 / t_r0,
                         "ripser_h0h1_per_s": 1 / t_r1, "mst_speedup_vs_ripser_h0": t_r0 / t_mst, "same_h0": same})
    return rows


def _tests(repeats: int) -> dict:
    rng = np.random.default_rng(0)
    d, raw, n = 32, 256, 50
    emb = lambda m, s: _clustered(m, d, s)  # noqa: E731
    ref_i = emb(64, 3)
    ref_t = ref_i
    def feats(m: int, s: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
        z = emb(m, s) + shift * rng.normal(size=(m, d))
        return z, np.hstack([z, rng.random((m, raw))])


    (zc, Fc), (za, Fa) = feats(200, 4, 0.0), feats(200, 5, 0.1)
    gc = topo_features(zc, zc, ref_i, ref_t, random_state=0)
    ga = topo_features(za, za, ref_i, ref_t, random_state=0)
    sam = SAMMD(n_semantic=d, epochs=50, random_state=0).fit(np.vstack([Fc[:100], Fa[:100]]), np.repeat([0, 1], 100))
    tc = TopoSAMMD(n_semantic=d, n_topo=d, epochs=50, random_state=0).fit(
        np.vstack([np.hstack([Fc[:100], gc[:100]]), np.hstack([Fa[:100], ga[:100]])]), np.repeat([0, 1], 100))
    X, Y = Fc[100:100 + n], Fa[100:100 + n]
    Xg, Yg = np.hstack([X, gc[100:100 + n]]), np.hstack([Y, ga[100:100 + n]])
    t_s = _median_time(lambda: sam.test(X, Y), repeats)
    t_t = _median_time(lambda: tc.test(Xg, Yg), repeats)
    t_g = _median_time(lambda: topo_features(np.vstack([zc[100:150], za[100:150]]),
                                             np.vstack([zc[100:150], za[100:150]]), ref_i, ref_t, random_state=0),
                       max(1, repeats // 2))
    return {"n": n, "sammd_test_s": t_s, "tc_sammd_test_s": t_t, "topo_features_2n_s": t_g,
            "tc_over_sammd_test_only": t_t / t_s, "tc_over_sammd_with_features": (t_t + t_g) / t_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    with limit_threads(args.threads):
        out = {"threads": args.threads, "diagrams": _diagrams(args.repeats), "tests": _tests(args.repeats)}
    print(f"{'n':>4} {'cloud':>10} {'MST H0/s':>10} {'ripser H0/s':>12} {'ripser H0+H1/s':>15} {'MST x':>7} same")
    for r in out["diagrams"]:
        print(f"{r['n']:>4} {r['cloud']:>10} {r['mst_h0_per_s']:>10.1f} {r['ripser_h0_per_s']:>12.1f} "
              f"{r['ripser_h0h1_per_s']:>15.2f} {r['mst_speedup_vs_ripser_h0']:>7.1f} {r['same_h0']}")
    t = out["tests"]
    print(f"one test at n={t['n']}: SAMMD {t['sammd_test_s'] * 1e3:.1f} ms, TC-SAMMD {t['tc_sammd_test_s'] * 1e3:.1f} ms "
          f"({t['tc_over_sammd_test_only']:.2f}x); + topological features of the 2n test rows "
          f"{t['topo_features_2n_s']:.2f} s ({t['tc_over_sammd_with_features']:.1f}x)")
    path = Path(__file__).parent / "results" / "topodetect.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
