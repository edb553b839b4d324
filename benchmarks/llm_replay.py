"""Prefix replay vs the full model for a DPO step, in FLOPs and seconds; and the forward pass's throughput against
this machine's own fp32 GEMM peak (issue 45, two rows).

Run: ``python benchmarks/llm_replay.py [--pairs 64] [--rounds 3] [--steps 3]``. SmolLM2-135M-Instruct (fp32, CPU,
2 torch threads), DPO with LoRA r=8 on q/k/v/o of the top K blocks, batch 8 pairs of generated preference data
(the setting of ``benchmarks/llm_train.py``), reference log-probs cached. Per variant: median step seconds (the
variants alternate round by round, each round's first step is a warm-up), the FLOPs of a step counted by
``torch.utils.flop_counter.FlopCounterMode`` (matmuls and attention, forward + backward), hence GFLOP/s. The
arithmetic ratio full / replay bounds what replay can gain; the time ratio falls short of it by the replay's lower
GEMM efficiency.

Forward throughput: ``model(ids)`` under ``no_grad`` at three batch shapes, FLOPs counted the same way, against
the median of a 2048 x 2048 fp32 ``torch.mm`` at the same thread count in the same run (the machine's achievable
GEMM peak; the issue's "~190 GFLOP/s of 2 AVX2 cores" was another machine).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from trustlab.core.seeding import set_runtime_env  # noqa: E402

set_runtime_env()

import _harness  # noqa: E402

TARGET_REPLAY, TARGET_PEAK = 5.0, 0.5
SHAPES = ((16, 32), (8, 128), (4, 512))
FLOP_STEPS = 6


def replay_steps(bench: _harness.Bench, n_pairs: int, rounds: int, steps: int) -> None:
    from llm_train import MODULES, _pairs

    from trustlab.llm import PolicyForward, PreferenceObjective, ReferenceCache, add_lora, load_model, train

    model, tok = load_model()
    _, pairs = _pairs(tok, n_pairs, seed=1)
    rows = []
    for k in (4, 2):
        pm = add_lora(model, layers=f"top{k}", modules=MODULES, r=8, alpha=16, random_state=0)
        fwd = {"replay": PolicyForward(pm, pairs.sequences, replay=k),
               "full": PolicyForward(pm, pairs.sequences, replay=None)}
        ref = ReferenceCache.compute(fwd["replay"])
        objs = {name: PreferenceObjective(f, pairs, reference=ref) for name, f in fwd.items()}
        flops = {name: _harness.flops(lambda o=o, pm=pm: train(pm, o, steps=FLOP_STEPS, batch_size=8, lr=1e-4, random_state=0))
                 / FLOP_STEPS for name, o in objs.items()}  # the mean step: batches differ in length
        times: dict[str, list[float]] = {name: [] for name in objs}
        order = list(objs.items())
        for r in range(rounds):
            for name, o in order if r % 2 == 0 else order[::-1]:
                times[name] += train(pm, o, steps=steps + 1, batch_size=8, lr=1e-4, random_state=r).step_time[1:]
        med = {name: sorted(v)[len(v) // 2] for name, v in times.items()}
        row = {"k": k, "flops": flops, "step_s": med, "samples": times,
               "gflops_per_s": {n: flops[n] / med[n] / 1e9 for n in objs},
               "flop_ratio": flops["full"] / flops["replay"], "time_ratio": med["full"] / med["replay"]}
        rows.append(row)
        bench.print_ratio(f"top-{k} replay vs full model, DPO step (cached reference)", row["time_ratio"],
                          target=f">= {TARGET_REPLAY:g}x" if k == 4 else "", met=row["time_ratio"] >= TARGET_REPLAY
                          if k == 4 else None)
        print(f"  arithmetic ratio {row['flop_ratio']:.2f}x; GFLOP/s replay {row['gflops_per_s']['replay']:.0f}, "
              f"full {row['gflops_per_s']['full']:.0f}", flush=True)
        model = pm.unload()
    bench.put(replay=rows, seq_len=float(pairs.sequences.attention_mask.sum(1).float().mean()),
              n_pairs=pairs.n_pairs)


def throughput(bench: _harness.Bench) -> None:
    import torch

    from trustlab.llm import load_model

    model, _ = load_model()
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    gemm = bench.compare({"mm": lambda: a @ b}, repeat=10, warmup=2, key="sgemm 2048")["mm"]["wall"]
    peak = 2 * 2048**3 / gemm / 1e9
    g = torch.Generator().manual_seed(0)
    rows = []
    for bsz, t in SHAPES:
        ids = torch.randint(100, 40000, (bsz, t), generator=g)

        def fwd(ids: Any = ids) -> None:
            with torch.no_grad():
                model(ids, use_cache=False)

        flops = _harness.flops(fwd)
        wall = bench.compare({"forward": fwd}, repeat=5, warmup=1, key=f"forward {bsz}x{t}")["forward"]["wall"]
        rows.append({"batch": bsz, "tokens": t, "flops": flops, "wall": wall, "tok_per_s": bsz * t / wall,
                     "gflops_per_s": flops / wall / 1e9, "share_of_peak": flops / wall / 1e9 / peak})
        bench.print_ratio(f"forward {bsz}x{t}: {rows[-1]['gflops_per_s']:.0f} GFLOP/s of a {peak:.0f} GFLOP/s GEMM "
                          "peak; share", rows[-1]["share_of_peak"], target=f">= {TARGET_PEAK:g}",
                          met=rows[-1]["share_of_peak"] >= TARGET_PEAK)
    bench.put(gemm_peak_gflops=peak, forward=rows)


def run(bench: _harness.Bench) -> None:
    import torch

    args = bench.result["params"]
    with _harness.threads(2):
        torch.set_num_threads(2)
        throughput(bench)
        replay_steps(bench, args["pairs"], args["rounds"], args["steps"])


def render(r: dict[str, Any]) -> str:
    v = r["values"]
    lines = ["## LLM: prefix replay in FLOPs, and forward throughput (issue 45)", "",
             "`benchmarks/llm_replay.py`: SmolLM2-135M-Instruct, fp32, 2 torch threads. DPO step with LoRA r=8 on "
             f"q/k/v/o of the top K blocks, batch 8 of {v['n_pairs']} generated preference pairs (mean sequence "
             f"{v['seq_len']:.0f} tokens), cached reference; medians of alternating rounds; FLOPs counted by "
             "`FlopCounterMode` (forward + backward).", "",
             "| K | full model step | replay step | time ratio | FLOPs full / replay | arithmetic ratio | "
             "GFLOP/s full / replay | target |", "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in v["replay"]:
        s, f, g = row["step_s"], row["flops"], row["gflops_per_s"]
        tgt = (f">= {TARGET_REPLAY:g}x: **{'met' if row['time_ratio'] >= TARGET_REPLAY else 'missed'}**"
               if row["k"] == 4 else "(meaningful setting)")
        lines.append(f"| {row['k']} | {s['full']:.3f} s | {s['replay']:.3f} s | **{row['time_ratio']:.2f}x** | "
                     f"{f['full'] / 1e9:.0f} / {f['replay'] / 1e9:.1f} GFLOP | {row['flop_ratio']:.2f}x | "
                     f"{g['full']:.0f} / {g['replay']:.0f} | {tgt} |")
    k4 = next(row for row in v["replay"] if row["k"] == 4)
    eff = k4["gflops_per_s"]["replay"] / k4["gflops_per_s"]["full"]
    lines += ["", f"Top-4 replay runs at {100 * eff:.0f} % of the full model's GFLOP/s, so the time ratio is "
              f"{k4['flop_ratio']:.2f} x {eff:.2f} = {k4['flop_ratio'] * eff:.2f}x; {TARGET_REPLAY:g}x needs "
              f"replay at >= {100 * TARGET_REPLAY / k4['flop_ratio']:.0f} % of the full model's efficiency."]
    lines += ["", f"Forward throughput against this machine's fp32 GEMM peak, measured in the same run as "
              f"**{v['gemm_peak_gflops']:.0f} GFLOP/s** (2048 x 2048 `torch.mm`, 2 threads):", "",
              "| batch x tokens | tokens/s | GFLOP/s | share of the GEMM peak | target |", "|---|---:|---:|---:|---|"]
    for row in v["forward"]:
        met = "met" if row["share_of_peak"] >= TARGET_PEAK else "missed"
        lines.append(f"| {row['batch']} x {row['tokens']} | {row['tok_per_s']:.0f} | {row['gflops_per_s']:.0f} | "
                     f"{100 * row['share_of_peak']:.0f} % | >= 50 %: **{met}** |")
    lines += ["", _harness.setting_line(r), "", NOTES]
    return "\n".join(lines)


NOTES = """Where the time goes (cProfile of 6 top-4 replay steps, 2026-12-03, before and after the fix below):
before, a step took about 0.42 s: backward 0.20 s, the replayed blocks' linear layers 0.13 s, and **24 ms building
the packed-prompt attention mask**: transformers' `create_causal_mask` evaluates any custom `and_mask_function`
under four nested `torch.vmap`s, because it cannot know the function is index-based. Ours is, so
`trustlab.llm.prefix._restricted_mask` now builds the same mask by broadcasting (`use_vmap=False`; equal element
for element to transformers' mask for sdpa and eager, `tests/llm/test_prefix_scoring.py`). The same measurement
run just before and just after the change (load average about 1.5 both times): top-4 4.16x -> 4.60x, top-2
5.13x -> 7.55x (a fixed cost weighs more on the shorter step); the table above is a later run.

What bounds the top-4 ratio: the arithmetic ratio (the full model's 30-block forward over every pair's prompt
twice against a 4-block forward over the packed prompt once, plus the same LM head at response positions and a
4-block backward) times replay's GEMM efficiency relative to the full model's (smaller GEMMs: rank-8 LoRA
factors, a 4-block graph, ~900 packed tokens); see the efficiency line below the table. The margin is thin and
varies from run to run on this shared machine: the run just before the one in the table (the same timing code,
two minutes earlier) gave 4.49x with an arithmetic ratio of 6.85x counted on a single batch (it now averages six), so the
row is met in one run of two. What is left in a replay step after the fix is backward (~50 %), the blocks' linear
layers (~30 %), log-softmax, attention and peft's Python wrapper (~45 us per LoRA module call).
With fewer replayed blocks (K = 2) or an online reference (`benchmarks/llm_train.py`: 8.3x) the ratio is above 5x.

The forward pass of the full model (no_grad) is 79 % `aten::mm` by self CPU time (torch.profiler, 16 x 32); the
rest is eager elementwise work (RMSNorm's pow/mean/mul, rotary, SiLU) and attention."""


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--pairs", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    _harness.main("llm-replay", ap.parse_args(), run, render)
