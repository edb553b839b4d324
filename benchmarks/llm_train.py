"""Benchmark of the LLM fine-tuning layer on SmolLM2-135M-Instruct (CPU): replay vs full model, vs trl, memory.

Run (under the shared CPU lock): ``.venv/bin/python benchmarks/llm_train.py [--part all|steps|run] [--quick]
[--no-write]``. Prints a table and, once both parts are stored in ``--results``, replaces the "LLM
fine-tuning layer" section of ``docs/benchmarks.md``.

Measured, with LoRA r=8, alpha=16 on q/k/v/o of the top 4 of 30 blocks and DPO (beta 0.1) on generated
preference pairs (``trustlab.data.prefs``), batch 8 pairs:

1. one DPO optimizer step: top-4 replay vs the same LoRA through the full model (our trainer, same data),
   with the reference log-probs cached and computed online; target >= 5x;
2. our step vs trl's ``DPOTrainer`` (same model, data, LoRA config, batch; trl's own tokenisation): with
   replay target >= 3x faster, without replay within 1.2x; trl with its default online reference and with
   ``precompute_ref_log_probs=True``;
3. a 200-step DPO run on 400 pairs in a fresh process: wall time (target <= 5 min), held-out preference
   accuracy on 100 pairs whose facts are not in training, and the process's peak RSS (target <= 2 GB).

Step times are medians after warm-up, the compared variants alternating (ABBA) so load drift hits all of
them; the machine is shared, so compare ratios, not seconds.
"""

from __future__ import annotations

import os

from trustlab.core.seeding import set_runtime_env

set_runtime_env()  # before torch: no busy-waiting on 2 shared cores, offline, no telemetry

import argparse  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- llm-train:start -->", "<!-- llm-train:end -->"
TARGETS = {"replay_vs_full": 5.0, "replay_vs_trl": 3.0, "full_vs_trl": 1.2, "rss_gb": 2.0, "run_min": 5.0}
MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")


def _pairs(tok: Any, n: int, seed: int) -> tuple[Any, Any]:
    from trustlab.data.prefs import make_preferences
    from trustlab.llm import tokenize_preferences

    data = make_preferences(n, random_state=seed)
    return data, tokenize_preferences(tok, data.prompts, data.chosen, data.rejected)


def _our_steps(pm: Any, pairs: Any, n_steps: int, rounds: int) -> dict[str, list[float]]:
    """Per-step seconds of our trainer in four settings, alternating them round by round (ABBA)."""
    from trustlab.llm import PolicyForward, PreferenceObjective, ReferenceCache, train

    replay = PolicyForward(pm, pairs.sequences, replay=4)
    unshared = PolicyForward(pm, pairs.sequences, replay=4, share_prompts=False)
    full = PolicyForward(pm, pairs.sequences, replay=None)
    ref = ReferenceCache.compute(replay)
    objectives = {
        "replay, cached ref": PreferenceObjective(replay, pairs, reference=ref),
        "replay unshared, cached ref": PreferenceObjective(unshared, pairs, reference=ref),
        "full, cached ref": PreferenceObjective(full, pairs, reference=ref),
        "replay, online ref": PreferenceObjective(replay, pairs, reference="online"),
        "full, online ref": PreferenceObjective(full, pairs, reference="online"),
    }
    times: dict[str, list[float]] = {k: [] for k in objectives}
    order = list(objectives.items())
    for r in range(rounds):
        for name, obj in order if r % 2 == 0 else order[::-1]:
            h = train(pm, obj, steps=n_steps + 1, batch_size=8, lr=1e-4, random_state=r)
            times[name] += h.step_time[1:]  # the first step of each call warms up
    return times


def _trl_steps(tok: Any, data: Any, n_steps: int, precompute: bool, model: Any = None, bf16: bool = False) -> list[float]:
    """Per-step seconds of trl's DPOTrainer (fresh model, same LoRA config and batch, fp32 like ours).

    trl's configs default to ``bf16=True`` (mixed precision) even on CPU; ``bf16=True`` measures that.
    """
    import datasets
    import peft
    import transformers
    from trl import DPOConfig, DPOTrainer

    from trustlab.llm import load_model

    if model is None:
        model, _ = load_model()
    n_layers = model.config.num_hidden_layers
    ds = datasets.Dataset.from_dict({
        "prompt": [[{"role": "user", "content": p}] for p in data.prompts],
        "chosen": [[{"role": "assistant", "content": c}] for c in data.chosen],
        "rejected": [[{"role": "assistant", "content": r}] for r in data.rejected],
    })
    targets = [f"model.layers.{i}.self_attn.{m}" for i in range(n_layers - 4, n_layers) for m in MODULES]
    lora = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=targets, task_type="CAUSAL_LM")
    stamps: list[float] = []

    class Timer(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):  # noqa: ANN001
            stamps.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kw):  # noqa: ANN001
            stamps[-1] = time.perf_counter() - stamps[-1]

    with tempfile.TemporaryDirectory(prefix="trustlab-trl-") as out:
        cfg = DPOConfig(output_dir=out, per_device_train_batch_size=8, max_steps=n_steps + 1, learning_rate=1e-4,
                        beta=0.1, precompute_ref_log_probs=precompute, logging_steps=10**6, save_strategy="no",
                        report_to="none", use_cpu=True, seed=0, dataloader_num_workers=0, max_length=None,
                        disable_tqdm=True, bf16=bf16, fp16=False)
        trainer = DPOTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok, peft_config=lora,
                             callbacks=[Timer()])
        trainer.train()
    return stamps[1:]


def dpo_run(n_train: int = 400, n_test: int = 100, steps: int = 200, lr: float = 2e-4, seed: int = 0) -> dict:
    """A full DPO run as a user would write it (run in a fresh process by the benchmark)."""
    import numpy as np

    from trustlab.data.prefs import make_preferences
    from trustlab.llm import (
        PolicyForward,
        PreferenceObjective,
        ReferenceCache,
        add_lora,
        load_model,
        preference_accuracy,
        tokenize_preferences,
        train,
    )

    t0 = time.perf_counter()
    model, tok = load_model()
    t_load = time.perf_counter() - t0
    train_d, test_d = make_preferences(n_train + n_test, random_state=seed).split(n_test, random_state=seed)
    pairs = tokenize_preferences(tok, train_d.prompts, train_d.chosen, train_d.rejected)
    held = tokenize_preferences(tok, test_d.prompts, test_d.chosen, test_d.rejected)
    pm = add_lora(model, layers="top4", modules=MODULES, r=8, alpha=16, random_state=seed)
    t1 = time.perf_counter()
    obj = PreferenceObjective(pm, pairs, loss="dpo", beta=0.1)  # replay cache + reference cache
    held_fwd = PolicyForward(pm, held.sequences)
    held_ref = ReferenceCache.compute(held_fwd)
    t_cache = time.perf_counter() - t1

    def evaluate() -> dict[str, float]:
        return {"acc": preference_accuracy(held_fwd, held, reference=held_ref).accuracy}

    # the base model's own ranking of the held-out pairs (sum and mean log-prob), the bar DPO should clear
    s, n = held_ref.sum.numpy(), held_ref.n_tokens.numpy()
    k = held.n_pairs
    base_sum, base_mean = float(np.mean(s[:k] > s[k:])), float(np.mean(s[:k] / n[:k] > s[k:] / n[k:]))
    t2 = time.perf_counter()
    hist = train(pm, obj, steps=steps, batch_size=8, lr=lr, warmup_steps=10, eval_every=50, evaluate=evaluate)
    t_train = time.perf_counter() - t2
    return {"wall_s": time.perf_counter() - t0, "load_s": t_load, "cache_s": t_cache, "train_s": t_train,
            "median_step_s": hist.median_step_time(), "evals": hist.evals, "final_acc": hist.evals[-1]["acc"],
            "base_acc_sum": base_sum, "base_acc_mean": base_mean, "n_train": pairs.n_pairs, "n_test": held.n_pairs,
            "loss_first": hist.loss[0], "loss_last10": float(np.mean(hist.loss[-10:])),
            "train_acc_last10": float(np.mean(hist.metrics["accuracy"][-10:]))}


def load_only() -> dict:
    from trustlab.llm import load_model

    load_model()
    return {}


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def part_steps(quick: bool) -> dict:
    """Step times of our trainer (five settings) and of trl's DPOTrainer (two settings)."""
    from trustlab.llm import add_lora, load_model

    n_steps, rounds, n_pairs, trl_steps = (2, 2, 16, 1) if quick else (3, 3, 64, 3)
    model, tok = load_model()
    data, pairs = _pairs(tok, n_pairs, seed=1)
    pm = add_lora(model, layers="top4", modules=MODULES, r=8, alpha=16, random_state=0)
    _log("our steps")
    ours = _our_steps(pm, pairs, n_steps, rounds)
    del pm, model
    times = {**ours, **part_trl(tok, data, trl_steps)}
    seq_len = float(pairs.sequences.attention_mask.sum(1).float().mean())
    return {"times": times, "n_pairs": pairs.n_pairs, "seq_len": seq_len, "n_steps": n_steps, "rounds": rounds,
            "trl_steps": trl_steps}


def part_trl(tok: Any, data: Any, trl_steps: int) -> dict[str, list[float]]:
    """trl's DPOTrainer in fp32 (as ours), online and with precomputed reference log-probs."""
    _log("trl, online reference")
    online = _trl_steps(tok, data, trl_steps, precompute=False)
    _log("trl, precomputed reference")
    pre = _trl_steps(tok, data, trl_steps, precompute=True)
    return {"trl, online ref": online, "trl, precomputed ref": pre}


def part_run() -> dict:
    """The 200-step DPO run and a load-only baseline, each in a fresh process."""
    from trustlab.llm import measure_peak_rss

    _log("load-only baseline")
    base = measure_peak_rss(load_only)
    _log("200-step DPO run")
    run = measure_peak_rss(dpo_run)
    return {"base_peak_mb": base.peak_mb, "run_peak_mb": run.peak_mb, "run": run.value, "source": run.source}


def _rows(steps: dict | None, run: dict | None) -> list[tuple[str, str, str, str, str]]:
    rows: list[tuple[str, str, str, str, str]] = []
    if steps is not None:
        med = {k: statistics.median(v) for k, v in steps["times"].items()}

        def ratio(a: str, b: str, what: str, target: str) -> None:
            if a not in med or b not in med:
                return
            rows.append((what, f"{med[a]:.2f} s", f"{med[b]:.2f} s", f"{med[a] / med[b]:.2f}x", target))

        ratio("full, cached ref", "replay, cached ref",
              "DPO step, cached reference: full model (A) vs top-4 replay (B)", ">= 5x")
        ratio("full, cached ref", "replay unshared, cached ref",
              "  same, replay without prompt sharing (each pair's prompt twice, like the full model)", "(component)")
        ratio("full, online ref", "replay, online ref",
              "DPO step, online reference: full model (A) vs top-4 replay (B)", ">= 5x")
        ratio("trl, precomputed ref", "replay, cached ref",
              "trl DPOTrainer, precomputed ref (A) vs ours, replay (B)", ">= 3x")
        ratio("trl, online ref", "replay, cached ref",
              "trl DPOTrainer, its default online ref (A) vs ours, replay (B)", ">= 3x")
        ratio("trl, precomputed ref", "full, cached ref",
              "trl, precomputed ref (A) vs ours without replay (B)", ">= 1/1.2 = 0.83x")
        ratio("trl, online ref", "full, online ref",
              "trl, online ref (A) vs ours without replay, online ref (B)", ">= 0.83x")
        ratio("trl bf16 default, online ref", "full, online ref",
              "  trl with its own default precision on CPU (bf16 autocast; not like for like) vs ours, full",
              "(pitfall)")
    if run is not None:
        r = run["run"]
        rows.append(("200-step DPO run, 400 pairs (fresh process): total wall (train only)",
                     f"{r['wall_s'] / 60:.2f} min", f"{r['train_s'] / 60:.2f} min", "", "<= 5 min"))
        rows.append(("  of which: load / replay + reference caches / median step",
                     f"{r['load_s']:.1f} s", f"{r['cache_s']:.1f} s", f"{r['median_step_s']:.2f} s/step", ""))
        rows.append(("peak RSS: that DPO run (A) vs a process that only loads the model (B)",
                     f"{run['run_peak_mb'] / 1024:.2f} GB", f"{run['base_peak_mb'] / 1024:.2f} GB", "", "A <= 2 GB"))
        accs = ", ".join(f"{e['step']}: {e['acc']:.2f}" for e in r["evals"])
        rows.append((f"held-out preference accuracy ({r['n_test']} pairs, facts unseen in training) by step",
                     accs, "", "", "reported"))
        rows.append(("  base model's own ranking of those pairs (sum / mean log-prob)",
                     f"{r['base_acc_sum']:.2f}", f"{r['base_acc_mean']:.2f}", "", "reference point"))
        rows.append(("  training loss first step / mean of last 10; train-batch accuracy last 10",
                     f"{r['loss_first']:.3f}", f"{r['loss_last10']:.3f}", f"{r['train_acc_last10']:.2f}", ""))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--part", choices=("all", "steps", "trl", "run"), default="all",
                    help="run the step timings, the 200-step run, or both (each part alone fits a lock slot)")
    ap.add_argument("--results", default=str(Path(tempfile.gettempdir()) / "trustlab-llm-train-bench.json"),
                    help="JSON file the parts are stored in and the table is built from")
    ap.add_argument("--quick", action="store_true", help="a few steps only (smoke test; writes nothing)")
    ap.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = ap.parse_args()
    t_start = time.perf_counter()
    import json

    import torch

    import trustlab
    from trustlab.core.seeding import thread_settings

    store = Path(args.results)
    saved = json.loads(store.read_text()) if store.exists() and not args.quick else {}
    if args.part in ("all", "steps"):
        saved["steps"] = part_steps(args.quick)
    if args.part == "trl":  # re-measure trl only (same pairs as the stored step timings)
        from trustlab.llm import load_model

        tok = load_model().tokenizer
        data, _ = _pairs(tok, saved["steps"]["n_pairs"], seed=1)
        saved["steps"]["times"].update(part_trl(tok, data, saved["steps"]["trl_steps"]))
    if args.part in ("all", "run") and not args.quick:
        saved["run"] = part_run()
    th = thread_settings()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    saved.setdefault("env", {})[args.part] = (
        f"torch threads {th.get('torch_num_threads')}, load average at end {load:.1f}, "
        f"{time.perf_counter() - t_start:.0f} s")
    if not args.quick:
        store.write_text(json.dumps(saved, indent=1))
    steps, run = saved.get("steps"), saved.get("run")
    table = ["| measurement | A | B | ratio | target |", "|---|---:|---:|---:|---|"]
    table += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in _rows(steps, run)]
    text = "\n".join(table)
    env = (f"trustlab {trustlab.__version__}, torch {torch.__version__}, Python {platform.python_version()}, "
           f"{os.cpu_count()} CPUs, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
    if steps is not None:
        env += (f"; step timing on {steps['n_pairs']} pairs (mean sequence length {steps['seq_len']:.0f} tokens incl. "
                f"SmolLM2's default system prompt), ours {steps['rounds']} alternating rounds of {steps['n_steps']} "
                f"measured steps, trl {steps['trl_steps']} measured steps per setting")
    env += "; " + "; ".join(f"part {k}: {v}" for k, v in saved["env"].items())
    print(text)
    print(env)
    if steps is not None:
        print({k: [round(x, 3) for x in v] for k, v in steps["times"].items()})
    if not args.no_write and not args.quick and steps is not None and run is not None:
        write_section(text, env)


NOTES = """Reading the table (targets from issue 16):

- Our variants run the same `PreferenceObjective` on the same peft model and batches; only the
  `PolicyForward` differs: `replay=4` (default: a pair's chosen and rejected rows packed, the prompt once),
  `replay=4, share_prompts=False` (the replay gain alone) and `replay=None` (the HF forward). With LoRA only in the top 4 blocks the full-model
  backward already stops at block 26 (nothing below needs a gradient), so the full-model step is a 30-block
  forward plus a 4-block backward, while replay is a 4-block forward plus the same backward: the gain
  is bounded near (30 + b) / (4 + b) for a backward costing b blocks. An online reference adds a no-grad
  forward, 30 blocks vs 4, so its ratio is higher.
- trl 1.16 `DPOTrainer` gets the same model (a fresh load), the same pairs as conversations (trl applies
  the chat template itself), the same LoRA config and batch, `use_cpu=True` and fp32 (`bf16=False`: trl's
  configs default to bf16 mixed precision even on CPU, which on this machine made a step take minutes; that
  run is kept as the "pitfall" row); its step time is taken between `on_step_begin` and `on_step_end`
  (forward, backward, optimizer). On CPU trl's fused LM head has no Triton kernel and scores every
  position with the full vocabulary (and computes entropy, mean logits and top-1 flags), while ours
  scores only the response positions: that, not replay, is the gap in the no-replay rows.
- The 200-step run is `benchmarks/llm_train.py:dpo_run`, the code a user writes; its peak RSS is the
  high-water mark of a fresh process (`measure_peak_rss`, `VmHWM`), model load included."""


def write_section(table: str, env: str) -> None:
    body = (f"{START}\n## LLM fine-tuning layer\n\n`benchmarks/llm_train.py` on SmolLM2-135M-Instruct (fp32, CPU): "
            "DPO with LoRA r=8 on q/k/v/o of the top 4 of 30 blocks, batch 8 pairs of generated preference data. "
            "Medians after warm-up, compared variants alternating; compare the ratios, not the seconds (shared "
            f"2-core machine).\n\n{table}\n\nSetting: {env}. Regenerate with "
            f"`.venv/bin/python benchmarks/llm_train.py`.\n\n{NOTES}\n{END}")
    old = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    if START in old and END in old:
        new = old[: old.index(START)] + body + old[old.index(END) + len(END):]
    else:
        new = old.rstrip() + "\n\n" + body + "\n"
    DOC.write_text(new)


if __name__ == "__main__":
    main()
