"""Experiment ``iclheads``: induction heads vs function-vector heads on SmolLM2-135M (Yin & Steinhardt, ICML 2025).

Claims (issue 9): (1) >= 3 heads with classic induction score >= 0.4 and top-5 mean >= 10x the median;
(2a) FV heads are causal: mean CIE of the top-5 FV heads >= 5x the median |CIE|; (2b) the top-5 % FV-head
function vector raises zero-shot first-token accuracy on >= 2 held-out tasks by >= 15 points more than a
random-head vector (mean of 3 draws); (3) mean-ablating the top 5 % FV heads lowers 5-shot held-out accuracy
by >= 10 points more than ablating 5 % random heads (mean of 3 draws); (4) Jaccard(top-5 % induction,
top-5 % FV) <= 0.5. Reported without a threshold: the paper's key contrast with exclusion,
drop(FV minus top-2 % induction) - drop(induction minus top-2 % FV); the paper finds it small in its
smallest models. One model load is shared by every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.base import PaperInfo
from trustlab.experiments.base import Claim, ExperimentConfig, RunContext
from trustlab.results.result import Result

PAPER = PaperInfo(title="Which Attention Heads Matter for In-Context Learning?", arxiv="2502.14010",
                  repo="https://github.com/kayoyin/icl-heads")
TITLE = "Induction heads vs function-vector heads for in-context learning (SmolLM2-135M)"
EXTRAS: tuple[str, ...] = ("llm",)

_FV = ("antonym", "country_capital", "english_french", "present_past", "singular_plural")
_EVAL = ("capitalize", "first_letter", "next_item", "choose_first_of_3", "choose_last_of_3")


@dataclass(frozen=True)
class Config(ExperimentConfig):
    model: str = "smollm2-135m-instruct"
    n_induction_seqs: int = 32
    seq_len: int = 50
    fv_tasks: tuple[str, ...] = _FV
    eval_tasks: tuple[str, ...] = _EVAL
    n_shots: int = 5
    n_mean: int = 20          # clean prompts per task for the mean head activations (official: 100)
    n_trials: int = 10        # corrupted prompts per FV task (official: 100)
    n_eval: int = 25          # 5-shot prompts per held-out task for the ablation curves
    fractions: tuple[float, ...] = (0.03, 0.05, 0.10)
    excl_fractions: tuple[float, ...] = (0.05, 0.10)
    exclude_size: float = 0.02
    main_fraction: float = 0.05
    n_random: int = 3
    steer_fraction: float = 0.05
    attribution: bool = True  # also compute the gradient approximation of the CIE and its Spearman agreement
    zero_ablation: bool = True

    @classmethod
    def quick(cls) -> Config:
        # two FV tasks and the two held-out tasks with the highest 5-shot accuracy (few prompts need a clear signal)
        return cls(n_induction_seqs=8, fv_tasks=("antonym", "country_capital"),
                   eval_tasks=("capitalize", "choose_last_of_3"), n_mean=10, n_trials=4, n_eval=16, fractions=(0.05,),
                   excl_fractions=(0.05,), attribution=False, zero_ablation=False)

    @classmethod
    def paper(cls) -> Config:
        """Closer to the paper: 10 shots, 100 mean prompts and trials, 1000 induction sequences (hours on CPU)."""
        return cls(n_induction_seqs=1000, n_shots=10, n_mean=100, n_trials=100, n_eval=100,
                   fractions=(0.01, 0.03, 0.05, 0.07, 0.09, 0.15, 0.2), excl_fractions=(0.03, 0.05, 0.1, 0.2))

    def validate(self) -> None:
        super().validate()
        from trustlab.core.constraints import Interval, validate_value
        from trustlab.core.exceptions import ConfigError

        for name in ("n_induction_seqs", "seq_len", "n_shots", "n_mean", "n_trials", "n_eval", "n_random"):
            validate_value("iclheads.Config", name, getattr(self, name), [Interval(int, 1, None)])
        for name in ("exclude_size", "main_fraction", "steer_fraction"):
            validate_value("iclheads.Config", name, getattr(self, name), [Interval(float, 0, 1, closed="neither")])
        if not self.fv_tasks or not self.eval_tasks or self.main_fraction not in self.fractions:
            raise ConfigError("iclheads.Config needs FV and eval tasks, and main_fraction among 'fractions'. "
                              f"Got fv_tasks={self.fv_tasks}, eval_tasks={self.eval_tasks}, "
                              f"main_fraction={self.main_fraction}, fractions={self.fractions}.")


def run(cfg: Config, ctx: RunContext) -> Result:
    import time

    import torch

    from trustlab.llm import dims, load_model
    from trustlab.methods import iclheads as ih

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    res = Result("iclheads", "", cfg.to_dict())
    seed = cfg.seeds[0]
    t0 = time.perf_counter()
    model, tok = load_model(cfg.model, attn_implementation="eager")
    d = dims(model)
    L, H = d.n_layers, d.n_heads
    timing = {"load": time.perf_counter() - t0}
    ih.check_disjoint(list(cfg.fv_tasks), list(cfg.eval_tasks))

    # -- data checks -------------------------------------------------------------------------------
    single = {t: ih.single_token_fraction(tok, ih.load_task(t)) for t in (*cfg.fv_tasks, *cfg.eval_tasks)}
    res.summary["single_token_fraction"] = single

    # -- (1) induction scores ------------------------------------------------------------------------
    t = time.perf_counter()
    ind = ih.induction_scores(model, cfg.n_induction_seqs, cfg.seq_len, random_state=seed)
    ind_tl = ih.induction_scores(model, max(2, cfg.n_induction_seqs // 4), cfg.seq_len, variant="tl",
                                 random_state=seed)
    timing["induction"] = time.perf_counter() - t
    ctx.check_budget("induction scores")

    # -- (2a) FV scores --------------------------------------------------------------------------------
    t = time.perf_counter()
    fv = ih.fv_scores(model, list(cfg.fv_tasks), n_mean=cfg.n_mean, n_trials=cfg.n_trials, n_shots=cfg.n_shots,
                      held_out=list(cfg.eval_tasks), random_state=seed, progress=ctx.progress)
    timing["fv_exact"] = time.perf_counter() - t
    ctx.check_budget("FV scores")
    cie = fv.scores
    if cfg.attribution:
        from scipy.stats import spearmanr

        t = time.perf_counter()
        fa = ih.fv_scores(model, list(cfg.fv_tasks), n_mean=cfg.n_mean, n_trials=cfg.n_trials, n_shots=cfg.n_shots,
                          method="attribution", held_out=list(cfg.eval_tasks), task_means=fv.task_means,
                          random_state=seed)
        timing["fv_attribution"] = time.perf_counter() - t
        res.summary["attribution_spearman"] = float(spearmanr(cie.ravel(), fa.scores.ravel())[0])
        top = set(np.argsort(-cie.ravel())[:13].tolist())
        res.summary["attribution_top13_overlap"] = len(top & set(np.argsort(-fa.scores.ravel())[:13].tolist())) / 13
        ctx.check_budget("attribution")
    for layer in range(L):
        for h in range(H):
            res.add(method="head_scores", dataset=cfg.model, seed=seed, metric="induction_score",
                    value=float(ind[layer, h]), layer=layer, head=h)
            res.add(method="head_scores", dataset=cfg.model, seed=seed, metric="fv_score",
                    value=float(cie[layer, h]), layer=layer, head=h)
    flat = np.sort(ind.ravel())[::-1]
    res.summary.update(
        induction=ind.tolist(), fv=cie.tolist(), induction_tl=ind_tl.tolist(),
        n_induction_ge_04=int((ind >= 0.4).sum()), induction_top5_mean=float(flat[:5].mean()),
        induction_median=float(np.median(ind)), induction_mean=float(ind.mean()),
        fv_top5_mean=float(np.sort(cie.ravel())[::-1][:5].mean()), fv_median_abs=float(np.median(np.abs(cie))),
        fv_min_heads_changed=min(fv.n_changed.values()), fv_finite=bool(np.isfinite(cie).all()),
        fv_corrupt_prob=fv.corrupt_prob,
        top_induction=[(int(i // H), int(i % H), float(ind.ravel()[i])) for i in np.argsort(-ind.ravel())[:10]],
        top_fv=[(int(i // H), int(i % H), float(cie.ravel()[i])) for i in np.argsort(-cie.ravel())[:10]],
    )

    # -- head sets ---------------------------------------------------------------------------------
    ex = cfg.exclude_size
    sets: dict[tuple[str, float, int], list[tuple[int, int]]] = {}
    for f in cfg.fractions:
        sets[("fv", f, 0)] = ih.select_heads(cie, f)
        sets[("induction", f, 0)] = ih.select_heads(ind, f)
        draws = cfg.n_random if f == cfg.main_fraction else 1
        for r in range(draws):
            sets[("random", f, r)] = ih.select_heads(ih.random_scores((L, H), seed * 1000 + r), f)
    for f in cfg.excl_fractions:
        sets[("fv_excl_induction", f, 0)] = ih.select_heads(cie, f, exclude_scores=ind, exclude_size=ex)
        sets[("induction_excl_fv", f, 0)] = ih.select_heads(ind, f, exclude_scores=cie, exclude_size=ex)
    mf = cfg.main_fraction
    res.summary["jaccard_top5pct"] = ih.jaccard(sets[("fv", mf, 0)], sets[("induction", mf, 0)])
    res.summary["head_sets"] = {f"{k[0]}@{k[1]}#{k[2]}": v for k, v in sets.items()}

    # -- (3) ablation on held-out tasks --------------------------------------------------------------
    t = time.perf_counter()
    means = fv.mean_activations
    drops: dict[str, dict[tuple[str, float, int], float]] = {}
    clean_acc = {}
    for ti, name in enumerate(ctx.progress(cfg.eval_tasks, desc="ablation")):
        train, test = ih.load_task(name).split(0.4, seed=seed)
        prompts = ih.build_prompts(train, cfg.n_eval, cfg.n_shots, queries=test, random_state=[seed, ti])
        pp = ih.PreparedPrompts(model, [p.text for p in prompts], [ih.target_token(tok, p.answer) for p in prompts],
                                tokenizer=tok)
        acc0 = pp.accuracy()
        clean_acc[name] = acc0
        res.add(method="clean", dataset=name, seed=seed, metric="accuracy", value=acc0, fraction=0.0, draw=0)
        drops[name] = {}
        conds = list(sets.items())
        if cfg.zero_ablation:
            conds.append((("fv_zero", mf, 0), sets[("fv", mf, 0)]))
        for key, heads in conds:
            kind = "zero" if key[0] == "fv_zero" else "mean"
            with ih.HeadAblation(heads=heads, kind=kind).apply(model, means=means):
                acc = pp.accuracy()
            drops[name][key] = acc0 - acc
            res.add(method=key[0], dataset=name, seed=seed, metric="accuracy", value=acc, fraction=key[1],
                    draw=key[2], n_heads=len(heads))
        ctx.check_budget(f"ablation {name}")
    timing["ablation"] = time.perf_counter() - t

    def mean_drop(kind: str, f: float) -> float:
        keys = [k for k in sets if k[0] == kind and k[1] == f] or [(kind, f, 0)]
        return float(np.mean([[drops[n][k] for k in keys] for n in cfg.eval_tasks]))

    res.summary["clean_accuracy"] = clean_acc
    res.summary["drop"] = {f"{k}@{f}": mean_drop(k, f) for k, f, r in sets if r == 0}
    if cfg.zero_ablation:
        res.summary["drop"][f"fv_zero@{mf}"] = mean_drop("fv_zero", mf)
    res.summary["drop_fv_minus_random"] = mean_drop("fv", mf) - mean_drop("random", mf)
    res.summary["drop_induction_minus_random"] = mean_drop("induction", mf) - mean_drop("random", mf)
    if mf in cfg.excl_fractions:
        res.summary["exclusion_gap"] = mean_drop("fv_excl_induction", mf) - mean_drop("induction_excl_fv", mf)

    # -- (2b) function-vector steering on zero-shot held-out prompts ----------------------------------
    t = time.perf_counter()
    k_heads = sets.get(("fv", cfg.steer_fraction, 0)) or ih.select_heads(cie, cfg.steer_fraction)
    layer = L // 3
    steer = {}
    for ti, name in enumerate(ctx.progress(cfg.eval_tasks, desc="steering")):
        train, test = ih.load_task(name).split(0.4, seed=seed)
        m_task = ih.mean_head_activations(model, train, n_mean=cfg.n_mean, n_shots=cfg.n_shots,
                                          random_state=[seed, ti, 7], tokenizer=tok)
        acc0 = ih.steered_accuracy(model, test, None, layer=layer, tokenizer=tok)
        acc_fv = ih.steered_accuracy(model, test, ih.function_vector(model, k_heads, m_task), layer=layer, tokenizer=tok)
        acc_r = []
        for r in range(cfg.n_random):
            rh = ih.select_heads(ih.random_scores((L, H), seed * 1000 + 500 + r), len(k_heads))
            acc_r.append(ih.steered_accuracy(model, test, ih.function_vector(model, rh, m_task), layer=layer,
                                             tokenizer=tok))
        for meth, v in (("zero_shot", acc0), ("fv_heads", acc_fv), *[("random_heads", a) for a in acc_r]):
            res.add(method=meth, dataset=name, seed=seed, metric="zero_shot_accuracy", value=v, layer=layer)
        steer[name] = {"none": acc0, "fv": acc_fv, "random": float(np.mean(acc_r)),
                       "advantage": (acc_fv - acc0) - (float(np.mean(acc_r)) - acc0)}
        ctx.check_budget(f"steering {name}")
    timing["steering"] = time.perf_counter() - t
    res.summary["steering"] = steer
    res.summary["steering_tasks_ge_15pt"] = int(sum(s["advantage"] >= 0.15 for s in steer.values()))
    res.summary["steering_layer"] = layer
    res.summary["timing_s"] = timing
    return res


# -- claims -------------------------------------------------------------------------------------------
def _c1(r: Result) -> tuple[Any, ...]:
    s = r.summary
    ratio = s["induction_top5_mean"] / max(s["induction_median"], 1e-12)
    ok = s["n_induction_ge_04"] >= 3 and ratio >= 10
    return ok, {"n_heads_ge_0.4": s["n_induction_ge_04"], "top5_over_median": round(ratio, 1)}, \
        {"n_heads": 3, "ratio": 10}, {"median": s["induction_median"]}


def _c2a(r: Result) -> tuple[Any, ...]:
    s = r.summary
    ratio = s["fv_top5_mean"] / max(s["fv_median_abs"], 1e-30)
    sane = s["fv_finite"] and s["fv_min_heads_changed"] > 0
    return bool(sane and ratio >= 5), round(ratio, 1), 5.0, {"median_abs_cie": s["fv_median_abs"]}


def _c2b(r: Result) -> tuple[Any, ...]:
    s = r.summary
    adv = {k: round(v["advantage"], 3) for k, v in s["steering"].items()}
    return s["steering_tasks_ge_15pt"] >= 2, s["steering_tasks_ge_15pt"], 2, {"advantage_per_task": adv}


def _c3(r: Result) -> tuple[Any, ...]:
    s = r.summary
    mf = r.config["main_fraction"]
    return s["drop_fv_minus_random"] >= 0.10, round(s["drop_fv_minus_random"], 3), 0.10, \
        {"drop_random": round(s["drop"][f"random@{mf}"], 3), "drop_fv": round(s["drop"][f"fv@{mf}"], 3)}


def _c4(r: Result) -> tuple[Any, ...]:
    j = r.summary["jaccard_top5pct"]
    return j <= 0.5, round(j, 3), 0.5


def _c5(r: Result) -> tuple[Any, ...]:
    g = r.summary.get("exclusion_gap")
    return None, None if g is None else round(g, 3), "report only (paper: small in its smallest models)"


CLAIMS = [
    Claim("C1", ">= 3 heads with classic induction score >= 0.4 and top-5 mean >= 10x the median head", _c1),
    Claim("C2a", "FV heads are causal: mean CIE of the top-5 FV heads >= 5x the median |CIE| (patches verified "
          "to change the logits)", _c2a,
          scale_note="5 FV tasks x 10 corrupted 5-shot prompts (paper: 37 tasks x 100 prompts, 10-shot)"),
    Claim("C2b", "The top-5 % FV-head function vector (layer L/3) raises zero-shot first-token accuracy on >= 2 "
          "held-out tasks by >= 15 points more than a random-head vector (3 draws)", _c2b,
          scale_note="20 zero-shot test queries per task; quick mode uses 2 tasks and 8 mean prompts"),
    Claim("C3", "Mean-ablating the top 5 % FV heads lowers 5-shot held-out accuracy by >= 10 points more than "
          "ablating 5 % random heads (3 draws)", _c3,
          scale_note="5 held-out tasks x 25 prompts (quick: 2 x 12); first-token accuracy, last-position mean "
          "ablation as in the official code"),
    Claim("C4", "Induction and FV heads are distinct: Jaccard(top-5 % induction, top-5 % FV) <= 0.5", _c4),
    Claim("C5", "Key contrast with exclusion (report only): drop(FV minus top-2 % induction) - drop(induction "
          "minus top-2 % FV) at 5 %", _c5,
          scale_note="The paper finds this gap small in its smallest models; SmolLM2-135M is one of those sizes"),
]
QUICK_EXPECTED_PASS = ("C1", "C2a", "C2b", "C3", "C4")  # from the runner helper's quick run; the paper's owner revises it


# -- plots ---------------------------------------------------------------------------------------------
def _heat(mat: Any, title: str, cmap: str) -> Any:
    from trustlab.results.plots import new_figure

    a = np.asarray(mat, dtype=float)
    fig, ax = new_figure(4.2, 5.2)
    im = ax.imshow(a, aspect="auto", cmap=cmap, origin="lower")
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax)
    return fig


def PLOTS(result: Result) -> dict[str, Any]:
    from trustlab.results.plots import new_figure

    s = result.summary
    out = {"induction_heatmap": _heat(s["induction"], "classic induction score", "viridis"),
           "fv_heatmap": _heat(s["fv"], "FV score (mean CIE)", "magma")}
    fig, ax = new_figure(4.5, 3.6)
    ax.scatter(np.ravel(s["induction"]), np.ravel(s["fv"]), s=8, alpha=0.7)
    ax.set_xlabel("induction score")
    ax.set_ylabel("FV score (CIE)")
    ax.set_title("per-head scores", fontsize=9)
    out["score_scatter"] = fig
    df = result.to_frame()
    acc = df[df["metric"] == "accuracy"]
    fig, ax = new_figure(6.0, 3.8)
    clean = float(acc[acc["method"] == "clean"]["value"].mean())
    for meth in ("fv", "induction", "random", "fv_excl_induction", "induction_excl_fv"):
        sub = acc[acc["method"] == meth]
        if sub.empty:
            continue
        g = sub.groupby("fraction")["value"].mean()
        xs = [0.0, *[float(x) for x in g.index]]
        ax.plot([100 * x for x in xs], [clean, *g.values.tolist()], marker="o", label=meth)
    ax.set_xlabel("% of heads mean-ablated (last position)")
    ax.set_ylabel("5-shot first-token accuracy")
    ax.set_title("held-out ICL accuracy vs ablation (mean over tasks)", fontsize=9)
    ax.legend(fontsize=7)
    out["ablation_curves"] = fig
    steer = s.get("steering", {})
    if steer:
        fig, ax = new_figure(6.0, 3.4)
        names = list(steer)
        x = np.arange(len(names))
        for j, key in enumerate(("none", "random", "fv")):
            ax.bar(x + (j - 1) * 0.27, [steer[n][key] for n in names], 0.27, label=key)
        ax.set_xticks(x, names, rotation=20, ha="right", fontsize=7)
        ax.set_ylabel("zero-shot first-token accuracy")
        ax.set_title(f"function-vector steering at layer {s.get('steering_layer')}", fontsize=9)
        ax.legend(fontsize=7)
        out["steering"] = fig
    return out
