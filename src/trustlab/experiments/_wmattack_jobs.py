"""Executor tasks of experiment ``wmattack`` (issue 46): one seed of the untuned paraphraser, one DPO seed.

The models stay where the task runs: :func:`load_generator` and :func:`load_oracle` load them once per process
(cached), so a worker loads them on its first task and the driver's own run shares them; a task is handed the
texts and the calibrated watermarks (small) and returns plain data (texts, flags, cosines, training numbers)
plus the names of the cache stages it found on disk. The cached generator is never modified: a DPO seed adapts
a copy of it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

#: what a task reads from the driver's state besides the models (texts and calibrated watermarks)
VIEW = ("eval", "surr_eval", "surr_eval_wm", "unigram_texts", "provider", "unigram")


@functools.lru_cache(maxsize=1)
def load_generator(model: str) -> tuple[Any, Any]:
    """The generator ``(model, tokenizer)`` by name (``"tiny"``: a seeded random 4-block llama), once per process."""
    from trustlab.llm import load_model, tiny_random_llama

    if model == "tiny":
        m, tok = tiny_random_llama(n_layers=4, n_ctx=1024)
    else:
        m, tok = load_model(model)
    m.eval()
    return m, tok


@functools.lru_cache(maxsize=1)
def load_oracle(ppl_model: str | None) -> Any:
    """MiniLM plus the perplexity model ``ppl_model`` (None: cosines only), once per process."""
    from trustlab.methods.wmattack import load_quality_oracle

    return load_quality_oracle(ppl_model)


def view(st: dict[str, Any]) -> dict[str, Any]:
    """What the tasks need of the driver's state (:data:`VIEW`)."""
    return {k: st[k] for k in VIEW}


def _state(cfg: Any, v: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    from trustlab.llm import cache_root
    from trustlab.methods import wmattack as W

    model, tok = load_generator(cfg.model)
    st = {**v, "model": model, "tok": tok, "oracle": load_oracle(cfg.ppl_model)}
    return st, W.StageCache(cache_root() if cfg.use_cache else None)


def base_job(cfg: Any, v: dict[str, Any], item: tuple[int, tuple[str, ...]]) -> tuple[dict[str, Any], list[str]]:
    """The untuned paraphraser with sampling seed ``seed`` on the sets ``sets`` (``item``)."""
    seed, sets = item
    st, cache = _state(cfg, v)
    key = [cfg.model, cfg.para_tokens, cfg.eval_temperature, seed, v["eval"], v["unigram_texts"], sets]
    evs = cache.get("base-paraphraser", key, lambda: paraphraser_sets(cfg, st, 0.0, seed, sets))
    return evs, cache.hits


def dpo_job(cfg: Any, v: dict[str, Any], pairs: Any, item: tuple[int, int]) -> tuple[dict[str, Any], list[str]]:
    """DPO seed number ``k`` (``item = (k, seed)``): train on ``pairs``, then paraphrase with the tuned model."""
    k, seed = item
    sets = ("eval", "surrogate") + (("unigram",) if k < cfg.transfer_seeds else ())
    st, cache = _state(cfg, v)
    key = [cfg.to_dict(), pairs.prompts, pairs.chosen, pairs.rejected, seed, v["eval"], v["surr_eval"],
           v["unigram_texts"], sets]

    def compute() -> dict[str, Any]:
        if cfg.steps == 0:  # the knockout: no training, the untuned paraphraser (same sampling seed)
            return untrained(cfg, st, seed, sets)
        return _train_and_paraphrase(cfg, st, pairs, k, seed, sets)

    return cache.get("dpo-seed", key, compute), cache.hits


def _train_and_paraphrase(cfg: Any, st: dict[str, Any], pairs: Any, k: int, seed: int,
                          sets: tuple[str, ...]) -> dict[str, Any]:
    """One DPO seed on a copy of the cached generator. As in the serial loop, the first seed's LoRA is added
    with its seed and a later seed's adapters (added with the first seed's) are re-initialised from its own
    seed (``reset_lora``), so every seed gets the state it had when the seeds ran one after another."""
    import copy
    import time

    from trustlab.llm import add_lora
    from trustlab.methods import wmattack as W

    model = copy.deepcopy(st["model"])
    if k > 0:
        model = add_lora(model, layers=cfg.lora_layers, r=cfg.lora_r, alpha=cfg.lora_alpha, random_state=cfg.seeds[0])
    t0 = time.perf_counter()
    tp = W.train_paraphraser(model, st["tok"], pairs, layers=cfg.lora_layers, r=cfg.lora_r, alpha=cfg.lora_alpha,
                             beta=cfg.beta, lr=cfg.lr, steps=cfg.steps, batch_size=cfg.batch_size, random_state=seed)
    st["policy"] = tp.model
    return {"train_s": time.perf_counter() - t0, "held_acc": tp.held_accuracy, "held_margin": tp.held_margin,
            "n_train": tp.n_train, "n_held": tp.n_held, "loss_first": float(tp.history.loss[0]),
            "loss_last": float(tp.history.loss[-1]),
            "step_s": tp.history.median_step_time(min(1, len(tp.history.loss) - 1)),
            "sets": {f"{r}": paraphraser_sets(cfg, st, r, seed, sets if r == 1.0 else ("eval",))
                     for r in (cfg.ratios if k == 0 else (1.0,))}}


def attack_eval(cfg: Any, st: dict[str, Any], attack: Any, texts: list[str], wms: list[Any], budget: float,
                 ppl: bool) -> dict[str, Any]:
    """Run ``attack`` on ``texts``; per output: detected under its watermark in ``wms``, cosine, perplexity."""
    out = attack.generate(list(texts), budget).outputs
    flagged = np.array([bool(w.detect([o], on_short="abstain").decisions[0]) for w, o in zip(wms, out, strict=True)])
    q = st["oracle"].score(texts, out, perplexity=ppl)
    return {"outputs": out, "flagged": flagged.tolist(), "cos": q.cosine.tolist(), "ppl": q.perplexity.tolist()}


def per_text(res: Any, method: str, dataset: str, seed: int, ev: dict[str, Any]) -> None:
    """Keep the per-text detection flags of a paraphraser (the paired confidence bounds of C3b and C4)."""
    by_set = res.summary.setdefault("per_text", {}).setdefault(method, {}).setdefault(dataset, {})
    by_set[str(seed)] = [int(bool(x)) for x in ev["flagged"]]


def paraphraser_sets(cfg: Any, st: dict[str, Any], ratio: float, seed: int, sets: tuple[str, ...]
                      ) -> dict[str, Any]:
    """The paraphraser (the tuned ``st["policy"]`` at adapter ``ratio``; ratio 0: the untuned model) with sampling
    seed ``1000 + seed`` on the named ``sets`` (eval, surrogate, unigram)."""
    from trustlab.methods import wmattack as W

    att = W.ParaphraseAttack(model=st["policy"] if ratio > 0 else st["model"], tokenizer=st["tok"],
                             temperature=cfg.eval_temperature, adapter_ratio=float(ratio) if ratio > 0 else 1.0,
                             batch_size=cfg.gen_batch, random_state=1000 + seed)
    data = {"eval": (st["eval"], [st["provider"]] * len(st["eval"])),
            "surrogate": (st["surr_eval"], st["surr_eval_wm"]),
            "unigram": (st["unigram_texts"], [st["unigram"]] * len(st["unigram_texts"]))}
    return {s: attack_eval(cfg, st, att, *data[s], cfg.para_tokens, ppl=s == "eval") for s in sets}


def untrained(cfg: Any, st: dict[str, Any], seed: int, sets: tuple[str, ...]) -> dict[str, Any]:
    """The knockout's stand-in for a DPO seed: the untuned paraphraser, no training numbers."""
    nan = float("nan")
    return {"train_s": 0.0, "held_acc": nan, "held_margin": nan, "n_train": 0, "n_held": 0, "loss_first": nan,
            "loss_last": nan, "step_s": nan, "sets": {"1.0": paraphraser_sets(cfg, st, 0.0, seed, sets)}}
