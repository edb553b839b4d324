"""Benchmark: training-step time of a ReFT intervention at a late block (replay) vs layer 0 (full backward),
and the trainable-parameter count of each arm vs LoRA (issue 26, "Performance").

Run: ``OMP_NUM_THREADS=1 python benchmarks/dint.py [--steps 6] [--train-steps 0] [--out f.json]``.

Setting: SmolLM2-135M-Instruct, ArithLite prompts (chat template), batch 8, rank 8 at f4+l4. Timed: the median
optimizer step of ``fit_intervention`` (after one warm-up step) for LoReFT and D-ReFT at layer 0 and at block
27, and of LoRA r=8 on q_proj/v_proj of every block (peft via ``trustlab.llm.add_lora``, the PEFT reference)
with the same trainer. With ``--train-steps N`` each arm also trains N steps and reports its exact match on
100 test problems, so the parameter counts can be read at the accuracy each reaches.
"""

from __future__ import annotations

import argparse
import json
import time


def _lora(model, tok, train, test, steps, train_steps):
    from trustlab.llm import SFTObjective, add_lora
    from trustlab.llm import train as train_fn
    from trustlab.methods.dint import InterventionEvaluator, tokenize_task

    peft = add_lora(model, layers="all", modules=["q_proj", "v_proj"], r=8, alpha=16, random_state=0)
    obj = SFTObjective(peft, tokenize_task(model, train, tok), replay=None)
    h = train_fn(peft, obj, steps=steps + 1, batch_size=8, lr=4e-4, random_state=0)
    out = {"n_params": h.n_trainable, "step_s": h.median_step_time(1)}
    if train_steps:
        train_fn(peft, obj, steps=train_steps, batch_size=8, lr=4e-4, random_state=1)
        out["accuracy"] = InterventionEvaluator(peft, tok, replay=False).accuracy(test)[0]
    peft.unload()
    return out


def _write(out: dict, path: str | None) -> None:
    """Write what has been measured so far (each arm as it finishes: a run cut short keeps its numbers)."""
    if path:
        from trustlab.core.files import atomic_write_text

        atomic_write_text(path, json.dumps(out, indent=1))


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--train-steps", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import torch

    from trustlab.llm import load_model
    from trustlab.methods.dint import DReFT, InterventionEvaluator, LoReFT, arith_lite, fit_intervention

    t = time.perf_counter()
    model, tok = load_model()
    out: dict = {"threads": torch.get_num_threads(), "load_s": time.perf_counter() - t, "arms": {}}
    train, test = arith_lite(64, random_state=0), arith_lite(100, split="test", random_state=1000)
    ev = InterventionEvaluator(model, tok, batch_size=25)
    if args.train_steps:
        out["zero_shot_accuracy"] = ev.accuracy(test)[0]
        print("zero-shot accuracy", out["zero_shot_accuracy"], flush=True)
    for name, cls, layer in (("loreft@27", LoReFT, 27), ("dreft@27", DReFT, 27), ("loreft@0", LoReFT, 0),
                             ("dreft@0", DReFT, 0)):
        iv = cls(layer=layer, rank=8, random_state=0)
        t = time.perf_counter()
        fit = fit_intervention(model, iv, train, tok, steps=args.steps + 1, batch_size=8, lr=3e-3)
        rec = {"n_params": fit.n_params, "step_s": fit.history.median_step_time(1), "fit_wall_s": time.perf_counter() - t}
        if args.train_steps:
            fit_intervention(model, iv, train, tok, steps=args.train_steps, batch_size=8, lr=3e-3, random_state=1)
            rec["accuracy"] = ev.accuracy(test, iv, inference="mean" if cls is DReFT else None)[0]
        out["arms"][name] = rec
        print(name, rec, flush=True)
        _write(out, args.out)
    out["arms"]["lora_qv_all_r8"] = _lora(model, tok, train, test, args.steps, args.train_steps)
    a = out["arms"]
    out["ratio_step_layer0_vs_late_loreft"] = a["loreft@0"]["step_s"] / a["loreft@27"]["step_s"]
    out["ratio_step_layer0_vs_late_dreft"] = a["dreft@0"]["step_s"] / a["dreft@27"]["step_s"]
    out["ratio_params_lora_vs_loreft"] = a["lora_qv_all_r8"]["n_params"] / a["loreft@0"]["n_params"]
    print(json.dumps(out, indent=1))
    _write(out, args.out)
    return out


if __name__ == "__main__":
    main()
