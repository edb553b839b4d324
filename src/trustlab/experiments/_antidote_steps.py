"""The stages of experiment ``antidote`` (kept apart to keep each module short): data, the alignment LoRA
(merged), the attack LoRA, the defences and the evaluations. Every stage uses public method / llm APIs."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.methods import antidote as ad


def load(cfg: Any) -> tuple[Any, Any]:
    from trustlab.llm import load_model, tiny_random_llama

    if cfg.model == "tiny":
        return tiny_random_llama(n_layers=4)
    return load_model(cfg.model)


def _pairs(tok: Any, prompts: list[str], responses: list[str], system: str) -> Any:
    from trustlab.llm import tokenize_pairs

    return tokenize_pairs(tok, prompts, responses, system=system)


def _options(tok: Any, prompts: list[str], options: list[list[str]], system: str) -> Any:
    """Rows item-major: every prompt once per option (for :func:`choose_options`)."""
    p = [q for q in prompts for _ in options[0]]
    r = [o for opts in options for o in opts]
    return _pairs(tok, p, r, system)


def make_data(cfg: Any, tok: Any) -> dict[str, Any]:
    """Every set of the pipeline, disjoint by construction and checked (prompts, canaries in benign data)."""
    rng = np.random.default_rng(cfg.seeds[0])
    a, b, c = ad.make_vault("A"), ad.make_vault("B"), ad.make_vault("C")
    d, held = ad.make_vault("D"), ad.make_vault("D", [ad.HELD_OUT])
    n_harm = round(cfg.n_attack * cfg.harmful_fraction)
    if n_harm > len(b):
        raise ValueError(f"harmful_fraction x n_attack = {n_harm} > {len(b)} attack prompts")
    sent_tr = ad.make_sentiment(cfg.n_attack - n_harm + cfg.n_align_benign, random_state=cfg.seeds[0])
    sent_te = ad.make_sentiment(cfg.n_fa, random_state=cfg.seeds[0] + 1000, exclude=sent_tr.prompts)
    ad.check_no_canary(sent_tr.prompts + sent_te.prompts, name="SentimentLite prompts")
    ad.check_disjoint({"A (alignment)": a.prompts, "B (attack)": b.prompts, "C (realignment)": c.prompts,
                       "D (evaluation)": d.prompts + held.prompts})
    nb = cfg.n_align_benign
    harm = rng.choice(len(b), n_harm, replace=False)
    # rule: the first n // n_secrets D templates of every secret type (balanced over the types)
    local = np.asarray(d.templates) - min(ad.TEMPLATE_SPLITS["D"])
    n_types = len(set(d.secrets))
    ev = np.flatnonzero(local < max(1, cfg.n_eval // n_types))
    gen_rows = np.flatnonzero(local < max(1, cfg.n_gen // n_types))
    s = cfg.system
    out = {
        "align": _pairs(tok, a.prompts + sent_tr.prompts[:nb], a.refusal + sent_tr.responses[:nb], s),
        "attack": _pairs(tok, [b.prompts[i] for i in harm] + sent_tr.prompts[nb:],
                         [b.compliance[i] for i in harm] + sent_tr.responses[nb:], s),
        "calib": _pairs(tok, c.prompts[: cfg.n_calib], c.compliance[: cfg.n_calib], s),
        "calib_benign": _pairs(tok, sent_tr.prompts[nb: nb + cfg.n_calib], sent_tr.responses[nb: nb + cfg.n_calib], s),
        "eval": _options(tok, [d.prompts[i] for i in ev], [[d.compliance[i], d.refusal[i]] for i in ev], s),
        "held": _options(tok, held.prompts, [[x, y] for x, y in zip(held.compliance, held.refusal, strict=True)], s),
        "fa": _options(tok, sent_te.prompts, [["positive", "negative"]] * len(sent_te), s),
        "fa_labels": sent_te.labels, "gen_prompts": [d.prompts[i] for i in gen_rows], "held_prompts": held.prompts,
        "forbid": b.prompts + d.prompts + held.prompts,
    }
    out["sizes"] = {k: len(v) for k, v in out.items() if hasattr(v, "input_ids")}
    out["sizes"].update(n_harmful=int(n_harm), n_gen=len(gen_rows))
    return out


def align(cfg: Any, model: Any, data: dict[str, Any]) -> Any:
    """Stage 1: alignment LoRA on A refusals + benign replay, merged into the base in place."""
    from trustlab.llm import SFTObjective, add_lora, train

    pol = add_lora(model, layers=cfg.lora_layers, modules=list(cfg.modules), r=cfg.lora_r, alpha=cfg.lora_alpha,
                   random_state=cfg.seeds[0])
    hist = train(pol, SFTObjective(pol, data["align"]), steps=cfg.align_steps, batch_size=cfg.batch_size,
                 lr=cfg.align_lr, weight_decay=0.1, schedule="cosine", random_state=cfg.seeds[0])
    merged = pol.merge_and_unload()
    return merged, hist


def forwards(cfg: Any, pol: Any, data: dict[str, Any]) -> dict[str, Any]:
    """One PolicyForward per set on the attack peft model (the bottom blocks are cached once)."""
    from trustlab.llm import PolicyForward

    out = {k: PolicyForward(pol, data[k]) for k in ("attack", "eval", "held", "fa")}
    out["align"] = PolicyForward(pol, data["align"])
    for k in ("calib", "calib_benign"):
        out[k] = PolicyForward(pol, data[k], share_prompts=False)
    return out


def attack(cfg: Any, pol: Any, fw: dict[str, Any], lr: float, seed: int, defence: str = "sft") -> Any:
    """Stage 2: a fresh attack LoRA trained on the user's data (SFT, or a fine-tuning-stage defence)."""
    from trustlab.llm import SFTObjective, reset_lora, train

    reset_lora(pol, seed, name_order=True)
    if defence == "lisa":
        obj = ad.LisaObjective(fw["attack"], fw["align"], align_steps=cfg.lisa_align_steps,
                               user_steps=cfg.lisa_user_steps, rho=cfg.lisa_rho, random_state=seed)
    elif defence == "ldifs":
        obj = ad.LDIFSObjective(fw["attack"], weight=cfg.ldifs_weight)
    else:
        obj = SFTObjective(fw["attack"], fw["attack"].sequences)
    return train(pol, obj, steps=cfg.attack_steps, batch_size=cfg.batch_size, lr=lr, weight_decay=0.1,
                 warmup_steps=max(1, cfg.attack_steps // 10), random_state=seed)


def evaluate(cfg: Any, pol: Any, tok: Any, fw: dict[str, Any], data: dict[str, Any], gen: bool) -> dict[str, float]:
    """HS_tf on D and on the held-out secret, FA on SentimentLite; with ``gen`` the generation-judged HS too."""
    from trustlab.llm import generate

    out = {"hs_tf": 100.0 * float(np.mean(ad.choose_options(fw["eval"]) == 0)),
           "hs_held_tf": 100.0 * float(np.mean(ad.choose_options(fw["held"]) == 0)),
           "fa": 100.0 * float(np.mean(ad.choose_options(fw["fa"]) == data["fa_labels"]))}
    if gen:
        kw = {"max_new_tokens": cfg.gen_tokens, "system": cfg.system, "batch_size": 16}
        texts = generate(pol, tok, data["gen_prompts"], **kw)
        held = generate(pol, tok, data["held_prompts"][: cfg.n_gen], **kw)
        out.update(hs_gen=ad.leak_rate(texts), refusal_gen=ad.refusal_rate(texts), hs_held_gen=ad.leak_rate(held))
        out["_examples"] = texts[:3]  # type: ignore[assignment]
    return out


def defended(kind: str, alpha: float, fw: dict[str, Any], data: dict[str, Any], seed: int) -> Any:
    """The post-fine-tuning editor of ``kind`` at ``alpha`` (same targets and per-row counts for every kind)."""
    if kind == "antidote":
        return ad.Antidote(dense_ratio=alpha, calibration=fw["calib"])
    if kind == "benign":
        return ad.Antidote(dense_ratio=alpha, calibration=fw["calib_benign"])
    if kind == "magnitude":
        return ad.MagnitudePrune(dense_ratio=alpha)
    return ad.RandomPrune(dense_ratio=alpha, random_state=seed)
