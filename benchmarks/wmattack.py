"""Benchmark (issue 27, "Performance"): watermark detection throughput, embed overhead per generated token vs
plain greedy generation, and the DPO step time of the paraphraser with top-K replay.

Run: ``OMP_NUM_THREADS=1 python benchmarks/wmattack.py [--quick]`` (``--json PATH`` (``--out`` is its old name) /
``--no-docs`` / ``--render-only``: the harness's options). Writes the "Adaptive watermark attacks" section of
``docs/benchmarks.md``.

Setting: SmolLM2-135M-Instruct and its tokenizer, 1 thread. Detection: 32 texts of 96 random token ids per
watermark, each timed call on a watermark with a new key (so KGW's green-list cache starts cold; the watermarks
are built outside the timing), tokens scored per second, median of 3 calls, the four watermarks alternating (ABBA).
Embed: ``generate_watermarked`` greedy on 8 prompts x ``new`` tokens (batch 8) with no watermark, KGW, Unigram,
EXP alternating (ABBA, median of ``repeats``); SynthID samples, so it is reported against sampled plain
generation (plain sampled: median of ``repeats``; SynthID: one run). The ratio is seconds per generated token
over the plain run's. DPO: ``train_paraphraser`` on 16 synthetic pairs (paraphrase prompts, ~60-token
responses), LoRA r=8 on the top 4 blocks (replay), batch 8, median step.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness  # noqa: E402

NAME = "wmattack"
WMS = ("kgw", "unigram", "exp", "synthid")
LABEL = {"kgw": "KGW", "unigram": "Unigram", "exp": "EXP", "synthid": "SynthID (transformers)"}


def _detect(bench: _harness.Bench, W, tok, key: int, n: int, length: int, repeats: int) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    rows = [rng.integers(0, len(tok), length).tolist() for _ in range(n)]
    fresh = {name: iter([W.make_watermark(name, tok, W.WatermarkKey(key + r)) for r in range(repeats)])
             for name in WMS}  # one new key per timed call
    bench.compare({name: (lambda it=it: next(it).detect_ids(rows)) for name, it in fresh.items()}, repeat=repeats,
                  warmup=0, key="detect")
    bench.put(detect_texts=n, detect_length=length, detect_repeats=repeats)


def _embed(bench: _harness.Bench, W, model, tok, new: int, repeats: int) -> None:
    prompts = W.text_prompts(8, random_state=3)
    calls = dict.fromkeys(("plain", "kgw", "unigram", "exp", "plain_sampled", "synthid"), 0)

    def gen(name: str):
        wm = None if name.startswith("plain") else W.make_watermark(name, tok, W.WatermarkKey(99))

        def fn() -> None:
            W.generate_watermarked(model, tok, prompts, wm, max_new_tokens=new, batch_size=8,
                                   do_sample=name in ("plain_sampled", "synthid"), random_state=calls[name])
            calls[name] += 1
        return fn

    bench.compare({k: gen(k) for k in ("plain", "kgw", "unigram", "exp")}, repeat=repeats, warmup=0, key="embed greedy")
    bench.compare({"plain_sampled": gen("plain_sampled")}, repeat=repeats, warmup=0, key="embed sampled")
    bench.once("embed synthid", gen("synthid"))
    bench.put(embed_tokens=8 * new, embed_new=new, embed_repeats=repeats)
    e = _embed_s(bench.result)
    for name in ("kgw", "unigram", "exp"):
        bench.print_ratio(f"embed {name} / plain greedy, s per token", e[name] / e["plain"], "<= 1.1x",
                          e[name] / e["plain"] <= 1.1)
    bench.print_ratio("embed synthid / plain sampled, s per token", e["synthid"] / e["plain_sampled"])


def _embed_s(r: dict[str, Any]) -> dict[str, float]:
    """Seconds per generated token of every embed variant."""
    t, n = r["timings"], r["values"]["embed_tokens"]
    out = {k: v["wall"] / n for k, v in {**t["embed greedy"], **t["embed sampled"]}.items()}
    out["synthid"] = t["embed synthid"]["once"]["wall"] / n
    return out


def _dpo(bench: _harness.Bench, W, model, tok, steps: int) -> None:
    src = [f"A short text number {i} about a town, its river and the people who live there." * 3 for i in range(16)]
    pairs = W.build_preference_pairs(src, [[s.replace("town", "city") * 1, s[::-1][:120]] for s in src],
                                     [[False, True]] * 16, [[0.9, 0.9]] * 16)
    tp, _ = bench.once("dpo train_paraphraser", lambda: W.train_paraphraser(
        model, tok, pairs, layers="top4", r=8, steps=steps + 1, batch_size=8, held_out=0.2, random_state=0))
    bench.put(dpo={"step_s": tp.history.median_step_time(1), "n_train_pairs": tp.n_train, "steps": steps,
                   "replay_k": tp.forward[0].k_top})
    tp.model.unload()
    print("dpo", bench.result["values"]["dpo"], flush=True)


def run(bench: _harness.Bench) -> None:
    from trustlab.llm import load_model
    from trustlab.methods import wmattack as W

    quick = bench.result["params"]["quick"]
    with _harness.threads(1):
        model, tok = load_model()
        model.eval()
        new, repeats = (32, 2) if quick else (64, 3)
        _detect(bench, W, tok, 1234, 32 if not quick else 16, 96, 3)
        _embed(bench, W, model, tok, new, repeats)
        _dpo(bench, W, model, tok, 4 if quick else 8)


def render(r: dict[str, Any]) -> str:
    v, d = r["values"], r["timings"]["detect"]
    e = _embed_s(r)
    tps = {k: v["detect_texts"] * v["detect_length"] / d[k]["wall"] for k in WMS}
    quick = " --quick" if r["params"]["quick"] else ""
    lines = ["## Adaptive watermark attacks (`wmattack`, issue 27)", "",
             f"`OMP_NUM_THREADS=1 python benchmarks/wmattack.py{quick}` (SmolLM2-135M-Instruct, 1 thread): "
             f"{v['detect_texts']} detection texts, {v['embed_new']} new tokens x {v['embed_repeats']} repeats for "
             f"embedding, {v['dpo']['steps']} timed DPO steps.", "",
             "| measurement | KGW | Unigram | EXP | SynthID (transformers) |", "|---|---|---|---|---|",
             f"| detection throughput, tokens/s ({v['detect_texts']} texts x {v['detect_length']} random ids, fresh "
             f"key, median of {v['detect_repeats']}) | " + " | ".join(f"{tps[k]:,.0f}" for k in WMS) + " |",
             f"| embed: seconds per generated token vs plain greedy generation (8 prompts x {v['embed_new']} tokens, "
             f"batch 8, median of {v['embed_repeats']}) | "
             + " | ".join(f"{e[k] / e['plain']:.2f}x" for k in ("kgw", "unigram", "exp"))
             + f" | {e['synthid'] / e['plain_sampled']:.2f}x (vs plain sampling; 1 run) |", "",
             f"Plain greedy generation: {1000 * e['plain']:.1f} ms per generated token (batch 8); plain sampling "
             f"{1000 * e['plain_sampled']:.1f} ms. Target: embed overhead <= 1.1x of plain greedy generation. "
             f"DPO step of the paraphraser with top-{v['dpo']['replay_k']} replay (LoRA r=8 on q/k/v/o of the top 4 "
             f"blocks, batch 8 pairs of ~90-token paraphrase prompts): **{v['dpo']['step_s']:.2f} s** median "
             f"({v['dpo']['n_train_pairs']} training pairs).", "", _harness.setting_line(r), "", NOTES]
    return "\n".join(lines)


NOTES = """Reading it: KGW detection is bound by one `torch.randperm` over the 49,152-token vocabulary per distinct
previous token (~0.65 ms each; a 512-entry cache helps on real text, where tokens repeat); Unigram is one table
lookup. Embed ratios under 1 mean the overhead is below this loaded machine's noise, not that watermarking is faster.
In the default experiment (25 pairs, ~250-token sequences) the paraphraser's DPO step took 5.6-6.1 s.

History (before the harness). `python benchmarks/wmattack.py --quick --out bench.json` (one CPU slot of the loaded
shared 2-core machine, 2026-12-01 18:48-18:54 UTC, git `bff644f`'s code; JSON in
`docs/papers/wmattack_files/bench_quick.json`): detection 1,559 / 521,248 / 2,633 / 9,323 tokens/s (KGW / Unigram /
EXP / SynthID); embed vs plain greedy KGW 1.09x, Unigram 1.16x, EXP 1.10x, SynthID 6.6x (vs plain sampling; 1 run);
plain greedy 22.1 ms per generated token. Unigram was measured at 1.16x with a per-step masked add (its two runs
6.7 / 6.4 s vs plain 5.7 / 5.7 s); after that its processor adds one precomputed bias row instead. Re-measured after
that change (same `--quick` command, at the merge of `wmattack`): embed KGW 0.94x, Unigram 0.87x, EXP 1.07x, SynthID
5.7x (vs sampling); detection 1,954 / 616,643 / 2,601 / 7,977 tokens/s; DPO step 4.66 s (two runs per variant: plain
7.1 / 6.6 s, Unigram 5.6 / 6.3 s); the 1.1x target held for KGW and Unigram within that noise. DPO step then: 4.6 s
median (13 training pairs)."""


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer tokens and repeats (a loaded machine)")
    ap.add_argument("--out", dest="json", default=None, help="old name of --json")
    _harness.main(NAME, ap.parse_args(), run, render)
