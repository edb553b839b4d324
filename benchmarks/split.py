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
    python benchmarks/split.py --json results.json                      # write the JSON there, docs untouched

Harness options (``benchmarks/_harness.py``): ``--json PATH``, ``--no-docs``, ``--render-only``. A default run writes
``docs/benchmarks_files/split.json`` and the ``split`` section of ``docs/benchmarks.md``. Single fits are timed
once (``bench.once``); LicketySPLIT's three variants alternate over ``--repeats`` rounds (``bench.rounds``: ABBA,
the C++ package's own fit timer).
"""

from __future__ import annotations

import sys
from pathlib import Path
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

sys.path.insert(0, str(Path(__file__).parent))
import _harness  # noqa: E402

NAME = "split"
DEPTH, REG = 5, 0.005
NOTES = """Every ratio is measured in the same run on the same binary matrix; a GOSDT run that hit its cap is counted
at the cap (so its speed-up is a lower bound). History: the full run before the harness (10-15 min) was not kept in
this file; the experiment's own numbers are in docs/papers/split.md."""


def _time_fit(bench: _harness.Bench, key: str, est: Any, X: np.ndarray, y: np.ndarray) -> tuple[Any, float]:
    _, dt = bench.once(key, lambda: est.fit(X, y))
    return est, dt


def _warm_up() -> None:
    rng = np.random.default_rng(0)
    X = (rng.random((64, 6)) < 0.5).astype(np.uint8)
    y = (X[:, 0] ^ X[:, 1]).astype(int)
    SPLITClassifier(depth_budget=3, lookahead_depth=2, binarize=False).fit(X, y)
    LicketySPLITClassifier(depth_budget=3, binarize=False).fit(X, y)


def bench_gosdt(bench: _harness.Bench, datasets: list[str], seeds: list[int], cap: float) -> list[dict[str, Any]]:
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
                est, dt = _time_fit(bench, f"gosdt {ds} seed {seed} {name}", est, Btr, ytr)
                row[name] = {"R": est.objective_, "time": dt, "acc": est.score(Bte, yte)}
            g = fit_gosdt(Btr, ytr, reg=REG, depth_budget=DEPTH, time_limit=cap)
            row["GOSDT"] = {"R": g.objective, "time": g.time_s if g.converged else max(g.time_s, cap),
                            "acc": float(np.mean(g.predict(Bte) == yte)), "converged": g.converged,
                            "lb": g.lower_bound}
            rows.append(row)
            print(f"  {ds} seed {seed}: p={row['p']} GOSDT {row['GOSDT']['time']:.2f}s "
                  f"(converged={g.converged}) SPLIT3 {row['SPLIT d_l=3']['time']:.3f}s", flush=True)
    return rows


def bench_lickety(bench: _harness.Bench, datasets: list[str], seeds: list[int], repeats: int) -> list[dict[str, Any]]:
    cfg = Config()
    rows = []
    for ds in datasets:
        for seed in seeds:
            Btr, _, ytr, _ = binary_split(ds, seed, cfg)
            last: dict[str, Any] = {}

            def fit(name: str, est: Any, Btr: np.ndarray = Btr, ytr: np.ndarray = ytr,
                    last: dict[str, Any] = last) -> float:
                last[name], dt = _time_fit_plain(est, Btr, ytr)
                return dt

            def pkg(Btr: np.ndarray = Btr, ytr: np.ndarray = ytr, last: dict[str, Any] = last) -> float:
                last["pkg"] = fit_licketysplit_package(Btr, ytr, reg=REG, depth_budget=DEPTH, lookahead_k=1)
                return last["pkg"].time_s

            t = bench.rounds({  # alternating, so load changes hit every variant alike
                "ours": lambda fit=fit: fit("ours", LicketySPLITClassifier(
                    depth_budget=DEPTH, reg=REG, completion="exact_last", binarize=False)),
                "paper": lambda fit=fit: fit("paper", LicketySPLITClassifier(depth_budget=DEPTH, reg=REG,
                                                                             binarize=False)),
                "pkg": pkg}, rounds=repeats, key=f"lickety {ds} seed {seed}")
            rows.append({"dataset": ds, "seed": seed, "p": Btr.shape[1], "R_ours": last["ours"].objective_,
                         "R_paper": last["paper"].objective_, "R_pkg": last["pkg"].objective,
                         "t_ours": t["ours"]["wall"], "t_paper": t["paper"]["wall"], "t_pkg": t["pkg"]["wall"]})
    return rows


def _time_fit_plain(est: Any, X: np.ndarray, y: np.ndarray) -> tuple[Any, float]:
    """A fit that returns its own seconds, for :meth:`_harness.Bench.rounds`."""
    import time

    t0 = time.perf_counter()
    est.fit(X, y)
    return est, time.perf_counter() - t0


def bench_scaling(bench: _harness.Bench, ps: list[int], seeds: list[int], cap: float, n: int) -> list[dict[str, Any]]:
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
                est, dt = _time_fit(bench, f"scaling p={p} seed {seed} {name}", SPLITClassifier(
                    depth_budget=DEPTH, lookahead_depth=dl, reg=REG, binarize=False), Bp, ytr)
                row[name] = {"R": est.objective_, "time": dt}
            g = fit_gosdt(Bp, ytr, reg=REG, depth_budget=DEPTH, time_limit=cap)
            row["GOSDT"] = {"R": g.objective, "time": g.time_s if g.converged else max(g.time_s, cap),
                            "converged": g.converged}
            rows.append(row)
            print(f"  scaling p={p} seed {seed}: GOSDT {row['GOSDT']['time']:.2f}s SPLIT2 "
                  f"{row['SPLIT d_l=2']['time']:.3f}s SPLIT3 {row['SPLIT d_l=3']['time']:.3f}s", flush=True)
    return rows


def bench_resplit(bench: _harness.Bench, depth: int, reg: float, eps: float) -> dict[str, Any]:
    cfg = Config()
    Btr, _, ytr, _ = binary_split("breast_cancer", 0, cfg)
    rs, t_rs = _time_fit(bench, "resplit", RESPLIT(depth_budget=depth, lookahead_depth=3, reg=reg, rashomon_mult=eps,
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


def run(bench: _harness.Bench, args: Any) -> None:
    _warm_up()
    out: dict[str, Any] = {"depth": DEPTH, "reg": REG, "gosdt_cap": args.gosdt_cap}
    if "gosdt" in args.sections:
        print("[gosdt]", flush=True)
        out["gosdt"] = bench_gosdt(bench, args.datasets, args.seeds, args.gosdt_cap)
    if "lickety" in args.sections:
        print("[lickety]", flush=True)
        out["lickety"] = bench_lickety(bench, args.datasets, args.seeds, args.repeats)
    if "scaling" in args.sections:
        print("[scaling]", flush=True)
        out["scaling"] = bench_scaling(bench, args.ps, args.seeds[:1] if not args.quick else [0], args.gosdt_cap,
                                       args.scaling_n)
    if "resplit" in args.sections:
        print("[resplit]", flush=True)
        out["resplit"] = bench_resplit(bench, 4, 0.01, 0.02)
    bench.put(**out)
    print()
    print(report(out), flush=True)


def render(result: dict[str, Any]) -> str:
    p = result["params"]
    head = ["## SPLIT / LicketySPLIT / RESPLIT speed (`split`)", "",
            f"`benchmarks/split.py --sections {' '.join(p['sections'])} --seeds {' '.join(map(str, p['seeds']))} "
            f"--gosdt-cap {p['gosdt_cap']:g} --repeats {p['repeats']}`{' (after --quick)' if p.get('quick') else ''}: "
            "depth 5, reg 0.005, the same binary matrix for every method.", ""]
    return "\n".join(head + [report(result["values"]), NOTES, "", _harness.setting_line(result)])


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--sections", nargs="+", default=["gosdt", "lickety", "scaling", "resplit"],
                    choices=["gosdt", "lickety", "scaling", "resplit"])
    ap.add_argument("--datasets", nargs="+", default=list(TG_ESTIMATORS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--gosdt-cap", type=float, default=120.0)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--ps", nargs="+", type=int, default=[20, 30, 40, 50, 60, 80])
    ap.add_argument("--scaling-n", type=int, default=3000)
    ap.add_argument("--quick", action="store_true", help="one seed, GOSDT cap 30 s, fewer repeats")
    a = ap.parse_args()
    if a.quick:
        a.seeds, a.gosdt_cap, a.repeats, a.ps = [0], 30.0, 5, [20, 40, 60]
    _harness.main(NAME, a, lambda b: run(b, a), render)
