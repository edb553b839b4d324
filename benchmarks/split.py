"""Full-size runs and speed comparisons for SPLIT / LicketySPLIT / RESPLIT against the C++ packages.

Not a test. Every ratio is measured in the same run on the same binary matrix:

* ``gosdt``: per data set, SPLIT (d_l = 2, 3) and our exact solver against GOSDT (capped; a timeout is
  counted at the cap): speed-up and objective gap.
* ``lickety``: our LicketySPLIT against the C++ ``licketysplit`` package (``lookahead_k=1``, the same
  algorithm): objective difference and the ratio of median fit times over repeats.
* ``scaling``: SPLIT run time against GOSDT as the number of binary features grows (20-80).
* ``resplit``: RESPLIT against TreeFARMS (set sizes, subset, time).

Usage::

    OMP_WAIT_POLICY=PASSIVE python benchmarks/split.py                 # everything (~10-15 min)
    python benchmarks/split.py --sections lickety scaling --gosdt-cap 60
    python benchmarks/split.py --quick                                  # one seed, small caps (~2 min)
    python benchmarks/split.py --json results.json                      # also write the raw numbers
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np

from trustlab.experiments.split import TG_ESTIMATORS, Config, binary_split
from trustlab.methods.split import (
    RESPLIT,
    LicketySPLITClassifier,
    SPLITClassifier,
    ThresholdGuessBinarizer,
    fit_gosdt,
    fit_licketysplit_package,
    fit_treefarms,
    tree_objective,
)

DEPTH, REG = 5, 0.005


def _time_fit(est: Any, X: np.ndarray, y: np.ndarray) -> tuple[Any, float]:
    t0 = time.perf_counter()
    est.fit(X, y)
    return est, time.perf_counter() - t0


def _warm_up() -> None:
    rng = np.random.default_rng(0)
    X = (rng.random((64, 6)) < 0.5).astype(np.uint8)
    y = (X[:, 0] ^ X[:, 1]).astype(int)
    SPLITClassifier(depth_budget=3, lookahead_depth=2, binarize=False).fit(X, y)
    LicketySPLITClassifier(depth_budget=3, binarize=False).fit(X, y)


def bench_gosdt(datasets: list[str], seeds: list[int], cap: float) -> list[dict[str, Any]]:
    cfg = Config()
    rows = []
    for ds in datasets:
        for seed in seeds:
            Btr, Bte, ytr, yte = binary_split(ds, seed, cfg)
            row: dict[str, Any] = {"dataset": ds, "seed": seed, "n": len(ytr), "p": Btr.shape[1]}
            for name, est in [("SPLIT d_l=2", SPLITClassifier(depth_budget=DEPTH, lookahead_depth=2, reg=REG,
                                                               binarize=False)),
                              ("SPLIT d_l=3", SPLITClassifier(depth_budget=DEPTH, lookahead_depth=3, reg=REG,
                                                               binarize=False)),
                              ("exact (ours)", SPLITClassifier(depth_budget=DEPTH, lookahead_depth=DEPTH, reg=REG,
                                                                time_limit=cap, binarize=False))]:
                est, dt = _time_fit(est, Btr, ytr)
                row[name] = {"R": est.objective_, "time": dt, "acc": est.score(Bte, yte)}
            g = fit_gosdt(Btr, ytr, reg=REG, depth_budget=DEPTH, time_limit=cap)
            row["GOSDT"] = {"R": g.objective, "time": g.time_s if g.converged else max(g.time_s, cap),
                            "acc": float(np.mean(g.predict(Bte) == yte)), "converged": g.converged,
                            "lb": g.lower_bound}
            rows.append(row)
            print(f"  {ds} seed {seed}: p={row['p']} GOSDT {row['GOSDT']['time']:.2f}s "
                  f"(converged={g.converged}) SPLIT3 {row['SPLIT d_l=3']['time']:.3f}s", flush=True)
    return rows


def bench_lickety(datasets: list[str], seeds: list[int], repeats: int) -> list[dict[str, Any]]:
    cfg = Config()
    rows = []
    for ds in datasets:
        for seed in seeds:
            Btr, _, ytr, _ = binary_split(ds, seed, cfg)
            ours_t, paper_t, theirs_t = [], [], []
            for _ in range(repeats):  # interleaved, so load changes hit both sides alike
                est, dt = _time_fit(LicketySPLITClassifier(depth_budget=DEPTH, reg=REG, completion="exact_last",
                                                           binarize=False), Btr, ytr)
                ours_t.append(dt)
                paper, dt = _time_fit(LicketySPLITClassifier(depth_budget=DEPTH, reg=REG, binarize=False), Btr, ytr)
                paper_t.append(dt)
                pkg = fit_licketysplit_package(Btr, ytr, reg=REG, depth_budget=DEPTH, lookahead_k=1)
                theirs_t.append(pkg.time_s)
            rows.append({"dataset": ds, "seed": seed, "p": Btr.shape[1], "R_ours": est.objective_,
                         "R_paper": paper.objective_, "R_pkg": pkg.objective, "t_ours": statistics.median(ours_t),
                         "t_paper": statistics.median(paper_t), "t_pkg": statistics.median(theirs_t)})
    return rows


def bench_scaling(ps: list[int], seeds: list[int], cap: float, n: int) -> list[dict[str, Any]]:
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split

    rows = []
    for seed in seeds:
        X, y = make_classification(n_samples=n, n_features=20, n_informative=12, n_redundant=4, flip_y=0.05,
                                   class_sep=0.8, random_state=seed)
        Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)
        B = ThresholdGuessBinarizer(n_estimators=250, max_depth=1, random_state=seed).fit(Xtr, ytr).transform(Xtr)
        order = np.random.default_rng(seed).permutation(B.shape[1])
        for p in ps:
            if p > B.shape[1]:
                continue
            Bp = B[:, np.sort(order[:p])]
            row: dict[str, Any] = {"seed": seed, "p": p}
            for name, dl in (("SPLIT d_l=2", 2), ("SPLIT d_l=3", 3)):
                est, dt = _time_fit(SPLITClassifier(depth_budget=DEPTH, lookahead_depth=dl, reg=REG, binarize=False),
                                    Bp, ytr)
                row[name] = {"R": est.objective_, "time": dt}
            g = fit_gosdt(Bp, ytr, reg=REG, depth_budget=DEPTH, time_limit=cap)
            row["GOSDT"] = {"R": g.objective, "time": g.time_s if g.converged else max(g.time_s, cap),
                            "converged": g.converged}
            rows.append(row)
            print(f"  scaling p={p} seed {seed}: GOSDT {row['GOSDT']['time']:.2f}s SPLIT2 "
                  f"{row['SPLIT d_l=2']['time']:.3f}s SPLIT3 {row['SPLIT d_l=3']['time']:.3f}s", flush=True)
    return rows


def bench_resplit(depth: int, reg: float, eps: float) -> dict[str, Any]:
    cfg = Config()
    Btr, _, ytr, _ = binary_split("breast_cancer", 0, cfg)
    rs, t_rs = _time_fit(RESPLIT(depth_budget=depth, lookahead_depth=3, reg=reg, rashomon_mult=eps,
                                 max_models=10**6, binarize=False), Btr, ytr)
    tf = fit_treefarms(Btr, ytr, reg=reg, depth_budget=depth, rashomon_mult=eps, max_trees=10**6)
    ours = {t.canonical() for t in rs.iter_trees()}
    worst = max(tree_objective(t, Btr, ytr, reg) for t in rs.iter_trees())
    return {"depth": depth, "reg": reg, "eps": eps, "p": Btr.shape[1], "n_resplit": rs.n_trees_,
            "n_treefarms": tf.info["n_trees"], "subset": ours <= set(tf.info["canonical"]),
            "t_resplit": t_rs, "t_treefarms": tf.time_s, "max_R": worst, "bound": rs.rashomon_bound_}


# ------------------------------------------------------------------------------------------------ report
def _mean(rows: list[dict[str, Any]], key: str, field: str) -> float:
    return float(np.mean([r[key][field] for r in rows]))


def report(out: dict[str, Any]) -> str:
    lines = []
    if "gosdt" in out:
        lines += ["### SPLIT vs GOSDT (depth 5, reg 0.005; mean over seeds, same binary matrix)", "",
                  "| data set | n | p | GOSDT s (converged) | SPLIT d_l=2 s | SPLIT d_l=3 s | exact (ours) s | "
                  "speed-up d_l=2 | speed-up d_l=3 | gap d_l=2 | gap d_l=3 | gap exact |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for ds in dict.fromkeys(r["dataset"] for r in out["gosdt"]):
            rows = [r for r in out["gosdt"] if r["dataset"] == ds]
            g = _mean(rows, "GOSDT", "time")
            conv = sum(r["GOSDT"]["converged"] for r in rows)
            s2, s3, ex = (_mean(rows, k, "time") for k in ("SPLIT d_l=2", "SPLIT d_l=3", "exact (ours)"))
            gaps = [float(np.mean([r[k]["R"] - r["GOSDT"]["R"] for r in rows]))
                    for k in ("SPLIT d_l=2", "SPLIT d_l=3", "exact (ours)")]
            lines.append(f"| {ds} | {rows[0]['n']} | {np.mean([r['p'] for r in rows]):.0f} | {g:.2f} ({conv}/{len(rows)}) "
                         f"| {s2:.3f} | {s3:.3f} | {ex:.3f} | {g / s2:.0f}x | {g / s3:.0f}x | {gaps[0]:+.4f} | "
                         f"{gaps[1]:+.4f} | {gaps[2]:+.4f} |")
        lines.append("")
    if "lickety" in out:
        lines += ["### LicketySPLIT (ours, numpy + numba) vs the C++ `licketysplit` package (k=1)", "",
                  "`exact_last` is our variant with the package's completion rule (last split level exact); "
                  "`paper` uses the paper's information-gain completions throughout.", "",
                  "| data set | p | R ours exact_last | R C++ | R ours paper | fit ours exact_last (ms) | "
                  "fit C++ (ms) | time ratio | fit ours paper (ms) |", "|---|---|---|---|---|---|---|---|---|"]
        for ds in dict.fromkeys(r["dataset"] for r in out["lickety"]):
            rows = [r for r in out["lickety"] if r["dataset"] == ds]
            ro, rp, rpa = (np.mean([r[k] for r in rows]) for k in ("R_ours", "R_pkg", "R_paper"))
            to, tp, tpa = (np.mean([r[k] for r in rows]) for k in ("t_ours", "t_pkg", "t_paper"))
            lines.append(f"| {ds} | {np.mean([r['p'] for r in rows]):.0f} | {ro:.5f} | {rp:.5f} | {rpa:.5f} | "
                         f"{1e3 * to:.2f} | {1e3 * tp:.2f} | {to / tp:.1f}x | {1e3 * tpa:.2f} |")
        lines.append("")
    if "scaling" in out:
        lines += ["### Scaling with the number of binary features (synthetic, depth 5, reg 0.005)", "",
                  "| p | GOSDT s (converged) | SPLIT d_l=2 s | SPLIT d_l=3 s | speed-up d_l=2 | speed-up d_l=3 |",
                  "|---|---|---|---|---|---|"]
        for p in sorted({r["p"] for r in out["scaling"]}):
            rows = [r for r in out["scaling"] if r["p"] == p]
            g = _mean(rows, "GOSDT", "time")
            conv = sum(r["GOSDT"]["converged"] for r in rows)
            s2, s3 = _mean(rows, "SPLIT d_l=2", "time"), _mean(rows, "SPLIT d_l=3", "time")
            lines.append(f"| {p} | {g:.2f} ({conv}/{len(rows)}) | {s2:.3f} | {s3:.3f} | {g / s2:.0f}x | {g / s3:.0f}x |")
        lines.append("")
    if "resplit" in out:
        r = out["resplit"]
        lines += ["### RESPLIT vs TreeFARMS (breast_cancer)", "",
                  "| depth | reg | eps | p | trees RESPLIT | trees TreeFARMS | subset | max R / bound | RESPLIT s | "
                  "TreeFARMS s |", "|---|---|---|---|---|---|---|---|---|---|",
                  f"| {r['depth']} | {r['reg']} | {r['eps']} | {r['p']} | {r['n_resplit']} | {r['n_treefarms']} | "
                  f"{r['subset']} | {r['max_R']:.5f} / {r['bound']:.5f} | {r['t_resplit']:.3f} | {r['t_treefarms']:.2f} |", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sections", nargs="+", default=["gosdt", "lickety", "scaling", "resplit"],
                    choices=["gosdt", "lickety", "scaling", "resplit"])
    ap.add_argument("--datasets", nargs="+", default=list(TG_ESTIMATORS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--gosdt-cap", type=float, default=120.0)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--ps", nargs="+", type=int, default=[20, 30, 40, 50, 60, 80])
    ap.add_argument("--scaling-n", type=int, default=3000)
    ap.add_argument("--quick", action="store_true", help="one seed, GOSDT cap 30 s, fewer repeats")
    ap.add_argument("--json", default=None, help="also write the raw numbers to this file")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.gosdt_cap, args.repeats, args.ps = [0], 30.0, 5, [20, 40, 60]
    _warm_up()
    out: dict[str, Any] = {"depth": DEPTH, "reg": REG, "gosdt_cap": args.gosdt_cap}
    t0 = time.perf_counter()
    if "gosdt" in args.sections:
        print("[gosdt]", flush=True)
        out["gosdt"] = bench_gosdt(args.datasets, args.seeds, args.gosdt_cap)
    if "lickety" in args.sections:
        print("[lickety]", flush=True)
        out["lickety"] = bench_lickety(args.datasets, args.seeds, args.repeats)
    if "scaling" in args.sections:
        print("[scaling]", flush=True)
        out["scaling"] = bench_scaling(args.ps, args.seeds[:1] if not args.quick else [0], args.gosdt_cap,
                                       args.scaling_n)
    if "resplit" in args.sections:
        print("[resplit]", flush=True)
        out["resplit"] = bench_resplit(4, 0.01, 0.02)
    out["wall_s"] = time.perf_counter() - t0
    print()
    print(report(out))
    print(f"total wall time {out['wall_s']:.0f} s")
    if args.json:
        from trustlab.core.files import atomic_write_text

        atomic_write_text(args.json, json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
