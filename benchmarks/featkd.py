"""Speed of FEAT-KD (issue 17). Not a test.

* ``fit``: FEAT-KD (choice B, the experiment's claim setting) is fitted on ``product_sine`` (n = 2000,
  80/20 split); then gplearn's ``SymbolicRegressor`` on y evolves one generation at a time (warm start) and
  its test R² is read after each generation until it reaches FEAT-KD's test R² (or ``--cap`` x FEAT-KD's
  fit time). Reported: the wall time each needed for that R² and the ratio (a lower bound when gplearn
  never got there).
* ``predict``: the exported formula (``export_numpy()``, numpy only) against the TabNet teacher's
  ``predict`` on ``--rows`` rows; medians of ``--repeats`` runs; the two must give the same FEAT-KD
  predictions as the fitted model.

Usage::

    python benchmarks/featkd.py [--repeats 5] [--rows 100000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings
from typing import Any

import numpy as np

from trustlab.core.threads import limit_threads
from trustlab.methods.featkd import FEATKDRegressor, make_formula_task


def _fit_race(seed: int, cap: float) -> dict[str, Any]:
    from gplearn.genetic import SymbolicRegressor
    from sklearn.metrics import r2_score

    task = make_formula_task("product_sine", 2000, random_state=seed)
    X, y = task.X, task.y
    perm = np.random.default_rng(10_000 + seed).permutation(len(X))
    tr, te = perm[400:], perm[:400]
    model = FEATKDRegressor(targets="step_contributions", max_epochs=80, patience=10, population_size=1000,
                            generations=20, n_threads=2, random_state=seed)
    t0 = time.perf_counter()
    model.fit(X[tr], y[tr])
    t_featkd = time.perf_counter() - t0
    r2_featkd = model.score(X[te], y[te])
    mu, sd = y[tr].mean(), y[tr].std()
    gp = SymbolicRegressor(population_size=1000, generations=1, parsimony_coefficient=0.001, init_depth=(2, 4),
                           function_set=("add", "sub", "mul", "div", "sqrt", "log", "sin", "cos"), metric="mse",
                           warm_start=True, n_jobs=1, random_state=seed)
    t0, gens, best, reached = time.perf_counter(), 0, -np.inf, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while time.perf_counter() - t0 < cap * t_featkd:
            gens += 1
            gp.set_params(generations=gens).fit(X[tr], (y[tr] - mu) / sd)
            best = r2_score(y[te], mu + sd * gp.predict(X[te]))
            if best >= r2_featkd:
                reached = time.perf_counter() - t0
                break
    t_gp = reached if reached is not None else time.perf_counter() - t0
    return {"seed": seed, "featkd_s": t_featkd, "featkd_r2": r2_featkd, "featkd_nodes": model.complexity_.n_nodes,
            "gplearn_s": t_gp, "gplearn_r2": float(best), "gplearn_generations": gens,
            "gplearn_reached": reached is not None, "ratio_gplearn_over_featkd": t_gp / t_featkd,
            "model": model, "X": X}


def _predict_race(model: FEATKDRegressor, rows: int, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    Xb = rng.uniform(-2, 2, size=(rows, model.n_features_in_))
    ns: dict[str, Any] = {}
    exec(model.export_numpy(), ns)  # noqa: S102 - our own generated source
    formula = ns["predict"]
    assert np.array_equal(formula(Xb), model.predict(Xb)), "exported formula differs from the model"
    Xs = ((Xb - model.x_mean_) / model.x_scale_).astype(np.float32)

    def timed(fn: Any) -> float:
        out = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return statistics.median(out)

    t_formula = timed(lambda: formula(Xb))
    t_teacher = timed(lambda: model.teacher_.predict(Xs))
    return {"rows": rows, "formula_s": t_formula, "teacher_s": t_teacher, "speedup": t_teacher / t_formula}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--cap", type=float, default=5.0, help="gplearn's time cap, in FEAT-KD fit times")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    with limit_threads(2):
        races = [_fit_race(s, args.cap) for s in args.seeds]
        pred = _predict_race(races[0]["model"], args.rows, args.repeats)
    for r in races:
        r.pop("model"), r.pop("X")
    out = {"fit": races, "predict": pred, "python": platform.python_version(), "machine": platform.machine()}
    for r in races:
        verdict = "reached" if r["gplearn_reached"] else "NOT reached (lower bound)"
        print(f"seed {r['seed']}: FEAT-KD {r['featkd_s']:.1f} s to R² {r['featkd_r2']:.4f} ({r['featkd_nodes']} nodes); "
              f"gplearn {r['gplearn_s']:.1f} s, {r['gplearn_generations']} generations, best R² {r['gplearn_r2']:.4f} "
              f"[{verdict}] -> ratio {r['ratio_gplearn_over_featkd']:.2f}x")
    print(f"predict {pred['rows']} rows: formula {pred['formula_s'] * 1e3:.2f} ms, TabNet {pred['teacher_s'] * 1e3:.1f} ms "
          f"-> {pred['speedup']:.0f}x")
    if args.json:
        from trustlab.core.files import atomic_write_text

        atomic_write_text(args.json, json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
