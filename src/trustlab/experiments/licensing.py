"""Experiment ``licensing``: a collective-licensing compensation report on the spec's demo (issue 22).

The position paper (Hazra et al., ICML 2025) has no experiments; its recommendation R5 is royalties paid
by each contributor's contribution. The demo of spec 3.4: digits, 10 owners x 100 points, owners 7-9 with
10/20/30 % of their labels flipped, owner 3 re-submitting owner 2's data, 300 validation points, a pool of
100,000 EUR. The claims are the properties P1-P7 of spec 3.5, each measured on this run's own numbers:
P1 money sums exactly; P2 game efficiency (exact methods to 1e-9, KNN-Shapley equal to the exact singleton
game, TMC within 3 standard errors of the exact values); P3 symmetry; P4 null players; P5 duplicates found
and gaming neutralised; P6 noisy labels (AUROC of -phi, shares fall with flip rate); P7 byte-identical JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.experiments._licensing_data import _flip, make_demo
from trustlab.experiments._licensing_premises import (
    PRE_LEARNED,
    PRE_RANGE,
    _pre_learned,
    _pre_values_vary,
    _premise_stats,
)
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, Premise, RunContext
from trustlab.methods.licensing import PAPER as PAPER
from trustlab.results.result import Result

TITLE = "Collective licensing: a contributor compensation report by data valuation"
EXTRAS: tuple[str, ...] = ()

#: the quick gate's rule (python -m trustlab.experiments._gates licensing: >= 4 of 5 quick seeds, not PASS under
#: KNOCKOUT): P1-P4, P5a and P7 hold for any utility, so they pass under the knockout and the rule leaves them out;
#: P2d is secondary (never gated)
QUICK_EXPECTED_PASS = ("pre-learned", "P5b", "P6a", "P6b")
#: the mechanism off: the validation labels are shuffled, so the utility the values are computed from carries no
#: information about the training points (the model's validation accuracy falls to chance)
KNOCKOUT: tuple[str, ...] = ("shuffle_val_labels=true",)


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: tuple[int, ...] = (0,)
    n_owners: int = 10
    points_per_owner: int = 100
    n_val: int = 300
    k: int = 5
    flip_rates: tuple[float, ...] = (0.1, 0.2, 0.3)  # the last owners' label-flip rates (owners 7, 8, 9)
    resubmitter: int = 3                              # owner who re-submits ...
    resubmitted: int = 2                              # ... this owner's data
    pool: float = 100000.0
    currency: str = "EUR"
    tmc_permutations: int = 300
    tmc_truncation: float = 0.01                      # the truncated TMC run (secondary P2d)
    banzhaf_samples: int = 1000
    money_trials: int = 2000
    noise_rate: float = 0.1                           # P6a: random label flips over the whole training set
    n_dup_inject: int = 50                            # P5a: exact copies and near copies injected (each)
    near_tol: float = 0.01                            # in pixel units of digits scaled to [0, 1] (grid 1/16)
    singleton_subsets: int = 5                        # P2a: 12-point subsets checked against the exact game
    logreg_game: bool = True                          # P2b also with the logistic-accuracy utility
    shuffle_val_labels: bool = False                  # True (the KNOCKOUT): validation labels permuted at random

    @classmethod
    def quick(cls) -> Config:
        return cls(points_per_owner=50, n_val=150, tmc_permutations=100, banzhaf_samples=300, money_trials=300,
                   n_dup_inject=25, singleton_subsets=2, logreg_game=False)

    @classmethod
    def paper(cls) -> Config:
        return cls(tmc_permutations=1000, banzhaf_samples=4000, money_trials=10000, seeds=(0, 1, 2))

    def validate(self) -> None:
        super().validate()
        from trustlab.core.constraints import Interval, validate_value
        from trustlab.core.exceptions import ConfigError

        for name in ("n_owners", "points_per_owner", "n_val", "k", "tmc_permutations", "banzhaf_samples",
                     "money_trials", "n_dup_inject", "singleton_subsets"):
            validate_value("licensing.Config", name, getattr(self, name), [Interval(int, 1, None)])
        validate_value("licensing.Config", "near_tol", self.near_tol, [Interval(float, 0, 1 / 32)])
        validate_value("licensing.Config", "noise_rate", self.noise_rate, [Interval(float, 0, 1)])
        if not 2 <= self.n_owners <= 11 or len(self.flip_rates) >= self.n_owners - 1:
            raise ConfigError(f"The 'n_owners' field of licensing.Config must be in [2, 11] (P3 adds an owner to "
                              f"the exact game) and exceed len(flip_rates) + 1. Got {self.n_owners}.")
        if 1797 < self.n_owners * self.points_per_owner + self.n_val:
            raise ConfigError("licensing.Config asks for more digits than the 1,797 available.")


def _share(rep: Any, owner: str) -> float:
    return next(o.share for o in rep.owners if o.owner == owner)


def _money(cfg: Config, rng: np.random.Generator) -> dict[str, Any]:
    """P1: random weights (negatives, exact ties, zeros), pools and currencies through the public money API."""
    from fractions import Fraction

    from trustlab.core.exceptions import InputError
    from trustlab.methods.licensing import largest_remainder, minor_unit_of, to_minor_units

    mismatches, worst_gap, beyond = 0, Fraction(0), 0
    for _ in range(cfg.money_trials):
        n = int(rng.integers(1, 30))
        w = np.round(rng.normal(size=n), int(rng.integers(1, 6)))
        w[rng.random(n) < 0.2] = 0.0
        w = np.maximum(w, 0.0) if rng.random() < 0.7 else w
        if w.sum() <= 0:
            w[0] = abs(w[0]) + abs(w.sum()) + 1.0
        cur = ["EUR", "JPY", "KWD"][int(rng.integers(0, 3))]
        pool = f"{rng.uniform(0.01, 1e7):.{int(rng.integers(0, 4))}f}"
        e = minor_unit_of(cur)
        try:
            total, _ = to_minor_units(pool, e)
        except ValueError:  # less than one minor unit
            continue
        try:
            pay = largest_remainder(w, total, [f"o{i}" for i in range(n)])
        except InputError:  # negative weights nearly cancel: amounts beyond int64, refused with a clear error
            beyond += 1
            continue
        mismatches += int(pay.sum() != total)
        s = sum(Fraction(float(x)) for x in w)
        worst_gap = max(worst_gap, max(abs(Fraction(int(p)) - Fraction(total) * Fraction(float(x)) / s)
                                       for p, x in zip(pay, w)))
    return {"money_trials": cfg.money_trials, "money_mismatches": mismatches, "money_max_quota_gap": float(worst_gap),
            "money_beyond_int64": beyond}


def run(cfg: Config, ctx: RunContext) -> Result:
    from scipy.stats import spearmanr

    from trustlab.methods.licensing import compensation_report

    res = Result("licensing", "", {})
    seed = cfg.seeds[0]
    d = make_demo(cfg, seed)
    if cfg.shuffle_val_labels:
        d["y_val"] = np.random.default_rng([seed, 9]).permutation(d["y_val"])
    _premise_stats(cfg, d, res)
    common = {"pool": cfg.pool, "currency": cfg.currency, "k": cfg.k, "random_state": seed}
    args = (d["X_demo"], d["y_demo"], d["owner_demo"], d["X_val"], d["y_val"])

    # -- the demo report (knn_shapley, exact dedup, counterfactual without dedup) -----------------------
    demo = compensation_report(*args, **common)
    res.summary["demo_report"] = demo.to_dict()
    res.summary["demo_markdown"] = demo.to_markdown()
    for o in demo.owners:
        for stage, v in (("no_dedup", o.share_no_dedup), ("dedup", o.share_dedup), ("final", o.share)):
            res.add(method="knn_shapley", dataset="digits-demo", seed=seed, owner=o.owner, metric="share",
                    stage=stage, value=v, payout_minor=o.payout_minor, flip_rate=float(d["rates"][int(o.owner)]))
    ctx.check_budget("demo report")

    res.summary.update(_money(cfg, np.random.default_rng([seed, 1])))
    res.summary["demo_payout_sum"] = int(sum(o.payout_minor for o in demo.owners))
    res.summary["demo_share_range_pp"] = 100 * float(max(o.share for o in demo.owners) - min(o.share for o in demo.owners))
    res.summary["demo_pool_minor"] = demo.pool_minor

    _efficiency(cfg, d, res, common)
    ctx.check_budget("efficiency")
    _symmetry_null(cfg, d, res, common)
    ctx.check_budget("symmetry and null players")
    _duplicates(cfg, d, res, common)
    ctx.check_budget("duplicates")

    # -- P6: noisy labels --------------------------------------------------------------------------------
    from sklearn.metrics import roc_auc_score

    from trustlab.methods.licensing import knn_shapley

    rng = np.random.default_rng([seed, 6])
    n = len(d["X"])
    f = rng.choice(n, int(round(cfg.noise_rate * n)), replace=False)
    y_noisy = _flip(d["y_clean"], f, rng)
    is_flip = np.zeros(n, dtype=bool)
    is_flip[f] = True
    phi = knn_shapley(d["X"], y_noisy, d["X_val"], d["y_val"], k=cfg.k)
    res.summary["noise_auroc"] = float(roc_auc_score(is_flip, -phi))
    res.summary["noise_auroc_cleanlab"] = _cleanlab_auroc(d["X"], y_noisy, is_flip, cfg.k)
    order = np.argsort(phi)
    res.summary["noise_precision_at_n_flipped"] = float(is_flip[order[:len(f)]].mean())
    res.add(method="knn_shapley", dataset="digits-noisy", seed=seed, metric="auroc", value=res.summary["noise_auroc"])
    rates = [float(d["rates"][int(o.owner)]) for o in demo.owners]
    shares = [o.share for o in demo.owners]
    res.summary["flip_share_spearman"] = float(spearmanr(rates, shares).statistic)
    res.summary["flip_share_spearman_max_possible"] = float(spearmanr(rates, -np.array(rates) - 1e-9 *
                                                                      np.arange(len(rates))).statistic)
    demo_flags = [o.n_flagged_noisy for o in demo.owners]
    res.summary["demo_flags_per_owner"] = demo_flags
    res.summary["demo_flipped_per_owner"] = [int(d["flipped"][d["owner"] == int(o.owner)].sum()) for o in demo.owners]

    # -- P7: determinism ---------------------------------------------------------------------------------
    same = []
    for kw in ({}, {"method": "tmc_shapley", "utility": "loglik", "n_samples": 50}):
        a = compensation_report(*args, **common, **kw).to_json()
        b = compensation_report(*args, **common, **kw).to_json()
        same.append(a == b)
    res.summary["json_identical"] = same
    other = compensation_report(*args, **{**common, "random_state": seed + 1}, method="tmc_shapley",
                                utility="loglik", n_samples=50).to_json()
    res.summary["json_differs_with_seed"] = other != b
    return res


def _efficiency(cfg: Config, d: dict[str, Any], res: Result, common: dict[str, Any]) -> None:
    """P2: exact methods to 1e-9; KNN-Shapley against the exact singleton game; TMC against exact."""
    from trustlab.methods.licensing import (
        KNNUtility,
        compensation_report,
        exact_shapley,
        knn_shapley,
    )

    args = (d["X_demo"], d["y_demo"], d["owner_demo"], d["X_val"], d["y_val"])
    resid = {"knn_shapley": compensation_report(*args, **common, counterfactual=False).efficiency_residual}
    utilities = ["knn", "loglik"] + (["logreg_acc"] if cfg.logreg_game else [])
    exact = {}
    for u in utilities:
        rep = compensation_report(*args, **common, method="owner_shapley_exact", utility=u, counterfactual=False)
        resid[f"owner_shapley_exact/{u}"] = rep.efficiency_residual
        exact[u] = {o.owner: o.raw_value for o in rep.owners}
        res.add(method="owner_shapley_exact", utility=u, dataset="digits-demo", metric="efficiency_residual",
                value=rep.efficiency_residual, seed=common["random_state"])
    res.summary["efficiency_residuals"] = resid
    rng = np.random.default_rng([common["random_state"], 2])
    gaps = []
    for _ in range(cfg.singleton_subsets):
        rows = rng.choice(len(d["X"]), 12, replace=False)
        Xs, ys = d["X"][rows], d["y"][rows]
        ok = np.flatnonzero(np.isin(d["y_val"], ys))  # validation points of the subset's classes
        val = rng.choice(ok, min(50, len(ok)), replace=False)
        kk = int(rng.integers(1, cfg.k + 1))
        phi = knn_shapley(Xs, ys, d["X_val"][val], d["y_val"][val], k=kk)
        ex = exact_shapley(KNNUtility(kk).game(Xs, ys, d["X_val"][val], d["y_val"][val], np.arange(12)))
        gaps.append(float(np.max(np.abs(phi - ex.values))))
    res.summary["knn_vs_exact_singleton_max_abs"] = max(gaps)
    tmc = compensation_report(*args, **common, method="tmc_shapley", utility="knn", n_samples=cfg.tmc_permutations,
                              counterfactual=False)
    z = [abs(o.raw_value - exact["knn"][o.owner]) / o.value_se for o in tmc.owners if o.value_se]
    res.summary["tmc_within_3se_fraction"] = float(np.mean(np.array(z) <= 3.0))
    res.summary["tmc_max_z"] = float(max(z))
    res.summary["tmc_residual"] = tmc.efficiency_residual
    res.summary["tmc_sum_se"] = tmc.efficiency_se
    trunc = compensation_report(*args, **common, method="tmc_shapley", utility="knn", n_samples=cfg.tmc_permutations,
                                tmc_tol=cfg.tmc_truncation, counterfactual=False)
    res.summary["tmc_truncated_residual"] = trunc.efficiency_residual
    res.summary["tmc_truncated_sum_se"] = trunc.efficiency_se
    bz = compensation_report(*args, **common, method="owner_banzhaf_msr", utility="knn", n_samples=cfg.banzhaf_samples,
                             counterfactual=False)
    res.summary["banzhaf_reported_efficient"] = bz.efficient
    res.summary["banzhaf_sum_minus_gain"] = float(bz.sum_raw - (bz.v_full - bz.v_empty))


def _symmetry_null(cfg: Config, d: dict[str, Any], res: Result, common: dict[str, Any]) -> None:
    """P3: a twin owner (owner 0's points, shuffled, dedup off). P4: a ghost, a copycat, a dummy."""
    from trustlab.methods.licensing import KNNUtility, compensation_report, exact_shapley

    rng = np.random.default_rng([common["random_state"], 3])
    src = np.flatnonzero(d["owner"] == 0)
    twin = rng.permutation(src)
    X = np.vstack([d["X"], d["X"][twin]])
    y = np.concatenate([d["y"], d["y"][twin]])
    owner = np.concatenate([d["owner"], np.full(len(twin), cfg.n_owners)])
    sym = {}
    for method in ("knn_shapley", "owner_shapley_exact"):
        rep = compensation_report(X, y, owner, d["X_val"], d["y_val"], **common, method=method, dedup="off")
        a = next(o for o in rep.owners if o.owner == "0")
        b = next(o for o in rep.owners if o.owner == str(cfg.n_owners))
        sym[method] = {"raw_gap": abs(a.raw_value - b.raw_value), "payout_gap": abs(a.payout_minor - b.payout_minor)}
    res.summary["symmetry"] = sym
    # P4a ghost (registered, no points) and P4b copycat (only copies of owner 1's points, dedup "first")
    cp = d["owner"] == 1
    Xc = np.vstack([d["X"], d["X"][cp]])
    yc = np.concatenate([d["y"], d["y"][cp]])
    oc = np.concatenate([d["owner"].astype(str), np.full(int(cp.sum()), "copycat")])
    registry = [str(o) for o in range(cfg.n_owners)] + ["copycat", "ghost"]
    rep = compensation_report(Xc, yc, oc, d["X_val"], d["y_val"], owners=registry, **common)
    null = {name: {"raw": next(o.raw_value for o in rep.owners if o.owner == name),
                   "payout": next(o.payout_minor for o in rep.owners if o.owner == name)} for name in ("ghost", "copycat")}
    # P4c dummy owner in the exact KNN game: far-away points of a class absent from the validation set
    rows = rng.choice(len(d["X"]), cfg.points_per_owner, replace=False)
    Xd = np.vstack([d["X"], d["X"][rows] + 100.0])
    yd = np.concatenate([d["y"], np.full(len(rows), 10)])
    players = np.concatenate([d["owner"], np.full(len(rows), cfg.n_owners)])
    ex = exact_shapley(KNNUtility(cfg.k).game(Xd, yd, d["X_val"], d["y_val"], players))
    null["dummy_exact_game"] = {"raw": float(ex.values[-1])}
    res.summary["null_players"] = null


def _duplicates(cfg: Config, d: dict[str, Any], res: Result, common: dict[str, Any]) -> None:
    """P5a: injected exact and near copies found; P5b: self-duplication and re-submission gain nothing."""
    from trustlab.methods.licensing import compensation_report, find_duplicates

    rng = np.random.default_rng([common["random_state"], 5])
    n = len(d["X"])
    pick = rng.choice(n, 2 * cfg.n_dup_inject, replace=False)
    ex_rows, nr_rows = pick[:cfg.n_dup_inject], pick[cfg.n_dup_inject:]
    noise = rng.uniform(-0.9 * cfg.near_tol, 0.9 * cfg.near_tol, (len(nr_rows), d["X"].shape[1]))
    X = np.vstack([d["X"], d["X"][ex_rows], d["X"][nr_rows] + noise])
    y = np.concatenate([d["y"], d["y"][ex_rows], d["y"][nr_rows]])
    truth = np.zeros(len(X), dtype=bool)
    truth[n:] = True
    # natural duplicates of the base data (same bytes and label as an earlier row) count as true ones too
    _, first = np.unique(np.column_stack([d["X"], d["y"]]), axis=0, return_index=True)
    natural = np.ones(n, dtype=bool)
    natural[first] = False
    truth[:n] |= natural
    pr = {}
    for mode, rows in (("exact", slice(0, n + cfg.n_dup_inject)), ("near", slice(None))):
        found = find_duplicates(X[rows], y[rows], mode=mode, tol=cfg.near_tol).is_duplicate
        t = truth[rows]
        tp = int((found & t).sum())
        pr[mode] = {"precision": tp / max(1, int(found.sum())), "recall": tp / max(1, int(t.sum())),
                    "n_true": int(t.sum()), "n_found": int(found.sum())}
    res.summary["dup_detection"] = pr
    # P5b: owner r's share when (i) r duplicates its own data exactly, (ii) r duplicates it with noise <= tol,
    # (iii) the demo re-submission; against the clean base (no copies), with and without de-duplication.
    base = compensation_report(d["X"], d["y"], d["owner"], d["X_val"], d["y_val"], **common, counterfactual=False)
    r, s = cfg.resubmitted, cfg.resubmitter
    own = d["owner"] == r
    jitter = rng.uniform(-0.9 * cfg.near_tol, 0.9 * cfg.near_tol, (int(own.sum()), d["X"].shape[1]))
    cases = {"self_exact": (d["X"][own], str(r), "exact"), "self_near": (d["X"][own] + jitter, str(r), "near"),
             "resubmission": (d["X"][own], str(s), "exact")}
    out = {}
    for name, (Xadd, who, mode) in cases.items():
        Xg = np.vstack([d["X"], Xadd])
        yg = np.concatenate([d["y"], d["y"][own]])
        og = np.concatenate([d["owner"], np.full(len(Xadd), int(who))])
        rep = compensation_report(Xg, yg, og, d["X_val"], d["y_val"], **common, dedup=mode, near_tol=cfg.near_tol)
        out[name] = {"owner": who, "base_share": _share(base, who), "share_dedup": _share(rep, who),
                     "share_no_dedup": next(o.share_no_dedup for o in rep.owners if o.owner == who)}
        res.add(method="knn_shapley", dataset=f"digits-{name}", seed=common["random_state"], owner=who,
                metric="share_change_pp", value=100 * (out[name]["share_dedup"] - out[name]["base_share"]),
                no_dedup_pp=100 * (out[name]["share_no_dedup"] - out[name]["base_share"]))
    res.summary["gaming"] = out


def _cleanlab_auroc(X: np.ndarray, y: np.ndarray, is_flip: np.ndarray, k: int) -> float | None:
    """Baseline: cleanlab's label-quality score (self-confidence of 5-fold cross-validated KNN
    probabilities), the anchor library's label-issue ranking; None when cleanlab is not installed."""
    try:
        from cleanlab.rank import get_label_quality_scores
    except ImportError:
        return None
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import cross_val_predict
    from sklearn.neighbors import KNeighborsClassifier

    proba = cross_val_predict(KNeighborsClassifier(n_neighbors=max(k, 10)), X, y, cv=5, method="predict_proba")
    return float(roc_auc_score(is_flip, -get_label_quality_scores(y, proba)))


# -- claims -------------------------------------------------------------------------------------------------
def _p1(r: Result) -> CheckResult:
    s = r.summary
    ok = s["money_mismatches"] == 0 and s["demo_payout_sum"] == s["demo_pool_minor"] and s["money_max_quota_gap"] < 1
    return CheckResult(ok, f"{s['money_mismatches']} mismatches in {s['money_trials']} random splits; demo "
                       f"{s['demo_payout_sum']} of {s['demo_pool_minor']} cents; max |payout - quota| "
                       f"{s['money_max_quota_gap']:.3f}", "0 mismatches, every payout within 1 unit of its quota",
                       unit="minor units", detail=f"{s.get('money_beyond_int64', 0)} random split(s) refused: negative "
                       "weights nearly cancel and the amounts exceed int64 (largest_remainder raises InputError)")


def _p2a(r: Result) -> CheckResult:
    e = abs(r.summary["efficiency_residuals"]["knn_shapley"])
    g = r.summary["knn_vs_exact_singleton_max_abs"]
    return CheckResult(e <= 1e-9 and g <= 1e-12, f"residual {e:.2e}; max |KNN-Shapley - exact singleton game| {g:.2e}",
                       "<= 1e-9 and <= 1e-12")


def _p2b(r: Result) -> CheckResult:
    res = {k: abs(v) for k, v in r.summary["efficiency_residuals"].items() if k.startswith("owner_shapley_exact")}
    worst = max(res.values())
    return CheckResult(worst <= 1e-9, f"max {worst:.2e} over " + ", ".join(k.split("/")[1] for k in res), "<= 1e-9",
                       detail=str(res))


def _p2c(r: Result) -> CheckResult:
    s = r.summary
    frac, resid, se = s["tmc_within_3se_fraction"], abs(s["tmc_residual"]), s["tmc_sum_se"]
    ok = frac >= 0.9 and resid <= 3 * se + 1e-9
    return CheckResult(ok, f"{100 * frac:.0f} % of owners within 3 SE of exact (max z {s['tmc_max_z']:.2f}); "
                       f"residual {resid:.1e}", ">= 90 % and residual <= 3 SE(sum) + 1e-9")


def _p2d(r: Result) -> CheckResult:
    s = r.summary
    resid, se = abs(s["tmc_truncated_residual"]), s["tmc_truncated_sum_se"]
    return CheckResult(resid <= 3 * se, f"residual {resid:.2e}, SE(sum) {se:.2e}", "<= 3 SE(sum)")


def _p3(r: Result) -> CheckResult:
    sym = r.summary["symmetry"]
    raw = max(v["raw_gap"] for v in sym.values())
    pay = max(v["payout_gap"] for v in sym.values())
    return CheckResult(raw <= 1e-12 and pay <= 1, f"raw gap {raw:.1e}, payout gap {pay} cent(s) (KNN-Shapley and "
                       "exact owner game)", "<= 1e-12 and <= 1 cent")


def _p4(r: Result) -> CheckResult:
    nl = r.summary["null_players"]
    ok = (nl["ghost"]["payout"] == 0 and nl["ghost"]["raw"] == 0 and nl["copycat"]["payout"] == 0
          and nl["copycat"]["raw"] == 0 and abs(nl["dummy_exact_game"]["raw"]) <= 1e-12)
    return CheckResult(ok, f"ghost {nl['ghost']['payout']} / copycat {nl['copycat']['payout']} cents; dummy "
                       f"{nl['dummy_exact_game']['raw']:.1e}", "0 cents, 0 cents, |phi| <= 1e-12")


def _p5a(r: Result) -> CheckResult:
    pr = r.summary["dup_detection"]
    worst = min(min(v["precision"], v["recall"]) for v in pr.values())
    return CheckResult(worst >= 0.99, ", ".join(f"{m}: P {v['precision']:.3f} R {v['recall']:.3f}"
                                               for m, v in pr.items()), "precision and recall >= 0.99")


def _p5b(r: Result) -> CheckResult:
    g = r.summary["gaming"]
    dd = {k: 100 * (v["share_dedup"] - v["base_share"]) for k, v in g.items()}
    nd = {k: 100 * (v["share_no_dedup"] - v["base_share"]) for k, v in g.items()}
    worst = max(abs(v) for v in dd.values())
    return CheckResult(worst <= 0.5, f"max |change| {worst:.2f} pp with dedup", "<= 0.5 pp",
                       baseline="without dedup: " + ", ".join(f"{k} {v:+.1f}" for k, v in nd.items()), unit="pp")


def _p6a(r: Result) -> CheckResult:
    a, cl = r.summary["noise_auroc"], r.summary["noise_auroc_cleanlab"]
    return CheckResult(a >= 0.95, round(a, 4), ">= 0.95", baseline=None if cl is None else round(cl, 4),
                       detail="baseline: cleanlab label-quality score on 5-fold KNN probabilities")


def _p6b(r: Result) -> CheckResult:
    rho = r.summary["flip_share_spearman"]
    return CheckResult(rho <= -0.8, round(rho, 3), "<= -0.8",
                       detail=f"max attainable with the tied zero rates: {r.summary['flip_share_spearman_max_possible']:.3f}")


def _p7(r: Result) -> CheckResult:
    same = r.summary["json_identical"]
    return CheckResult(all(same), f"{sum(same)}/{len(same)} identical (knn_shapley, tmc_shapley); a new seed "
                       f"changes TMC: {r.summary['json_differs_with_seed']}", "all byte-identical")


def _note(cfg: dict[str, Any]) -> str:
    return (f"digits, {cfg['n_owners']} owners x {cfg['points_per_owner']} points, {cfg['n_val']} validation points, "
            f"k={cfg['k']}, flip rates {tuple(cfg['flip_rates'])} for the last owners")


CLAIMS = [
    Premise("pre-learned", f"The valuation's model learned: k-NN on all owners' points beats the majority class on the "
            f"validation set by >= {PRE_LEARNED:g} points", _pre_learned),
    Premise("pre-values-vary", f"The payouts are not constant: the demo's largest and smallest final shares differ by "
            f">= {PRE_RANGE:g} pp", _pre_values_vary),
    Claim("P1", "Money efficiency: payouts are integers of minor units summing exactly to the pool (random splits "
          "with negatives, ties and three currencies, and the demo), each within one unit of its quota", _p1,
          scale_note=lambda c: f"{c['money_trials']} random splits; " + _note(c)),
    Claim("P2a", "KNN-Shapley is efficient (sum = v(N) - v(empty) to 1e-9) and equals the exact Shapley value of "
          "the singleton KNN game (to 1e-12)", _p2a,
          scale_note=lambda c: f"{c['singleton_subsets']} random 12-point subsets, k drawn in [1, {c['k']}]; " + _note(c)),
    Claim("P2b", "Exact owner Shapley is efficient to 1e-9 for the KNN, naive-Bayes log-likelihood (and logistic) "
          "utilities", _p2b, scale_note=lambda c: "logistic utility " + ("included" if c["logreg_game"] else
                                                                          "skipped (quick mode)") + "; " + _note(c)),
    Claim("P2c", "TMC Shapley (no truncation) agrees with exact owner Shapley within 3 standard errors for >= 90 % of "
          "owners, and its efficiency residual is within 3 SE", _p2c,
          scale_note=lambda c: f"{c['tmc_permutations']} permutations; " + _note(c)),
    Claim("P2d", "Truncated TMC (tol = tmc_truncation) keeps efficiency within 3 SE of its per-permutation total",
          _p2d, secondary=True,
          scale_note=lambda c: f"tol {c['tmc_truncation']}, {c['tmc_permutations']} permutations; truncation biases "
          "the total by up to tol * v(N), which the SE does not cover"),
    Claim("P3", "Symmetry: an owner holding the same multiset of points as owner 0 (dedup off) gets the same raw "
          "value (1e-12) and payout (1 cent)", _p3, scale_note=_note),
    Claim("P4", "Null players: a registered owner with 0 points and an owner whose points are all removed by dedup "
          "get exactly 0; a dummy owner of the exact game gets 0 to 1e-12", _p4, scale_note=_note),
    Claim("P5a", "Injected exact and near duplicates (|delta|_inf <= tol) are found with precision and recall >= 0.99",
          _p5a, scale_note=lambda c: f"{c['n_dup_inject']} exact + {c['n_dup_inject']} near copies, tol "
          f"{c['near_tol']}; " + _note(c)),
    Claim("P5b", "With dedup, duplicating one's own data (exactly or within tol) or re-submitting another's changes "
          "one's share by <= 0.5 pp", _p5b, scale_note=_note, requires=("pre-learned", "pre-values-vary")),
    Claim("P6a", "Noisy labels: with 10 % flipped labels the AUROC of -phi (KNN-Shapley) is >= 0.95", _p6a,
          requires=("pre-learned",),
          scale_note=lambda c: f"{c['noise_rate']} of {c['n_owners'] * c['points_per_owner']} training labels "
          "flipped at random"),
    Claim("P6b", "Owners' shares decrease with their flip rate: Spearman(flip rate, share) <= -0.8 across the demo's "
          "owners", _p6b, requires=("pre-learned", "pre-values-vary"),
          scale_note=lambda c: _note(c) + "; the tied zero rates cap |rho| near 0.81"),
    Claim("P7", "Determinism: the same seed and inputs give a byte-identical JSON report", _p7, scale_note=_note),
]


def PLOTS(result: Result) -> dict[str, Any]:
    from trustlab.methods.licensing import CompensationReport
    from trustlab.results.plots import claims_plot

    rep = CompensationReport.from_dict(result.summary["demo_report"])
    return {"shares": rep.plot_shares(), "waterfall": rep.plot_waterfall(), "claims": claims_plot(result)}
