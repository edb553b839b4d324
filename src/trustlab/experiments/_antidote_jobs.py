"""The independent units of experiment ``antidote`` as executor tasks (issue 46): the aligned model's evaluation
and every (lr, seed, defence) attack with its post-fine-tuning editors. A worker process builds the backbone,
the merged alignment and the attack LoRA's forward caches once (:func:`setup`, cached per config) and reuses
them across its tasks; each task starts from a freshly reset attack LoRA and returns plain records only."""

from __future__ import annotations

import functools
import time
from typing import Any


@functools.lru_cache(maxsize=1)
def setup(cfg: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The attack peft model on the merged alignment, its tokenizer, data and forward caches, and what the
    summary reports of them (sizes, alignment loss, load and setup seconds). Built under global RNGs seeded
    with the run's first seed, so every worker builds the same model whichever task asks first."""
    from trustlab.core.seeding import isolated_global_rng
    from trustlab.experiments import _antidote_steps as S
    from trustlab.llm import add_lora

    with isolated_global_rng(cfg.seeds[0]):
        t0 = time.perf_counter()
        model, tok = S.load(cfg)
        load_s = time.perf_counter() - t0
        data = S.make_data(cfg, tok)
        merged, hist = S.align(cfg, model, data)
        pol = add_lora(merged, layers=cfg.lora_layers, modules=list(cfg.modules), r=cfg.lora_r,
                       alpha=cfg.lora_alpha, random_state=cfg.seeds[0])
        st = {"pol": pol, "tok": tok, "data": data, "fw": S.forwards(cfg, pol, data)}
        info = {"data": data["sizes"], "alignment": {"final_loss": float(hist.loss[-1]), "steps": len(hist.loss)},
                "load_s": load_s, "setup_s": time.perf_counter() - t0}
    return st, info


def unit_job(cfg: Any, unit: tuple[str, float, int, str]) -> dict[str, Any]:
    """One unit ``(lr_name, lr, seed, defence)`` (a task of ``ctx.map``; defence ``"aligned"``: the aligned
    model itself): its records, generation examples and the worker's setup info. The backbone stays here."""
    from trustlab.experiments import _antidote_steps as S
    from trustlab.experiments.antidote import _defences, _record
    from trustlab.llm import reset_lora
    from trustlab.results.result import Result

    st, info = setup(cfg)
    res = Result("antidote", "", {})
    lr_name, lr, seed, defence = unit
    examples: dict[str, Any] = {}
    if defence == "aligned":
        reset_lora(st["pol"], cfg.seeds[0], name_order=True)
        _record(res, "aligned", "none", seed, S.evaluate(cfg, st["pol"], st["tok"], st["fw"], st["data"], gen=True))
        return {"records": res.records, "examples": examples, "setup": info}
    hist = S.attack(cfg, st["pol"], st["fw"], lr, seed, defence)
    gen = defence == "sft" and lr_name == "high"
    rec = S.evaluate(cfg, st["pol"], st["tok"], st["fw"], st["data"], gen=gen)
    rec.update(final_loss=float(hist.loss[-1]), step_time_s=hist.median_step_time(min(2, len(hist.loss) - 1)))
    if "_examples" in rec:
        examples[f"sft_{lr_name}_{seed}"] = rec["_examples"]
    _record(res, defence, lr_name, seed, rec)
    if defence == "sft":
        _defences(cfg, res, st, seed, lr_name)
    return {"records": res.records, "examples": examples, "setup": info}
