"""Tests of trustlab.methods.licensing: properties P1-P7 (hypothesis), bad inputs, report, CLI, oracles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustlab.core.exceptions import ConfigError, InputError
from trustlab.methods.licensing import (
    CompensationReport,
    KNNUtility,
    LogisticAccuracy,
    NaiveBayesLogLikelihood,
    compensation_report,
    exact_shapley,
    find_duplicates,
    knn_shapley,
    knn_vote_disagrees,
    largest_remainder,
    loo_values,
    minor_unit_of,
    msr_banzhaf,
    tmc_shapley,
    to_minor_units,
)

ROOT = Path(__file__).resolve().parents[2]


def _blobs(seed: int, n_owners: int = 4, per: int = 12, n_val: int = 30, d: int = 3):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3.0, size=(3, d))
    y = rng.integers(0, 3, n_owners * per)
    X = centers[y] + rng.normal(size=(len(y), d))
    yv = rng.integers(0, 3, n_val)
    Xv = centers[yv] + rng.normal(size=(n_val, d))
    return X, y, np.repeat(np.arange(n_owners), per), Xv, yv


@pytest.fixture(scope="module")
def digits():
    from trustlab.data.images import load_digits_images

    ds = load_digits_images(flatten=True)
    idx = np.random.default_rng(0).permutation(len(ds.X))
    X, y = ds.X[idx].astype(np.float64), ds.y[idx]
    return X[:400], y[:400], np.repeat(np.arange(8), 50), X[400:550], y[400:550]


# -- P1 money efficiency ---------------------------------------------------------------------------------
@given(st.lists(st.floats(-5, 5, allow_nan=False, allow_infinity=False), min_size=1, max_size=25),
       st.integers(0, 10**12))
def test_p1_largest_remainder_sums_exactly_and_is_within_one_unit(ws, total):
    w = np.array(ws)
    if w.sum() <= 0:
        w = np.abs(w) + 1e-3
    pay = largest_remainder(w, total)
    assert pay.dtype.kind == "i" and int(pay.sum()) == total
    s = sum(Fraction(float(x)) for x in w)
    assert all(abs(Fraction(int(p)) - Fraction(total) * Fraction(float(x)) / s) < 1 for p, x in zip(pay, w))


def test_largest_remainder_refuses_amounts_beyond_int64():
    # quick seed 4 of the experiment: negative weights that nearly cancel gave quotas beyond int64 (OverflowError)
    with pytest.raises(InputError, match="int64"):
        largest_remainder(np.array([1.0, -1.0 + 1e-15]), 10**12)


def test_p1_ties_broken_by_owner_id():
    assert largest_remainder(np.ones(3), 100, ["b", "a", "c"]).tolist() == [33, 34, 33]
    assert largest_remainder(np.ones(3), 2, ["10", "9", "2"]).tolist() == [0, 1, 1]  # numeric order 2 < 9 < 10


@given(st.decimals(min_value="0.01", max_value="1000000", places=2, allow_nan=False, allow_infinity=False),
       st.integers(0, 3), st.sampled_from(["clip", "allow"]))
def test_p1_report_pays_the_pool_to_the_cent(pool, seed, negative):
    X, y, owner, Xv, yv = _blobs(seed)
    rep = compensation_report(X, y, owner, Xv, yv, pool, negative=negative, fallback="equal", counterfactual=False)
    assert sum(o.payout_minor for o in rep.owners) == rep.pool_minor == int(pool * 100)


# -- P2 efficiency and exactness -------------------------------------------------------------------------------
@given(st.integers(0, 10**6), st.integers(1, 6), st.integers(2, 12))
def test_p2_knn_shapley_equals_exact_singleton_game(seed, k, n):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 3, size=(n, 2)).astype(float)  # a coarse grid: many distance ties and duplicates
    y = rng.integers(0, 2, n)
    Xv = rng.integers(0, 3, size=(7, 2)).astype(float)
    yv = np.where(rng.random(7) < 0.5, y[0], y[-1])
    k = min(k, n)
    phi = knn_shapley(X, y, Xv, yv, k=k)
    game = KNNUtility(k).game(X, y, Xv, yv, np.arange(n))
    ex = exact_shapley(game)
    assert np.max(np.abs(phi - ex.values)) <= 1e-12
    assert abs(phi.sum() - game.v_full) <= 1e-9 and game.v_empty == 0.0


@pytest.mark.parametrize("utility", [KNNUtility(3), NaiveBayesLogLikelihood(), LogisticAccuracy(max_iter=200)])
def test_p2_exact_owner_game_is_efficient(utility):
    X, y, owner, Xv, yv = _blobs(1, n_owners=5)
    res = exact_shapley(utility.game(X, y, Xv, yv, owner))
    assert abs(res.efficiency_residual) <= 1e-9 and res.efficient


def test_p2_naive_bayes_empty_coalition_is_the_uniform_prior():
    X, y, owner, Xv, yv = _blobs(2)
    g = NaiveBayesLogLikelihood().game(X, y, Xv, yv, owner)
    assert g.v_empty == pytest.approx(-np.log(3) - X.shape[1] * np.log(2), abs=1e-12)


def test_p2_tmc_within_three_se_of_exact_and_banzhaf_not_efficient():
    X, y, owner, Xv, yv = _blobs(3, n_owners=6)
    game = KNNUtility(3).game(X, y, Xv, yv, owner)
    ex = exact_shapley(game)
    tmc = tmc_shapley(game, n_permutations=400, random_state=0)
    z = np.abs(tmc.values - ex.values) / np.maximum(tmc.se, 1e-12)
    assert np.mean(z <= 3) >= 0.8 and abs(tmc.efficiency_residual) <= 1e-9
    bz = msr_banzhaf(game, n_samples=500, random_state=0)
    assert not bz.efficient and not loo_values(game).efficient
    rep = compensation_report(X, y, owner, Xv, yv, 100, method="owner_banzhaf_msr", n_samples=100)
    assert rep.efficiency_residual is None and "not efficient" in rep.to_markdown()


def test_p2_exact_game_refuses_more_than_12_owners():
    X, y, owner, Xv, yv = _blobs(4, n_owners=13, per=4)
    with pytest.raises(InputError, match="at most max_players=12.*owner_banzhaf_msr.*tmc_shapley"):
        compensation_report(X, y, owner, Xv, yv, 100, method="owner_shapley_exact", k=3)
    rep = compensation_report(X, y, owner, Xv, yv, 100, method="owner_banzhaf_msr", k=3, n_samples=64)
    assert len(rep.owners) == 13


# -- P3 symmetry, P4 null players -----------------------------------------------------------------------------
@given(st.integers(0, 10**6), st.sampled_from(["knn_shapley", "owner_shapley_exact"]))
def test_p3_identical_multisets_get_equal_values(seed, method):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 4, size=(24, 2)).astype(float)  # ties in distance are common on a grid
    y = rng.integers(0, 2, 24)
    owner = np.repeat(np.arange(3), 8)
    twin = rng.permutation(np.flatnonzero(owner == 0))
    X2, y2 = np.vstack([X, X[twin]]), np.concatenate([y, y[twin]])
    o2 = np.concatenate([owner, np.full(8, 3)])
    Xv = rng.integers(0, 4, size=(15, 2)).astype(float)
    yv = rng.integers(0, 2, 15)
    rep = compensation_report(X2, y2, o2, Xv, yv, 1000, method=method, k=3, dedup="off", fallback="equal")
    a, b = rep.owners[0], rep.owners[3]
    assert abs(a.raw_value - b.raw_value) <= 1e-12 and abs(a.payout_minor - b.payout_minor) <= 1


def test_p3_exact_duplicates_get_equal_point_values():
    X, y, _, Xv, yv = _blobs(5)
    X2, y2 = np.vstack([X, X[:5]]), np.concatenate([y, y[:5]])
    phi = knn_shapley(X2, y2, Xv, yv, k=3)
    assert np.max(np.abs(phi[:5] - phi[-5:])) <= 1e-15


def test_p4_null_players_get_exactly_zero():
    X, y, owner, Xv, yv = _blobs(6)
    cp = owner == 1
    Xc = np.vstack([X, X[cp]])
    yc = np.concatenate([y, y[cp]])
    oc = np.concatenate([owner.astype(str), np.full(int(cp.sum()), "copycat")])
    rep = compensation_report(Xc, yc, oc, Xv, yv, 500, owners=["0", "1", "2", "3", "copycat", "ghost"])
    by = {o.owner: o for o in rep.owners}
    assert by["ghost"].payout_minor == 0 and by["ghost"].raw_value == 0 and by["ghost"].n_points == 0
    assert by["copycat"].payout_minor == 0 and by["copycat"].raw_value == 0 and by["copycat"].n_dup_cross == 12
    Xd = np.vstack([X, X[:10] + 100.0])
    yd = np.concatenate([y, np.full(10, 7)])  # a class absent from validation, far away
    ex = exact_shapley(KNNUtility(3).game(Xd, yd, Xv, yv, np.concatenate([owner, np.full(10, 4)])))
    assert abs(ex.values[-1]) <= 1e-12


# -- P5 duplicates ---------------------------------------------------------------------------------------
@given(st.integers(0, 10**6))
def test_p5_injected_duplicates_found(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 4))
    y = rng.integers(0, 3, 60)
    rows = rng.choice(60, 20, replace=False)
    tol = 0.05
    Xn = np.vstack([X, X[rows[:10]], X[rows[10:]] + rng.uniform(-0.9 * tol, 0.9 * tol, (10, 4))])
    yn = np.concatenate([y, y[rows]])
    exact = find_duplicates(Xn[:70], yn[:70], mode="exact").is_duplicate
    near = find_duplicates(Xn, yn, mode="near", tol=tol).is_duplicate
    assert exact.tolist() == [False] * 60 + [True] * 10 and near.tolist() == [False] * 60 + [True] * 20


def test_p5_self_duplication_gains_nothing_with_dedup(digits):
    X, y, owner, Xv, yv = digits
    base = compensation_report(X, y, owner, Xv, yv, 100000, counterfactual=False)
    own = owner == 2
    Xg, yg, og = np.vstack([X, X[own]]), np.concatenate([y, y[own]]), np.concatenate([owner, owner[own]])
    rep = compensation_report(Xg, yg, og, Xv, yv, 100000)
    s_base, s_dd, s_nd = base.owners[2].share, rep.owners[2].share, rep.owners[2].share_no_dedup
    assert abs(s_dd - s_base) <= 0.005 < s_nd - s_base
    assert rep.owners[2].n_dup_within == 50
    # "split": owner 3 re-submits owner 2's points; each kept point's value is halved between them
    split = compensation_report(Xg, yg, np.concatenate([owner, np.full(50, 3)]), Xv, yv, 100000, dup_credit="split")
    v2, v3 = base.owners[2].raw_value, base.owners[3].raw_value
    assert split.owners[2].raw_value == pytest.approx(v2 / 2, abs=1e-12)
    assert split.owners[3].raw_value == pytest.approx(v3 + v2 / 2, abs=1e-12)


# -- P6 noisy labels -------------------------------------------------------------------------------------
def test_p6_flipped_labels_have_low_values_and_are_flagged(digits):
    from sklearn.metrics import roc_auc_score

    X, y, owner, Xv, yv = digits
    rng = np.random.default_rng(1)
    f = rng.choice(len(y), 40, replace=False)
    yn = y.copy()
    yn[f] = (yn[f] + rng.integers(1, 10, 40)) % 10
    flip = np.isin(np.arange(len(y)), f)
    phi = knn_shapley(X, yn, Xv, yv, k=5)
    assert roc_auc_score(flip, -phi) >= 0.95
    rep = compensation_report(X, yn, owner, Xv, yv, 1000, noisy="drop", noise_flag_quantile=0.1)
    assert rep.n_flagged_noisy >= 20
    assert knn_vote_disagrees(X, yn, k=5)[f].mean() > 0.8


def test_p6_cross_check_flags_against_cleanlab_datalab(digits):
    pytest.importorskip("cleanlab")
    pytest.importorskip("datasets")
    from cleanlab import Datalab
    from sklearn.model_selection import cross_val_predict
    from sklearn.neighbors import KNeighborsClassifier

    X, y, owner, Xv, yv = digits
    rng = np.random.default_rng(2)
    f = rng.choice(len(y), 40, replace=False)
    yn = y.copy()
    yn[f] = (yn[f] + rng.integers(1, 10, 40)) % 10
    Xd, yd = np.vstack([X, X[:10]]), np.concatenate([yn, yn[:10]])
    proba = cross_val_predict(KNeighborsClassifier(10), Xd, yd, cv=5, method="predict_proba")
    lab = Datalab(data={"label": yd}, label_name="label", verbosity=0)
    lab.find_issues(features=Xd, pred_probs=proba, issue_types={"label": {}, "near_duplicate": {}})
    issues = lab.get_issues()
    theirs = np.flatnonzero(issues["is_label_issue"].to_numpy())
    phi = knn_shapley(Xd, yd, Xv, yv, k=5)
    ours = np.flatnonzero((phi <= np.quantile(phi, 0.1)) & knn_vote_disagrees(Xd, yd, k=5))
    assert len(np.intersect1d(ours, theirs)) >= 0.6 * len(ours)  # most of our flags are cleanlab label issues
    dup_theirs = set(np.flatnonzero(issues["is_near_duplicate_issue"].to_numpy()))
    ours_dup = set(np.flatnonzero(find_duplicates(Xd, yd).is_duplicate))
    assert ours_dup <= dup_theirs  # every exact copy we drop is a near duplicate for cleanlab too


# -- P7 determinism --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw", [{}, {"method": "tmc_shapley", "utility": "loglik", "n_samples": 20}])
def test_p7_same_seed_same_bytes(kw):
    X, y, owner, Xv, yv = _blobs(7)
    a = compensation_report(X, y, owner, Xv, yv, 1234.56, random_state=3, **kw).to_json()
    b = compensation_report(X, y, owner, Xv, yv, 1234.56, random_state=3, **kw).to_json()
    assert a == b
    assert json.loads(a)["input_hash"] == json.loads(b)["input_hash"]


# -- bad inputs ------------------------------------------------------------------------------------------
def test_owner_column_with_missing_ids():
    X, y, owner, Xv, yv = _blobs(8)
    for bad in (None, np.nan, "", "  "):
        o = owner.astype(object)
        o[3] = bad
        with pytest.raises(InputError, match=r"missing owner id.*rows \[3\]"):
            compensation_report(X, y, o, Xv, yv, 100)
    o = owner.astype(str).astype(object)
    o[0], o[20] = "A", "a "
    with pytest.raises(InputError, match="differ only by case or spaces"):
        compensation_report(X, y, o, Xv, yv, 100)
    with pytest.raises(InputError, match="one id per row"):
        compensation_report(X, y, owner[:-1], Xv, yv, 100)


@pytest.mark.parametrize("pool", [0, -1, -0.01, float("nan"), float("inf"), "abc", True, 0.001])
def test_pool_not_positive_or_not_finite(pool):
    X, y, owner, Xv, yv = _blobs(9)
    with pytest.raises(InputError, match="pool"):
        compensation_report(X, y, owner, Xv, yv, pool)


def test_currency_without_minor_unit_and_unknown_codes():
    X, y, owner, Xv, yv = _blobs(10)
    rep = compensation_report(X, y, owner, Xv, yv, 5000, currency="JPY")  # whole yen, no cents
    assert rep.minor_unit == 0 and rep.pool_minor == 5000 and "." not in rep.owners[0].payout
    assert to_minor_units("5000.4", 0) == (5000, True)
    rep = compensation_report(X, y, owner, Xv, yv, "100.005", currency="EUR")
    assert rep.pool_minor == 10000 and any("rounded" in w for w in rep.warnings)
    assert compensation_report(X, y, owner, Xv, yv, 1, currency="KWD").pool_minor == 1000
    with pytest.raises(InputError, match="minor_unit="):
        compensation_report(X, y, owner, Xv, yv, 100, currency="XBT")
    assert minor_unit_of("XBT", minor_unit=6) == 6
    with pytest.raises(ConfigError, match="currency"):
        compensation_report(X, y, owner, Xv, yv, 100, currency="euro")


def test_validation_labels_unseen_in_training_and_k_too_large():
    X, y, owner, Xv, yv = _blobs(11)
    with pytest.raises(InputError, match="never seen in training"):
        compensation_report(X, y, owner, Xv, np.where(yv == 0, 9, yv), 100)
    with pytest.raises(InputError, match="'k' argument.*<= the number of training points"):
        compensation_report(X, y, owner, Xv, yv, 100, k=len(X) + 1)
    with pytest.raises(InputError, match="'k' argument"):
        knn_shapley(X[:3], y[:3], Xv, np.full(len(Xv), y[0]), k=4)
    Xd, yd = np.vstack([X[:2]] * 5), np.tile(y[:2], 5)  # 10 rows, 2 distinct
    with pytest.raises(InputError, match="left after de-duplication"):
        compensation_report(Xd, yd, np.arange(10) % 2, Xv[:3], np.full(3, y[0]), 10, k=3)


def test_all_values_non_positive_follow_the_fallback():
    # every owner holds both classes; the validation points are class 0 inside the class-1 region: any
    # fitted model gets 0 accuracy while the empty coalition (pool majority, class 0) gets 1, so every
    # owner's exact Shapley value is negative and nothing is left to split by after clipping
    rng = np.random.default_rng(0)
    y = np.tile([0, 0, 0, 1, 1], 6)
    X = np.where(y == 0, -1.0, 1.0)[:, None] + 0.1 * rng.normal(size=(30, 1))
    owner = np.repeat(["a", "b", "c"], 10)
    Xv, yv = 1.0 + 0.1 * rng.normal(size=(8, 1)), np.zeros(8, dtype=int)
    kw = {"method": "owner_shapley_exact", "utility": "logreg_acc", "k": 1, "counterfactual": False}
    for fb in ("raise", None):
        with pytest.raises(InputError, match="fallback='unpaid'.*fallback='equal'"):
            compensation_report(X, y, owner, Xv, yv, 100, fallback=fb, **kw)
    unpaid = compensation_report(X, y, owner, Xv, yv, 100, **kw)  # the default: pay nothing and say so
    assert unpaid.payout_rule == "nothing left: unpaid" and unpaid.unpaid_minor == 10000
    assert all(o.payout_minor == 0 and o.share == 0 for o in unpaid.owners)
    assert any("nothing is left" in w for w in unpaid.warnings) and "not paid out" in unpaid.to_markdown()
    rep = compensation_report(X, y, owner, Xv, yv, 100, fallback="equal", **kw)
    assert all(o.raw_value < 0 for o in rep.owners) and rep.fallback_used
    assert [o.payout_minor for o in rep.owners] == [3334, 3333, 3333]
    assert any("single class" in w for w in rep.warnings)
    signed = compensation_report(X, y, owner, Xv, yv, 100, negative="allow", fallback="equal", **kw)
    assert signed.fallback_used and sum(o.payout_minor for o in signed.owners) == 10000


def test_config_conflicts_and_warnings():
    X, y, owner, Xv, yv = _blobs(13)
    with pytest.raises(ConfigError, match="utility"):
        compensation_report(X, y, owner, Xv, yv, 100, utility="loglik")
    with pytest.raises(ConfigError, match="dup_credit"):
        compensation_report(X, y, owner, Xv, yv, 100, method="owner_shapley_exact", dup_credit="split")
    rep = compensation_report(np.vstack([X, Xv[:2]]), np.concatenate([y, yv[:2]]),
                              np.concatenate([owner, [0, 0]]), Xv, yv, 100)
    assert any("also appear in the validation set" in w for w in rep.warnings)
    Xs = X * np.array([1.0, 1000.0, 1.0])
    rep = compensation_report(Xs, y, owner, Xv * np.array([1.0, 1000.0, 1.0]), yv, 100, dedup="near")
    assert any("standardise X" in w for w in rep.warnings)


# -- report renderings, files, CLI -----------------------------------------------------------------------
def test_report_renderings_and_atomic_files(tmp_path):
    X, y, owner, Xv, yv = _blobs(14)
    rep = compensation_report(X, y, owner, Xv, yv, 100000, method="tmc_shapley", utility="knn", n_samples=30)
    for suffix in (".json", ".csv", ".md"):
        path = rep.save(tmp_path / f"r{suffix}")
        assert path.read_text() == {".json": rep.to_json, ".csv": rep.to_csv, ".md": rep.to_markdown}[suffix]()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "r.json", "r.md"]
    with pytest.raises(InputError, match="must end in"):
        rep.save(tmp_path / "r.txt")
    back = CompensationReport.from_dict(json.loads(rep.to_json()))
    assert back.to_json() == rep.to_json()
    assert rep.to_csv().count("\n") == len(rep.owners) + 1
    md = rep.to_markdown()
    assert "v(N)" in md and rep.input_hash[:16] in md and "100000.00 EUR" in md
    assert all(o.value_se is not None for o in rep.owners) and rep.efficiency_se is not None
    from matplotlib.figure import Figure

    assert isinstance(rep.plot_shares(), Figure) and isinstance(rep.plot_waterfall(), Figure)


def test_cli_licensing_report(tmp_path):
    import pandas as pd
    from typer.testing import CliRunner

    from trustlab.cli._app import app

    X, y, owner, Xv, yv = _blobs(15)
    df = pd.DataFrame(X, columns=["f0", "f1", "f2"]).assign(y=y, c=[f"org{o}" for o in owner])
    df.to_csv(tmp_path / "data.csv", index=False)
    pd.DataFrame(Xv, columns=["f0", "f1", "f2"]).assign(y=yv).to_csv(tmp_path / "val.csv", index=False)
    runner = CliRunner()
    res = runner.invoke(app, ["licensing", "report", str(tmp_path / "data.csv"), "--owner-column", "c",
                              "--label-column", "y", "--pool", "100000", "--currency", "EUR", "--validation",
                              str(tmp_path / "val.csv"), "--out", str(tmp_path / "rep.json")])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "rep.json").read_text())
    assert sum(o["payout_minor"] for o in data["owners"]) == 10_000_000 and "org0" in res.output
    res = runner.invoke(app, ["licensing", "report", str(tmp_path / "data.csv"), "--owner-column", "c",
                              "--label-column", "y", "--pool", "100000"])  # hold-out validation
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["licensing", "report", str(tmp_path / "data.csv"), "--owner-column", "nope",
                              "--label-column", "y", "--pool", "-5"])
    assert res.exit_code == 2 and "nope" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["licensing", "report", str(tmp_path / "data.csv"), "--owner-column", "c",
                              "--label-column", "y", "--pool", "-5", "--validation", str(tmp_path / "val.csv")])
    assert res.exit_code == 2 and "'pool' argument" in res.output


# -- optional oracle: pyDVL in its own venv (numpy < 2) --------------------------------------------------
def _pydvl_python() -> str | None:
    cand = os.environ.get("TRUSTLAB_PYDVL_PYTHON", "/tmp/trustlab-pydvl/bin/python")
    if not Path(cand).is_file():
        return None
    ok = subprocess.run([cand, "-c", "import pydvl.valuation"], capture_output=True, timeout=120)
    return cand if ok.returncode == 0 else None


def test_knn_shapley_matches_pydvl_when_available(tmp_path):
    py = _pydvl_python()
    if py is None:
        pytest.skip("no pyDVL venv (create it with: bash benchmarks/licensing_pydvl_env.sh)")
    rng = np.random.default_rng(0)
    X, Xv = rng.normal(size=(300, 5)), rng.normal(size=(60, 5))  # continuous: no distance ties
    y, yv = rng.integers(0, 3, 300), rng.integers(0, 3, 60)
    np.savez(tmp_path / "in.npz", X=X, y=y, X_val=Xv, y_val=yv, k=5)
    subprocess.run([py, str(ROOT / "benchmarks" / "licensing_pydvl_oracle.py"), str(tmp_path / "in.npz"),
                    str(tmp_path / "out.npz")], check=True, capture_output=True, timeout=300, cwd=tmp_path)
    theirs = np.load(tmp_path / "out.npz")["values"]
    assert np.max(np.abs(knn_shapley(X, y, Xv, yv, k=5) - theirs)) <= 1e-10
    assert sys.modules.get("pydvl") is None  # never imported into trustlab's process


def test_near_duplicates_in_many_features_match_a_brute_force_search():
    """Above 15 features sklearn's 'auto' search is brute force (O(n^2)); find_duplicates uses a k-d tree, which must
    find the same groups."""
    from sklearn.neighbors import NearestNeighbors

    from trustlab.methods.licensing import find_duplicates

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 20))
    X[1500:1600] = X[:100] + rng.uniform(-1e-3, 1e-3, size=(100, 20))
    y = rng.integers(0, 2, 2000)
    y[1500:1550] = y[:50]
    got = find_duplicates(X, y, mode="near", tol=1e-3)
    neigh = NearestNeighbors(radius=1e-3, metric="chebyshev", algorithm="brute").fit(X).radius_neighbors(
        X, return_distance=False)
    leader, is_leader = np.arange(len(X)), np.zeros(len(X), bool)
    for i in range(len(X)):
        cands = [j for j in neigh[i] if j < i and is_leader[j] and y[j] == y[i]]
        leader[i] = min(cands) if cands else i
        is_leader[i] = not cands
    assert np.array_equal(got.leader, leader) and got.n_duplicates >= 50


def test_split_pool_signed_values_that_cancel_leave_nothing():
    """Issue 41's crash (`run licensing --quick --seeds 5`: weights summing to -1.99e-16): values that cancel
    to rounding noise are 'nothing left', paid by the fallback, never amplified into quotas."""
    from trustlab.methods.licensing import split_pool

    v = np.array([0.3, -0.1, -0.2])  # sums to -2.8e-17 in floating point
    unpaid = split_pool(v, 1000, negative="allow")
    assert unpaid.rule == "nothing left: unpaid" and unpaid.unpaid_minor == 1000 and unpaid.payouts.sum() == 0
    equal = split_pool(v, 1000, negative="allow", fallback="equal")
    assert equal.payouts.tolist() == [334, 333, 333] and equal.unpaid_minor == 0
    with pytest.raises(InputError, match="Nothing is left"):
        split_pool(v, 1000, negative="allow", fallback="raise")
    assert split_pool(np.array([0.3, -0.1, 0.2]), 1000, negative="allow").rule == "proportional"
