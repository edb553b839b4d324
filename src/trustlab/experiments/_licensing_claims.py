"""Licensing's claim checks: the properties P1-P7 (secondary since issue 41) and the empirical claims G1, G2,
M1, S1 with the secondary lines G1b and Z1. Thresholds are pre-registered in docs/papers/licensing.md."""

from __future__ import annotations

from trustlab.experiments.base import CheckResult
from trustlab.results.result import Result

#: pre-registered thresholds (issue 41): a perturbed re-submission gains its submitter <= 2 pp of share; the
#: embedded rule drops <= 2 % of a clean pool and moves no clean-pool share by more than 1 pp; the Monte-Carlo
#: values agree with an independent 5x longer run within 1.96 combined SE for >= 90 % of owners (nominal 95 %)
G1_MAX_GAIN_PP, G2_MAX_DROP, G2_MAX_MOVE_PP, M1_MIN_COVERAGE = 2.0, 0.02, 1.0, 0.90


def _p1(r: Result) -> CheckResult:
    s = r.summary
    ok = s["money_mismatches"] == 0 and s["demo_payout_sum"] == s["demo_pool_minor"] and s["money_max_quota_gap"] < 1
    return CheckResult(ok, f"{s['money_mismatches']} mismatches in {s['money_trials']} random splits; demo "
                       f"{s['demo_payout_sum']} of {s['demo_pool_minor']} cents; max |payout - quota| "
                       f"{s['money_max_quota_gap']:.3f}", "0 mismatches, every payout within 1 unit of its quota",
                       unit="minor units", detail=f"{s.get('money_beyond_int64', 0)} random split(s) refused: negative "
                       "weights nearly cancel and the amounts exceed int64 (largest_remainder raises InputError); "
                       f"{s.get('money_nothing_left', 0)} with an exact sum <= 0 paid nothing by the rule (split_pool)")


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




def _g1_rows(r: Result, primary: bool) -> dict[str, dict]:
    return {k: v for k, v in r.summary["perturbed_gaming"].items() if v["primary"] == primary}


def _g1_check(rows: dict[str, dict]) -> CheckResult:
    worst = max(v["gain_pp"] for v in rows.values())
    obs = ", ".join(f"+-{k}: {v['gain_pp']:+.2f} pp ({v['copies_found']}/{v['n_copies']} copies found)"
                    for k, v in rows.items())
    base = ", ".join(f"+-{k}: no dedup {100 * (v['share_no_dedup'] - v['base_share']):+.1f}"
                     + (f", old near {100 * (v['share_old_near'] - v['base_share']):+.1f}" if "share_old_near" in v else "")
                     for k, v in rows.items())
    tol = next(iter(rows.values()))["tol"]
    return CheckResult(worst <= G1_MAX_GAIN_PP, obs, f"<= {G1_MAX_GAIN_PP:g} pp each", baseline=base, unit="pp",
                       detail=f"embedded tolerance {tol:.4g} (Euclidean, PCA space)" if tol is not None else None)


def _g1(r: Result) -> CheckResult:
    return _g1_check(_g1_rows(r, True))


def _g1b(r: Result) -> CheckResult:
    return _g1_check(_g1_rows(r, False))


def _g2(r: Result) -> CheckResult:
    e = r.summary["embedded_clean"]
    ok = e["dropped_fraction"] <= G2_MAX_DROP and e["max_share_change_pp"] <= G2_MAX_MOVE_PP
    return CheckResult(ok, f"{100 * e['dropped_fraction']:.1f} % dropped ({e['n_dropped']} rows); max share change "
                       f"{e['max_share_change_pp']:.2f} pp", f"<= {100 * G2_MAX_DROP:g} % and <= {G2_MAX_MOVE_PP:g} pp",
                       detail=f"tolerance {e['tol']:.4g}")


def _m1(r: Result) -> CheckResult:
    m = r.summary["monte_carlo"]
    return CheckResult(m["coverage_value"] >= M1_MIN_COVERAGE,
                       f"{100 * m['coverage_value']:.1f} % of {m['n_compared']} owners (payouts: "
                       f"{100 * m['coverage_payout']:.1f} %); median payout SE {m['median_payout_se']:.2f} EUR of "
                       f"{m['median_payout']:.2f}", f">= {100 * M1_MIN_COVERAGE:g} % (nominal 95 %)",
                       detail=f"{m['n_owners']} owners, {m['permutations']} vs {m['reference_permutations']} "
                       f"permutations; {m['seconds_short']:.1f} s for the shorter run")


def _s1(r: Result) -> CheckResult:
    s = r.summary["sensitivity"]
    bad = [row["setting"] for row in s["rows"] if row["lowest"] != s["worst_owner"]]
    worst_move = max(row["max_change_pp"] for row in s["rows"])
    return CheckResult(not bad, f"lowest in {len(s['rows']) - len(bad)}/{len(s['rows'])} settings"
                       + (f" (not in: {'; '.join(bad)})" if bad else ""), "every setting",
                       detail=f"largest share move from the default setting {worst_move:.2f} pp")


def _z1(r: Result) -> CheckResult:
    z = r.summary["zero_value"]
    u, e = z["unpaid"], z["equal"]
    ok = (u["unpaid"] == z["pool_minor"] and u["paid"] == 0 and u["said_so"] and e["paid"] == z["pool_minor"]
          and max(e["payouts"]) - min(e["payouts"]) <= 1)
    return CheckResult(ok, f"gain {u['gain']:.3g}; unpaid: {u['paid']} paid, {u['unpaid']} unpaid ({u['rule']}); "
                       f"equal: payouts {e['payouts']}", "nothing paid and said so; equal split within 1 unit",
                       detail=f"knn_shapley on the same pool: v(N) - v(empty) = {z['knn_shapley_gain']:.3f} "
                       f"(chance accuracy counts as value; rule {z['knn_shapley_rule']})")
