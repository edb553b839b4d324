"""Benchmark: one FPO step (ours: top-4 replay, offline reference + feature caches) vs trl's DPOTrainer step.

Run (under the shared CPU lock): ``.venv/bin/python benchmarks/fpo.py [--steps 5] [--rounds 2] [--no-write]``.
Same model (SmolLM2-135M-Instruct, fp32), same generated pairs, LoRA r=8 / alpha=16 on q/k/v/o of the top 4
blocks, batch 8 pairs. trl 1.16's ``DPOTrainer`` runs with ``precompute_ref_log_probs=True`` (its cheapest
reference) and with its default online reference; trl has no FPO, so DPO is the nearest trl step (FPO adds
the SAE features and the feature term). Medians after a warm-up step, variants alternating (ABBA); the
machine is shared, so compare ratios. Writes the "FPO" section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

from trustlab.core.seeding import set_runtime_env

set_runtime_env()  # before torch: no busy-waiting on 2 shared cores, offline, no telemetry

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- fpo:start -->", "<!-- fpo:end -->"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_train import _pairs, _trl_steps  # noqa: E402  (one trl setup for every LLM benchmark)


def _fpo_steps(n_steps: int, seed: int = 0) -> list[float]:
    from trustlab.llm import PolicyForward, add_lora, load_model, train
    from trustlab.methods import fpo

    model, tok = load_model()
    data, pairs = _pairs(tok, 64, seed)
    pm = add_lora(model, layers="top4", r=8, alpha=16, random_state=seed)
    fwd = PolicyForward(pm, pairs.sequences, replay=4)
    sae, _ = fpo.train_sae(fpo.collect_activations(fwd), width=2048, k=32, steps=50, random_state=seed)
    obj = fpo.FPOObjective(fwd, pairs, sae, k=32)  # offline reference log-probs and features
    return train(pm, obj, steps=n_steps + 1, batch_size=8, lr=1e-4, random_state=seed).step_time[1:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    from trustlab.llm import load_tokenizer

    tok = load_tokenizer()
    data, _ = _pairs(tok, 64, 0)
    times: dict[str, list[float]] = {"ours FPO (replay, offline caches)": [], "trl DPO (precomputed ref)": [],
                                     "trl DPO (online ref)": []}
    for r in range(a.rounds):
        order = list(times) if r % 2 == 0 else list(times)[::-1]
        for name in order:
            if name.startswith("ours"):
                times[name] += _fpo_steps(a.steps)
            else:
                times[name] += _trl_steps(tok, data, a.steps, precompute="precomputed" in name)
            print(name, f"{statistics.median(times[name]):.3f} s", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    ours = med["ours FPO (replay, offline caches)"]
    lines = [START, "## FPO (issue 24)", "",
             "`benchmarks/fpo.py`: one optimizer step on SmolLM2-135M-Instruct (fp32, CPU, 1 thread), batch 8 pairs, "
             "LoRA r 8 on q/k/v/o of the top 4 blocks; median seconds after a warm-up step, "
             f"{a.rounds} alternating rounds of {a.steps} steps. trl has no FPO: DPO is its nearest step.", "",
             "| variant | median step (s) | trl / ours |", "|---|---|---|"]
    for k, v in med.items():
        lines.append(f"| {k} | {v:.3f} | {v / ours:.2f}x |")
    lines += ["", END]
    text = "\n".join(lines)
    print(text)
    if not a.no_write:
        from _docsection import write_section

        write_section(START, END, text)


if __name__ == "__main__":
    main()
