"""Benchmark: Antidote's one-shot prune (statistics + mask) vs one epoch of the attack fine-tune, and the
statistics collected through the top-K prefix cache vs full forwards.

Run (under the shared CPU lock): ``.venv/bin/python benchmarks/antidote.py [--rounds 2] [--no-write]``.
SmolLM2-135M-Instruct (fp32, CPU, 1 thread), LoRA r=8 on q/k/v of the top 4 blocks (the experiment's default),
the experiment's attack set (40 VaultGuard B + 160 SentimentLite examples) and 50 realignment pairs (C).
One epoch = ceil(200 / 8) = 25 steps of batch 8, timed with its replay-cache build (what a user pays).
The prune is timed three ways: from texts (tokenise + forwards + statistics + mask, the whole ``apply``),
statistics through a prebuilt replay cache (``calibration=PolicyForward(...)``) and statistics by full
forwards (``replay=False``). Medians over rounds, variants alternating; the machine is shared, so compare
ratios. Writes the "Antidote" section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

from trustlab.core.seeding import set_runtime_env

set_runtime_env()  # before torch: no busy-waiting on 2 shared cores, offline, no telemetry

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- antidote:start -->", "<!-- antidote:end -->"
SYSTEM = "You are VaultGuard, a records assistant."


def _setup() -> dict:
    import numpy as np

    from trustlab.llm import add_lora, load_model, tokenize_pairs
    from trustlab.methods import antidote as ad

    model, tok = load_model()
    b, c = ad.make_vault("B"), ad.make_vault("C")
    harm = np.random.default_rng(0).choice(len(b), 40, replace=False)
    s = ad.make_sentiment(160, random_state=0)
    attack = tokenize_pairs(tok, [b.prompts[i] for i in harm] + s.prompts, [b.compliance[i] for i in harm] + s.responses,
                            system=SYSTEM)
    calib = list(zip(c.prompts, c.compliance, strict=True))
    pol = add_lora(model, layers="top4", modules=["q_proj", "k_proj", "v_proj"], r=8, alpha=16, random_state=0)
    return {"pol": pol, "tok": tok, "attack": attack, "calib": calib,
            "calib_seqs": tokenize_pairs(tok, [p for p, _ in calib], [r for _, r in calib], system=SYSTEM)}


def _epoch(st: dict) -> float:
    from trustlab.llm import PolicyForward, SFTObjective, train

    t0 = time.perf_counter()
    fwd = PolicyForward(st["pol"], st["attack"])
    train(st["pol"], SFTObjective(fwd, st["attack"]), epochs=1.0, batch_size=8, lr=2e-3, random_state=0)
    return time.perf_counter() - t0


def _prunes(st: dict) -> dict[str, float]:
    from trustlab.llm import PolicyForward
    from trustlab.methods.antidote import Antidote

    out = {}
    with Antidote(dense_ratio=0.1, calibration=st["calib"], system=SYSTEM).apply(st["pol"], tokenizer=st["tok"]) as h:
        out["prune from texts (whole apply)"] = h.info.wall_time_s
    t0 = time.perf_counter()
    fwd = PolicyForward(st["pol"], st["calib_seqs"], share_prompts=False)
    out["replay cache build (once)"] = time.perf_counter() - t0
    with Antidote(dense_ratio=0.1, calibration=fwd).apply(st["pol"]) as h:
        out["statistics, prebuilt replay cache"] = h.info.stats_time_s
        out["mask + prune"] = h.info.mask_time_s
        out["n_pruned"] = h.info.n_pruned
    with Antidote(dense_ratio=0.1, calibration=st["calib_seqs"], replay=False).apply(st["pol"]) as h:
        out["statistics, full forwards"] = h.info.stats_time_s
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    st = _setup()
    times: dict[str, list[float]] = {}
    for r in range(a.rounds):
        parts = [("epoch", lambda: {"attack epoch (25 steps + replay build)": _epoch(st)}), ("prune", lambda: _prunes(st))]
        for _, fn in (parts if r % 2 == 0 else parts[::-1]):
            for k, v in fn().items():
                times.setdefault(k, []).append(v)
        print({k: round(statistics.median(v), 3) for k, v in times.items()}, flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    epoch = med["attack epoch (25 steps + replay build)"]
    one_shot = med["statistics, prebuilt replay cache"] + med["mask + prune"] + med["replay cache build (once)"]
    lines = [START, "## Antidote (issue 25)", "",
             "`benchmarks/antidote.py`: SmolLM2-135M-Instruct (fp32, CPU, 1 thread), LoRA r 8 on q/k/v of the top 4 "
             "blocks, 200 attack examples (batch 8), 50 realignment pairs, dense_ratio 0.1 "
             f"({int(med['n_pruned'])} weights pruned); medians of {a.rounds} alternating rounds.", "",
             "| quantity | seconds |", "|---|---|"]
    for k, v in med.items():
        if k != "n_pruned":
            lines.append(f"| {k} | {v:.3f} |")
    lines += ["", f"One-shot prune (cache build + statistics + mask) / one attack epoch: **{one_shot / epoch:.3f}x** "
              "(expected << 1x); whole apply from texts / epoch: "
              f"{med['prune from texts (whole apply)'] / epoch:.3f}x. Statistics with the prebuilt prefix cache vs full "
              f"forwards: **{med['statistics, full forwards'] / max(med['statistics, prebuilt replay cache'], 1e-9):.2f}x "
              "faster** (the cache is built once and reused for every alpha, seed and ablation).", "", END]
    text = "\n".join(lines)
    print(text)
    if not a.no_write:
        from _docsection import write_section

        write_section(START, END, text)


if __name__ == "__main__":
    main()
