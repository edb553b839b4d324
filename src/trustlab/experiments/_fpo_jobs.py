"""The independent units of experiment ``fpo`` as executor tasks (issue 46): every (method, seed) training run
with its held-out evaluation. A worker process builds the backbone, the LoRA policy, the replay, reference and
feature caches and the SAE once (:func:`setup`, cached per config) and reuses them across its tasks; each task
starts from the seed's freshly reset LoRA and returns records (and, for FPO's first seed, the trained adapter
that C4 checks) only. The backbone stays in the worker. C4's exactness check (:func:`exactness`) runs in the
driver afterwards."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np


def load(cfg: Any) -> tuple[Any, Any]:
    from trustlab.llm import load_model, tiny_random_llama

    if cfg.model == "tiny":
        return tiny_random_llama(n_layers=4)
    return load_model(cfg.model)


def data(cfg: Any, tok: Any) -> dict[str, Any]:
    """The generated pairs of the run (seeded by its first seed), split with disjoint facts, tokenised."""
    from trustlab.data.prefs import make_preferences
    from trustlab.llm import tokenize_preferences

    d = make_preferences(cfg.n_pairs, tasks=cfg.tasks, rambling_fraction=cfg.rambling_fraction,
                         match_length=cfg.match_length, random_state=cfg.seeds[0])
    train_d, test_d = d.split(cfg.n_test)
    tk = lambda x: tokenize_preferences(tok, x.prompts, x.chosen, x.rejected, system=cfg.system)  # noqa: E731
    return {"train_d": train_d, "test_d": test_d, "pairs": tk(train_d), "held": tk(test_d)}


def base_ranking(ref: Any, n: int) -> dict[str, float]:
    """How often the reference (base) model itself puts the chosen response above the rejected one, by summed
    and by length-normalised log-probability: the shortcut the held-out accuracy must not already contain."""
    s = ref.sum.double().numpy()
    per_tok = s / np.maximum(ref.n_tokens.double().numpy(), 1.0)
    return {"summed": float(np.mean(s[:n] > s[n:])), "normalised": float(np.mean(per_tok[:n] > per_tok[n:])),
            "n_pairs": float(n)}


def objective(method: str, cfg: Any, st: dict[str, Any], fwd: Any, pairs: Any, ref: Any, feats: Any) -> Any:
    from trustlab.llm import PreferenceObjective
    from trustlab.methods.fpo import FPOObjective, TDPOObjective

    if method == "fpo":
        return FPOObjective(fwd, pairs, st["sae"], beta=cfg.beta, alpha=cfg.alpha, k=cfg.fpo_k, reference=ref,
                            features=feats, units=cfg.feature_units)
    if method == "tdpo2":
        return TDPOObjective(fwd, pairs, beta=cfg.beta, alpha=cfg.tdpo_alpha)
    if method == "simpo":
        return PreferenceObjective(fwd, pairs, loss="simpo", beta=cfg.simpo_beta, gamma=cfg.simpo_gamma)
    loss = "dpo_norm" if method == "dpo_norm" else "dpo"
    return PreferenceObjective(fwd, pairs, loss=loss, beta=cfg.beta, reference="online" if method == "dpo_online"
                               else ref)


def _setup(cfg: Any, summary: dict[str, Any]) -> dict[str, Any]:
    from trustlab.llm import PolicyForward, ReferenceCache, add_lora
    from trustlab.methods import fpo

    model, tok = load(cfg)
    st: dict[str, Any] = {"tok": tok, **data(cfg, tok)}
    pol = add_lora(model, layers=cfg.lora_layers, r=cfg.lora_r, alpha=cfg.lora_alpha, random_state=cfg.seeds[0])
    st["pol"] = pol
    st["fwd"] = PolicyForward(pol, st["pairs"].sequences)
    st["fwd_held"] = PolicyForward(pol, st["held"].sequences)
    st["ref"] = ReferenceCache.compute(st["fwd"])
    st["ref_held"] = ReferenceCache.compute(st["fwd_held"])
    acts = fpo.collect_activations(st["fwd"])
    sae, rep = fpo.train_sae(acts, width=cfg.sae_width, k=cfg.sae_k, steps=cfg.sae_steps, random_state=cfg.seeds[0])
    st["sae"] = sae
    st["feats"] = fpo.FeatureCache.compute(st["fwd"], sae)
    st["feats_held"] = fpo.FeatureCache.compute(st["fwd_held"], sae)
    summary["sae"] = {"fve": rep.fve, "l0": rep.l0, "dead_fraction": rep.dead_fraction, "n_tokens": len(acts),
                      "eval_tokens": rep.n_tokens, "fingerprint": sae.fingerprint()[:16]}
    summary["data"] = {"train_pairs": st["pairs"].n_pairs, "test_pairs": st["held"].n_pairs,
                       "max_len": int(st["pairs"].sequences.input_ids.shape[1]), "replay_k": st["fwd"].k_top,
                       "equal_length_fraction": float(np.mean([len(c) == len(r) for c, r in
                                                               zip(st["test_d"].chosen, st["test_d"].rejected)]))}
    summary["base_ranking"] = base_ranking(st["ref_held"], st["held"].n_pairs)
    return st


@functools.lru_cache(maxsize=1)
def setup(cfg: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's state and the summary entries it reports (SAE, data, the base model's ranking), built under
    global RNGs seeded with the run's first seed, so every worker builds the same state whichever task asks
    first."""
    from trustlab.core.seeding import isolated_global_rng

    summary: dict[str, Any] = {}
    with isolated_global_rng(cfg.seeds[0]):
        st = _setup(cfg, summary)
    return st, summary


def _train(cfg: Any, st: dict[str, Any], method: str, seed: int, rec: dict[str, float]) -> dict[str, Any] | None:
    from trustlab.llm import train
    from trustlab.methods.fpo._diagnostics import feature_share

    pol = st["pol"]
    obj = objective(method, cfg, st, st["fwd"], st["pairs"], st["ref"], st["feats"])
    hist = train(pol, obj, steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr, warmup_steps=cfg.warmup_steps,
                 random_state=seed)
    rec["step_time_s"] = hist.median_step_time(min(2, len(hist.loss) - 1))
    rec["loss_first3"], rec["loss_last3"] = float(np.mean(hist.loss[:3])), float(np.mean(hist.loss[-3:]))
    if method == "fpo" and seed == cfg.seeds[0]:
        st["fpo_state"] = {n: p.detach().clone() for n, p in pol.named_parameters() if "lora_" in n}
        return feature_share(obj, st["pairs"].n_pairs)
    return None


def _generations(cfg: Any, st: dict[str, Any], seed: int, rec: dict[str, float]) -> None:
    """``n_samples`` samples at T = 1 for each of ``n_gen`` held-out prompts: mean task reward and distinct-2
    (per prompt over its samples, then the mean over prompts with any bigram)."""
    from trustlab.llm import distinct_n, evaluate_generations

    td = st["test_d"].subset(list(range(min(cfg.n_gen, len(st["test_d"])))))
    ev = evaluate_generations(st["pol"], st["tok"], td.prompts, lambda rs: td.reward(rs), system=cfg.system,
                              max_new_tokens=cfg.gen_tokens, batch_size=20, do_sample=True, temperature=1.0,
                              n_samples=cfg.n_samples, random_state=seed)
    d2 = [distinct_n(rs, n=2) for rs in ev.responses]
    rec["reward_sampled"] = ev.mean_reward
    rec["distinct2"] = float(np.nanmean(d2)) if not np.all(np.isnan(d2)) else float("nan")


def _one(cfg: Any, st: dict[str, Any], method: str, seed: int) -> tuple[dict[str, float], Any]:
    from trustlab.llm import preference_accuracy, reset_lora
    from trustlab.methods import fpo

    fwd_h, held = st["fwd_held"], st["held"]
    reset_lora(st["pol"], seed)
    rec: dict[str, float] = {}
    share = _train(cfg, st, method, seed, rec) if method != "sft" else None
    acc = preference_accuracy(fwd_h, held, reference=st["ref_held"], beta=cfg.beta)
    acc_n = preference_accuracy(fwd_h, held, reference=st["ref_held"], beta=cfg.beta, length_normalized=True)
    c_rows, r_rows = held.rows(np.arange(held.n_pairs))
    kl = fpo.reference_kl(fwd_h, c_rows)
    rec.update(accuracy=acc.accuracy, accuracy_norm=acc_n.accuracy, kl=kl.mean_kl, entropy=float(kl.entropy.mean()),
               feature_mse=float(fpo.feature_mse(fwd_h, st["sae"], st["feats_held"], r_rows, k=cfg.fpo_k,
                                                 units=cfg.feature_units).mean()))
    if cfg.n_gen:
        _generations(cfg, st, seed, rec)
    return rec, share


def unit_job(cfg: Any, unit: tuple[str, int]) -> dict[str, Any]:
    """One ``(method, seed)`` run: its records, FPO's feature-term share and FPO's trained adapter (first seed
    only; ``None`` otherwise, as the share)."""
    st, _ = setup(cfg)
    method, seed = unit
    rec, share = _one(cfg, st, method, seed)
    records = [{"method": method, "dataset": "prefs", "seed": seed, "metric": k, "value": float(v)}
               for k, v in rec.items()]
    return {"records": records, "feature_term": share, "fpo_state": st.pop("fpo_state", None)}


def exactness(cfg: Any, st: dict[str, Any], fpo_state: dict[str, Any] | None) -> dict[str, float]:
    """C4: offline-cache FPO loss vs online-reference FPO loss on a float64 copy with the trained FPO adapter."""
    import copy

    import torch

    from trustlab.llm import PolicyForward, tokenize_preferences
    from trustlab.methods import fpo

    d = st["train_d"].subset(list(range(8)))
    pairs = tokenize_preferences(st["tok"], d.prompts, d.chosen, d.rejected, system=cfg.system)
    pol = st["pol"]
    if fpo_state is not None:
        with torch.no_grad():
            for n, p in pol.named_parameters():
                if n in fpo_state:
                    p.copy_(fpo_state[n])
    m64 = copy.deepcopy(pol).double()
    sae64 = copy.deepcopy(st["sae"]).double()
    fwd = PolicyForward(m64, pairs.sequences)
    kw = {"beta": cfg.beta, "alpha": cfg.alpha, "k": cfg.fpo_k, "units": cfg.feature_units}
    off = fpo.FPOObjective(fwd, pairs, sae64, **kw)
    on = fpo.FPOObjective(fwd, pairs, sae64, reference="online", features="online", **kw)
    rows = np.arange(pairs.n_pairs)
    with torch.no_grad():
        a, b = off(rows), on(rows)
        on.alpha = 0.0  # the same loss without the feature term: how much of it C4 can see
        b0 = on(rows)
    del m64
    d_diff = max(abs(a.metrics[m] - b.metrics[m]) / max(1.0, abs(b.metrics[m]))
                 for m in ("feature_mse_chosen", "feature_mse_rejected"))
    return {"offline": float(a.loss), "online": float(b.loss), "abs_diff": abs(float(a.loss) - float(b.loss)),
            "feature_mse_rejected": b.metrics["feature_mse_rejected"], "feature_rel_diff": d_diff,
            "feature_effect": abs(float(b.loss) - float(b0.loss))}
