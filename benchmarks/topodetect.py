"""topodetect speed: persistence diagrams per second for clouds of 64-256 points (H0 via the minimum spanning
tree vs ripser's full Rips H0, same bars; ripser H0+H1), and the cost of one topology-augmented SAMMD test vs
plain SAMMD (with and without computing the per-sample topological features of the test sets).

Standalone: ``python benchmarks/topodetect.py [--repeats 3] [--threads 1]`` (harness options: ``--json PATH``,
``--no-docs``, ``--render-only``). MST H0 and ripser H0 run alternately, as do SAMMD and TC-SAMMD tests (medians of
``--repeats`` after a warm-up). Clouds are embedding-like (points around 10 class centres on the unit sphere,
d = 32, as MiniCLIP embeddings), plus one random Gaussian cloud (the worst case for H1).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import _harness  # noqa: E402

NAME = "topodetect"
NOTES = """The MST path is barely faster than ripser's H0 at these sizes (scipy's per-call overhead dominates); its
value is the exact float64 bars and the pairing the differentiable path needs; H1 costs several times more than H0.
The topological features of the test rows (8 batches of 32 each), computed inside the test, are what makes a
TC-SAMMD test cost more than a SAMMD test; the test itself costs about the same.

History (pre-harness script, each timing alone, not alternating): 2026-12-01 18:17 UTC at 978d96d (1 thread, one
CPU slot of the loaded machine): MST / ripser H0 1.0-1.4x, TC-SAMMD / SAMMD 1.01x (5.5 vs 5.4 ms), with the
features 0.17 s (32x SAMMD); the first run (16:11 UTC, a busier machine) measured 0.5-1.2x, 1.09x and 42.5x.
Earlier unlocked timings of `topo_features` (50 samples x 8 batches): per-batch autograd 4.5 s, closed-form loop
1.8 s, vectorised minimum-spanning-forest version 0.12 s. The default experiment (3 seeds, all claims) took 152 s
on one thread."""


def _clustered(n: int, d: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(10, d))
    X = c[rng.integers(0, 10, n)] + 0.3 * rng.normal(size=(n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def _diagrams(bench: _harness.Bench, repeats: int) -> list[dict]:
    from trustlab.methods.topodetect import h0_deaths, persistence_diagrams

    rows = []
    for n in (64, 128, 256):
        for kind, X in (("clustered", _clustered(n)), ("gaussian", np.random.default_rng(1).normal(size=(n, 32)))):
            same = bool(np.allclose(np.sort(persistence_diagrams(X, maxdim=0)[0][:, 1]), h0_deaths(X), atol=1e-5))
            t = bench.compare({"mst_h0": lambda X=X: h0_deaths(X),
                               "ripser_h0": lambda X=X: persistence_diagrams(X, maxdim=0)},
                              repeat=repeats, key=f"H0 n={n} {kind}")
            t1 = bench.compare({"ripser_h0h1": lambda X=X: persistence_diagrams(X, maxdim=1)},
                               repeat=max(1, repeats // 2), key=f"H0+H1 n={n} {kind}")
            t_mst, t_r0, t_r1 = t["mst_h0"]["wall"], t["ripser_h0"]["wall"], t1["ripser_h0h1"]["wall"]
            rows.append({"n": n, "cloud": kind, "mst_h0_per_s": 1 / t_mst, "ripser_h0_per_s": 1 / t_r0,
                         "ripser_h0h1_per_s": 1 / t_r1, "mst_speedup_vs_ripser_h0": t_r0 / t_mst, "same_h0": same})
    return rows


def _tests(bench: _harness.Bench, repeats: int) -> dict:
    from trustlab.methods.topodetect import SAMMD, TopoSAMMD, topo_features

    rng = np.random.default_rng(0)
    d, raw, n = 32, 256, 50
    ref_i = ref_t = _clustered(64, d, 3)

    def feats(m: int, s: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
        z = _clustered(m, d, s) + shift * rng.normal(size=(m, d))
        return z, np.hstack([z, rng.random((m, raw))])

    (zc, Fc), (za, Fa) = feats(200, 4, 0.0), feats(200, 5, 0.1)
    gc = topo_features(zc, zc, ref_i, ref_t, random_state=0)
    ga = topo_features(za, za, ref_i, ref_t, random_state=0)
    sam = SAMMD(n_semantic=d, epochs=50, random_state=0).fit(np.vstack([Fc[:100], Fa[:100]]), np.repeat([0, 1], 100))
    tc = TopoSAMMD(n_semantic=d, n_topo=d, epochs=50, random_state=0).fit(
        np.vstack([np.hstack([Fc[:100], gc[:100]]), np.hstack([Fa[:100], ga[:100]])]), np.repeat([0, 1], 100))
    X, Y = Fc[100:100 + n], Fa[100:100 + n]
    Xg, Yg = np.hstack([X, gc[100:100 + n]]), np.hstack([Y, ga[100:100 + n]])
    t = bench.compare({"sammd": lambda: sam.test(X, Y), "tc_sammd": lambda: tc.test(Xg, Yg)}, repeat=repeats,
                      key="one test")
    z2 = np.vstack([zc[100:150], za[100:150]])
    tg = bench.compare({"topo_features_2n": lambda: topo_features(z2, z2, ref_i, ref_t, random_state=0)},
                       repeat=max(1, repeats // 2), key="topo_features of the 2n test rows")
    t_s, t_t, t_g = t["sammd"]["wall"], t["tc_sammd"]["wall"], tg["topo_features_2n"]["wall"]
    return {"n": n, "sammd_test_s": t_s, "tc_sammd_test_s": t_t, "topo_features_2n_s": t_g,
            "tc_over_sammd_test_only": t_t / t_s, "tc_over_sammd_with_features": (t_t + t_g) / t_s}


def run(bench: _harness.Bench, repeats: int, threads: int) -> None:
    with _harness.threads(threads):
        diagrams, tests = _diagrams(bench, repeats), _tests(bench, repeats)
    bench.put(diagrams=diagrams, tests=tests)
    print(f"{'n':>4} {'cloud':>10} {'MST H0/s':>10} {'ripser H0/s':>12} {'ripser H0+H1/s':>15} {'MST x':>7} same")
    for r in diagrams:
        print(f"{r['n']:>4} {r['cloud']:>10} {r['mst_h0_per_s']:>10.1f} {r['ripser_h0_per_s']:>12.1f} "
              f"{r['ripser_h0h1_per_s']:>15.2f} {r['mst_speedup_vs_ripser_h0']:>7.1f} {r['same_h0']}")
    t = tests
    print(f"one test at n={t['n']}: SAMMD {t['sammd_test_s'] * 1e3:.1f} ms, TC-SAMMD {t['tc_sammd_test_s'] * 1e3:.1f} ms "
          f"({t['tc_over_sammd_test_only']:.2f}x); + topological features of the 2n test rows "
          f"{t['topo_features_2n_s']:.2f} s ({t['tc_over_sammd_with_features']:.1f}x)", flush=True)


def render(result: dict[str, Any]) -> str:
    p, v = result["params"], result["values"]
    t = v["tests"]
    lines = ["## topodetect (issue 19)", "",
             f"`python benchmarks/topodetect.py --repeats {p['repeats']} --threads {p['threads']}`: diagrams per "
             f"second, medians of {p['repeats']} (H0+H1 of {max(1, p['repeats'] // 2)}) after a warm-up, MST and "
             "ripser H0 alternating; clouds in d = 32 (embedding-like: 10 clusters on the unit sphere; Gaussian: the "
             "H1 worst case). \"same\" = ripser's H0 deaths equal the MST's.", "",
             "| n | cloud | MST H0 /s | ripser H0 /s | ripser H0+H1 /s | MST / ripser H0 | same H0 |",
             "|---|---|---:|---:|---:|---:|---|"]
    lines += [f"| {r['n']} | {r['cloud']} | {r['mst_h0_per_s']:.0f} | {r['ripser_h0_per_s']:.0f} | "
              f"{r['ripser_h0h1_per_s']:.3g} | {r['mst_speedup_vs_ripser_h0']:.1f}x | "
              f"{'yes' if r['same_h0'] else 'NO'} |" for r in v["diagrams"]]
    lines += ["", f"One test at n = {t['n']} (200 wild-bootstrap draws; SAMMD and TC-SAMMD alternating): SAMMD "
              f"{1e3 * t['sammd_test_s']:.1f} ms, TC-SAMMD {1e3 * t['tc_sammd_test_s']:.1f} ms "
              f"(**{t['tc_over_sammd_test_only']:.2f}x**); with the topological features of the 2n test rows "
              f"computed inside the test ({t['topo_features_2n_s']:.2f} s), **{t['tc_over_sammd_with_features']:.0f}x** "
              "SAMMD.", "", NOTES, "", _harness.setting_line(result)]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    _harness.main(NAME, a, lambda b: run(b, a.repeats, a.threads), render)
