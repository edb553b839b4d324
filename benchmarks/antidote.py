"""Benchmark: Antidote's one-shot prune (statistics + mask) vs one epoch of the attack fine-tune, and the
statistics collected through the top-K prefix cache vs full forwards.

Run (under the shared CPU lock): ``.venv/bin/python benchmarks/antidote.py [--rounds 2]`` (``--json PATH`` /
``--no-docs`` (``--no-write`` is its old name) / ``--render-only``: the harness's options).
SmolLM2-135M-Instruct (fp32, CPU, 1 thread), LoRA r=8 on q/k/v of the top 4 blocks (the experiment's default),
the experiment's attack set (40 VaultGuard B + 160 SentimentLite examples) and 50 realignment pairs (C).
One epoch = ceil(200 / 8) = 25 steps of batch 8, timed with its replay-cache build (what a user pays).
The prune is timed three ways: from texts (tokenise + forwards + statistics + mask, the whole ``apply``),
statistics through a prebuilt replay cache (``calibration=PolicyForward(...)``) and statistics by full
forwards (``replay=False``). Medians over rounds, the epoch and the prunes alternating (ABBA); the machine is
shared, so compare ratios. Writes the "Antidote" section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

from trustlab.core.seeding import set_runtime_env

set_runtime_env()  # before torch: no busy-waiting on 2 shared cores, offline, no telemetry

import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness  # noqa: E402

NAME = "antidote"
SYSTEM = "You are VaultGuard, a records assistant."
EPOCH = "attack epoch (25 steps + replay build)"
WHOLE = "prune from texts (whole apply)"
PARTS = ("replay cache build (once)", "statistics, prebuilt replay cache", "mask + prune", "statistics, full forwards")


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


def _prunes(st: dict, parts: dict[str, list[float]]) -> float:
    """The three prunes; their component seconds go to ``parts``; returns the whole apply's seconds."""
    from trustlab.llm import PolicyForward
    from trustlab.methods.antidote import Antidote

    with Antidote(dense_ratio=0.1, calibration=st["calib"], system=SYSTEM).apply(st["pol"], tokenizer=st["tok"]) as h:
        whole = h.info.wall_time_s
    t0 = time.perf_counter()
    fwd = PolicyForward(st["pol"], st["calib_seqs"], share_prompts=False)
    parts[PARTS[0]].append(time.perf_counter() - t0)
    with Antidote(dense_ratio=0.1, calibration=fwd).apply(st["pol"]) as h:
        parts[PARTS[1]].append(h.info.stats_time_s)
        parts[PARTS[2]].append(h.info.mask_time_s)
        parts["n_pruned"] = h.info.n_pruned
    with Antidote(dense_ratio=0.1, calibration=st["calib_seqs"], replay=False).apply(st["pol"]) as h:
        parts[PARTS[3]].append(h.info.stats_time_s)
    return whole


def run(bench: _harness.Bench) -> None:
    st = _setup()
    parts: dict[str, Any] = {k: [] for k in PARTS}
    with _harness.threads(1):
        bench.rounds({EPOCH: lambda: _epoch(st), WHOLE: lambda: _prunes(st, parts)},
                     rounds=bench.result["params"]["rounds"], key="antidote")
    bench.put(n_pruned=int(parts.pop("n_pruned")), parts=parts)
    med = _medians(bench.result)
    bench.print_ratio("one-shot prune / attack epoch", _one_shot(med) / med[EPOCH], "<< 1x")
    bench.print_ratio("statistics: full forwards / prebuilt replay cache",
                      _harness.ratio(med[PARTS[3]], med[PARTS[1]]))


def _medians(r: dict[str, Any]) -> dict[str, float]:
    med = {k: v["wall"] for k, v in r["timings"]["antidote"].items()}
    med.update({k: statistics.median(v) for k, v in r["values"]["parts"].items()})
    return med


def _one_shot(med: dict[str, float]) -> float:
    return med[PARTS[1]] + med[PARTS[2]] + med[PARTS[0]]


def render(r: dict[str, Any]) -> str:
    med = _medians(r)
    epoch, one_shot = med[EPOCH], _one_shot(med)
    lines = ["## Antidote (issue 25)", "",
             "`benchmarks/antidote.py`: SmolLM2-135M-Instruct (fp32, CPU, 1 thread), LoRA r 8 on q/k/v of the top 4 "
             "blocks, 200 attack examples (batch 8), 50 realignment pairs, dense_ratio 0.1 "
             f"({r['values']['n_pruned']} weights pruned); medians of {r['params']['rounds']} alternating rounds.", "",
             "| quantity | seconds |", "|---|---|"]
    lines += [f"| {k} | {med[k]:.3f} |" for k in (EPOCH, WHOLE, *PARTS)]
    lines += ["", f"One-shot prune (cache build + statistics + mask) / one attack epoch: **{one_shot / epoch:.3f}x** "
              f"(expected << 1x); whole apply from texts / epoch: {med[WHOLE] / epoch:.3f}x. Statistics with the "
              "prebuilt prefix cache vs full forwards: "
              f"**{med[PARTS[3]] / max(med[PARTS[1]], 1e-9):.2f}x faster** (the cache is built once and reused for "
              "every alpha, seed and ablation).", "", _harness.setting_line(r), "", NOTES]
    return "\n".join(lines)


NOTES = """History: the run before this section was generated by the harness (2 alternating rounds, 5472 weights
pruned) measured the attack epoch at 52.113 s, the whole apply from texts 15.554 s, the replay cache build 13.849 s,
statistics through the prebuilt cache 1.861 s, mask + prune 0.009 s and statistics by full forwards 11.569 s:
one-shot prune / epoch 0.302x, whole apply / epoch 0.298x, prebuilt cache vs full forwards 6.22x."""


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-write", dest="no_docs", action="store_true", help="old name of --no-docs")
    _harness.main(NAME, ap.parse_args(), run, render)
