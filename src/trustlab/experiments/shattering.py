"""Experiment ``shattering``: representation shattering under knowledge editing (Nishi et al., ICML 2025).

Part A (synthetic, the paper's core): a cyclic knowledge graph (3 random orders, 24 relations, held-out
logical-inference facts), a 2-layer decoder trained from scratch in the run on random walks, then ROME edits
of order-I facts to counterfactual answers at cyclic distance d in {1..4} (and d = 0, the null control),
with AlphaEdit and constrained fine-tuning (FT-L) on the same edits as baselines. For every edit: efficacy,
R(D*) over all entity representations (residual after the edited block, fixed contexts) and the accuracy
drop on facts of *other* entities per order.

Part B (naturalistic, reported): ROME on SmolLM2-135M's "The month after {M} is" facts, edits to months d
further on; month-ring Spearman, R(D*) over the 12 months (weekdays as an unedited control structure) and
country-capital retention.

Pre-registered claims (issue 20, spec 3.5), written before the first default-mode run:
P  preconditions: direct recall >= 95 %, held-out logical inference >= 80 %, ROME efficacy >= 90 %
   (else claims 1-3 are void, and the run says so); since issue 39 two premises, pre-learned (recall and
   inference) and pre-edit-takes (ROME efficacy), that C1-C3 require;
C1 Spearman(d, R) >= 0.8 over per-edit values (d = 1..4) and mean R(4) >= 3 mean R(1);
C2 r^2(R, accuracy drop on other entities' facts) >= 0.5, and damage on the untouched orders (II, III)
   >= 50 % of the damage on the edited order (I);
C3 null control: edits to the current answer give R <= 0.02 and |accuracy change| <= 1 point;
C4 naturalistic (secondary, never changes the exit status): ROME efficacy (P(new) > P(old)) >= 80 %;
   Spearman(d, R) over the month edits > 0; mean month-ring Spearman after < before; capital retention.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.experiments._shattering_months import MONTHS
from trustlab.experiments._shattering_months import months as _months
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, Premise, RunContext
from trustlab.methods.shattering import PAPER as PAPER
from trustlab.results.result import Result

TITLE = "Representation shattering under knowledge editing (synthetic cyclic KG + SmolLM2 months)"
EXTRAS: tuple[str, ...] = ("llm",)
#: the quick gate's rule (5 quick seeds + knockout, docs/papers/shattering.md); C4a (secondary) left it. At quick
#: scale the decoder learns no inference (pre-learned FAIL), so C1-C3 are VOID; only the edit premise is gated
QUICK_EXPECTED_PASS: tuple[str, ...] = ("pre-edit-takes",)
#: the mechanism off: no edit is written (every edit's place is measured on the unedited model)
KNOCKOUT: tuple[str, ...] = ("edit=False",)

@dataclass(frozen=True)
class Config(ExperimentConfig):
    # synthetic world and model
    n_entities: int = 64
    holdout: float = 0.15
    d_model: int = 64
    n_heads: int = 4
    tie_embeddings: bool = False
    train_steps: int = 3000
    batch_size: int = 128
    lr: float = 3e-3
    weight_decay: float = 0.1
    n_walks: int = 50000
    composition: float = 0.1
    context_hops: int = 3
    n_contexts: int = 4
    # editing
    edit_layer: int = 1
    key: str = "last"
    rep_site: str = "blocks.1.resid_post"
    n_edits: int = 5
    distances: tuple[int, ...] = (1, 2, 3, 4)
    n_null: int = 3
    cov_walks: int = 2000
    v_steps: int = 25
    baselines: tuple[str, ...] = ("AlphaEdit", "FineTuneEdit")
    edit: bool = True  # False = the knockout: no edit is applied (synthetic and months)
    # naturalistic part (SmolLM2)
    llm: bool = True
    llm_model: str = "smollm2-135m-instruct"
    llm_sources: tuple[str, ...] = ("March", "June", "September")
    llm_distances: tuple[int, ...] = (1, 2, 3, 6)
    llm_layer: int = 8
    llm_rep_layers: tuple[int, ...] = (12, 20)
    llm_v_steps: int = 20

    @classmethod
    def quick(cls) -> Config:
        """A smaller graph trained briefly, 2 edits per distance at d in {1, 4}, one month edit (rule-based)."""
        return cls(n_entities=32, train_steps=600, n_walks=20000, n_edits=2, distances=(1, 4), n_null=1,
                   cov_walks=500, baselines=(), llm_sources=("March",), llm_distances=(1,), llm_rep_layers=(12,))

    @classmethod
    def paper(cls) -> Config:
        """Closer to the paper: 2048 entities, 150 k steps of batch 256 (hours; needs a GPU to be practical)."""
        return cls(n_entities=2048, d_model=96, train_steps=150000, batch_size=256, n_walks=2_000_000,
                   n_edits=16, cov_walks=20000, llm_sources=("March", "June", "September", "December"))

    def validate(self) -> None:
        super().validate()
        from trustlab.core.constraints import Interval, Options, validate_value
        from trustlab.core.exceptions import ConfigError

        for name in ("n_entities", "d_model", "n_heads", "train_steps", "batch_size", "n_walks", "context_hops",
                     "n_contexts", "n_edits", "cov_walks", "v_steps", "llm_v_steps"):
            validate_value("shattering.Config", name, getattr(self, name), [Interval(int, 1, None)])
        validate_value("shattering.Config", "n_null", self.n_null, [Interval(int, 0, None)])
        validate_value("shattering.Config", "key", self.key, [Options(["last", "subject"])])
        if not self.distances or any(d < 1 or d > self.n_entities // 2 for d in self.distances):
            raise ConfigError(f"The 'distances' field of shattering.Config must be non-empty ints in [1, "
                              f"n_entities // 2]. Got {self.distances!r} instead.")
        bad = [b for b in self.baselines if b not in ("AlphaEdit", "FineTuneEdit")]
        if bad or any(m not in MONTHS for m in self.llm_sources):
            raise ConfigError(f"shattering.Config: unknown baselines {bad} or source months {self.llm_sources}.")


def run(cfg: Config, ctx: RunContext) -> Result:
    import torch

    from trustlab.core.threads import limit_threads

    res = Result("shattering", "", cfg.to_dict())
    with limit_threads(max(1, min(2, torch.get_num_threads()))):
        _synthetic(cfg, ctx, res)
        if cfg.llm:
            ctx.check_budget("synthetic part")
            _months(cfg, ctx, res)
    return res


# -- part A: synthetic -----------------------------------------------------------------------------------
def _train(cfg: Config, res: Result, seed: int) -> tuple[Any, Any]:
    import time

    from trustlab.methods import shattering as sh

    kg = sh.CyclicKG(cfg.n_entities, 3, 4, cfg.holdout, seed)
    model = sh.make_kg_model(kg, d_model=cfg.d_model, n_heads=cfg.n_heads, tie_embeddings=cfg.tie_embeddings,
                             random_state=seed)
    t = time.perf_counter()
    hist = sh.train_kg_model(model, kg, steps=cfg.train_steps, batch_size=cfg.batch_size, lr=cfg.lr,
                             weight_decay=cfg.weight_decay, n_walks=cfg.n_walks, composition=cfg.composition,
                             random_state=seed)
    res.summary["train"] = {"wall_s": time.perf_counter() - t, "final_loss": float(hist.loss[-1]),
                            "n_params": int(sum(p.numel() for p in model.parameters())), "kg": kg.fingerprint()}
    return kg, model


class _Evaluator:
    """Fixed query tokens and representation inputs, so before/after numbers differ only by the edit."""

    def __init__(self, cfg: Config, kg: Any, model: Any, seed: int) -> None:
        from trustlab.methods import shattering as sh

        self.kg, self.model, self.cfg = kg, model, cfg
        kw = {"context_hops": cfg.context_hops, "n_contexts": cfg.n_contexts, "random_state": seed}
        self.facts = {s: kg.facts(s) for s in ("train", "heldout")}
        self.tokens = {s: sh.query_tokens(kg, f, **kw) for s, f in self.facts.items()}
        self.order = {s: np.array([kg.relation_spec(int(r))[0] for r in f[:, 1]]) for s, f in self.facts.items()}
        ents = np.arange(kg.n_entities)
        self.rep_inputs = np.stack([kg.contexts(ents, cfg.context_hops, random_state=seed * 7919 + c)
                                    for c in range(cfg.n_contexts)], axis=1).reshape(-1, 2 * cfg.context_hops + 1)
        self.kw = kw

    def correct(self) -> dict[str, np.ndarray]:
        from trustlab.methods import shattering as sh

        return {s: sh.fact_accuracy(self.model, self.kg, f, tokens=self.tokens[s], **self.kw).correct
                for s, f in self.facts.items()}

    def reps(self) -> np.ndarray:
        from trustlab.methods import shattering as sh

        return sh.extract_representations(self.model, self.rep_inputs, site=self.cfg.rep_site,
                                          n_contexts=self.cfg.n_contexts)


def _editors(cfg: Config) -> dict[str, Any]:
    from trustlab.methods import shattering as sh

    eds = {"ROME": sh.ROME(layer=cfg.edit_layer, v_steps=cfg.v_steps)}
    if "AlphaEdit" in cfg.baselines:
        eds["AlphaEdit"] = sh.AlphaEdit(layer=cfg.edit_layer, v_steps=cfg.v_steps)
    if "FineTuneEdit" in cfg.baselines:
        eds["FineTuneEdit"] = sh.FineTuneEdit(layer=cfg.edit_layer)
    return eds


def _edit_plan(cfg: Config, kg: Any, ok: np.ndarray, facts: np.ndarray, seed: int) -> list[tuple[int, int, int, int]]:
    """(subject, relation, new answer, d) for the null and counterfactual edits: order-I facts the model gets
    right, drawn without replacement by a seeded rule (never by outcome)."""
    rng = np.random.default_rng([seed, 20])
    cand = np.nonzero((ok == 1) & np.array([kg.relation_spec(int(r))[0] == 0 for r in facts[:, 1]]))[0]
    if not len(cand):
        cand = np.nonzero([kg.relation_spec(int(r))[0] == 0 for r in facts[:, 1]])[0]
    plan = []
    for d in (0, *cfg.distances):
        n = cfg.n_null if d == 0 else cfg.n_edits
        for i in rng.choice(cand, size=n, replace=len(cand) < n):
            x, r, y = (int(v) for v in facts[i])
            plan.append((x, r, kg.shifted(0, y, int(rng.choice([-1, 1])) * d), d))
    return plan


def _synthetic(cfg: Config, ctx: RunContext, res: Result) -> None:
    from trustlab.experiments._shattering_edits import edit_job
    from trustlab.methods import shattering as sh

    seed = cfg.seeds[0]
    kg, model = _train(cfg, res, seed)
    ctx.check_budget("training")
    ev = _Evaluator(cfg, kg, model, seed)
    base = ev.correct()
    reps0 = ev.reps()
    res.summary["pre"] = pre = {
        "direct": float(base["train"].mean()), "logical": float(base["heldout"].mean()),
        "ring_spearman": [sh.ring_spearman(reps0, kg.distance_matrix(o)) for o in range(3)]}
    stats = sh.key_covariance(model, cfg.edit_layer, kg.walks(cfg.cov_walks, 16, random_state=seed + 10_000)[0])
    res.summary["cov_condition"] = stats.condition
    plan = _edit_plan(cfg, kg, base["train"], ev.facts["train"], seed)
    # one executor task per planned edit (issue 46), every editor on it; results merged in plan order
    done = ctx.map(functools.partial(edit_job, cfg, ev, base, reps0, stats, seed), list(enumerate(plan)),
                   desc="shattering edits")
    edits: list[dict[str, Any]] = []
    example = None
    for rows, records, refused, ex in done:
        edits += rows
        res.records.extend(records)
        if refused:
            res.summary.setdefault("refused", []).extend(refused)
        example = example or ex
    ctx.check_budget(f"{len(plan)} edit(s)")
    res.summary["edits"] = edits
    res.summary["example"] = dict(example or {}, reps_before=reps0.tolist(), orders=kg.orders.tolist())
    rome = [e for e in edits if e["method"] == "ROME" and e["d"] > 0]
    pre["rome_efficacy"] = float(np.mean([e["efficacy"] for e in rome])) if rome else float("nan")


def _rome(r: Result, counterfactual: bool = True) -> list[dict[str, Any]]:
    return [e for e in r.summary.get("edits", []) if e["method"] == "ROME" and (e["d"] > 0) == counterfactual]


def _pre_learned(r: Result) -> CheckResult:
    p = r.summary["pre"]
    n = r.config["n_entities"]
    return CheckResult(bool(p["direct"] >= 0.95 and p["logical"] >= 0.80),
                       f"direct {100 * p['direct']:.1f} %, logical {100 * p['logical']:.1f} %", ">= 95 % / >= 80 %",
                       detail=f"chance {100 / n:.1f} % ({n} entities); ring Spearman per order at the representation "
                       f"site: {np.round(p['ring_spearman'], 3)}")


def _pre_edit(r: Result) -> CheckResult:
    eff = r.summary["pre"]["rome_efficacy"]
    return CheckResult(bool(eff >= 0.90), round(100 * eff, 1), ">= 90", unit="% ROME efficacy (counterfactual edits)",
                       detail=f"{len(_rome(r))} counterfactual edits")


def _c1(r: Result) -> CheckResult:
    from scipy.stats import spearmanr

    e = _rome(r)
    if len(e) < 2:
        return CheckResult(None, None, "rho >= 0.8 and ratio >= 3", detail="fewer than 2 counterfactual edits")
    d = np.array([x["d"] for x in e])
    R = np.array([x["R"] for x in e])
    rho = float(spearmanr(d, R)[0]) if len(set(d)) > 1 else float("nan")
    lo, hi = R[d == d.min()].mean(), R[d == d.max()].mean()
    ratio = float(hi / lo) if lo > 0 else float("inf")
    means = {int(k): round(float(R[d == k].mean()), 4) for k in sorted(set(d))}
    return CheckResult(bool(rho >= 0.8 and ratio >= 3), f"rho {rho:.3f}, R(d_max)/R(d_min) {ratio:.2f}",
                       "rho >= 0.8 and ratio >= 3", detail=f"mean R by d: {means}")


def _c2(r: Result) -> CheckResult:
    e = _rome(r)
    if len(e) < 3:
        return CheckResult(None, None, "r2 >= 0.5 and ratio >= 0.5", detail="fewer than 3 counterfactual edits")
    R = np.array([x["R"] for x in e])
    drop = np.array([x["drop_other"] for x in e])
    r2 = float(np.corrcoef(R, drop)[0, 1] ** 2) if len(e) > 2 and R.std() > 0 and drop.std() > 0 else float("nan")
    d1 = float(np.mean([x["drop_I"] for x in e]))
    d23 = float(np.mean([(x["drop_II"] + x["drop_III"]) / 2 for x in e]))
    frac = d23 / d1 if d1 > 0 else float("nan")
    return CheckResult(bool(r2 >= 0.5 and frac >= 0.5), f"r2 {r2:.3f}, damage(II,III)/damage(I) {frac:.2f}",
                       "r2 >= 0.5 and ratio >= 0.5", unit="",
                       detail=f"mean drop: order I {100 * d1:.2f} points, orders II/III {100 * d23:.2f} points")


def _c3(r: Result) -> CheckResult:
    e = _rome(r, counterfactual=False)
    if not e:
        return CheckResult(None, None, "R <= 0.02 and |change| <= 1 point", detail="no null edits in this config")
    R = max(x["R"] for x in e)
    ch = max(abs(x["drop_other"]) for x in e)
    real = [x["update_norm"] for x in _rome(r)]
    scale = float(np.median(real)) if real else 1.0
    if not r.config.get("edit", True):  # the knockout: no edit was written
        return CheckResult(None, f"max R {R:.4f}", "R <= 0.02 and |change| <= 1 point",
                           detail=f"{len(e)} null edits not applied (edit=False, the knockout)")
    if all(x["update_norm"] <= 1e-4 * scale for x in e):  # nothing was edited: R ~ 0 by construction
        return CheckResult(None, f"max R {R:.4f} (every update is 0)", "R <= 0.02 and |change| <= 1 point",
                           detail=f"{len(e)} null edits; ROME's v* optimisation stopped at step 0 on every "
                           "one (the model already predicts the current answer), so the update is below 1e-4 of the "
                           f"counterfactual edits' median norm ({scale:.3g}) and the null control did not run")
    return CheckResult(bool(R <= 0.02 and ch <= 0.01), f"max R {R:.4f}, max |change| {100 * ch:.2f} points",
                       "R <= 0.02 and |change| <= 1 point", detail=f"{len(e)} null edits")


def _c_baseline(name: str) -> Any:
    def check(r: Result) -> CheckResult:
        e = [x for x in r.summary.get("edits", []) if x["method"] == name and x["d"] > 0]
        if not e:
            return CheckResult(None, None, "report only", detail=f"{name} not run in this config")
        rome = _rome(r)
        return CheckResult(None, f"R {np.mean([x['R'] for x in e]):.4f}, drop {100 * np.mean([x['drop_other'] for x in e]):.2f}"
                           f" points, efficacy {100 * np.mean([x['efficacy'] for x in e]):.0f} %", "report only",
                           baseline=f"ROME R {np.mean([x['R'] for x in rome]):.4f}, drop "
                           f"{100 * np.mean([x['drop_other'] for x in rome]):.2f} points")
    return check


def _months_rows(r: Result) -> list[dict[str, Any]]:
    return r.summary.get("months", {}).get("edits", [])


def _c4a(r: Result) -> CheckResult:
    e = _months_rows(r)
    if not e:
        return CheckResult(None, None, ">= 80 %", detail="naturalistic part not run")
    eff = float(np.mean([x["efficacy"] for x in e]))
    par = float(np.mean([x["paraphrase"] for x in e]))
    return CheckResult(eff >= 0.8, round(100 * eff, 1), ">= 80", unit="%", detail=f"paraphrase {100 * par:.0f} %; "
                       f"{len(e)} edits")


def _c4b(r: Result) -> CheckResult:
    from scipy.stats import spearmanr

    e = _months_rows(r)
    if len(e) < 2 or len({x["d"] for x in e}) < 2:
        return CheckResult(None, None, "> 0", detail="needs edits at >= 2 distances")
    top = str(max(int(k) for k in e[0]["R"]))
    d = [x["d"] for x in e]
    R = [x["R"][top] for x in e]
    rho = float(spearmanr(d, R)[0])
    means = {k: round(float(np.mean([R[i] for i in range(len(d)) if d[i] == k])), 4) for k in sorted(set(d))}
    return CheckResult(rho > 0, round(rho, 3), "> 0", detail=f"mean R at layer {top} by d: {means}")


def _c4c(r: Result) -> CheckResult:
    m = r.summary.get("months", {})
    e = m.get("edits", [])
    if not e:
        return CheckResult(None, None, "after < before", detail="naturalistic part not run")
    top = max(m["ring_before"], key=lambda k: int(k))
    after = float(np.mean([x["ring_after"][top] for x in e]))
    cap = float(np.mean([x["capitals_retained"] for x in e]))
    return CheckResult(after < m["ring_before"][top], round(after, 3), "< before", baseline=round(m["ring_before"][top], 3),
                       detail=f"capital retention {100 * cap:.0f} % (before: {100 * m['capitals_before']:.0f} % "
                       f"correct); mean change of other months' successor log-prob "
                       f"{np.mean([x['succ_lp_change_others'] for x in e]):.3f}")


def _syn_note(c: dict[str, Any]) -> str:
    return (f"{c['n_entities']} entities x 3 orders x 24 relations, d_model {c['d_model']}, {c['train_steps']} steps "
            f"of {c['batch_size']} walks trained in the run (paper: 2048 entities, 150 k steps); {c['n_edits']} edits "
            f"per distance {tuple(c['distances'])}, seed {c['seeds'][0]}")


CLAIMS = [
    Premise("pre-learned", "The synthetic decoder learned the graph: direct recall >= 95 % and held-out logical "
            "inference >= 80 % (the old precondition P, first half)", _pre_learned, scale_note=_syn_note),
    Premise("pre-edit-takes", "The edits take: ROME efficacy on the counterfactual edits >= 90 % (the old "
            "precondition P, second half)", _pre_edit, scale_note=_syn_note),
    Claim("C1", "R(D*) grows with counterfactual distance: Spearman(d, R) >= 0.8 over per-edit values and "
          "R(d_max) >= 3 R(d_min)", _c1, scale_note=_syn_note, paper_value=None,
          requires=("pre-learned", "pre-edit-takes")),
    Claim("C2", "Shattering predicts damage: r^2(R, accuracy drop on other entities' facts) >= 0.5 and damage on "
          "the untouched orders >= 50 % of that on the edited order", _c2, scale_note=_syn_note, paper_value=0.905,
          requires=("pre-learned", "pre-edit-takes")),
    Claim("C3", "Null control: an edit to the current answer gives R(D*) <= 0.02 and |accuracy change| <= 1 point",
          _c3, scale_note=lambda c: f"{c['n_null']} null edits", requires=("pre-learned", "pre-edit-takes")),
    Claim("B1", "AlphaEdit on the same edits (report only, beside ROME)", _c_baseline("AlphaEdit"), secondary=True),
    Claim("B2", "Constrained fine-tuning (FT-L) on the same edits (report only, beside ROME)",
          _c_baseline("FineTuneEdit"), secondary=True),
    Claim("C4a", "SmolLM2 months: ROME efficacy P(new) > P(old) on a 2-shot prompt >= 80 %", _c4a, secondary=True,
          scale_note=lambda c: f"{len(c['llm_sources'])} source months x d in {tuple(c['llm_distances'])}, ROME at "
          f"layer {c['llm_layer']} without covariance, {c['llm_v_steps']} steps, 5 fixed templates"),
    Claim("C4b", "SmolLM2 months: R(D*) over the 12 months increases with d (Spearman > 0)", _c4b, secondary=True),
    Claim("C4c", "SmolLM2 months: mean month-ring Spearman after the edits is below before (capital retention "
          "reported)", _c4c, secondary=True),
]


# -- plots -----------------------------------------------------------------------------------------------
def _rings(before: Any, after: Any, order: Any, title: str) -> Any:
    from trustlab.methods.shattering import EditDiagnosis, ring_figure, shattering

    b, a = np.asarray(before), np.asarray(after)
    diag = EditDiagnosis(shattering(b, a), None, None, b, a, None)
    fig = ring_figure(diag, order=order)
    fig.suptitle(f"{title}; R(D*) = {diag.shattering:.3f}", fontsize=9)
    return fig


def PLOTS(result: Result) -> dict[str, Any]:
    from trustlab.results.plots import new_figure

    out: dict[str, Any] = {}
    s = result.summary
    ex = s.get("example", {})
    if ex.get("reps_after"):
        out["rings_synthetic"] = _rings(ex["reps_before"], ex["reps_after"], ex["orders"][0],
                                        f"synthetic, order I, ROME edit {ex['edit']}")
    mex = s.get("months", {}).get("example")
    if mex:
        out["rings_months"] = _rings(s["months"]["reps_before"], mex["reps_after"], None,
                                     f"SmolLM2 months, edit {mex['edit']}")
    edits = s.get("edits", [])
    fig, ax = new_figure(5.0, 3.6)
    for name in dict.fromkeys(e["method"] for e in edits):
        ds = sorted({e["d"] for e in edits if e["method"] == name})
        ax.plot(ds, [np.mean([e["R"] for e in edits if e["method"] == name and e["d"] == d]) for d in ds], "o-",
                label=name)
    m = _months_rows(result)
    if m:
        top = max(m[0]["R"], key=lambda k: int(k))
        ds = sorted({e["d"] for e in m})
        ax.plot(ds, [np.mean([e["R"][top] for e in m if e["d"] == d]) for d in ds], "s--", label="ROME, SmolLM2 months")
    ax.set_xlabel("counterfactual distance d")
    ax.set_ylabel("R(D*)")
    ax.set_title("shattering vs edit distance", fontsize=9)
    ax.legend(fontsize=7)
    out["r_vs_d"] = fig
    fig, ax = new_figure(5.0, 3.6)
    for name in dict.fromkeys(e["method"] for e in edits):
        sel = [e for e in edits if e["method"] == name]
        ax.scatter([e["R"] for e in sel], [100 * e["drop_other"] for e in sel], s=14, label=name)
    ax.set_xlabel("R(D*)")
    ax.set_ylabel("accuracy drop on other entities' facts (points)")
    ax.set_title("damage vs shattering (synthetic)", fontsize=9)
    ax.legend(fontsize=7)
    out["damage_vs_r"] = fig
    return out
