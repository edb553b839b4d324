"""Tests of trustlab.methods.xhacking: audit soundness, statistics, bad inputs (issue 8)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from trustlab.core.exceptions import ConfigError, InputError, ScaleWarning, UnknownNameError
from trustlab.methods.xhacking import (
    EvalSettings,
    SearchContext,
    SearchSpace,
    XHackingAudit,
    make_redundant_classification,
    redundancy,
    speedup_ci,
    tiny_space,
    tts_summary,
    verify_report,
    xhack,
)
from trustlab.methods.xhacking._explain import normalise_shap
from trustlab.methods.xhacking._space import build_pipeline


@pytest.fixture(scope="module")
def data():
    X, y, info = make_redundant_classification(240, rhos=(0.0, 0.95), n_independent=1, random_state=0)
    return X, y, [d["name"] for d in info]


@pytest.fixture(scope="module")
def ctx(data):
    X, y, names = data
    return SearchContext(X, y, EvalSettings(n_background=15, n_explain=15), feature_names=names)


def _audit(**kw):
    params = dict(search_space=tiny_space(), features=["t1"], budget=3, n_explore=4, n_background=15,
                  n_explain=15, n_startup_trials=2, progress=False, random_state=0)
    params.update(kw)
    return XHackingAudit(**params)


def test_audit_soundness_on_tiny_space(data):
    X, y, names = data
    rep = _audit().audit(X, y, feature_names=names)
    assert rep.n_trials == 1 + 4 + 2 * 3
    numbers = {t["number"]: t for t in rep.trials}
    for f in rep.features:
        lo, hi = numbers[f.argmin_share_trial], numbers[f.argmax_share_trial]
        assert lo["defensible"] and hi["defensible"]
        assert lo["share"][f.index] == f.min_share <= f.reference_share <= f.max_share == hi["share"][f.index]
        assert f.min_rank <= f.reference_rank <= f.max_rank
    ver = verify_report(rep, X, y)
    assert ver.ok, ver.problems
    assert ver.max_abs_diff <= 1e-6 and ver.n_endpoints == 4 * len(names)
    # tampering is detected
    rep.spec["eps"] = 0.5
    assert not verify_report(rep, X, y).ok


def test_audit_report_renderings_and_hash(data):
    X, y, names = data
    a, b = _audit().audit(X, y, feature_names=names), _audit().audit(X, y, feature_names=names)
    assert a.spec_hash == b.spec_hash and len(a.spec_hash) == 64
    assert _audit(eps=0.02).audit(X, y, feature_names=names).spec_hash != a.spec_hash
    md = a.to_markdown()
    assert "X-hacking audit" in md and "t1" in md and a.spec_hash in md
    import json

    js = json.loads(a.to_json())
    assert len(js["trials"]) == a.n_trials and js["spec_hash"] == a.spec_hash
    pdat = a.plot_data()
    assert len(pdat["name"]) == len(names) and all(lo <= hi for lo, hi in zip(pdat["min"], pdat["max"]))
    assert a.plot() is not None


def test_tts_statistics_with_censoring():
    s = tts_summary([3, None, 5], budget=20)
    assert s.values == [3.0, 20.0, 5.0] and s.n_censored == 1 and s.median == 5.0
    ci = speedup_ci([10, 12, None, 8, 9], [2, 4, 3, 5, None], budget=20, n_boot=300)
    assert ci.ratio == pytest.approx(10 / 4)
    assert ci.lo <= ci.ratio <= ci.hi
    same = speedup_ci([None] * 5, [None] * 5, budget=20, n_boot=50)
    assert same.ratio == 1.0


def test_xhack_trial_log_and_success(ctx):
    r = xhack(None, None, "t1", budget=6, search_space=tiny_space(), context=ctx, n_startup_trials=2,
              sampler="random", random_state=1)
    assert len(r.trials) == 6 and [t["number"] for t in r.trials] == list(range(1, 7))
    floor = r.reference["score"] - r.eps
    for t in r.trials:
        assert t["defensible"] == (t["score"] >= floor)
        assert abs(sum(t["share"]) - 1) < 1e-9 or sum(t["share"]) == 0
    first = [t["number"] for t in r.trials if t["success"]]
    assert r.trials_to_success == (first[0] if first else None)
    # min_share counts the reference (defensible by definition) next to the defensible trials
    j, e_ref = r.target_index, r.reference["share"][r.target_index]
    assert r.min_share == min([e_ref] + [t["share"][j] for t in r.trials if t["defensible"]])
    # same seed, same trials
    r2 = xhack(None, None, "t1", budget=6, search_space=tiny_space(), context=ctx, n_startup_trials=2,
               sampler="random", random_state=1)
    assert [t["config"] for t in r2.trials] == [t["config"] for t in r.trials]


def test_feature_switches_make_dropping_trivial(ctx):
    space = SearchSpace(imputers=("mean",), scalers=("standard",), selectors=("none",), transforms=("none",),
                        models=("lr",), feature_switches=True)
    r = xhack(None, None, "c1", budget=8, search_space=space, context=ctx, sampler="random", random_state=0)
    dropped = [t for t in r.trials if not t["config"]["keep_3"]]
    assert dropped and all(t["share"][3] == 0.0 for t in dropped)


def test_dropped_feature_counts_zero_and_pca_uses_permutation(ctx):
    cfg = {"imputer": "mean", "scaler": "standard", "selector": "kbest_f", "keep": 0.2, "transform": "none",
           "model": "rf", "rf_n": 5, "rf_depth": 3, "rf_max_features": 1.0, "rf_leaf": 1}
    rec = ctx.evaluate(cfg)
    assert rec["explainer"] == "tree" and sum(s > 0 for s in rec["share"]) == 1
    rec = ctx.evaluate({**cfg, "selector": "none", "transform": "pca", "pca_keep": 0.5})
    assert rec["explainer"] == "permutation-pipeline"
    rec = ctx.evaluate({**cfg, "model": "lr", "lr_C": 1.0, "lr_penalty": "l2"})
    assert rec["explainer"] == "linear"


def test_multiclass_normalisation():
    assert normalise_shap(np.ones((4, 3))).shape == (4, 3, 1)
    two = np.stack([-np.ones((4, 3)), np.ones((4, 3))], -1)
    assert normalise_shap(two).shape == (4, 3, 1) and normalise_shap(two)[0, 0, 0] == 1
    assert normalise_shap(np.ones((4, 3, 5))).shape == (4, 3, 5)
    assert normalise_shap([np.ones((4, 3))] * 3).shape == (4, 3, 3)
    X = np.random.default_rng(0).normal(size=(120, 4))
    y = np.digitize(X[:, 0], [-0.5, 0.5])
    c = SearchContext(X, y, EvalSettings(n_background=15, n_explain=15))
    assert c.n_classes == 3 and abs(sum(c.reference["share"]) - 1) < 1e-9


def test_unknown_target_feature(ctx):
    with pytest.raises(UnknownNameError, match="Did you mean 't1'"):
        xhack(None, None, "t11", budget=2, context=ctx, search_space=tiny_space())
    with pytest.raises(UnknownNameError):
        xhack(None, None, 99, budget=2, context=ctx, search_space=tiny_space())


def test_eps_negative_errors_and_huge_warns(ctx, data):
    with pytest.raises(ConfigError, match="'eps'"):
        xhack(None, None, "t1", eps=-0.1, budget=2, context=ctx, search_space=tiny_space())
    with pytest.warns(UserWarning, match="so large"):
        xhack(None, None, "t1", eps=0.9, budget=2, context=ctx, search_space=tiny_space(), sampler="random")
    X, y, _ = data
    with pytest.raises(ConfigError):
        _audit(eps=-1.0).audit(X, y)


def test_background_too_small_warns(data):
    X, y, _ = data
    with pytest.warns(ScaleWarning, match="too small"):
        SearchContext(X, y, EvalSettings(n_background=3, n_explain=10))


def test_explain_on_train_warns(data):
    X, y, _ = data
    with pytest.warns(UserWarning, match="leakage"):
        c = SearchContext(X, y, EvalSettings(explain_on="train", n_background=15, n_explain=15))
    assert any(np.allclose(c.X_ex[0], row) for row in c.X_tr)


def test_budget_below_startup_warns(ctx):
    with pytest.warns(UserWarning, match="start-up trials"):
        xhack(None, None, "t1", budget=3, n_startup_trials=5, context=ctx, search_space=tiny_space())


def test_additivity_failure_caught_and_flagged(ctx, monkeypatch):
    import shap

    orig = shap.TreeExplainer.shap_values

    def failing(self, X, *a, check_additivity=True, **k):
        if check_additivity:
            raise Exception("Additivity check failed in TreeExplainer!")  # noqa: TRY002 - shap's own type
        return orig(self, X, *a, check_additivity=False, **k)

    monkeypatch.setattr(shap.TreeExplainer, "shap_values", failing)
    cfg = {"imputer": "mean", "scaler": "none", "selector": "none", "transform": "none", "model": "rf",
           "rf_n": 7, "rf_depth": 3, "rf_max_features": 1.0, "rf_leaf": 2}
    with pytest.warns(RuntimeWarning, match="additivity"):
        rec = ctx.evaluate(cfg)
    assert rec["additivity_ok"] is False and rec["error"] is None


def test_redundancy_and_generator():
    X, y, info = make_redundant_classification(400, rhos=(0.0, 0.95), n_independent=1, random_state=0)
    assert X.shape == (400, 5) and set(np.unique(y)) == {0, 1}
    assert redundancy(X, 2) > 0.8 > 0.1 > redundancy(X, 0)
    with pytest.raises(ConfigError):
        redundancy(X, 9)
    b = np.column_stack([X[:, 0] > 0, X[:, 0]]).astype(float)
    assert redundancy(b, 0) > 0.8


def test_gp_sampler_runs(ctx):
    pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = xhack(None, None, "t1", budget=4, sampler="gp", n_startup_trials=2, context=ctx,
                  search_space=tiny_space(), random_state=0)
    assert len(r.trials) == 4


def test_build_pipeline_is_deterministic(data):
    X, y, _ = data
    cfg = {"imputer": "median", "scaler": "robust", "selector": "kbest_mi", "keep": 0.6, "transform": "none",
           "model": "et", "et_n": 5, "et_depth": 3, "et_max_features": 0.5, "et_leaf": 1, "seed": 3}
    a = build_pipeline(cfg, X.shape[1]).fit(X, y).predict_proba(X)
    b = build_pipeline(cfg, X.shape[1]).fit(X, y).predict_proba(X)
    assert np.array_equal(a, b)


def test_achievable_drop_same_effort_per_feature(ctx):
    from trustlab.methods.xhacking import achievable_drop

    out = achievable_drop(None, None, ["t0", "t1"], budget=5, seeds=(0, 1), search_space=tiny_space(),
                          n_startup_trials=2, context=ctx)
    assert set(out) == {"t0", "t1"}
    for name, v in out.items():
        j = ctx.names.index(name)
        assert v.reference_share == ctx.reference["share"][j]
        assert len(v.drops) == len(v.min_share) == len(v.n_defensible) == 2
        assert v.drop == pytest.approx(np.mean(v.drops)) and v.drop_max == max(v.drops)
        for d, m, best in zip(v.drops, v.min_share, v.best_trial):
            assert 0.0 <= d <= 1.0 and m <= v.reference_share
            assert d == pytest.approx(1 - m / v.reference_share)
            if best is None:  # nothing defensible beat the reference: drop 0, never negative
                assert d == 0.0
            else:  # the minimum is attained by a stored, recomputable configuration
                assert ctx.evaluate(best)["share"][j] == pytest.approx(m, abs=1e-12)
    again = achievable_drop(None, None, ["t1"], budget=5, seeds=(0, 1), search_space=tiny_space(),
                            n_startup_trials=2, context=ctx)
    assert again["t1"].drops == out["t1"].drops


def test_achievable_drop_bad_inputs(ctx, data):
    from trustlab.methods.xhacking import achievable_drop

    with pytest.raises(ConfigError, match="'seeds' argument of achievable_drop"):
        achievable_drop(None, None, ["t1"], budget=2, seeds=(), context=ctx, search_space=tiny_space())
    with pytest.raises(InputError, match="'X' and 'y' arguments of achievable_drop are required"):
        achievable_drop(None, None, ["t1"], budget=2, search_space=tiny_space())
    with pytest.raises(UnknownNameError):
        achievable_drop(None, None, ["nope"], budget=2, context=ctx, search_space=tiny_space())
    X, y, names = data  # without a context: built from the keyword arguments
    out = achievable_drop(X, y, [0], budget=3, sampler="random", search_space=tiny_space(), feature_names=names,
                          n_background=15, n_explain=15)
    assert list(out) == ["t0"] and out["t0"].drop >= 0.0


def test_experiment_config_validation():
    from trustlab.core.exceptions import ConfigError as CE
    from trustlab.experiments.xhacking import Config

    Config.quick().validate()
    Config.default().validate()
    with pytest.raises(CE):
        Config(synth_space="lr-only").validate()
    with pytest.raises(CE):
        Config(vuln_seeds=()).validate()


# -- issue 31: the audit's default search includes the analyst's feature selection --------------------------
def test_audit_default_space_has_feature_switches_and_drop_probes(data):
    from trustlab.methods.xhacking import audit_space, default_space

    assert audit_space().feature_switches and not default_space().feature_switches
    X, y, names = data
    space = SearchSpace(imputers=("mean",), scalers=("standard",), selectors=("none",), transforms=("none",),
                        models=("lr",), feature_switches=True)
    rep = _audit(search_space=space, features=["t1", "c1"], budget=0, n_explore=2).audit(X, y, feature_names=names)
    probes = [t for t in rep.trials if t["search"].startswith("probe:drop:")]
    assert [t["search"] for t in probes] == ["probe:drop:t1", "probe:drop:c1"]
    for t, j in zip(probes, (names.index("t1"), names.index("c1"))):
        assert t["share"][j] == 0.0 and all(t["config"][f"keep_{i}"] == (i != j) for i in range(len(names)))
    assert verify_report(rep, X, y).ok
    # without switches there is nothing to drop: no probes
    rep2 = _audit(budget=0, n_explore=2).audit(X, y, feature_names=names)
    assert not any(t["search"].startswith("probe") for t in rep2.trials)
    # the default is the switch space
    assert XHackingAudit().get_params()["search_space"] is None


def test_audit_refuses_empty_feature_list_and_continuous_y(data):
    X, y, names = data
    with pytest.raises(ConfigError, match="The 'features' parameter of XHackingAudit must be"):
        _audit(features=[]).audit(X, y)
    cont = np.linspace(0, 1, len(y))
    with pytest.raises(InputError, match="must hold class labels.*continuous"):
        _audit().audit(X, cont)
    with pytest.raises(InputError, match="real numbers"):
        _audit().audit(X + 1j, y)


def test_audit_warns_on_few_defensible_pipelines_and_a_perfect_reference():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] > 0).astype(int)
    X[:, 0] = np.where(y == 1, 2.0, -2.0) + 0.1 * X[:, 0]  # a wide gap: the reference is perfect on held-out rows
    with pytest.warns(UserWarning, match="scores 1.000"):
        SearchContext(X, y, EvalSettings(n_background=15, n_explain=15))
    with pytest.warns(UserWarning, match="defensible.*say little"):
        XHackingAudit(search_space=tiny_space(), features=[0], budget=0, n_explore=1, n_background=15, n_explain=15,
                      progress=False, random_state=0).audit(X, y)


def test_audit_progress_bar_can_be_switched_off(data, capsys):
    X, y, names = data
    _audit(progress=False, budget=0, n_explore=2).audit(X, y, feature_names=names)
    assert "XHackingAudit" not in capsys.readouterr().err
    _audit(progress=True, budget=0, n_explore=2).audit(X, y, feature_names=names)
    assert "XHackingAudit" in capsys.readouterr().err


def test_audit_accepts_any_random_state_rule_and_records_the_seed(data):
    X, y, names = data
    rep = _audit(random_state=np.random.default_rng(3), budget=0, n_explore=2).audit(X, y, feature_names=names)
    assert isinstance(rep.spec["random_state"], int) and verify_report(rep, X, y).ok


def test_build_pipeline_refuses_bad_configs():
    with pytest.raises(ConfigError, match="'model' entry"):
        build_pipeline({"model": "xgb"}, 3)
    with pytest.raises(ConfigError, match="lacks the entry 'lr_C'"):
        build_pipeline({"model": "lr"}, 3)


def test_c1b_primary_is_the_single_search_and_best_of_seeds_is_secondary():
    from trustlab.experiments.xhacking import CLAIMS
    from trustlab.results.result import Result

    by_id = {c.id: c for c in CLAIMS}
    assert not by_id["C1b"].secondary and by_id["C1b-best"].secondary
    r = Result("xhacking", "default", {"vuln_seeds": [0, 1, 2]})
    r.summary.update(breast_cancer_top_share_ratio_first_seed=0.28, breast_cancer_top_share_ratio_best=0.0,
                     breast_cancer_top_share_ratios=[0.28, 0.23, 0.0], breast_cancer_top_feature="worst perimeter")
    assert by_id["C1b"].check(r).passed is False and by_id["C1b"].check(r).observed == 0.28
    assert by_id["C1b-best"].check(r).passed is True
    cfg = {"control_budget": 6, "seeds": [0, 1, 2, 3, 4]}
    assert "6 trials per seed" in by_id["C3"].note_for(cfg) and "5 seeds" in by_id["C3"].note_for(cfg)


def test_premises_void_the_hacking_claims_when_the_search_cannot_move():
    """Issue 39: a search with no defensible alternative (the KNOCKOUT's one trial) voids C1b and C3 rather than
    letting C3 (no false alarm) pass by construction."""
    from trustlab.experiments import xhacking as exp
    from trustlab.experiments.base import evaluate_claims
    from trustlab.results.result import Result

    r = Result("xhacking", "quick", {"vuln_seeds": [0], "hack_budget": 12})
    r.summary.update(breast_cancer_top_share_ratio_first_seed=0.0, breast_cancer_top_feature="f",
                     breast_cancer_reference_score=0.95, breast_cancer_majority=0.63, synthetic_reference_score=0.9,
                     synthetic_majority=0.5, breast_cancer_defensible_first_seed=5, synthetic_vuln_defensible_trials=40,
                     synthetic_vuln_trials=240, control_n_seeds=5, control_successes_tpe=0, control_successes_random=0)
    st = {o.id: o.status for o in evaluate_claims(r, exp.CLAIMS)}
    assert st["pre-learned"] == st["pre-search-room-bc"] == st["pre-search-room-synth"] == st["C1b"] == st["C3"] == "PASS"
    r.summary.update(synthetic_vuln_defensible_trials=0)  # the synthetic search cannot move: C3, not C1b, is VOID
    st = {o.id: o.status for o in evaluate_claims(r, exp.CLAIMS)}
    assert st["pre-search-room-synth"] == "FAIL" and st["C3"] == "VOID" and st["C1b"] == "PASS"
    r.summary.update(breast_cancer_defensible_first_seed=0)
    st = {o.id: o.status for o in evaluate_claims(r, exp.CLAIMS)}
    assert st["pre-search-room-bc"] == "FAIL" and st["C1b"] == "VOID" and st["pre-learned"] == "PASS"
    r.summary["synthetic_reference_score"] = 0.52
    assert {o.id: o.status for o in evaluate_claims(r, exp.CLAIMS)}["pre-learned"] == "FAIL"


def test_audit_attaches_explanation_controls(data):
    import json

    """Issue 23: the audited explanations carry trustlab.explain's controls and sanity verdict."""
    X, y, names = data
    rep = _audit(controls="endpoints").audit(X, y, feature_names=names)
    audited = [f for f in rep.features if f.name in rep.spec["features"]]
    endpoints = {n for f in audited for n in (f.argmin_share_trial, f.argmax_share_trial)}
    assert set(rep.controls) == {0} | endpoints
    for verdict in rep.controls.values():
        assert verdict["status"] in {"PASS", "FAIL", "INCOMPLETE"}
        assert {c["name"] for c in verdict["checks"]} and verdict["correlations"]
        assert "model_randomisation" in verdict["correlations"] or verdict["status"] == "INCOMPLETE"
    md = rep.to_markdown()
    assert "Explanation controls" in md and f"trial 0 (reference): **{rep.controls[0]['status']}**" in md
    ref_only = _audit(controls="reference").audit(X, y, feature_names=names)
    assert set(ref_only.controls) == {0} and ref_only.controls[0] == rep.controls[0]  # seeded: reproducible
    assert _audit(controls="none").audit(X, y, feature_names=names).controls == {}
    assert json.loads(rep.to_json())["controls"]["0"]["status"] == rep.controls[0]["status"]
