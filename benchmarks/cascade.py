"""Cascade routing speed: vectorised decisions vs a per-query Python loop of the same policy.

Standalone: ``python benchmarks/cascade.py [--n 10000] [--loop 1000] [--json out.json]``. A synthetic
RouterBench-like table of ``n`` queries x 8 models (medium noise, separable estimates with per-run-set
variances), lambdas tuned by ``CascadeRouter`` at the middle budget of the grid on 1000 other rows, then
the full policy (up to 8 steps, pruning on, no max_depth) decided for every query: by the vectorised
engine (supermodel values computed per reached run-set for all its queries at once) and by the per-query
reference search on the first ``loop`` queries. Target (issue 21): >= 50x more decisions per second,
identical decisions. Also times the reference without the pruning lemma (the paper's ~5-9x).
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from trustlab.methods.cascade import (  # noqa: E402
    CascadeRouter,
    ConstantSearch,
    SyntheticNoiseEstimator,
    budget_grid,
    synthetic_table,
)
from trustlab.methods.cascade._engine import Engine  # noqa: E402
from trustlab.methods.cascade._reference import reference_decisions  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--loop", type=int, default=1000)
    ap.add_argument("--loop-no-prune", type=int, default=200)
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    k = args.models
    table = synthetic_table(args.n + 1000, k, random_state=0)
    est = SyntheticNoiseEstimator(noise="medium", random_state=0).estimate(table)
    tune, test = est.subset(np.arange(1000)), est.subset(np.arange(1000, args.n + 1000))
    policy = CascadeRouter(allow_in_sample=True, random_state=0, search=[ConstantSearch(n_iter=20)])
    policy.fit(tune.quality, tune.true_cost, estimates=tune)
    grid = budget_grid(test.quality.mean(0), test.true_cost.mean(0))
    budget = float(grid[len(grid) // 2])
    lambdas = policy.tune(budget).lambdas
    space, rows = policy.space_, np.arange(test.n)
    with threadpool_limits(2):
        t0 = time.perf_counter()
        vec = Engine(test, policy.samples_, cache=False).run_cr(space, lambdas, rows, prune=True, top_k=None)
        t_vec = time.perf_counter() - t0
        sub = test.subset(np.arange(args.loop))
        t0 = time.perf_counter()
        ref = reference_decisions(sub, policy.samples_, lambdas, depth=space.depth, rank=policy.rank_)
        t_loop = time.perf_counter() - t0
        small = test.subset(np.arange(args.loop_no_prune))
        t0 = time.perf_counter()
        ref_np = reference_decisions(small, policy.samples_, lambdas, depth=space.depth, rank=policy.rank_, prune=False)
        t_np = time.perf_counter() - t0
        t0 = time.perf_counter()
        ref_p = reference_decisions(small, policy.samples_, lambdas, depth=space.depth, rank=policy.rank_)
        t_p = time.perf_counter() - t0
    m = args.loop
    same = bool((vec.masks[:m] == ref.masks).all() and (vec.order[:m] == ref.order).all()
                and (vec.answer[:m] == ref.answer).all())
    same_np = bool((ref_np.masks == ref_p.masks).all() and (ref_np.answer == ref_p.answer).all())
    runs = vec.run(k).sum(1)
    out = {"n_queries": args.n, "n_models": k, "max_depth": space.depth, "budget": budget,
           "mean_models_run": float(runs.mean()), "max_models_run": int(runs.max()),
           "vectorised_s": t_vec, "vectorised_decisions_per_s": args.n / t_vec,
           "loop_queries": m, "loop_s": t_loop, "loop_decisions_per_s": m / t_loop,
           "speedup": (args.n / t_vec) / (m / t_loop), "identical_decisions": same,
           "loop_no_prune_queries": args.loop_no_prune, "loop_pruned_s": t_p, "loop_unpruned_s": t_np,
           "lemma_speedup_in_loop": t_np / t_p, "lemma_identical": same_np,
           "load_average": os.getloadavg()[0]}
    print(f"{args.n} queries x {k} models (max_depth {space.depth}), budget {budget:.3g}: "
          f"{out['mean_models_run']:.2f} models run per query on average (max {out['max_models_run']})")
    print(f"vectorised: {t_vec:.2f} s = {out['vectorised_decisions_per_s']:.0f} decisions/s")
    print(f"per-query loop ({m} queries): {t_loop:.2f} s = {out['loop_decisions_per_s']:.1f} decisions/s")
    print(f"speed-up {out['speedup']:.0f}x; identical decisions on the {m} looped queries: {same}")
    print(f"pruning lemma in the loop ({args.loop_no_prune} queries): {t_np:.2f} s without vs {t_p:.2f} s with "
          f"= {out['lemma_speedup_in_loop']:.1f}x; identical: {same_np}; load average {out['load_average']:.1f}")
    if args.json:
        from trustlab.core.files import atomic_write_text

        atomic_write_text(args.json, json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
