"""Cascade routing: the six official-code bugs (our behaviour is the correct one), the reductions, the
vectorised engine against the per-query reference, tables and loaders, estimators, evaluation, JSON,
bad inputs and the ``trustlab route`` command."""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from trustlab.core.exceptions import ConfigError, InputError, TrustlabError
from trustlab.methods.cascade import (
    BudgetWarning,
    CascadeRouter,
    ClassificationEstimator,
    ConstantSearch,
    OpenFormEstimator,
    OptimalCascade,
    OptimalRouter,
    QualityEstimates,
    RepetitiveConstantSearch,
    SelectionTable,
    SyntheticNoiseEstimator,
    ThresholdCascade,
    TPESearch,
    auc,
    bootstrap_auc,
    budget_grid,
    classifier_pool,
    cost_to_reach,
    evaluate_policy,
    expected_max,
    fit_policy,
    hull_models,
    linear_curve,
    load_routerbench,
    load_selection_table,
    policy_from_json,
    policy_to_json,
    routellm_metrics,
    save_selection_table,
    synthetic_table,
    verifiable_items,
)
from trustlab.methods.cascade._engine import Engine, Space, select_answer
from trustlab.methods.cascade._estimates import diagonal_covariances, sobol_normal
from trustlab.methods.cascade._lambda import SearchResult
from trustlab.methods.cascade._llm_pool import heuristic_solver
from trustlab.methods.cascade._reference import reference_decisions


def _b1(n: int = 400, k: int = 4, noise: str = "medium", seed: int = 0) -> tuple[QualityEstimates, QualityEstimates]:
    est = SyntheticNoiseEstimator(noise=noise, random_state=seed).estimate(synthetic_table(n, k, random_state=seed))
    cut = n // 4
    return est.subset(np.arange(cut)), est.subset(np.arange(cut, n))


def _fit(policy, e):
    return policy.fit(e.quality, e.true_cost, estimates=e)


def _budgets(e: QualityEstimates, n: int = 4) -> np.ndarray:
    return budget_grid(e.quality.mean(0), e.true_cost.mean(0), n)


def _same_decisions(a, b, e, budgets) -> int:
    bad = 0
    for x in budgets:
        da, db = a.decide(e, float(x)), b.decide(e, float(x))
        bad += int(((da.answer != db.answer) | (da.run != db.run).any(1)).sum())
    return bad


KW = {"allow_in_sample": True, "random_state": 0, "search": [ConstantSearch(n_iter=20)]}


# ----------------------------------------------------------------------------- the six official-code bugs
def test_bug_a_expected_max_scales_by_the_standard_deviation():
    """E[max(a, X)], X ~ N(mu, s^2), has a closed form; the official independent branch used s^2 for s."""
    a, mu, s = 0.6, 0.5, 0.5
    ours = expected_max([a, mu], np.diag([1e-12, s**2]), n_samples=8192, random_state=0)[0]
    d = (mu - a) / s
    exact = a + (mu - a) * norm.cdf(d) + s * norm.pdf(d)
    wrong_s = s**2
    wrong = a + (mu - a) * norm.cdf((mu - a) / wrong_s) + wrong_s * norm.pdf((mu - a) / wrong_s)
    assert abs(ours - exact) < 2e-3
    assert abs(wrong - exact) > 0.05  # the variance-scaled value is far off: the test can tell them apart


def test_bug_b_tpe_upper_bound_uses_max_factor():
    init = SearchResult((2.0, 3.0), 1.0, 0.5, 2.0)
    assert TPESearch(max_factor=4.0).upper_bound(init, 100.0) == 12.0  # official: max(0, (1-4)*3) = 0 -> 100
    assert TPESearch(max_factor=4.0, from_scratch=True).upper_bound(init, 100.0) == 100.0
    pytest.importorskip("optuna")
    seen = []

    def execute(lams):
        seen.append(lams)
        lam = float(np.mean([v for v in lams if v is not None]))
        return 1.0 / (1.0 + lam), 1.0 - 0.1 * lam

    res = TPESearch(n_trials=12, max_factor=4.0).search(execute, 2, 0.5, 100.0, init, random_state=0)
    assert res.feasible and all(0 <= v <= 12.0 for lams in seen for v in lams if v is not None)


def test_bug_c_answer_always_from_a_model_that_ran():
    tune, test = _b1()
    for cls in (OptimalRouter, ThresholdCascade, OptimalCascade, CascadeRouter):
        p = _fit(cls(**KW), tune)
        for b in (1e-9, float(test.true_cost.mean(0).max()), 1e6):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", BudgetWarning)
                d = p.decide(test, b)
            assert d.run.sum(1).min() >= 1 and d.run[np.arange(len(d.answer)), d.answer].all()
    with pytest.raises(TrustlabError, match="ran no model"):
        select_answer(test, np.array([0, 1]), np.array([0, 1]))


def test_bug_d_router_tie_mixing_spends_the_budget_exactly():
    """Every query ties at lambda* = 0.15; B = 1.5 needs P(expensive) = 0.25 (the official formula: 0.75)."""
    n = 4000
    q, c = np.tile([0.5, 0.8], (n, 1)), np.tile([1.0, 3.0], (n, 1))
    e = QualityEstimates(("cheap", "good"), c, ante=q, post=q, quality=q, true_cost=c)
    r = OptimalRouter(random_state=0, search=[ConstantSearch(n_iter=60)]).fit(q, c, estimates=e)
    res = r.tune(1.5)
    assert res.expected_cost == pytest.approx(1.5, abs=1e-9) and res.gamma == pytest.approx(0.25, abs=1e-9)
    d = r.decide(e, 1.5)
    assert d.cost(c).mean() == pytest.approx(1.5, abs=0.05)
    official_gamma = (3.0 - 1.5) / (3.0 - 1.0)
    assert abs((1 - official_gamma) * 1.0 + official_gamma * 3.0 - 1.5) > 0.9


def test_bug_e_cheapest_member_of_the_best_supermodel_runs_first():
    """Best supermodel {1, 2}; model 2 costs less for this query than model 1 (index order is not cost
    order): model 2 runs first (the official argmin over a generator always picked the first index)."""
    ante = np.array([[0.0, 0.9, 0.9]])
    cost = np.array([[1.0, 4.0, 2.0]])
    e = QualityEstimates(("a", "b", "c"), cost, ante=ante, post=ante, cov=diagonal_covariances(np.array([.2, .2, .2])))
    space = Space(3, 3, np.arange(3))
    t = Engine(e, sobol_normal(256, 3, 0, centre=True)).run_cr(space, (0.001, 0.001, 0.001), np.arange(1),
                                                                prune=True, top_k=None)
    assert t.order[0, 0] == 2 and t.masks[0] == 0b110


@pytest.mark.parametrize("dense", [False, True])
def test_bug_f_vectorised_engine_matches_the_per_query_reference(dense):
    """The same decisions as the per-query search for every option combination (official loops per query)."""
    if dense:
        table = classifier_pool("wine", random_state=0)
        fit, rest = table.subset(np.arange(50)), table.subset(np.arange(50, table.n_queries))
        est = ClassificationEstimator().fit(fit).estimate(rest)
        k = table.n_models
    else:
        k = 4
        est = SyntheticNoiseEstimator(noise="medium", random_state=1).estimate(synthetic_table(120, k, random_state=1))
    Z = sobol_normal(64, k, 0, centre=True)
    rank = np.argsort(np.argsort(est.true_cost.mean(0) if est.true_cost is not None else np.arange(k)))
    rng = np.random.default_rng(0)
    scale = 1.0 / est.cost.mean()
    multi = 0
    for depth, greedy, fo, top_k, prune, mode in itertools.product([k, 2], [False, True], [False, True], [None, 2],
                                                                    [True, False], ["cr", "cascade"]):
        lams = tuple(float(v) for v in 10 ** rng.uniform(-4, -0.5, k) * scale)
        space = Space(k, depth, rank, mode=mode, force_order=fo or mode == "cascade", greedy=greedy)
        v = Engine(est, Z, cache=bool(top_k)).run_cr(space, lams, np.arange(est.n), prune=prune, top_k=top_k)
        r = reference_decisions(est, Z, lams, depth=depth, rank=rank, mode=mode, force_order=fo or mode == "cascade",
                                greedy=greedy, top_k=top_k, prune=prune)
        assert (v.masks == r.masks).all() and (v.order == r.order).all() and (v.answer == r.answer).all(), \
            (depth, greedy, fo, top_k, prune, mode)
        multi += int((v.run(k).sum(1) > 1).sum())
    assert multi > 100  # the lambdas make cascades happen


@pytest.mark.parametrize("uncertain", [True, False])
def test_pruned_step_with_skips_and_chunks_matches_the_reference(uncertain, monkeypatch):
    """The lazy pruned step (submodularity skip, several chunks per run-set, with and without uncertainty) makes
    the per-query search's decisions, and its memoised summed costs are the index-order sums bit for bit."""
    from trustlab.methods.cascade import _lazy
    from trustlab.methods.cascade._engine import set_costs
    from trustlab.methods.cascade._estimates import mask_bits

    monkeypatch.setattr(_lazy, "LAZY_ROWS", 48)
    k = 6
    est = SyntheticNoiseEstimator(noise="medium", random_state=2).estimate(synthetic_table(240, k, random_state=2))
    est = est if uncertain else est.without_uncertainty()
    Z = sobol_normal(128, k, 0, centre=True)
    rank = np.argsort(np.argsort(est.true_cost.mean(0)))
    rng = np.random.default_rng(3)
    multi = 0
    for fo, depth in [(False, k), (True, k), (False, 3)]:
        lams = tuple(float(v) for v in 10 ** rng.uniform(-3, -1, k) / est.cost.mean())
        space = Space(k, depth, rank, force_order=fo)
        v = Engine(est, Z, cache=False).run_cr(space, lams, np.arange(est.n), prune=True, top_k=None)
        r = reference_decisions(est, Z, lams, depth=depth, rank=rank, force_order=fo)
        assert (v.masks == r.masks).all() and (v.order == r.order).all() and (v.answer == r.answer).all(), (fo, depth)
        multi += int((v.run(k).sum(1) > 2).sum())
    assert multi > 50  # deep enough for the skip to matter
    bits = mask_bits(np.arange(2**k), k)
    slow = np.zeros((est.n, 2**k))
    for j in range(k):
        slow += est.cost[:, j : j + 1] * bits[None, :, j]
    assert np.array_equal(set_costs(est.cost, bits), slow)


# ----------------------------------------------------------------------------- reductions
def test_reductions_router_cascade_and_pruning():
    tune, test = _b1(n=500, k=4, noise="low")
    budgets = _budgets(test)
    assert _same_decisions(_fit(OptimalRouter(**KW), tune), _fit(CascadeRouter(max_depth=1, **KW), tune), test,
                           budgets) == 0
    assert _same_decisions(_fit(OptimalCascade(**KW), tune), _fit(CascadeRouter(cascade=True, **KW), tune), test,
                           budgets) == 0
    assert _same_decisions(_fit(CascadeRouter(**KW), tune), _fit(CascadeRouter(prune=False, **KW), tune), test,
                           budgets) == 0


@pytest.mark.filterwarnings("ignore::trustlab.methods.cascade._policies.BudgetWarning")
def test_cascade_routing_improves_on_routing_and_the_linear_baseline():
    tune, test = _b1(n=800, k=4, noise="low")
    mq, mc = test.quality.mean(0), test.true_cost.mean(0)
    ref = {"c_min": mc.min(), "c_max": mc.max(), "q_min": mq.min()}
    b = _budgets(test)
    cr = evaluate_policy(_fit(CascadeRouter(**KW), tune), test, b)
    ro = evaluate_policy(_fit(OptimalRouter(**KW), tune), test, b)
    lin = linear_curve(mq, mc)
    a_cr, a_ro, a_lin = (auc(x.cost, x.quality, **ref) for x in (cr, ro, lin))
    assert a_cr > a_ro > a_lin
    ci = bootstrap_auc(cr, mq, mc, other=ro, n_boot=50)
    assert ci.low <= ci.estimate <= ci.high and ci.low > 0


# ----------------------------------------------------------------------------- budgets and mixing
def test_budget_mixing_meets_the_budget_on_the_tuning_rows():
    tune, _ = _b1(n=800, k=4, noise="low")
    p = _fit(CascadeRouter(**KW), tune)
    for b in _budgets(tune)[1:-1]:
        res = p.tune(float(b))
        assert res.feasible and (not res.binding or res.expected_cost == pytest.approx(b, rel=1e-9))


def test_budget_below_the_cheapest_model_warns_and_runs_the_cheapest_plan():
    tune, test = _b1()
    p = _fit(CascadeRouter(**KW), tune)
    with pytest.warns(BudgetWarning, match="below the cheapest"):
        d = p.decide(test, 1e-12)
    assert d.info["feasible"] is False and (d.run.sum(1) == 1).all()
    with pytest.raises(InputError, match="budget"):
        p.route(test, -1.0)


def test_repetitive_constant_search_stops_early():
    tune, test = _b1(k=4, noise="low")
    p = _fit(CascadeRouter(**{**KW, "search": [RepetitiveConstantSearch(n_iter=15)]}), tune)
    d = p.decide(test, float(_budgets(test)[3]))
    assert d.info["strategy"].startswith("repetitive") and d.run.sum(1).max() <= len(d.info["lambdas"])


# ----------------------------------------------------------------------------- tables and loaders
def test_table_validation():
    with pytest.raises(InputError, match="must be >= 0"):
        SelectionTable(quality=[[0, 1]], cost=[[1, -2]])
    with pytest.raises(InputError, match="missing"):
        SelectionTable(quality=[[0, np.nan]], cost=[[1, 2]])
    with pytest.raises(InputError, match="shape"):
        SelectionTable(quality=[[0, 1]], cost=[[1, 2, 3]])
    with pytest.raises(InputError, match="no answers"):
        SelectionTable(quality=[[0, 1]], cost=[[1, 2]], answers=[["x", None]])
    with pytest.raises(InputError, match="distinct"):
        SelectionTable(quality=[[0, 1]], cost=[[1, 2]], models=["a", "a"])
    with pytest.warns(UserWarning, match="outside"):
        SelectionTable(quality=[[0, 3]], cost=[[1, 2]])


def test_policy_fit_refuses_bad_tables_and_in_sample_estimates():
    tune, _ = _b1()
    with pytest.raises(InputError):
        CascadeRouter().fit(tune.quality, -tune.true_cost)
    with pytest.raises(InputError):
        CascadeRouter().fit(tune.quality, tune.true_cost[:-1])
    q = tune.quality.copy()
    q[0, 0] = np.nan
    with pytest.raises(InputError):
        CascadeRouter().fit(q, tune.true_cost)
    with pytest.raises(InputError, match="allow_in_sample"):
        CascadeRouter(random_state=0).fit(tune.quality, tune.true_cost, estimates=tune)
    with pytest.raises(InputError, match="same"):
        CascadeRouter(allow_in_sample=True).fit(tune.quality[:5], tune.true_cost[:5], estimates=tune)


def test_too_many_models_needs_max_depth(monkeypatch):
    import trustlab.methods.cascade._engine as engine

    monkeypatch.setattr(engine, "_available_bytes", lambda: int(4 * 13 * 1000**2))  # room for 1000 supermodels
    t = synthetic_table(40, 12, random_state=0)
    e = SyntheticNoiseEstimator(random_state=0).estimate(t)
    with pytest.raises(ConfigError, match="max_depth <= 4"):
        _fit(CascadeRouter(**KW), e)
    assert _fit(CascadeRouter(max_depth=3, **KW), e).space_.U == 299


def test_long_format_round_trip(tmp_path):
    t = classifier_pool("wine", random_state=0)
    t = SelectionTable(quality=t.quality, cost=t.cost, models=t.models, queries=t.queries, answers=t.answers,
                       features=np.arange(t.n_queries, dtype=float)[:, None])
    for suffix in ("jsonl", "csv"):
        p = save_selection_table(t, tmp_path / f"t.{suffix}")
        back = load_selection_table(p)
        assert back.models == t.models and np.array_equal(back.quality, t.quality)
        assert np.allclose(back.cost, t.cost) and np.allclose(back.features, t.features)
        assert np.allclose(back.answers[3, 2], t.answers[3, 2])


def test_missing_entries_and_unlabelled_queries(tmp_path):
    rows = [{"query": "q1", "model": "a", "quality": 1, "cost": 1}, {"query": "q1", "model": "b", "quality": 0,
             "cost": 2}, {"query": "q2", "model": "a", "quality": 1, "cost": 1}]
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match="missing"):
        load_selection_table(p)
    assert load_selection_table(p, on_missing="drop").n_queries == 1
    new = tmp_path / "new.jsonl"
    new.write_text(json.dumps({"query": "x", "model": "a", "answer": "4"}) + "\n")
    t = load_selection_table(new)
    assert t.quality is None and t.cost is None and t.answers[0, 0] == "4"


def test_routerbench_schema_from_a_user_file(tmp_path):
    import pandas as pd

    df = pd.DataFrame({"sample_id": ["s1", "s2", "s3"], "prompt": ["p1", "p2", "p3"], "eval_name": ["mmlu", "gsm", "mmlu"],
                       "m1": [1.0, 0.0, 1.0], "m2": [1.0, 1.0, np.nan], "m1|total_cost": [1e-4, 2e-4, 1e-4],
                       "m2|total_cost": [1e-3, 2e-3, 1e-3], "m1|model_response": ["A", "B", "C"],
                       "m2|model_response": ["A", "A", "C"]})
    df.to_pickle(tmp_path / "rb.pkl")
    t = load_routerbench(tmp_path / "rb.pkl", on_missing="zero")
    assert t.models == ("m1", "m2") and t.quality[2, 1] == 0.0 and t.features.shape == (3, 2)
    df.drop(columns=["m2|model_response"]).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(InputError, match="model_response"):
        load_routerbench(tmp_path / "bad.csv")
    with pytest.raises(InputError, match="format"):
        load_selection_table(tmp_path / "rb.parquet") if (tmp_path / "rb.parquet").write_text("x") else None


# ----------------------------------------------------------------------------- estimators
def test_synthetic_estimator_follows_the_routerbench_protocol():
    t = synthetic_table(500, 3, random_state=0)
    e = SyntheticNoiseEstimator(noise="low", random_state=0).estimate(t)
    sig = np.sqrt(e.cov[0][np.arange(3), np.arange(3)])
    assert np.allclose(sig, np.std(e.ante - e.post, axis=0)) and e.in_sample.all()
    assert np.allclose(e.cov[0b111][np.arange(3), np.arange(3)], 1e-6)
    assert np.corrcoef(e.post[:, 0], t.quality[:, 0])[0, 1] > np.corrcoef(e.ante[:, 0], t.quality[:, 0])[0, 1]
    high = SyntheticNoiseEstimator(noise="high", random_state=0).estimate(t)
    assert (high.cost.std(axis=0) < 0.05 * t.cost.mean(axis=0)).all()  # costs collapse to per-model constants
    assert e.cost[:, 2].std() > 0.1 * t.cost[:, 2].mean()  # at low noise they follow each query


def test_classification_estimator_features_and_json():
    from trustlab.methods.cascade._estimators import estimator_from_dict

    t = classifier_pool("wine", random_state=0)
    est = ClassificationEstimator().fit(t.subset(np.arange(60)))
    e = est.estimate(t.subset(np.arange(60, t.n_queries)))
    assert e.mean.shape == (2**5, t.n_queries - 60, 5) and (e.mean >= 0).all() and (e.mean <= 1).all()
    assert e.cov.shape == (32, 5, 5) and not e.in_sample.any()
    assert est.estimate(t.subset(np.arange(10))).in_sample.all()
    feats = est._featurize(t.subset(np.arange(5)))
    same = SelectionTable(quality=t.quality[:5], cost=t.cost[:5], models=t.models,
                          answers=np.repeat(t.answers[:5, :1], 5, axis=1))
    f2 = est._featurize(same)
    assert np.allclose(f2["pairs"][(0, 1)][:, 0], 0) and (f2["pairs"][(0, 1)][:, 1] == 1).all()
    assert feats["self"][0].shape == (5, 3)
    back = estimator_from_dict(json.loads(json.dumps(est.to_dict())))
    assert np.array_equal(back.estimate(t).mean, est.estimate(t).mean)
    bad = SelectionTable(quality=np.full((4, 5), 0.5), cost=t.cost[:4], models=t.models, answers=t.answers[:4])
    with pytest.raises(InputError, match="0/1"):
        ClassificationEstimator().fit(bad)


def test_open_form_estimator_on_text_and_logprob_answers():
    items = verifiable_items(60, random_state=0)
    truth = [str(it["answer"]) for it in items]
    rng = np.random.default_rng(0)
    answers = np.empty((60, 2), dtype=object)
    quality = np.zeros((60, 2))
    for i, it in enumerate(items):
        h = heuristic_solver(it["question"])
        answers[i, 0] = {"answer": None if h is None else str(h), "logprobs": []}
        guess = truth[i] if rng.random() < 0.6 else "0"
        answers[i, 1] = {"answer": guess, "logprobs": list(rng.normal(-1 if guess == truth[i] else -3, 0.3, 3))}
        quality[i] = [float(answers[i, j]["answer"] == truth[i]) for j in range(2)]
    t = SelectionTable(quality=quality, cost=np.tile([1.0, 10.0], (60, 1)), answers=answers)
    e = OpenFormEstimator().fit(t.subset(np.arange(30))).estimate(t.subset(np.arange(30, 60)))
    post = e.mean_for(0b11)[:, 1]
    assert post[quality[30:, 1] == 1].mean() > post[quality[30:, 1] == 0].mean() + 0.3


def test_heuristic_solver_and_items():
    items = verifiable_items(30, random_state=1)
    assert {it["kind"] for it in items} == {"add", "compare", "solve"}
    for it in items:
        h = heuristic_solver(it["question"])
        if it["kind"] == "compare":
            assert h == it["answer"]
        elif it["kind"] == "solve":
            assert h is None
    assert heuristic_solver("What is 19 + 23?") == 32  # carry-less: wrong (42)


@pytest.mark.llm
def test_llm_pool_runs_smollm2(tmp_path):
    from trustlab.methods.cascade import llm_pool

    t = llm_pool(6, models=("heuristic", "smollm2", "oracle"), cache_dir=tmp_path)
    assert t.quality.shape == (6, 3) and (t.quality[:, 2] == 1).all() and (t.mean_cost()[1] > t.mean_cost()[0])
    assert all(isinstance(a["logprobs"], list) for a in t.answers[:, 1])
    assert np.array_equal(llm_pool(6, models=("heuristic", "smollm2", "oracle"), cache_dir=tmp_path).quality, t.quality)


def test_classifier_pool_cache(tmp_path):
    a = classifier_pool("wine", random_state=0, cache_dir=tmp_path)
    b = classifier_pool("wine", random_state=0, cache_dir=tmp_path)
    assert len(list((tmp_path / "cascade").iterdir())) == 1
    assert np.array_equal(a.quality, b.quality) and np.allclose(a.answers[0, 3], b.answers[0, 3])


# ----------------------------------------------------------------------------- evaluation
def test_hull_grid_auc_and_metrics():
    assert hull_models([0.5, 0.4, 0.9], [1.0, 2.0, 3.0]).tolist() == [0, 2]
    grid = budget_grid([0.5, 0.7, 0.8], [1.0, 2.0, 4.0], 3)
    assert grid.tolist() == [1.0, 1.5, 2.0, 3.0, 4.0]
    assert auc([1.0, 3.0], [0.5, 0.9], c_min=1.0, c_max=3.0, q_min=0.5) == pytest.approx(0.7)
    with pytest.raises(InputError, match="every model costs the same"):
        auc([1.0], [0.5], c_min=1.0, c_max=1.0, q_min=0.5)
    with pytest.raises(InputError, match="hull"):
        budget_grid([0.9, 0.5], [1.0, 2.0])
    assert cost_to_reach([1.0, 2.0], [0.5, 0.7], 0.9) is None
    m = routellm_metrics([1.0, 2.0, 3.0], [0.5, 0.9, 0.9], [0.5, 0.9], [1.0, 3.0])
    assert m["cpt50"] == pytest.approx(0.25) and 0 < m["apgr"] <= 1


# ----------------------------------------------------------------------------- JSON and the CLI
def test_policy_json_routes_new_queries_without_the_training_table():
    t = classifier_pool("breast_cancer", random_state=0)
    train, test = t.split(0.5, random_state=0)
    p = fit_policy(CascadeRouter(random_state=0, search=[ConstantSearch(n_iter=15)]), train)
    b = float(np.median(train.mean_cost()))
    d = p.decide(test, b)
    q = policy_from_json(policy_to_json(p))
    assert getattr(q, "tuning_", None) is None
    d2 = q.decide(SelectionTable(answers=test.answers, models=test.models, queries=test.queries), b)
    assert np.array_equal(d.answer, d2.answer) and np.array_equal(d.run, d2.run)
    with pytest.raises(InputError, match="below all"):
        q.decide(test, b / 100)


def test_cli_route_prints_the_curve_and_saves_the_policy(tmp_path):
    from typer.testing import CliRunner

    from trustlab.cli._app import app

    path = save_selection_table(classifier_pool("wine", random_state=0), tmp_path / "t.jsonl")
    runner = CliRunner()
    res = runner.invoke(app, ["route", str(path), "--target", "0.9", "--save", str(tmp_path / "p.json"),
                              "--policy", "cascade-router"])
    assert res.exit_code == 0, res.output
    assert "AUC" in res.output and "budget that reaches quality 0.9" in res.output
    doc = json.loads((tmp_path / "p.json").read_text())
    b = doc["tuned"][2]["budget"]
    res2 = runner.invoke(app, ["route", str(path), "--load", str(tmp_path / "p.json"), "--budget", str(b)])
    assert res2.exit_code == 0 and "routed" in res2.output
    res3 = runner.invoke(app, ["route", str(tmp_path / "missing.jsonl")])
    assert res3.exit_code == 2 and "does not exist" in res3.output


def test_methods_are_registered_as_routers():
    from trustlab.core.registry import METHODS
    from trustlab.methods import discover_methods

    discover_methods()
    names = {n for n in METHODS.names() if METHODS.entry(n).meta.get("paper") == "cascade"}
    assert names == {"OptimalRouter", "ThresholdCascade", "OptimalCascade", "CascadeRouter"}
    assert all(METHODS.entry(n).meta["role"] == "router" for n in names)


@pytest.mark.reproduce
def test_quick_experiment_passes_its_expected_claims(quick_run):
    from trustlab.experiments import cascade

    result, _ = quick_run("cascade")
    status = {c.id: c.passed for c in result.claims}
    assert all(status[i] for i in cascade.QUICK_EXPECTED_PASS), status
    assert "b1_quality_vs_budget" in cascade.PLOTS(result)


def test_router_role_default_decide_runs_the_routed_model():
    """The role extension: a Router that only implements _route gets decide() running exactly that model."""
    from trustlab.core.roles import Router

    class Cheapest(Router):
        _constraints: dict = {}

        def _fit(self, quality, cost):
            self.best_ = int(np.argmin(cost.mean(0)))

        def _route(self, queries, budget):
            return np.full(len(queries), self.best_)

    r = Cheapest().fit(np.ones((4, 3)), np.tile([3.0, 1.0, 2.0], (4, 1)))
    d = r.decide(np.zeros((2, 3)), 1.0)
    assert d.answer.tolist() == [1, 1] and d.run.tolist() == [[False, True, False]] * 2
    assert d.cost(np.tile([3.0, 1.0, 2.0], (2, 1))).tolist() == [1.0, 1.0]
