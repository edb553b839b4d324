"""Experiment ``wmattack``: an adaptive (DPO-tuned) paraphraser against KGW on SmolLM2-135M, vs the untuned
paraphraser and non-LLM edits; key transfer and transfer to Unigram.

Claims (issue 27, spec 1.5), pre-registered before the first default-mode run:
(C1) detection sanity: KGW (gamma 0.25, delta 2) on the generator detects >= 80 % of the provider-key texts
at z > 4, flags none of the unwatermarked texts at z > 4, and |mean z| < 1 under a wrong key;
(C2) preference data: >= 20 pairs, and every chosen text is undetected under its surrogate key (re-checked);
(C3a) the attack: the DPO paraphraser's joint success P(evade at 1 % FPR and MiniLM cosine >= 0.75) >= the
untuned paraphraser's + 10 points (mean over the seeds); (C3b) key transfer: its evasion against the unseen
provider key >= its evasion against the surrogate keys - 15 points; (C3c, secondary, the spec's fallback):
held-out DPO preference accuracy >= 0.6 and a positive mean reward margin; (C4) transfer: trained against
KGW, its Unigram evasion >= the untuned paraphraser's. Every stage is cached by content hash (a rerun resumes).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, Premise, RunContext
from trustlab.methods.wmattack import PAPER as PAPER
from trustlab.results.result import Result

TITLE = "Adaptive attacks on LLM watermarks: a DPO-tuned paraphraser vs KGW on SmolLM2-135M"
EXTRAS: tuple[str, ...] = ("llm",)
#: the quick gate's rule (experiments._gates, 5 seeds + knockout, docs/papers/wmattack.md) gives ("pre-para-moved",)
#: since issue 47 (C3b, judged against the untuned paraphraser now, FAILs on every quick seed; before issue 47 the
#: rule also gave C3b, dropped then because quick's random model evades every key with or without training)
QUICK_EXPECTED_PASS: tuple[str, ...] = ("pre-para-moved",)
#: the mechanism off: no DPO step, the untuned paraphraser stands in the tuned one's place
KNOCKOUT: tuple[str, ...] = ("steps=0",)
#: pre-registered: the tuned paraphraser must rewrite at least this share of the provider-key texts differently
#: from the untuned one (same sampling seed); below it the attack claims measure the untuned model
MOVED_MIN = 0.80

EDITS = (("deletion", "WordDeletion", 0.3), ("shuffle", "TokenShuffle", 0.3), ("synonym", "SynonymSwap", 0.5))


@dataclass(frozen=True)
class Config(ExperimentConfig):
    model: str = "smollm2-135m-instruct"  # or "tiny" (random 4-block llama, SmolLM2 tokenizer)
    n_keys: int = 8             # attacker's surrogate keys
    n_train: int = 48           # texts under surrogate keys, for the preference pairs
    n_candidates: int = 4       # paraphrases sampled per training text
    n_eval: int = 64            # texts under the provider key (issue 47: >= 64)
    n_null: int = 200           # unwatermarked texts for the 1 % FPR threshold (issue 47: >= 200; their prompts
                                # start with the eval prompts)
    n_surrogate_eval: int = 32  # eval prompts under surrogate keys (key transfer)
    n_unigram: int = 64         # eval prompts under a Unigram provider key (watermark transfer)
    new_tokens: int = 96        # provider-key, unwatermarked, surrogate-eval and Unigram texts
    train_tokens: int = 64      # the attacker's training texts (spec 1.4: 64)
    cand_tokens: int = 72       # candidate paraphrases of the training texts
    para_tokens: int = 96       # evaluation paraphrases
    gamma: float = 0.25
    delta: float = 2.0
    fpr: float = 0.01
    cos_threshold: float = 0.75
    cand_temperature: float = 1.0
    eval_temperature: float = 0.7
    lora_layers: str = "top4"
    lora_r: int = 8
    lora_alpha: float = 16.0
    beta: float = 0.1
    lr: float = 1e-3            # issue 47 pilot (scripts/wmattack_pilot.py): candidate B
    steps: int = 24             # DPO steps (issue 47 pilot: B); 0 = no training (the knockout: the untuned paraphraser)
    batch_size: int = 8
    ratios: tuple[float, ...] = (0.5, 1.0)  # adapter ratios traced on the first seed (0 = the untuned model)
    transfer_seeds: int = 1     # seeds whose paraphraser is also run on the Unigram texts
    ppl_model: str | None = "gemma3-270m"
    gen_batch: int = 16
    use_cache: bool = True
    seeds: tuple[int, ...] = (0, 1, 2)

    @classmethod
    def quick(cls) -> Config:
        """Mechanics only: a random tiny model, 8 training texts x 2 paraphrases, 24 tokens, one seed. A random
        model's outputs are unrelated to their source, so the quality gate of the pair rule is off
        (``cos_threshold=-1``): quick mode exercises embed -> detect -> pairs -> DPO -> metrics, not the claim."""
        return cls(model="tiny", n_keys=4, n_train=8, n_candidates=2, cos_threshold=-1.0, n_eval=6, n_null=6,
                   n_surrogate_eval=4, n_unigram=4,
                   new_tokens=24, train_tokens=24, cand_tokens=24, para_tokens=24, lora_layers="top2", lora_r=4, steps=4, batch_size=4, lr=5e-3,
                   ratios=(1.0,), ppl_model=None, use_cache=False, seeds=(0,))

    def validate(self) -> None:
        super().validate()
        from trustlab.core.constraints import Interval, validate_value

        for name in ("n_keys", "n_train", "n_candidates", "n_eval", "n_null", "n_surrogate_eval", "n_unigram", "new_tokens",
                     "train_tokens", "cand_tokens", "para_tokens", "lora_r", "batch_size", "gen_batch"):
            validate_value("wmattack.Config", name, getattr(self, name), [Interval(int, 1, None)])
        for name in ("transfer_seeds", "steps"):
            validate_value("wmattack.Config", name, getattr(self, name), [Interval(int, 0, None)])
        for name in ("fpr", "gamma"):
            validate_value("wmattack.Config", name, getattr(self, name), [Interval(float, 0, 1, closed="neither")])
        self._validate_sizes()

    def _validate_sizes(self) -> None:
        """Every text has its own prompt (greedy decoding: one text per prompt and key)."""
        from trustlab.core.exceptions import ConfigError
        from trustlab.methods.wmattack import N_TEXT_PROMPTS

        need = self.n_train + max(self.n_eval, self.n_null)
        if need > N_TEXT_PROMPTS:
            raise ConfigError(f"The 'n_train' + max('n_eval', 'n_null') of wmattack.Config must be at most the "
                              f"{N_TEXT_PROMPTS} shipped prompts (one greedy text per prompt). Got {need} instead.")
        for name in ("n_surrogate_eval", "n_unigram"):
            if getattr(self, name) > self.n_eval:
                raise ConfigError(f"The {name!r} of wmattack.Config must be at most 'n_eval' = {self.n_eval} (its "
                                  f"texts use the eval prompts). Got {getattr(self, name)} instead.")


# -- setup: models, keys, texts ------------------------------------------------------------------------------
def _load(cfg: Config) -> tuple[Any, Any]:
    """The generator, loaded once per process (shared with the executor tasks that run here)."""
    from trustlab.experiments._wmattack_jobs import load_generator

    return load_generator(cfg.model)


def _oracle(cfg: Config) -> Any:
    from trustlab.experiments._wmattack_jobs import load_oracle

    return load_oracle(cfg.ppl_model)


def _texts(cfg: Config, st: dict[str, Any]) -> None:
    """Generate (or read from the cache) every watermarked / unwatermarked text of the run."""
    from trustlab.methods import wmattack as W

    m, tok, cache = st["model"], st["tok"], st["cache"]
    every = W.text_prompts(W.N_TEXT_PROMPTS, random_state=cfg.seeds[0])  # every prompt type mixed into every set
    order = np.random.default_rng(cfg.seeds[0]).permutation(len(every))
    prompts = [every[i] for i in order[: cfg.n_train + max(cfg.n_eval, cfg.n_null)]]
    st["train_prompts"], st["eval_prompts"] = prompts[: cfg.n_train], prompts[cfg.n_train: cfg.n_train + cfg.n_eval]
    null_prompts = prompts[cfg.n_train: cfg.n_train + cfg.n_null]
    base = [cfg.model, cfg.new_tokens, cfg.gamma, cfg.delta]

    def gen(name: str, ps: list[str], wms: list[Any], n_new: int = cfg.new_tokens) -> list[str]:
        def compute() -> list[str]:
            out = [""] * len(ps)
            for wm in {id(w): w for w in wms}.values():  # one batch per key
                rows = [i for i, w in enumerate(wms) if w is wm]
                got = W.generate_watermarked(m, tok, [ps[i] for i in rows], wm, max_new_tokens=n_new,
                                             batch_size=cfg.gen_batch)
                for i, t in zip(rows, got, strict=True):
                    out[i] = t
            return out

        ids = ["none" if w is None else f"{w.name}:{w.key_id}" for w in wms]
        return cache.get(f"texts-{name}", [*base, n_new, ps, ids], compute)

    sk = st["surrogate_wm"]
    st["train"] = gen("train", st["train_prompts"], [sk[i % len(sk)] for i in range(cfg.n_train)], cfg.train_tokens)
    st["eval"] = gen("eval", st["eval_prompts"], [st["provider"]] * cfg.n_eval)
    st["null"] = gen("null", null_prompts, [None] * cfg.n_null)
    sp = st["eval_prompts"][: cfg.n_surrogate_eval]
    st["surr_eval_wm"] = [sk[i % len(sk)] for i in range(len(sp))]
    st["surr_eval"] = gen("surrogate-eval", sp, st["surr_eval_wm"])
    st["unigram_texts"] = gen("unigram", st["eval_prompts"][: cfg.n_unigram], [st["unigram"]] * cfg.n_unigram)


def _setup(cfg: Config, ctx: RunContext) -> dict[str, Any]:
    from trustlab.llm import cache_root
    from trustlab.methods import wmattack as W

    with ctx.untimed("load the generator, MiniLM and the perplexity model"):
        model, tok = _load(cfg)
        oracle = _oracle(cfg)
    model.eval()
    keys = W.make_keys(cfg.n_keys + 3, random_state=10_000 + cfg.seeds[0])
    provider, wrong, uni_key, surrogate = keys[0], keys[1], keys[2], keys[3:]
    kw = {"gamma": cfg.gamma, "delta": cfg.delta}
    st: dict[str, Any] = {
        "model": model, "tok": tok, "oracle": oracle,
        "cache": W.StageCache(cache_root() if cfg.use_cache else None),
        "provider": W.KGW(tok, provider, **kw), "wrong": W.KGW(tok, wrong, **kw), "unigram": W.Unigram(tok, uni_key, **kw),
        "surrogate_wm": [W.KGW(tok, k, **kw) for k in surrogate]}
    _texts(cfg, st)
    return st


# -- stages --------------------------------------------------------------------------------------------------
def _sanity(cfg: Config, st: dict[str, Any], res: Result) -> None:
    """C1 at the default z > 4 rule, then calibrate every watermark to the 1 % FPR threshold."""
    pv, wr = st["provider"], st["wrong"]
    d_eval, d_null = pv.detect(st["eval"], on_short="abstain"), pv.detect(st["null"], on_short="abstain")
    d_wrong = wr.detect(st["eval"], on_short="abstain")
    res.summary["sanity"] = {"tpr_z4": float(d_eval.decisions.mean()), "fp_z4": int(d_null.decisions.sum()),
                             "n_eval": len(st["eval"]), "n_null": len(st["null"]),
                             "mean_z_wrong_key": float(np.nanmean(d_wrong.scores)),
                             "mean_z_eval": float(np.nanmean(d_eval.scores)),
                             "mean_z_null": float(np.nanmean(d_null.scores)),
                             "mean_tokens_eval": float(np.mean(d_eval.n_scored))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cals = {}
        for name, wm in [("provider", pv), ("unigram", st["unigram"])] + [
                (f"surrogate{i}", w) for i, w in enumerate(st["surrogate_wm"])]:
            cals[name] = wm.calibrate(st["null"], fpr=cfg.fpr)
    c = cals["provider"]
    res.summary["calibration"] = {"method": c.method, "alpha": c.alpha, "n_null": c.n_null,
                                  "null_fpr_provider": c.observed_fpr, "null_fpr_unigram": cals["unigram"].observed_fpr}


def _pairs(cfg: Config, st: dict[str, Any], res: Result) -> Any:
    """Sample candidates from the untuned paraphraser, label them under each text's surrogate key, curate."""
    from trustlab.methods import wmattack as W

    sk = st["surrogate_wm"]
    wms = [sk[i % len(sk)] for i in range(cfg.n_train)]
    base = W.ParaphraseAttack(model=st["model"], tokenizer=st["tok"], temperature=cfg.cand_temperature,
                              batch_size=cfg.gen_batch, random_state=cfg.seeds[0])

    def compute() -> list[list[str]]:
        reps = [t for t in st["train"] for _ in range(cfg.n_candidates)]
        outs = base.generate(reps, cfg.cand_tokens).outputs
        return [outs[i * cfg.n_candidates:(i + 1) * cfg.n_candidates] for i in range(cfg.n_train)]

    cands = st["cache"].get("candidates", [cfg.model, cfg.cand_tokens, cfg.cand_temperature, cfg.n_candidates,
                                           cfg.seeds[0], st["train"]], compute)
    det, qual = [], []
    for i, row in enumerate(cands):
        d = wms[i].detect(row, on_short="abstain")
        det.append([bool(x) if ok else None for x, ok in zip(d.decisions, d.decided, strict=True)])
        qual.append(st["oracle"].cosine([st["train"][i]] * len(row), row).tolist())
    src_det = [bool(wms[i].detect([t], on_short="abstain").decisions[0]) for i, t in enumerate(st["train"])]
    pairs = W.build_preference_pairs(st["train"], cands, det, qual, quality_threshold=cfg.cos_threshold,
                                     source_detected=src_det, random_state=cfg.seeds[0])
    chosen_src = [int(s) for s in pairs.source]
    rechk = [bool(wms[s].detect([c], on_short="abstain").decisions[0]) for s, c in zip(chosen_src, pairs.chosen,
                                                                                         strict=True)]
    flat_d = [x for r in det for x in r]
    res.summary["pairs"] = {**pairs.counts, "chosen_detected": int(sum(rechk)), "candidates": len(flat_d),
                            "cand_detected": int(sum(x is True for x in flat_d)),
                            "cand_undecided": int(sum(x is None for x in flat_d)),
                            "cand_mean_cos": float(np.mean([q for r in qual for q in r])),
                            "cand_cos_ok": float(np.mean([q >= cfg.cos_threshold for r in qual for q in r]))}
    return pairs


def _record(cfg: Config, res: Result, method: str, dataset: str, seed: int, ev: dict[str, Any]) -> None:
    f, c = np.asarray(ev["flagged"], dtype=bool), np.asarray(ev["cos"], dtype=float)
    rows = {"evasion": 1 - f.mean(), "cosine": c.mean(), "joint": np.mean(~f & (c >= cfg.cos_threshold)),
            "perplexity": np.nanmean(ev["ppl"]) if np.isfinite(ev["ppl"]).any() else np.nan}
    for metric, v in rows.items():
        res.add(method=method, dataset=dataset, seed=seed, metric=metric, value=float(v))


def _baselines(cfg: Config, st: dict[str, Any], res: Result, ctx: RunContext) -> None:
    import functools

    from trustlab.experiments import _wmattack_jobs as jobs
    from trustlab.methods import wmattack as W

    pv = [st["provider"]] * len(st["eval"])
    none = {"flagged": st["provider"].detect(st["eval"], on_short="abstain").decisions.tolist(),
            "cos": [1.0] * len(st["eval"]), "ppl": st["oracle"].perplexity(st["eval"]).tolist()}
    _record(cfg, res, "none", "eval", cfg.seeds[0], none)
    for name, cls, ratio in EDITS:
        att = getattr(W, cls)(ratio=ratio, random_state=cfg.seeds[0])
        _record(cfg, res, name, "eval", cfg.seeds[0], jobs.attack_eval(cfg, st, att, st["eval"], pv, ratio, True))
    # the untuned paraphraser, the same sampling seeds as the tuned one: one executor task per seed (issue 46)
    items = [(seed, ("eval", "unigram") if k < cfg.transfer_seeds else ("eval",)) for k, seed in enumerate(cfg.seeds)]
    done = ctx.map(functools.partial(jobs.base_job, cfg, jobs.view(st)), items, desc="wmattack base paraphraser",
                   resources={"num_gpus": "auto"})
    for seed, (evs, hits) in zip(cfg.seeds, done, strict=True):
        st["cache"].hits.extend(hits)
        st.setdefault("base_outputs", {})[seed] = evs["eval"]["outputs"]
        for s, ev in evs.items():
            _record(cfg, res, "paraphrase_base", s, seed, ev)
            jobs.per_text(res, "paraphrase_base", s, seed, ev)


def _dpo(cfg: Config, st: dict[str, Any], res: Result, pairs: Any, ctx: RunContext) -> None:
    """Every DPO seed (train, then paraphrase), one executor task per seed (issue 46); records in seed order."""
    import functools

    from trustlab.experiments import _wmattack_jobs as jobs

    done = ctx.map(functools.partial(jobs.dpo_job, cfg, jobs.view(st), pairs), list(enumerate(cfg.seeds)),
                   desc="wmattack DPO seeds", resources={"num_gpus": "auto"})
    for seed, (ev, hits) in zip(cfg.seeds, done, strict=True):
        st["cache"].hits.extend(hits)
        base_out, dpo_out = st["base_outputs"][seed], ev["sets"]["1.0"]["eval"]["outputs"]
        res.add(method="paraphrase_dpo", dataset="eval", seed=seed, metric="changed_vs_base",
                value=float(np.mean([a != b for a, b in zip(base_out, dpo_out, strict=True)])))
        for metric in ("held_acc", "held_margin", "loss_first", "loss_last", "step_s", "train_s"):
            res.add(method="paraphrase_dpo", dataset="pairs", seed=seed, metric=metric, value=float(ev[metric]))
        for r, sets_ev in ev["sets"].items():
            for s, e in sets_ev.items():
                _record(cfg, res, "paraphrase_dpo" if float(r) == 1.0 else f"paraphrase_dpo_r{r}", s, seed, e)
                if float(r) == 1.0:
                    jobs.per_text(res, "paraphrase_dpo", s, seed, e)
    ctx.check_budget(f"{len(cfg.seeds)} DPO seed(s)")


def run(cfg: Config, ctx: RunContext) -> Result:
    import torch

    from trustlab.core.threads import limit_threads

    with limit_threads(max(1, min(2, torch.get_num_threads()))):
        res = Result("wmattack", "", cfg.to_dict())
        t0 = time.perf_counter()
        st = _setup(cfg, ctx)
        res.summary["timing_s"] = {"texts": time.perf_counter() - t0}
        _sanity(cfg, st, res)
        pairs = _pairs(cfg, st, res)
        res.summary["timing_s"]["pairs"] = time.perf_counter() - t0
        ctx.check_budget("preference pairs")
        _baselines(cfg, st, res, ctx)
        res.summary["timing_s"]["baselines"] = time.perf_counter() - t0
        if pairs.n_pairs >= 2 and len(set(pairs.source.tolist())) >= 2:
            _dpo(cfg, st, res, pairs, ctx)
        else:
            res.summary["dpo_skipped"] = f"{pairs.n_pairs} pair(s): too few to train"
        res.summary["quality_oracle"] = st["oracle"].note
        res.summary["cache_hits"] = list(st["cache"].hits)
        res.summary["timing_s"]["total"] = time.perf_counter() - t0
    return res



# -- claims --------------------------------------------------------------------------------------------------
def _mean(r: Result, method: str, dataset: str, metric: str, seed: int | None = None) -> float | None:
    df = r.to_frame()
    if df.empty:
        return None
    sub = df[(df["method"] == method) & (df["dataset"] == dataset) & (df["metric"] == metric)]
    sub = sub if seed is None else sub[sub["seed"] == seed]
    return None if sub.empty else float(sub["value"].mean())


def _pre_moved(r: Result) -> CheckResult:
    ch = _mean(r, "paraphrase_dpo", "eval", "changed_vs_base")
    if ch is None:
        return CheckResult(False, None, f">= {100 * MOVED_MIN:.0f} %", detail=r.summary.get("dpo_skipped", "no DPO run"))
    df = r.to_frame()
    per = df[(df["method"] == "paraphrase_dpo") & (df["metric"] == "changed_vs_base")]["value"].tolist()
    return CheckResult(ch >= MOVED_MIN, round(100 * ch, 1), f">= {100 * MOVED_MIN:.0f}",
                       unit="% of provider-key texts the tuned paraphraser rewrites differently from the untuned one "
                       "(same sampling seed; mean over seeds)", detail="per seed " + "/".join(f"{100 * v:.0f}" for v in per) + " %")


def _c1(r: Result) -> CheckResult:
    s = r.summary.get("sanity")
    if not s:
        return CheckResult(None, None, "TPR >= 0.8, 0 FP, |mean z| < 1")
    ok = s["tpr_z4"] >= 0.8 and s["fp_z4"] == 0 and abs(s["mean_z_wrong_key"]) < 1
    return CheckResult(ok, (round(s["tpr_z4"], 3), s["fp_z4"], round(s["mean_z_wrong_key"], 2)),
                       "(>= 0.8, 0, |z| < 1)", unit="(TPR at z > 4, false positives at z > 4, mean z wrong key)",
                       detail=f"{s['n_eval']} provider-key / {s['n_null']} unwatermarked texts, mean "
                       f"{s['mean_tokens_eval']:.0f} scored tokens; mean z {s['mean_z_eval']:.2f} watermarked, "
                       f"{s['mean_z_null']:.2f} unwatermarked")


def _c2(r: Result) -> CheckResult:
    p = r.summary.get("pairs")
    if not p:
        return CheckResult(None, None, ">= 20 pairs, 0 chosen detected")
    return CheckResult(p["pairs"] >= 20 and p["chosen_detected"] == 0, (p["pairs"], p["chosen_detected"]),
                       "(>= 20, 0)", unit="(pairs, chosen texts detected under their surrogate key)",
                       detail=f"{p['candidates']} candidates: {p['cand_detected']} detected, {p['cand_undecided']} "
                       f"too short, {100 * p['cand_cos_ok']:.0f} % with cosine >= threshold (mean "
                       f"{p['cand_mean_cos']:.3f}); sources kept {p['kept_sources']} of {p['sources']} "
                       f"(not detected {p['source_not_detected']}, no chosen {p['no_chosen']}, rejected = source "
                       f"{p['rejected_is_source']})")


def _c3a(r: Result) -> CheckResult:
    d, b = _mean(r, "paraphrase_dpo", "eval", "joint"), _mean(r, "paraphrase_base", "eval", "joint")
    if d is None or b is None:
        return CheckResult(None, None, ">= base + 10 points", detail=r.summary.get("dpo_skipped", ""))
    e_d, e_b = _mean(r, "paraphrase_dpo", "eval", "evasion"), _mean(r, "paraphrase_base", "eval", "evasion")
    c_d, c_b = _mean(r, "paraphrase_dpo", "eval", "cosine"), _mean(r, "paraphrase_base", "eval", "cosine")
    return CheckResult(d >= b + 0.10, round(100 * d, 1), f">= {100 * b + 10:.1f}", baseline=round(100 * b, 1),
                       unit="% joint success (mean over seeds)",
                       detail=f"evasion {100 * e_d:.1f} vs {100 * e_b:.1f} %, cosine {c_d:.3f} vs {c_b:.3f} "
                       "(DPO vs untuned)")


def _paired_evasion(r: Result, dataset: str) -> tuple[float, float, int, int] | None:
    """DPO minus untuned evasion on the same texts and sampling seeds: (mean difference, its one-sided 95 % paired
    bootstrap lower bound, texts, seeds); None without both paraphrasers' per-text flags."""
    from trustlab.experiments._paired import paired_lower

    pt = r.summary.get("per_text", {})
    base, dpo = pt.get("paraphrase_base", {}).get(dataset, {}), pt.get("paraphrase_dpo", {}).get(dataset, {})
    seeds = [k for k in dpo if k in base]
    if not seeds:
        return None
    diffs = [np.asarray(base[k], dtype=float) - np.asarray(dpo[k], dtype=float) for k in seeds]  # flag_b - flag_d
    return float(np.mean(diffs)), paired_lower(diffs), len(diffs[0]), len(seeds)


def _c3b(r: Result) -> CheckResult:
    e, s = _mean(r, "paraphrase_dpo", "eval", "evasion"), _mean(r, "paraphrase_dpo", "surrogate", "evasion")
    b, pe = _mean(r, "paraphrase_base", "eval", "evasion"), _paired_evasion(r, "eval")
    thr = "> untuned (95 % paired lower bound of the gain > 0) and >= surrogate - 15 points"
    if e is None or s is None or b is None or pe is None:
        return CheckResult(None, None, thr)
    diff, low, n, k = pe
    return CheckResult(low > 0 and e >= s - 0.15, round(100 * e, 1), f"lower bound > 0 and >= {100 * s - 15:.1f}",
                       baseline=round(100 * b, 1), unit="% evasion vs the unseen provider key (baseline: the untuned "
                       "paraphraser, same texts and sampling seeds; mean over seeds)",
                       detail=f"gain {100 * diff:+.1f} points, one-sided 95 % paired-bootstrap lower bound "
                       f"{100 * low:+.1f} over {n} texts x {k} seeds; DPO evasion vs the surrogate keys {100 * s:.1f} %")


def _c3c(r: Result) -> CheckResult:
    a, m = _mean(r, "paraphrase_dpo", "pairs", "held_acc"), _mean(r, "paraphrase_dpo", "pairs", "held_margin")
    if a is None or not np.isfinite(a):
        return CheckResult(None, None, "acc >= 0.6 and margin > 0")
    return CheckResult(a >= 0.6 and m > 0, (round(a, 3), round(m, 4)), "(>= 0.6, > 0)",
                       unit="(held-out preference accuracy, mean reward margin; mean over seeds)")


def _c4(r: Result) -> CheckResult:
    d, b = _mean(r, "paraphrase_dpo", "unigram", "evasion"), _mean(r, "paraphrase_base", "unigram", "evasion")
    pe = _paired_evasion(r, "unigram")
    if d is None or b is None or pe is None:
        return CheckResult(None, None, "> untuned (95 % paired lower bound of the gain > 0)")
    diff, low, n, k = pe
    return CheckResult(low > 0, round(100 * d, 1), "> untuned: lower bound of the gain > 0", baseline=round(100 * b, 1),
                       unit="% Unigram evasion at 1 % FPR (baseline: the untuned paraphraser, same texts and seed)",
                       detail=f"gain {100 * diff:+.1f} points, one-sided 95 % paired-bootstrap lower bound "
                       f"{100 * low:+.1f} over {n} texts x {k} seed(s)")


def _sizes(c: dict[str, Any]) -> str:
    return (f"{c['model']}, {c['n_eval']} eval texts of {c['new_tokens']} new tokens, {c['n_train']} training texts "
            f"of {c['train_tokens']} tokens x {c['n_candidates']} paraphrases under {c['n_keys']} surrogate keys, LoRA r={c['lora_r']} on "
            f"{c['lora_layers']}, {c['steps']} DPO steps x {c['batch_size']} pairs, {len(c['seeds'])} seed(s); "
            "paper: Llama-3.1-8B provider, 296 prompts, Qwen2.5/Llama-3.2-3B paraphrasers, 32 keys")


CLAIMS = [
    Premise("pre-para-moved", f"The DPO steps moved the paraphraser: its outputs on the provider-key texts differ from "
            f"the untuned paraphraser's (same sampling seed) on >= {100 * MOVED_MIN:.0f} % of texts", _pre_moved,
            scale_note=lambda c: f"{c['steps']} DPO steps, {c['n_eval']} texts, {len(c['seeds'])} seed(s)"),
    Claim("C1", "Detection sanity: KGW detects >= 80 % of provider-key texts at z > 4, flags no unwatermarked "
          "text at z > 4, and |mean z| < 1 under a wrong key", _c1,
          scale_note=lambda c: f"{c['model']}, {c['n_eval']} texts of {c['new_tokens']} new tokens each side; "
          f"gamma {c['gamma']}, delta {c['delta']}"),
    Claim("C2", "Preference data: >= 20 pairs by the paper's rule, every chosen text undetected under its "
          "surrogate key", _c2,
          scale_note=lambda c: f"{c['n_train']} texts x {c['n_candidates']} paraphrases (spec: 32 x 4), cosine >= "
          f"{c['cos_threshold']} in place of the LLM judge's 0.8"),
    Claim("C3a", "Attack: the DPO paraphraser's joint success P(evade at 1 % FPR and cosine >= 0.75) >= the "
          "untuned paraphraser's + 10 points (mean over seeds)", _c3a, scale_note=_sizes, requires=("pre-para-moved",)),
    Claim("C3b", "Key transfer: trained only against surrogate keys, the DPO paraphraser evades the unseen provider "
          "key more often than the untuned paraphraser (one-sided 95 % paired-bootstrap lower bound of the gain > 0, "
          "ties FAIL) and its provider-key evasion >= its surrogate-key evasion - 15 points", _c3b,
          requires=("pre-para-moved",),
          paper_value=96.0,  # v1 abstract: evasion > 96 % of the tuned paraphraser against the unseen key
          scale_note=lambda c: f"{c['n_eval']} provider-key texts vs {c['n_surrogate_eval']} held-out-prompt "
          "surrogate-key texts, mean over seeds"),
    Claim("C3c", "Fallback (spec): held-out DPO preference accuracy >= 0.6 and positive mean reward margin", _c3c,
          secondary=True, scale_note="pairs split 80/20 by source text (the fork's split seed 42)"),
    Claim("C4", "Transfer: trained against KGW, the paraphraser's Unigram evasion > the untuned paraphraser's (one-sided "
          "95 % paired-bootstrap lower bound of the gain > 0 over the same texts and sampling seed; ties FAIL)", _c4, requires=("pre-para-moved",), scale_note=lambda c: f"{c['n_unigram']} Unigram texts, the first {c['transfer_seeds']} seed(s) of "
          "both paraphrasers"),
]


# -- plots ---------------------------------------------------------------------------------------------------
def PLOTS(result: Result) -> dict[str, Any]:
    from trustlab.results.plots import new_figure

    df = result.to_frame()
    fig, ax = new_figure(5.6, 4.0)
    if not df.empty:
        ev = df[df["dataset"] == "eval"]
        for m in dict.fromkeys(ev["method"]):
            e, c = _mean(result, m, "eval", "evasion"), _mean(result, m, "eval", "cosine")
            ax.scatter([c], [100 * e], s=32, marker="o" if m.startswith("paraphrase") else "s")
            ax.annotate(m.replace("paraphrase_", ""), (c, 100 * e), fontsize=7, xytext=(3, 3), textcoords="offset points")
        curve = [(0.0, "paraphrase_base")] + sorted(
            (float(m.split("_r")[-1]), m) for m in set(ev["method"]) if m.startswith("paraphrase_dpo_r"))
        curve += [(1.0, "paraphrase_dpo")] if "paraphrase_dpo" in set(ev["method"]) else []
        s0 = result.config["seeds"][0]
        pts = [(_mean(result, m, "eval", "cosine", s0), _mean(result, m, "eval", "evasion", s0)) for _, m in curve]
        ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], "-", lw=1, color="gray",
                label=f"adapter ratio 0 -> 1 (seed {s0})")
        ax.axvline(result.config.get("cos_threshold", 0.75), ls=":", color="gray", lw=0.8)
        ax.legend(fontsize=7)
    ax.set_xlabel("mean MiniLM cosine to the watermarked source")
    ax.set_ylabel("evasion at 1 % FPR (%)")
    ax.set_title("KGW, provider key: evasion vs quality per attack (points: mean over seeds)", fontsize=9)
    return {"evasion_vs_quality": fig}
