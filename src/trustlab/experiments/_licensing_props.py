"""Licensing's property measurements (spec 3.5, P1-P5, secondary lines since issue 41): money, game
efficiency, symmetry, null players and duplicates of the demo, each on the run's own numbers."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.results.result import Result


def _share(rep: Any, owner: str) -> float:
    return next(o.share for o in rep.owners if o.owner == owner)


def _money(cfg: Any, rng: np.random.Generator) -> dict[str, Any]:
    """P1: random weights (negatives, exact ties, zeros), pools and currencies through the public money API."""
    from fractions import Fraction

    from trustlab.core.exceptions import InputError
    from trustlab.methods.licensing import minor_unit_of, split_pool, to_minor_units

    mismatches, worst_gap, beyond, nothing = 0, Fraction(0), 0, 0
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
            split = split_pool(w, total, [f"o{i}" for i in range(n)], negative="allow", fallback="unpaid")
        except InputError:  # negative weights nearly cancel: amounts beyond int64, refused with a clear error
            beyond += 1
            continue
        if split.unpaid_minor:  # the exact sum is <= 0 (or numerically zero): the rule pays nothing, says so
            nothing += 1
            mismatches += int(split.unpaid_minor != total or split.payouts.any())
            continue
        pay = split.payouts
        mismatches += int(pay.sum() != total)
        s = sum(Fraction(float(x)) for x in w)
        worst_gap = max(worst_gap, max(abs(Fraction(int(p)) - Fraction(total) * Fraction(float(x)) / s)
                                       for p, x in zip(pay, w)))
    return {"money_trials": cfg.money_trials, "money_mismatches": mismatches, "money_max_quota_gap": float(worst_gap),
            "money_beyond_int64": beyond, "money_nothing_left": nothing}


def _efficiency(cfg: Any, d: dict[str, Any], res: Result, common: dict[str, Any]) -> None:
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


def _symmetry_null(cfg: Any, d: dict[str, Any], res: Result, common: dict[str, Any]) -> None:
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


def _duplicates(cfg: Any, d: dict[str, Any], res: Result, common: dict[str, Any]) -> None:
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


def _noise_and_determinism(cfg: Any, d: dict[str, Any], res: Result, common: dict[str, Any], demo: Any) -> None:
    """P6: flipped labels have low values; shares fall with the flip rate. P7: byte-identical JSON."""
    from scipy.stats import spearmanr

    from trustlab.experiments._licensing_data import _flip
    from trustlab.methods.licensing import compensation_report

    seed = common["random_state"]
    args = (d["X_demo"], d["y_demo"], d["owner_demo"], d["X_val"], d["y_val"])
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
