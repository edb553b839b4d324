"""Licensing's empirical measurements (issue 41): perturbed re-submission (G1/G1b), the embedded
de-duplication's cost on clean data (G2), owner-level Monte Carlo at hundreds of owners (M1), the
sensitivity of the shares to the utility, K and the validation set (S1 and the docs table), and the
payout rule for a pool with nothing left to value (Z1, an all-noise pool)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from trustlab.results.result import Result

#: digits' pixels are 0-16 in scikit-learn and [0, 1] in trustlab's loader: noise amplitudes are given on
#: the 0-16 scale (the issue's +-0.05 and +-0.8) and divided by this before they are added
PIXEL_SCALE = 16.0


def _share(rep: Any, owner: str) -> float:
    return next(o.share for o in rep.owners if o.owner == owner)


def _line(rep: Any, owner: str) -> Any:
    return next(o for o in rep.owners if o.owner == owner)


def gaming(cfg: Any, d: dict[str, Any], res: Result, common: dict[str, Any], ctx: Any) -> None:
    """G1 / G1b: owner ``resubmitter`` re-submits owner ``resubmitted``'s images with uniform per-pixel noise
    of each amplitude; its share gain over the clean pool with ``gaming_dedup``, without de-duplication
    and with the old max-norm ``near`` rule (tol ``near_tol``). G2: the embedded rule on the clean pool.
    The noise is drawn here in amplitude order; each amplitude's reports are one ``ctx.map`` task (issue 46)."""
    import functools

    from trustlab.methods.licensing import compensation_report

    rng = np.random.default_rng([common["random_state"], 41])
    r, s = cfg.resubmitted, cfg.resubmitter
    base = compensation_report(d["X"], d["y"], d["owner"], d["X_val"], d["y_val"], **common, counterfactual=False)
    own = d["owner"] == r
    amps = tuple(cfg.perturb_amplitudes) + tuple(cfg.sweep_amplitudes)
    noise = [rng.uniform(-amp / PIXEL_SCALE, amp / PIXEL_SCALE, (int(own.sum()), d["X"].shape[1])) for amp in amps]
    rows = ctx.map(functools.partial(_gaming_job, cfg, d, common, _share(base, str(s))), list(zip(amps, noise)),
                   desc="licensing re-submissions")
    ctx.check_budget(f"{len(amps)} perturbed re-submission(s)")
    out = {}
    for amp, row in zip(amps, rows):
        out[f"{amp:g}"] = row
        res.add(method="knn_shapley", dataset="digits-perturbed-resubmission", seed=common["random_state"],
                owner=str(s), metric="share_gain_pp", value=row["gain_pp"], amplitude=amp,
                no_dedup_pp=100 * (row["share_no_dedup"] - row["base_share"]))
    res.summary["perturbed_gaming"] = out
    emb = compensation_report(d["X"], d["y"], d["owner"], d["X_val"], d["y_val"], **common, counterfactual=False,
                              dedup="embedded", near_quantile=cfg.near_quantile, near_variance=cfg.near_variance)
    res.summary["embedded_clean"] = {
        "dropped_fraction": emb.n_duplicates / emb.n_train, "n_dropped": emb.n_duplicates, "tol": emb.dedup_tol,
        "max_share_change_pp": 100 * max(abs(a.share - b.share) for a, b in zip(emb.owners, base.owners))}


def _gaming_job(cfg: Any, d: dict[str, Any], common: dict[str, Any], base_share: float,
                item: tuple[float, np.ndarray]) -> dict[str, Any]:
    """One amplitude of G1 / G1b (a task of ``ctx.map``): the re-submission ``X[owner resubmitted] + noise``
    valued with ``gaming_dedup`` (and, at a primary amplitude, the old ``near`` rule); its plain row."""
    from trustlab.methods.licensing import compensation_report

    amp, noise = item
    r, s = cfg.resubmitted, cfg.resubmitter
    own = d["owner"] == r
    dd = {"dedup": cfg.gaming_dedup, "near_tol": cfg.near_tol, "near_quantile": cfg.near_quantile,
          "near_variance": cfg.near_variance}
    Xg = np.vstack([d["X"], d["X"][own] + noise])
    yg = np.concatenate([d["y"], d["y"][own]])
    og = np.concatenate([d["owner"], np.full(int(own.sum()), s)])
    rep = compensation_report(Xg, yg, og, d["X_val"], d["y_val"], **common, **dd)
    row = {"amplitude_0_16": amp, "base_share": base_share, "share_dedup": _share(rep, str(s)),
           "share_no_dedup": _line(rep, str(s)).share_no_dedup, "copies_found": _line(rep, str(s)).n_dup_cross,
           "n_copies": int(own.sum()), "tol": rep.dedup_tol, "primary": amp in cfg.perturb_amplitudes}
    if row["primary"]:
        old = compensation_report(Xg, yg, og, d["X_val"], d["y_val"], **common, dedup="near", near_tol=cfg.near_tol,
                                  counterfactual=False)
        row["share_old_near"] = _share(old, str(s))
    row["gain_pp"] = 100 * (row["share_dedup"] - row["base_share"])
    return row


def monte_carlo(cfg: Any, d: dict[str, Any], res: Result, common: dict[str, Any]) -> None:
    """M1: the demo's training points re-split among ``mc_owners`` owners; permutation-sampling owner Shapley
    (KNN utility, incremental prefixes) twice with independent seeds, the second with
    ``mc_reference_factor`` times the permutations: how often do the two agree within 1.96 combined SE?"""
    from trustlab.methods.licensing import compensation_report

    seed = common["random_state"]
    rng = np.random.default_rng([seed, 43])
    owner = rng.permutation(np.arange(len(d["X"])) % cfg.mc_owners)
    kw = {**common, "method": "tmc_shapley", "utility": "knn", "counterfactual": False}
    t0 = time.perf_counter()
    a = compensation_report(d["X"], d["y"], owner, d["X_val"], d["y_val"], **{**kw, "random_state": np.random.default_rng([seed, 44])},
                            n_samples=cfg.mc_permutations)
    t_short = time.perf_counter() - t0
    b = compensation_report(d["X"], d["y"], owner, d["X_val"], d["y_val"], **{**kw, "random_state": np.random.default_rng([seed, 45])},
                            n_samples=cfg.mc_reference_factor * cfg.mc_permutations)
    z = np.array([abs(x.raw_value - y.raw_value) / np.hypot(x.value_se, y.value_se)
                  for x, y in zip(a.owners, b.owners) if np.hypot(x.value_se, y.value_se) > 0])
    pay_z = np.array([abs(x.payout_minor - y.payout_minor) / np.hypot(x.payout_se_minor, y.payout_se_minor)
                      for x, y in zip(a.owners, b.owners) if np.hypot(x.payout_se_minor, y.payout_se_minor) > 0])
    se_eur = np.array([x.payout_se_minor for x in a.owners]) / 10 ** a.minor_unit
    res.summary["monte_carlo"] = {
        "n_owners": len(a.owners), "permutations": cfg.mc_permutations,
        "reference_permutations": cfg.mc_reference_factor * cfg.mc_permutations, "seconds_short": t_short,
        "coverage_value": float(np.mean(z <= 1.96)), "coverage_payout": float(np.mean(pay_z <= 1.96)),
        "n_compared": int(len(z)), "median_payout_se": float(np.median(se_eur)), "max_payout_se": float(se_eur.max()),
        "median_payout": float(np.median([x.payout_minor for x in a.owners]) / 10 ** a.minor_unit),
        "efficiency_residual": a.efficiency_residual}


def sensitivity(cfg: Any, d: dict[str, Any], res: Result, common: dict[str, Any], ctx: Any) -> None:
    """S1 and the docs table: the demo report's shares under other utilities, K and validation sets (the
    settings, bootstraps drawn here in order; each setting's report one ``ctx.map`` task, issue 46)."""
    import functools

    from scipy.stats import spearmanr

    rng = np.random.default_rng([common["random_state"], 47])
    settings: list[tuple[str, dict[str, Any], np.ndarray, np.ndarray]] = [
        ("default: knn_shapley, k=5", {}, d["X_val"], d["y_val"])]
    for u in ("knn", "loglik") + (("logreg_acc",) if cfg.logreg_game else ()):
        settings.append((f"owner game, utility {u}", {"method": "owner_shapley_exact", "utility": u},
                         d["X_val"], d["y_val"]))
    for k in cfg.sens_k:
        if k != cfg.k:
            settings.append((f"knn_shapley, k={k}", {"k": k}, d["X_val"], d["y_val"]))
    settings.append(("disjoint validation set", {}, d["X_val2"], d["y_val2"]))
    for b in range(cfg.sens_bootstraps):
        rows = rng.integers(0, len(d["X_val"]), len(d["X_val"]))
        settings.append((f"bootstrap validation set {b + 1}", {}, d["X_val"][rows], d["y_val"][rows]))
    worst = str(int(np.argmax(d["rates"])))
    args = (d["X_demo"], d["y_demo"], d["owner_demo"])
    done = ctx.map(functools.partial(_setting_job, args, common, worst), [s[1:] for s in settings],
                   desc="licensing sensitivity")
    ctx.check_budget(f"{len(settings)} sensitivity setting(s)")
    table, ref = [], None
    for (name, *_), row in zip(settings, done):
        shares = np.array(row.pop("shares"))
        ref = shares if ref is None else ref
        table.append({"setting": name, "shares": shares.tolist(), "owners": row["owners"],
                      "max_change_pp": float(100 * np.max(np.abs(shares - ref))),
                      "spearman": float(spearmanr(shares, ref).statistic), "lowest": row["lowest"],
                      "worst_rank": row["worst_rank"]})
    res.summary["sensitivity"] = {"worst_owner": worst, "rows": table}


def _setting_job(args: tuple[Any, ...], common: dict[str, Any], worst: str,
                 item: tuple[dict[str, Any], np.ndarray, np.ndarray]) -> dict[str, Any]:
    """One sensitivity setting (a task of ``ctx.map``): the demo report's shares with the setting's keywords
    and validation set, its owners, the lowest-share owner and the rank of the ``worst`` (noisiest) owner."""
    from trustlab.methods.licensing import compensation_report

    kw, Xv, yv = item
    rep = compensation_report(*args, Xv, yv, **{**common, **kw}, counterfactual=False)
    shares = np.array([o.share for o in rep.owners])
    return {"shares": shares.tolist(), "owners": [o.owner for o in rep.owners],
            "lowest": rep.owners[int(np.argmin(shares))].owner,
            "worst_rank": int(1 + np.sum(shares < _share(rep, worst)))}


def zero_value(cfg: Any, d: dict[str, Any], res: Result, common: dict[str, Any]) -> None:
    """Z1: an all-noise pool (uniform-noise images with random labels) valued by the naive-Bayes
    log-likelihood owner game: its data are worth less than no data, so nothing is left to split."""
    from trustlab.methods.licensing import compensation_report

    rng = np.random.default_rng([common["random_state"], 49])
    n = cfg.n_owners * cfg.points_per_owner
    X = rng.random((n, d["X"].shape[1]))
    y = rng.integers(0, 10, n)
    owner = np.repeat(np.arange(cfg.n_owners), cfg.points_per_owner)
    kw = {**common, "method": "owner_shapley_exact", "utility": "loglik", "counterfactual": False}
    out = {}
    for fb in ("unpaid", "equal"):
        rep = compensation_report(X, y, owner, d["X_val"], d["y_val"], **kw, fallback=fb)
        out[fb] = {"rule": rep.payout_rule, "unpaid": rep.unpaid_minor, "paid": sum(o.payout_minor for o in rep.owners),
                   "gain": rep.v_full - rep.v_empty, "said_so": any("nothing" in w for w in rep.warnings),
                   "payouts": sorted({o.payout_minor for o in rep.owners})}
    out["pool_minor"] = rep.pool_minor
    knn = compensation_report(X, y, owner, d["X_val"], d["y_val"], **common, counterfactual=False)
    out["knn_shapley_gain"] = knn.v_full - knn.v_empty  # v(empty) = 0: chance accuracy counts as value here
    out["knn_shapley_rule"] = knn.payout_rule
    res.summary["zero_value"] = out
