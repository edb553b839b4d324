"""Cascade routing speed: vectorised decisions vs a per-query Python loop of the same policy (issues 21, 45).

Run: ``python benchmarks/cascade.py [--n 10000] [--loop 1000] [--repeat 5]``. A synthetic RouterBench-like table
of ``n`` queries x 8 models (medium noise, separable estimates with per-run-set variances), lambdas tuned by
``CascadeRouter`` at the middle budget of the grid on 1000 other rows, then the full policy (up to 8 steps,
pruning on, no max_depth) decided for every query by the vectorised engine (``Engine.run_cr``, the pruned
step of ``_lazy.py``) and for the first ``loop`` queries by the per-query reference search (``_reference.py``).
The two are timed alternately (``bench.compare``, medians) and compared in decisions per second; the decisions
on the looped queries must be identical. Also times the reference without the pruning lemma (the paper's ~5-9x)
and records a cProfile of one vectorised run (``--profile``, on by default). Target (issue 21): >= 50x.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import _harness  # noqa: E402

TARGET = 50.0


def _profile(fn: Any, top: int = 8) -> list[dict[str, Any]]:
    """The ``top`` functions of one call of ``fn`` by own time (cProfile), as JSON rows."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    st = pstats.Stats(prof)
    total = sum(v[2] for v in st.stats.values())  # type: ignore[attr-defined]
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:top]  # type: ignore[attr-defined]
    return [{"function": f"{Path(f).name}:{ln}({name})", "calls": int(v[1]), "tottime_s": float(v[2]),
             "share": float(v[2] / total)} for (f, ln, name), v in rows] + [{"function": "total", "tottime_s": total}]


def run(bench: _harness.Bench) -> None:
    import numpy as np

    from trustlab.methods.cascade import (
        CascadeRouter,
        ConstantSearch,
        SyntheticNoiseEstimator,
        budget_grid,
        synthetic_table,
    )
    from trustlab.methods.cascade._engine import Engine
    from trustlab.methods.cascade._reference import reference_decisions

    p = bench.result["params"]
    n, k, m = p["n"], p["models"], p["loop"]
    table = synthetic_table(n + 1000, k, random_state=0)
    est = SyntheticNoiseEstimator(noise="medium", random_state=0).estimate(table)
    tune, test = est.subset(np.arange(1000)), est.subset(np.arange(1000, n + 1000))
    policy = CascadeRouter(allow_in_sample=True, random_state=0, search=[ConstantSearch(n_iter=20)])
    policy.fit(tune.quality, tune.true_cost, estimates=tune)
    grid = budget_grid(test.quality.mean(0), test.true_cost.mean(0))
    budget = float(grid[len(grid) // 2])
    lambdas = policy.tune(budget).lambdas
    space, rows, Z, rank = policy.space_, np.arange(test.n), policy.samples_, policy.rank_
    sub, small = test.subset(np.arange(m)), test.subset(np.arange(p["loop_no_prune"]))
    out: dict[str, Any] = {}

    def vec() -> None:  # a fresh engine: nothing cached from a previous call
        out["vec"] = Engine(test, Z, cache=False).run_cr(space, lambdas, rows, prune=True, top_k=None)

    def loop() -> None:
        out["ref"] = reference_decisions(sub, Z, lambdas, depth=space.depth, rank=rank)

    with _harness.threads(p["threads"]):
        t = bench.compare({"vectorised": vec, "loop": loop}, repeat=p["repeat"], warmup=1, key="decisions")
        lemma = bench.compare({
            "loop_unpruned": lambda: out.__setitem__("np", reference_decisions(
                small, Z, lambdas, depth=space.depth, rank=rank, prune=False)),
            "loop_pruned": lambda: out.__setitem__("p", reference_decisions(small, Z, lambdas, depth=space.depth,
                                                                            rank=rank))},
            repeat=1, warmup=0, key="lemma")
        profile = _profile(vec) if p["profile"] else []
    v, r = out["vec"], out["ref"]
    same = bool((v.masks[:m] == r.masks).all() and (v.order[:m] == r.order).all() and (v.answer[:m] == r.answer).all())
    same_np = bool((out["np"].masks == out["p"].masks).all() and (out["np"].answer == out["p"].answer).all())
    runs = v.run(k).sum(1)
    vec_rate, loop_rate = n / t["vectorised"]["wall"], m / t["loop"]["wall"]
    ratio = vec_rate / loop_rate
    bench.put(n_queries=n, n_models=k, max_depth=space.depth, budget=budget, mean_models_run=float(runs.mean()),
              max_models_run=int(runs.max()), vectorised_decisions_per_s=vec_rate, loop_decisions_per_s=loop_rate,
              speedup=ratio, met=ratio >= TARGET, identical_decisions=same,
              lemma_speedup_in_loop=lemma["loop_unpruned"]["wall"] / lemma["loop_pruned"]["wall"],
              lemma_identical=same_np, profile=profile)
    print(f"{n} queries x {k} models (max_depth {space.depth}), budget {budget:.3g}: {runs.mean():.2f} models run "
          f"per query on average (max {runs.max()})", flush=True)
    print(f"vectorised {vec_rate:,.0f} decisions/s, per-query loop ({m} queries) {loop_rate:,.1f} decisions/s; "
          f"identical decisions: {same}", flush=True)
    bench.print_ratio("decisions per second, vectorised / loop", ratio, f">= {TARGET:g}x", ratio >= TARGET)


def render(r: dict[str, Any]) -> str:
    v, p, t = r["values"], r["params"], r["timings"]
    tv, tl = t["decisions"]["vectorised"], t["decisions"]["loop"]
    lu, lp = t["lemma"]["loop_unpruned"]["wall"], t["lemma"]["loop_pruned"]["wall"]
    met = "met" if v["met"] else "missed"
    lines = ["## Cascade routing", "",
             f"`benchmarks/cascade.py` (issues 21, 45): {v['n_queries']:,} test queries x {v['n_models']} models of "
             "a synthetic RouterBench-like table (medium noise), lambdas tuned by `CascadeRouter` at the middle "
             f"budget of the grid on 1,000 other rows, then the full policy (up to {v['max_depth']} steps, pruning "
             f"on) decided for every query ({v['mean_models_run']:.2f} models run per query on average, at most "
             f"{v['max_models_run']}), on {p['threads']} threads. The engine and the loop are timed alternately, "
             f"{p['repeat']} times each after a warm-up (medians; the loop on the first {p['loop']:,} queries).", "",
             "| measurement | vectorised engine | per-query loop (`_reference.py`) | ratio | target |",
             "|---|---:|---:|---:|---|",
             f"| CascadeRouter decisions per second | {v['vectorised_decisions_per_s']:,.0f} /s ({v['n_queries']:,} "
             f"in {_harness.fmt_s(tv['wall'])}, {_harness.fmt_s(tv['min_wall'])}-{_harness.fmt_s(tv['max_wall'])}) "
             f"| {v['loop_decisions_per_s']:,.0f} /s ({p['loop']:,} in {_harness.fmt_s(tl['wall'])}) "
             f"| **{v['speedup']:.0f}x** | >= {TARGET:g}x: **{met}** |",
             f"| identical decisions on the {p['loop']:,} looped queries | | | "
             f"{'yes' if v['identical_decisions'] else 'NO'} | identical |",
             f"| pruning lemma inside the loop ({p['loop_no_prune']} queries): without vs with | | "
             f"{_harness.fmt_s(lu)} vs {_harness.fmt_s(lp)} | {v['lemma_speedup_in_loop']:.1f}x "
             f"({'identical' if v['lemma_identical'] else 'DIFFERENT'} decisions) | paper ~5-9x |", "",
             f"{TARGET:g}x at this run's loop speed ({v['loop_decisions_per_s']:,.0f} decisions/s) needs the "
             f"{v['n_queries']:,} queries in {_harness.fmt_s(v['n_queries'] / (TARGET * v['loop_decisions_per_s']))};"
             f" the engine took {_harness.fmt_s(tv['wall'])} ({tv['wall'] * TARGET * v['loop_decisions_per_s'] / v['n_queries']:.2f}x that)."]
    if v.get("profile"):
        tot = v["profile"][-1]["tottime_s"]
        lines += ["", f"cProfile of one vectorised run in this benchmark (own time, {tot:.2f} s in all; numpy's "
                  "element-wise kernels are counted in the Python function that calls them):", "",
                  "| function | calls | own time | share |", "|---|---:|---:|---:|"]
        lines += [f"| `{row['function']}` | {row['calls']:,} | {_harness.fmt_s(row['tottime_s'])} | "
                  f"{100 * row['share']:.0f} % |" for row in v["profile"][:-1]]
    lines += ["", NOTES, "", _harness.setting_line(r)]
    return "\n".join(lines)


NOTES = """Where the time went, and the fix (issue 45). **Before** (commit 56cbcfd; the old script's run on this
machine: 1.69 s for the 10,000 queries, 2.62 s for 1,000 loop queries, 16x; 28x in the issue's run):
`line_profiler` on one `Engine.run_cr` (1.27 s unprofiled) put 80 % of the time in the per-run-set pruned pass
`_pruned_chunk`, and within it the running `maximum` of a gathered block of samples (30 %), the sample means (20 %),
finding the added model by `flatnonzero` (7 %), the lemma test (8 %), compressions (7 %) and building the samples
array (7 %); the other 20 % went to the step's dense `(queries, 256 supermodels)` arrays after the pass (costs
gathered per step 7 %, trade-offs, masks and the tie-broken arg-max 12 %). The pass evaluated 1.88 million
(query, supermodel) pairs of 128 samples beyond the roots, 1.49 million of which the lemma then dropped.
**Fix** (`_lazy.py`): (1) a *submodularity skip*: the sample mean of a maximum is submodular, so the gain of a model
on a set is at most its gain on each subset one model smaller; where such a smaller candidate (evaluated one
level earlier) failed the lemma by more than a rounding margin, the larger one is dropped unevaluated (the
per-query search evaluates it, then drops it): 0.75 million pairs evaluated instead of 1.88 million, of which
the 0.38 million kept are needed; (2) the trade-offs are kept per chunk of queries, no step-wide dense arrays;
(3) each model's samples are built once per chunk by one contiguous addition (a broadcast over rows of 128 costs
1.7x as much) and gathered for the queries a candidate needs, the running maximum taken in place; (4) summed
costs memoised (a mask's sum is its sum without its last model plus that model's cost: the same additions in
the same order, bit-identical; 13 ms instead of 106 ms for 10,000 x 256); (5) the skip's flags stored per
candidate, so a test reads one row. Decisions: identical to the old engine on all 10,000 queries and to the
per-query reference on the looped ones (checked here and by the cascade tests, which include chunked runs with
and without uncertainty). **After**: `line_profiler` on one run (0.62 s with its overhead): gathers and running
maxima 17 %, compressions of the surviving and not-skipped queries 16 %, building the samples 14 %, sample sums
8 %, the pick and the trade-off stores 10 %, roots 4 %, the cost table and tiling 3 %; the other ~29 % is Python
around ~6,500 (chunk, candidate) visits. With 32 samples instead of 128 the same run takes 0.25 s instead of
0.52 s, so about 0.36 s scales with the samples (memory traffic over 128-sample blocks: at one gather, one
maximum and one sum per pair this is the kernel floor of this search) and 0.16 s does not. **Why >= 50x is missed**: the line under the
first table gives the time 50x needs at this run's loop speed; the sample-proportional floor plus the
per-candidate Python above exceed it, and nothing else tried brought the engine under it. Tried and not kept: a closed-form (sorted-sample) gain for candidates whose parent is one model, which cut the
evaluated pairs from 0.75 to 0.55 million but not the time (0.527 vs 0.521 CPU s, medians of 5 alternated runs);
chunks of 256 to 1,024 queries time the same, 2,048 and more are slower (cache). The ratio also moves with the
loop's own speed, between 286 and 472 decisions/s across runs on this shared machine."""


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--loop", type=int, default=1000)
    ap.add_argument("--loop-no-prune", type=int, default=200)
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-profile", dest="profile", action="store_false")
    _harness.main("cascade", ap.parse_args(), run, render)
