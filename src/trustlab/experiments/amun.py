"""Experiment ``amun``: unlearning by fine-tuning on adversarial examples (Ebrahimpour-Boroojeny et al., ICML 2025).

"Noisy digits" (pixels/16 + fixed seeded N(0, 0.35) noise, clipped, so membership is visible), an MLP
64-256-256-10 trained to memorise (SGD 0.05, momentum 0.9, 60 epochs), train 600 / test 1,197, forget 10 %
(60) and ~17 % (100). Online RMIA with reference models on complementary random halves of all 1,797 points.
Every method's hyper-parameters (lr x epochs; for AMUN also the variant) are tuned on a *separate* forget split
of the same size and evaluated on a disjoint one.

Claims (issue 6): (B1) evaluator sanity: the original model's RMIA forget-vs-test AUC >= 60 and the retrained
model's within 50 +- 6; (B2) the AMUN variant chosen on the tuning split has a lower mean Avg Gap than FT, GA
and RL, and lower than SalUn by >= 0.5; (B3) |AUC(AMUN) - AUC(retrain)| <= 5 and a test-accuracy drop vs the
original <= 3 points.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.base import PaperInfo
from trustlab.experiments.base import Claim, ExperimentConfig, RunContext
from trustlab.results.result import Result

PAPER = PaperInfo(title="Not All Wrong is Bad: Using Adversarial Examples for Unlearning (AMUN)", arxiv="2503.00917",
                  repo="https://github.com/Ali-E/AMUN", commit="9e341a9")
TITLE = "AMUN: unlearning with adversarial examples, evaluated by online RMIA"
EXTRAS: tuple[str, ...] = ("torch",)

#: method family -> (class name, fixed kwargs)
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "FT": ("FineTune", {}),
    "GA": ("GradientAscent", {}),
    "RL": ("RandomLabel", {}),
    "BS": ("BoundaryShrink", {}),
    "l1-sparse": ("L1Sparse", {}),
    "SalUn": ("SalUn", {}),
    "AMUN[amun]": ("AMUN", {"variant": "amun"}),
    "AMUN[advonly]": ("AMUN", {"variant": "advonly"}),
}

#: hyper-parameters used when ``tune=False`` (quick mode): the most frequent choice of the default run's tuning
#: splits (lr grid 0.005-0.2 x epochs 5/10/20; never chosen on an evaluation split)
FIXED: dict[str, dict[str, Any]] = {
    "FT": {"lr": 0.2, "epochs": 20},
    "GA": {"lr": 0.02, "epochs": 20},
    "RL": {"lr": 0.05, "epochs": 5},
    "BS": {"lr": 0.005, "epochs": 10},
    "l1-sparse": {"lr": 0.2, "epochs": 20},
    "SalUn": {"lr": 0.05, "epochs": 5},
    "AMUN[amun]": {"lr": 0.2, "epochs": 20},
    "AMUN[advonly]": {"lr": 0.1, "epochs": 20},
}


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: tuple[int, ...] = (0, 1, 2)
    noise: float = 0.35
    data_seed: int = 0
    n_train: int = 600
    forget_sizes: tuple[int, ...] = (60, 100)
    hidden: tuple[int, ...] = (256, 256)
    train_epochs: int = 60
    train_lr: float = 0.05
    n_refs: int = 16
    ref_epochs: int = 60
    methods: tuple[str, ...] = tuple(FAMILIES)
    tune: bool = True
    lr_grid: tuple[float, ...] = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
    epochs_grid: tuple[int, ...] = (5, 10, 20)
    auc_balanced: bool = False   # AUC on all test points (lower variance) instead of balanced subsamples
    gamma: float = 2.0

    @classmethod
    def quick(cls) -> Config:
        return cls(seeds=(0, 1, 2), forget_sizes=(100,), n_refs=8, ref_epochs=30,
                   methods=("FT", "GA", "RL", "SalUn", "AMUN[amun]", "AMUN[advonly]"), tune=False)

    @classmethod
    def paper(cls) -> Config:
        """Closer to the paper's protocol at digits scale: 5 seeds, 64 reference models, finer grid."""
        return cls(seeds=(0, 1, 2, 3, 4), n_refs=64, lr_grid=(0.005, 0.01, 0.02, 0.05, 0.1, 0.2),
                   epochs_grid=(5, 10, 20, 40))

    def validate(self) -> None:
        super().validate()
        from trustlab.core.constraints import Interval, validate_value
        from trustlab.core.exceptions import ConfigError

        own = "amun.Config"
        validate_value(own, "noise", self.noise, [Interval("real", 0, None)])
        validate_value(own, "n_train", self.n_train, [Interval(int, 10, 1700)])
        validate_value(own, "n_refs", self.n_refs, [Interval(int, 2, None)])
        if self.n_refs % 2:
            raise ConfigError(f"The 'n_refs' field of {own} must be even (complementary halves). Got {self.n_refs} instead.")
        if not self.forget_sizes or any(not isinstance(k, int) or k < 1 or 2 * k >= self.n_train
                                        for k in self.forget_sizes):
            raise ConfigError(f"The 'forget_sizes' field of {own} must be ints in [1, n_train/2). "
                              f"Got {self.forget_sizes!r} instead.")
        unknown = [m for m in self.methods if m not in FAMILIES]
        if unknown:
            raise ConfigError(f"The 'methods' field of {own} must be names from {sorted(FAMILIES)}. Got {unknown!r} instead.")
        if not any(m.startswith("AMUN") for m in self.methods):
            raise ConfigError(f"The 'methods' field of {own} must include an AMUN variant. Got {self.methods!r} instead.")


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if x is not None and np.isfinite(x)]
    return float(np.mean(xs)) if xs else float("nan")


def run(cfg: Config, ctx: RunContext) -> Result:
    import torch

    from trustlab.data import load_digits_images
    from trustlab.methods import amun as A
    from trustlab.models import MLP

    torch.set_num_threads(1)
    res = Result("amun", "", {})
    ds = load_digits_images(noise=cfg.noise, seed=cfg.data_seed)
    X, y = ds.X.astype(np.float32), np.asarray(ds.y, np.int64)
    n_in = int(np.prod(X.shape[1:]))

    def make_model() -> Any:
        return MLP(n_in, 10, hidden=cfg.hidden)

    train_spec = A.SGDSpec(epochs=cfg.train_epochs, lr=cfg.train_lr, momentum=0.9, batch_size=64)
    ref_spec = A.SGDSpec(epochs=cfg.ref_epochs, lr=cfg.train_lr, momentum=0.9, batch_size=64)

    t0 = time.perf_counter()
    refs = A.fit_reference_models(make_model, X, y, cfg.n_refs, spec=ref_spec, seed=cfg.data_seed,
                                  progress=lambda it: ctx.progress(it, desc="reference models", total=cfg.n_refs))
    res.summary["rmia_refs_s"] = time.perf_counter() - t0
    res.summary["rmia_per_ref_s"] = refs.per_model_s
    ctx.check_budget("reference models")

    def evaluate(model: Any, data: Any, f: np.ndarray, seed: int) -> dict[str, float]:
        return A.evaluate_unlearning(model, data, f, refs, balanced=cfg.auc_balanced, seed=seed, gamma=cfg.gamma)

    grid = list(itertools.product(cfg.lr_grid, cfg.epochs_grid)) if cfg.tune else [None]
    gaps: dict[str, list[float]] = {}
    per: dict[str, dict[str, list[float]]] = {}
    chosen_variant: list[str] = []
    timings: dict[str, list[float]] = {}

    def record(method: str, seed: int, size: int, split: str, m: dict[str, float], **extra: Any) -> None:
        for k, v in m.items():
            res.add(method=method, seed=seed, forget_size=size, split=split, metric=k, value=v, **extra)

    for seed in ctx.progress(cfg.seeds, desc="seeds"):
        rng = np.random.default_rng(1000 + seed)
        perm = rng.permutation(len(X))
        tr, te = np.sort(perm[: cfg.n_train]), np.sort(perm[cfg.n_train:])
        data = A.UnlearningData(X=X, y=y, train_idx=tr, test_idx=te, num_classes=10)
        torch.manual_seed(seed)
        model = make_model()
        t = time.perf_counter()
        A.sgd_train(model, X[tr], y[tr], train_spec, seed=seed)
        timings.setdefault("train", []).append(time.perf_counter() - t)
        for size in cfg.forget_sizes:
            pick = rng.permutation(tr)
            splits = {"tune": np.sort(pick[:size]), "eval": np.sort(pick[size:2 * size])}
            retrained: dict[str, dict[str, float]] = {}
            for split, f in splits.items():
                t = time.perf_counter()
                with A.Retrain(lr=cfg.train_lr, epochs=cfg.train_epochs, weight_decay=0.0,
                               random_state=seed).apply(model, f, data):
                    timings.setdefault("retrain", []).append(time.perf_counter() - t)
                    retrained[split] = evaluate(model, data, f, seed)
            m_orig = evaluate(model, data, splits["eval"], seed)
            record("Original", seed, size, "eval", {**m_orig, "gap": A.avg_gap(m_orig, retrained["eval"])})
            record("Retrain", seed, size, "eval", {**retrained["eval"], "gap": 0.0})
            for key in ("Original", "Retrain"):
                m = m_orig if key == "Original" else retrained["eval"]
                per.setdefault(key, {}).setdefault("AUC", []).append(m["AUC"])
                per[key].setdefault("TA", []).append(m["TA"])
                per[key].setdefault("UA", []).append(m["UA"])
            gaps.setdefault("Original", []).append(A.avg_gap(m_orig, retrained["eval"]))

            def run_one(fam: str, hp: dict[str, Any], f: np.ndarray, split: str, *, model: Any = model,
                        data: Any = data, seed: int = seed,
                        retrained: dict[str, Any] = retrained) -> tuple[float, dict[str, float]]:
                cls_name, fixed = FAMILIES[fam]
                est = getattr(A, cls_name)(**fixed, **hp, random_state=seed)
                t = time.perf_counter()
                try:
                    handle = est.apply(model, f, data)
                except A.UnlearningDivergedError:
                    return float("inf"), {}
                with handle:
                    timings.setdefault(fam, []).append(time.perf_counter() - t)
                    m = evaluate(model, data, f, seed)
                return A.avg_gap(m, retrained[split]), m

            tuned_gap: dict[str, float] = {}
            for fam in cfg.methods:
                if cfg.tune:
                    best = (float("inf"), None)
                    for lr, ep in grid:
                        hp = {"lr": lr, "epochs": ep}
                        g, _ = run_one(fam, hp, splits["tune"], "tune")
                        res.add(method=fam, seed=seed, forget_size=size, split="tune", metric="gap",
                                value=g, lr=lr, epochs=ep)
                        if g < best[0]:
                            best = (g, hp)
                    ctx.check_budget(f"tuning {fam}")
                    hp = best[1] or {"lr": min(cfg.lr_grid), "epochs": min(cfg.epochs_grid)}
                    tuned_gap[fam] = best[0]
                else:
                    hp = dict(FIXED[fam])
                    tuned_gap[fam] = run_one(fam, hp, splits["tune"], "tune")[0]
                g, m = run_one(fam, hp, splits["eval"], "eval")
                record(fam, seed, size, "eval", {**m, "gap": g}, lr=hp["lr"], epochs=hp["epochs"],
                       tune_gap=tuned_gap[fam])
                gaps.setdefault(fam, []).append(g)
                for k in ("AUC", "TA", "UA", "RA"):
                    if k in m:
                        per.setdefault(fam, {}).setdefault(k, []).append(m[k])
            amuns = [f for f in cfg.methods if f.startswith("AMUN")]
            pick_fam = min(amuns, key=lambda f: tuned_gap[f])
            chosen_variant.append(pick_fam)
            last = {r["metric"]: r["value"] for r in res.records
                    if r["method"] == pick_fam and r["seed"] == seed and r["forget_size"] == size and r["split"] == "eval"}
            record("AMUN", seed, size, "eval", last, variant=pick_fam)
            gaps.setdefault("AMUN", []).append(last["gap"])
            for k in ("AUC", "TA", "UA", "RA"):
                per.setdefault("AMUN", {}).setdefault(k, []).append(last.get(k, float("nan")))
            ctx.check_budget(f"seed {seed} size {size}")

    s = res.summary
    s["mean_gap"] = {k: _mean(v) for k, v in gaps.items()}
    s["mean_metrics"] = {k: {m: _mean(v) for m, v in d.items()} for k, d in per.items()}
    s["chosen_variant"] = chosen_variant
    s["orig_auc"] = _mean(per["Original"]["AUC"])
    s["retrain_auc"] = _mean(per["Retrain"]["AUC"])
    s["orig_auc_per_split"] = per["Original"]["AUC"]
    s["retrain_auc_per_split"] = per["Retrain"]["AUC"]
    s["amun_auc_gap_per_run"] = _mean([abs(a - r) for a, r in zip(per["AMUN"]["AUC"], per["Retrain"]["AUC"])])
    s["amun_ta_drop"] = _mean([o - a for a, o in zip(per["AMUN"]["TA"], per["Original"]["TA"])])
    # the paper's Avg Gap: |mean metric - mean retrain metric| per cell (forget size), metrics averaged over
    # seeds first (this reproduces Table 1's Avg Gap column from its own UA/RA/TA/AUC means); then the mean over
    # the forget-size cells.
    cells: dict[str, dict[int, dict[str, float]]] = {}
    for size in cfg.forget_sizes:
        rows = [r for r in res.records if r["split"] == "eval" and r["forget_size"] == size]
        for meth in {r["method"] for r in rows}:
            cells.setdefault(meth, {})[size] = {
                k: _mean([r["value"] for r in rows if r["method"] == meth and r["metric"] == k])
                for k in (*A.METRIC_KEYS, "AUC_margin")}
    s["cell_metrics"] = {m: {str(k): v for k, v in d.items()} for m, d in cells.items()}
    s["paper_gap"] = {m: _mean([A.avg_gap(cells[m][z], cells["Retrain"][z]) for z in cfg.forget_sizes
                                if all(np.isfinite(v) for v in cells[m][z].values())])
                      for m in cells}
    s["paper_gap_per_size"] = {m: {str(z): A.avg_gap(cells[m][z], cells["Retrain"][z]) for z in cfg.forget_sizes}
                               for m in cells}
    s["amun_auc_gap"] = _mean([abs(cells["AMUN"][z]["AUC"] - cells["Retrain"][z]["AUC"]) for z in cfg.forget_sizes])
    s["timings_s"] = {k: _mean(v) for k, v in timings.items()}
    s["n_splits"] = len(cfg.seeds) * len(cfg.forget_sizes)
    res.notes.append(f"tuning: {'grid lr ' + str(cfg.lr_grid) + ' x epochs ' + str(cfg.epochs_grid) if cfg.tune else 'off (fixed hyper-parameters from FIXED)'}; "
                     f"AMUN variant chosen per split on the tuning split: {chosen_variant}")
    res.notes.append(f"RMIA: {cfg.n_refs} reference MLPs ({cfg.ref_epochs} epochs) on complementary random halves of "
                     f"all {len(X)} points; {refs.per_model_s:.2f} s per reference model")
    return res


def _b1(r: Result) -> tuple[Any, ...]:
    o, t = r.summary["orig_auc"], r.summary["retrain_auc"]
    return (o >= 60 and abs(t - 50) <= 6, f"original {o:.1f}, retrain {t:.1f}", "original >= 60; retrain in 50 +- 6",
            "chance = 50")


def _b2(r: Result) -> tuple[Any, ...]:
    g, per_run = r.summary["paper_gap"], r.summary["mean_gap"]
    a = g["AMUN"]
    others = {k: g[k] for k in ("FT", "GA", "RL") if k in g}
    ok = all(a < v for v in others.values())
    if "SalUn" in g:
        ok = ok and (g["SalUn"] - a >= 0.5)
    shown = {**others, **({"SalUn": g["SalUn"]} if "SalUn" in g else {})}
    base = ", ".join(f"{k} {v:.2f}" for k, v in shown.items())
    extra = {k: g[k] for k in ("BS", "l1-sparse") if k in g}
    note = f" (not in the claim: {', '.join(f'{k} {v:.2f}' for k, v in extra.items())})" if extra else ""
    return (ok, f"AMUN {a:.2f} (per-run mean gap {per_run['AMUN']:.2f})",
            "< FT, GA, RL; <= SalUn - 0.5", base + note)


def _b3(r: Result) -> tuple[Any, ...]:
    d, drop = r.summary["amun_auc_gap"], r.summary["amun_ta_drop"]
    return (d <= 5 and drop <= 3, f"|AUC gap| {d:.2f} (per-run {r.summary['amun_auc_gap_per_run']:.2f}), "
            f"TA drop {drop:.2f}", "|AUC gap| <= 5 and TA drop <= 3",
            f"original TA {r.summary['mean_metrics']['Original']['TA']:.1f}")


CLAIMS = [
    Claim("B1", "Evaluator sanity: the original model's RMIA forget-vs-test AUC >= 60 and the retrained model's "
          "within 50 +- 6 (mean over seeds x forget sizes)", _b1,
          scale_note="noisy digits, MLP; n_forget 60/100 gives an AUC sd of about 4 per split"),
    Claim("B2", "The AMUN variant chosen on the tuning split has a lower Avg Gap (UA, RA, TA, RMIA AUC; the "
          "paper's definition on seed-averaged metrics, averaged over the forget sizes) to Retrain than FT, GA and "
          "RL, and lower than SalUn by >= 0.5", _b2,
          scale_note="quick mode: 1 seed, forget 100, fixed hyper-parameters (no tuning), 8 reference models"),
    Claim("B3", "|AUC(AMUN) - AUC(retrain)| <= 5 (seed-averaged AUCs per forget size) and AMUN's test-accuracy "
          "drop vs the original <= 3 points (mean over splits)", _b3),
]
QUICK_EXPECTED_PASS = ("B1", "B2")  # from the runner helper's quick run; the paper's owner revises it


def PLOTS(result: Result) -> dict[str, Any]:
    from trustlab.results.plots import new_figure

    g = result.summary.get("paper_gap", result.summary.get("mean_gap", {}))
    fig, ax = new_figure()
    names = list(g)
    ax.bar(range(len(names)), [g[n] for n in names])
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("mean Avg Gap to Retrain (lower is better)")
    ax.set_title("AMUN vs baselines (noisy digits, MLP)", fontsize=9)
    return {"avg_gap": fig}
