"""Benchmark (issue 27, "Performance"): watermark detection throughput, embed overhead per generated token vs
plain greedy generation, and the DPO step time of the paraphraser with top-K replay.

Run: ``OMP_NUM_THREADS=1 python benchmarks/wmattack.py [--quick] [--out f.json]``.

Setting: SmolLM2-135M-Instruct and its tokenizer, 1 thread. Detection: 32 texts of 96 random token ids per
watermark (new keys, so KGW's green-list cache starts cold), tokens scored per second, median of 3 repeats.
Embed: ``generate_watermarked`` greedy on 8 prompts x ``--new`` tokens (batch 8) with no watermark, KGW,
Unigram, EXP (SynthID samples: reported against sampled plain generation); median of ``--repeats`` runs; the
ratio is seconds per generated token over the plain run's. DPO: ``train_paraphraser`` on 16 synthetic pairs
(paraphrase prompts, ~60-token responses), LoRA r=8 on the top 4 blocks (replay), batch 8, median step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def _detect(W, tok, key, n, length, repeats) -> dict:
    import numpy as np

    rng = np.random.default_rng(0)
    rows = [rng.integers(0, len(tok), length).tolist() for _ in range(n)]
    out = {}
    for name in ("kgw", "unigram", "exp", "synthid"):
        ts = []
        for r in range(repeats):
            wm = W.make_watermark(name, tok, W.WatermarkKey(key + r))
            t = time.perf_counter()
            wm.detect_ids(rows)
            ts.append(time.perf_counter() - t)
        out[name] = {"tokens_per_s": n * length / statistics.median(ts), "median_s": statistics.median(ts)}
        print("detect", name, out[name], flush=True)
    return out


def _embed(W, model, tok, new, repeats) -> dict:
    prompts = W.text_prompts(8, random_state=3)
    out = {}
    for name in ("plain", "kgw", "unigram", "exp", "plain_sampled", "synthid"):
        wm = None if name.startswith("plain") else W.make_watermark(name, tok, W.WatermarkKey(99))
        sample = name in ("plain_sampled", "synthid")
        ts = []
        for r in range(repeats if name != "synthid" else 1):
            t = time.perf_counter()
            W.generate_watermarked(model, tok, prompts, wm, max_new_tokens=new, batch_size=8, do_sample=sample,
                                   random_state=r)
            ts.append(time.perf_counter() - t)
        out[name] = {"s_per_token": statistics.median(ts) / (8 * new), "runs_s": ts}
        print("embed", name, out[name], flush=True)
    for name in ("kgw", "unigram", "exp"):
        out[name]["ratio_vs_plain"] = out[name]["s_per_token"] / out["plain"]["s_per_token"]
    out["synthid"]["ratio_vs_plain_sampled"] = out["synthid"]["s_per_token"] / out["plain_sampled"]["s_per_token"]
    return out


def _dpo(W, model, tok, steps) -> dict:
    src = [f"A short text number {i} about a town, its river and the people who live there." * 3 for i in range(16)]
    pairs = W.build_preference_pairs(src, [[s.replace("town", "city") * 1, s[::-1][:120]] for s in src],
                                     [[False, True]] * 16, [[0.9, 0.9]] * 16)
    tp = W.train_paraphraser(model, tok, pairs, layers="top4", r=8, steps=steps + 1, batch_size=8, held_out=0.2,
                             random_state=0)
    out = {"step_s": tp.history.median_step_time(1), "n_train_pairs": tp.n_train, "steps": steps,
           "replay_k": tp.forward[0].k_top}
    tp.model.unload()
    print("dpo", out, flush=True)
    return out


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer tokens and repeats (a loaded machine)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import torch

    from trustlab.llm import load_model
    from trustlab.methods import wmattack as W

    torch.set_num_threads(1)
    model, tok = load_model()
    model.eval()
    new, repeats = (32, 2) if args.quick else (64, 3)
    out = {"threads": torch.get_num_threads(), "quick": args.quick,
           "detect": _detect(W, tok, 1234, 32 if not args.quick else 16, 96, 3),
           "embed": _embed(W, model, tok, new, repeats), "dpo": _dpo(W, model, tok, 4 if args.quick else 8)}
    print(json.dumps(out, indent=1))
    if args.out:
        from trustlab.core.files import atomic_write_text

        atomic_write_text(args.out, json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
