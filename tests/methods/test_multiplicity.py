"""Tests of trustlab.methods.multiplicity: S identities, the Bernstein bound, metrics, the classifier, the audit
(issue 28). Fast ones use a 4-block random llama; real SmolLM2 tests are marked llm, the quick run reproduce."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from trustlab.core.exceptions import ConfigError, InputError, TrustlabError
from trustlab.methods.multiplicity import (
    MultiplicityAudit,
    TabularLLM,
    TabularLLMClassifier,
    balanced_shots,
    bernstein_bound,
    confidence_score,
    entropy_score,
    local_stability,
    mc_dropout_proba,
    multiplicity_metrics,
    rashomon_filter,
    serialize_rows,
    stability_terms,
    tercile_gap,
    verbalizer_ids,
)

torch = pytest.importorskip("torch")


class _Logistic:
    """A fixed 2-class logistic model with predict_proba (a model whose outputs we know)."""

    def __init__(self, w, b=0.0):
        self.w, self.b = np.asarray(w, dtype=np.float64), b

    def predict_proba(self, X):
        p = 1.0 / (1.0 + np.exp(-(np.asarray(X, dtype=np.float64) @ self.w + self.b)))
        return np.stack([1 - p, p], axis=1)


@pytest.fixture(scope="module")
def backbone():
    return TabularLLM("tiny")


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 50, size=(24, 3)).astype(float)
    return X, (X[:, 0] > 25).astype(int)


@pytest.fixture(scope="module")
def fitted(backbone, table):
    X, y = table
    return TabularLLMClassifier(backbone=backbone, steps=4, batch_size=4, columns=["a", "b", "c"]).fit(X, y)


# ------------------------------------------------------------------------------ S identities and the bound
def test_closed_form_of_the_terms_and_S_below_the_neighbour_mean():
    rng = np.random.default_rng(1)
    fx, fn = rng.random(50), rng.random((50, 7))
    Z = stability_terms(fx, fn)
    np.testing.assert_allclose(Z, np.minimum(fx[:, None], 2 * fn - fx[:, None]), atol=1e-12)
    assert (Z.mean(1) <= fn.mean(1) + 1e-12).all()
    res = local_stability(_Logistic([2.0, -1.0]), rng.normal(size=(30, 2)), k=8, sigma=0.3, relative=False)
    assert (res.S <= res.neighbour_mean + 1e-12).all() and (res.S <= res.f_x + 1e-12).all()


def test_sigma_to_zero_gives_f_of_x_for_every_model_kind(fitted, table):
    X, _ = table
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    for model, space in ((net, "cached"), (_Logistic([0.1, 0.0, -0.1]), "cached"), (fitted, "cached"),
                         (fitted, "embedding")):
        res = local_stability(model, X[:6], k=4, sigma=1e-7, space=space)
        np.testing.assert_allclose(res.S, res.f_x, atol=1e-5)
        assert (res.f_x >= 0.5 - 1e-9).all()  # probability of the predicted class


def test_bernstein_bound_values():
    assert float(bernstein_bound(16, 0.1, 0.0)) == pytest.approx(1 - np.exp(-16 * 0.01 / (0.4 / 3)))
    b = bernstein_bound(16, 0.1, [0.0, 0.01, 0.1])
    assert b[0] > b[1] > b[2] > 0
    assert float(bernstein_bound(1000, 0.1, 0.01)) > 0.99


def test_bound_holds_where_the_expected_fine_tuned_output_is_known():
    """Models f'(x) = f(x + d) with d from the same neighbourhood: E_f'[f'(x)] = E f(e_i) exactly, so the
    guarantee's assumption holds with equality; the frequency of E f' >= S - eps over repeated draws of the
    k neighbours must be at least the Bernstein bound."""
    f = _Logistic([3.0, -2.0])
    x = np.array([[0.3, 0.1]])
    k, sigma, eps = 8, 0.4, 0.15
    # E f(e_i) by Monte Carlo with many neighbours (sphere of radius sigma around x)
    big = local_stability(f, x, k=20000, sigma=sigma, relative=False, eps=eps, random_state=99)
    expected = big.neighbour_mean[0]
    hits, bounds = [], []
    for seed in range(300):
        r = local_stability(f, x, k=k, sigma=sigma, relative=False, eps=eps, random_state=seed)
        hits.append(expected >= r.S[0] - eps)
        bounds.append(r.bound[0])
    assert np.mean(hits) >= np.mean(bounds) - 0.03
    assert np.mean(bounds) > 0.3  # a bound that says something


def test_neighbour_samplers_and_relative_radius():
    f = _Logistic([1.0, 1.0])
    X = np.array([[3.0, 4.0]])
    for sampler in ("sphere", "gaussian"):
        r1 = local_stability(f, X, k=64, sigma=0.1, relative=True, sampler=sampler, random_state=0)
        r2 = local_stability(f, X * 10, k=64, sigma=0.01, relative=True, sampler=sampler, random_state=0)
        assert np.isfinite(r1.S).all() and np.isfinite(r2.S).all()
    a = local_stability(f, X, k=8, sigma=0.1, random_state=3)
    b = local_stability(f, X, k=8, sigma=0.1, random_state=3)
    np.testing.assert_array_equal(a.S, b.S)


# ------------------------------------------------------------------------------ ground truth and measures
def test_multiplicity_metrics_by_hand():
    P = np.array([[0.9, 0.2, 0.6], [0.6, 0.4, 0.4], [0.4, 0.1, 0.7]])  # 3 models x 3 points, P(class 1)
    mm = multiplicity_metrics(P, y=[1, 0, 1])
    assert mm.flips.tolist() == [True, False, True]
    assert mm.arbitrariness == pytest.approx(2 / 3)
    np.testing.assert_allclose(mm.pairwise_disagreement, [2 / 3, 0, 2 / 3])
    np.testing.assert_allclose(mm.majority_agreement, [2 / 3, 1, 2 / 3])
    np.testing.assert_allclose(mm.std[0], np.std([0.9, 0.6, 0.4]))
    np.testing.assert_allclose(mm.range, [0.5, 0.3, 0.3])
    assert mm.accuracies == pytest.approx([1.0, 2 / 3, 2 / 3])
    assert mm.positive_rates == pytest.approx([2 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(confidence_score([0.9, 0.2]), [0.9, 0.8])
    assert entropy_score([0.5])[0] == pytest.approx(-np.log(2))
    assert tercile_gap([1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 2, 2]) == (2.0, 0.0)


def test_rashomon_filter_drops_low_scores_and_class_bias_shifts():
    rs = rashomon_filter([0.80, 0.79, 0.70, 0.80], [0.50, 0.52, 0.50, 0.90], delta=0.03, rate_tolerance=0.15)
    assert rs.kept.tolist() == [0, 1]
    assert "score" in rs.reasons[2] and "positive rate" in rs.reasons[3]


# ------------------------------------------------------------------------------ serialisation and the LLM
def test_serialisation_missing_values_and_free_text():
    import pandas as pd

    df = pd.DataFrame({"age": [67.0, np.nan], "housing": ["own", None]})
    with pytest.warns(UserWarning, match="unknown"):
        out = serialize_rows(df, question="Good credit risk?")
    assert out == ["age: 67; housing: own. Good credit risk? Answer:",
                   "age: unknown; housing: unknown. Good credit risk? Answer:"]
    with pytest.raises(InputError, match="row 1, column 'age' is missing"):
        serialize_rows(df, missing="raise")
    with pytest.raises(InputError, match="column 'note' holds free text"):
        serialize_rows(pd.DataFrame({"note": ["x" * 500]}))
    with pytest.raises(InputError, match="newline"):
        serialize_rows([["a\nb"]], ["c"])


def test_verbalizers_must_be_single_tokens(backbone):
    tok = backbone.tokenizer
    assert len(verbalizer_ids(tok, [" No", " Yes"])) == 2
    with pytest.raises(InputError, match="'definitely not' is [0-9]+ tokens"):
        verbalizer_ids(tok, [" Yes", "definitely not"])
    with pytest.raises(InputError, match="verbaliser"):
        TabularLLM("tiny", verbalizers=(" No", " absolutely yes"))


def test_balanced_shots_and_single_class():
    idx = balanced_shots(np.r_[np.zeros(10), np.ones(5)], 4, random_state=0)
    assert len(idx) == 8 and set(np.r_[np.zeros(10), np.ones(5)][idx]) == {0.0, 1.0}
    with pytest.raises(InputError, match="single class"):
        balanced_shots(np.zeros(10), 2)
    with pytest.raises(InputError, match="fewer than n_per_class"):
        balanced_shots(np.r_[np.zeros(10), np.ones(2)], 3)


def test_classifier_fits_predicts_and_refuses_bad_tables(backbone, fitted, table):
    X, y = table
    p = fitted.predict_proba(X)
    assert p.shape == (24, 2) and np.allclose(p.sum(1), 1)
    assert fitted.history_.n_trainable > 0 and len(fitted.history_.loss) == 4
    with pytest.raises(InputError, match="at least 2 classes"):
        TabularLLMClassifier(backbone=backbone, steps=1).fit(X, np.zeros(24, dtype=int))
    with pytest.raises(InputError, match="max_prompt_tokens"):
        TabularLLMClassifier(backbone=TabularLLM("tiny", max_prompt_tokens=8), steps=1).fit(X, y)
    with pytest.raises(InputError, match="inf"):
        fitted.predict_proba(np.where(X == X[0, 0], np.inf, X))
    # two seeds differ; the same seed reproduces (the shared backbone holds no per-model state)
    other = TabularLLMClassifier(backbone=backbone, steps=4, batch_size=4, columns=["a", "b", "c"],
                                 random_state=1).fit(X, y)
    assert not np.allclose(other.predict_proba(X), p)
    np.testing.assert_allclose(fitted.predict_proba(X), p, atol=1e-6)


def test_prior_calibrates_each_models_positive_rate(backbone, fitted, table):
    """Issue 47: prior=q shifts the yes/no margin so that a fraction q of the training rows is predicted positive;
    predict_proba, MC dropout and S's probability path all use the shifted logits."""
    from trustlab.methods.multiplicity import local_stability

    X, y = table
    kw = {"backbone": backbone, "steps": 4, "batch_size": 4, "columns": ["a", "b", "c"], "random_state": 0}
    for q in (0.25, 0.5):
        cal = TabularLLMClassifier(**kw, prior=q).fit(X, y)
        rate = float((cal.predict_proba(X)[:, 1] > 0.5).mean())
        assert abs(rate - q) <= 1.5 / len(y), (q, rate)
        assert cal.offset_ != 0.0 and fitted.offset_ == 0.0
    raw = fitted.predict_proba(X)
    cal = TabularLLMClassifier(**kw, prior=0.5).fit(X, y)
    z_raw, z_cal = np.log(raw[:, 1] / raw[:, 0]), np.log(cal.predict_proba(X)[:, 1] / cal.predict_proba(X)[:, 0])
    np.testing.assert_allclose(z_raw - z_cal, cal.offset_, atol=1e-4)  # the same model, shifted
    res = local_stability(cal, X[:4], k=2, sigma=1e-7, random_state=0)
    np.testing.assert_allclose(res.f_x, cal.predict_proba(X[:4]).max(1), atol=1e-5)
    with pytest.raises(TrustlabError, match="prior"):
        TabularLLMClassifier(**kw, prior=1.5).fit(X, y)


def test_replay_states_reproduce_the_hidden_states(backbone, fitted, table):
    X, _ = table
    fwd = backbone.forward_for(serialize_rows(X, ["a", "b", "c"], question="Positive?"))
    rows = np.arange(5)
    with torch.no_grad():
        h = fwd.hidden(rows)
        h2 = fwd.replay_states(rows, fwd.input_states(rows))
    torch.testing.assert_close(h, h2, atol=1e-5, rtol=1e-5)
    with pytest.raises(InputError, match="replay_states needs states"):
        fwd.replay_states(rows, fwd.input_states(rows)[:, :3])


def test_mc_dropout_changes_outputs_and_restores_the_rates(fitted, table):
    X, _ = table
    before = [d.p for d in fitted.backbone_.lora_dropouts()]
    mc = mc_dropout_proba(fitted, X[:5], n_masks=3, p=0.3)
    assert mc.shape == (3, 5, 2) and mc.std(0).max() > 0
    assert [d.p for d in fitted.backbone_.lora_dropouts()] == before
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Dropout(0.2), torch.nn.Linear(8, 2)).eval()
    assert mc_dropout_proba(net, X[:4], n_masks=2, p=None).shape == (2, 4, 2) and not net.training
    # a Generator seeds the masks (it used to fall back to seed 0 silently)
    g1, g2 = (mc_dropout_proba(net, X[:4], n_masks=2, random_state=np.random.default_rng(3)) for _ in range(2))
    np.testing.assert_array_equal(g1, g2)
    assert not np.array_equal(g1, mc_dropout_proba(net, X[:4], n_masks=2, random_state=0))
    with pytest.raises(InputError, match="no Dropout"):
        mc_dropout_proba(torch.nn.Linear(3, 2), X[:4])


# ------------------------------------------------------------------------------ the audit
def test_audit_on_sklearn_models_and_report():
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] + X[:, 1] + 0.8 * rng.normal(size=200) > 0).astype(int)
    audit = MultiplicityAudit(factory=lambda s: RandomForestClassifier(20, max_depth=4, random_state=s), n_models=5,
                              bootstrap=True, k=8, sigma=0.3, relative=False, mc_masks=0, delta=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = audit.audit(X[:120], y[:120], X[120:], y[120:])
    assert len(rep.S) == 80 and set(rep.spearman) == {"S", "confidence", "entropy"}
    assert 0 <= rep.summary["arbitrariness"] <= 1 and rep.summary["mean_std"] > 0
    assert all(0 <= i < 80 for i in rep.unstable)
    assert "Multiplicity audit" in rep.to_markdown() and '"spearman"' in rep.to_json()
    assert rep.plot() is not None



def test_audit_random_state_takes_a_generator_like_every_method():
    """The shared random_state rule: an int, a Generator (one seed drawn per audit) or None."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(1)
    X = rng.normal(size=(90, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=90) > 0).astype(int)

    def run(random_state):
        audit = MultiplicityAudit(factory=lambda s: RandomForestClassifier(5, max_depth=3, random_state=s),
                                  n_models=3, bootstrap=True, k=4, sigma=0.2, relative=False, mc_masks=0,
                                  random_state=random_state)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return audit.audit(X[:60], y[:60], X[60:], y[60:])

    a, b = run(np.random.default_rng(7)), run(np.random.default_rng(7))
    np.testing.assert_array_equal(a.S, b.S)
    assert a.summary == b.summary
    with pytest.raises(ConfigError, match="random_state.*numpy Generator. Got 'seven'"):
        run("seven")

def test_audit_on_tiny_llm_fine_tunes(backbone, table):
    X, y = table
    audit = MultiplicityAudit(factory=lambda s: TabularLLMClassifier(backbone=backbone, steps=2, batch_size=4, random_state=s),
                              n_models=2, k=2, mc_masks=2, delta=1.0, rate_tolerance=1.0)
    rep = audit.audit(X[:16], y[:16], X[16:], y[16:])
    assert rep.kept == [0, 1] and "mc_dropout" in rep.measures and len(rep.S) == 8


def test_bad_arguments():
    f = _Logistic([1.0, 0.0])
    X = np.zeros((3, 2))
    with pytest.raises(ConfigError, match="'k' argument"):
        local_stability(f, X, k=1)
    with pytest.raises(ConfigError, match="'sigma' argument"):
        local_stability(f, X, sigma=0.0)
    with pytest.raises(InputError, match="NaN or inf"):
        local_stability(f, np.full((2, 2), np.nan), k=2)
    with pytest.raises(InputError, match="at least 2 models"):
        multiplicity_metrics(np.full((1, 4), 0.5))
    with pytest.raises(InputError, match="probabilities"):
        multiplicity_metrics(np.full((2, 4), 1.5))
    with pytest.raises(ConfigError, match="n_models"):
        MultiplicityAudit(factory=lambda s: None, n_models=1).audit(X, [0, 1, 0], X, [0, 1, 0])
    with pytest.raises(InputError, match="fit and predict_proba"):
        MultiplicityAudit(factory=lambda s: object(), n_models=2).audit(X, [0, 1, 0], X, [0, 1, 0])


# ------------------------------------------------------------------------------ real SmolLM2 / quick run
@pytest.mark.llm
def test_smollm2_verbalizers_and_a_short_fit():
    bb = TabularLLM()
    assert bb.verbalizer_ids == [2838, 9230]
    X = np.array([[30.0, 1.0], [70.0, 0.0], [25.0, 1.0], [80.0, 0.0]])
    clf = TabularLLMClassifier(backbone=bb, steps=3, batch_size=4, columns=["age", "smoker"]).fit(X, [0, 1, 0, 1])
    assert clf.predict_proba(X).shape == (4, 2)
    assert bb.forward_for(serialize_rows(X, ["age", "smoker"], question="Positive?")).k_top == 2


@pytest.mark.reproduce
def test_quick_experiment_runs(quick_run):
    res, _ = quick_run("multiplicity")
    ids = {c.id for c in res.claims}
    assert {"mult_llm", "pred_llm", "bound_llm", "mult_mlp", "pred_mlp", "bound_mlp"} <= ids
    assert len(res.summary["llm"]) == 1 and len(res.summary["mlp"]) == 1


def test_premises_read_majority_class_accuracy_and_knockout():
    """Issue 39: every kept model must beat the majority-class accuracy by 3 points; shuffled labels knock out."""
    import dataclasses

    from trustlab.experiments import multiplicity as exp
    from trustlab.results.result import Result

    assert exp.KNOCKOUT == ("shuffle_labels=True",)
    dataclasses.replace(exp.Config.quick(), shuffle_labels=True).validate()
    cfg = dataclasses.replace(exp.Config.quick(), shuffle_labels=True)
    y = np.array([0, 1] * 16)
    yk = exp._train_labels(cfg, y, 0)
    assert sorted(yk) == sorted(y) and (yk != y).any()  # a permutation: class counts kept, labels moved
    assert (exp._train_labels(exp.Config.quick(), y, 0) == y).all()
    r = Result("multiplicity", "quick", {})
    r.summary["llm"] = [{"split": 0, "majority_acc": 0.70, "test_accuracies": [0.70, 0.69]}]  # constant predictors
    r.summary["mlp"] = [{"split": 0, "majority_acc": 0.50, "test_accuracies": [0.81, 0.80]}]
    assert exp._learned("llm")(r).passed is False and exp._learned("mlp")(r).passed is True
    req = {c.id: c.requires for c in exp.CLAIMS}
    assert req["mult_llm"] == ("pre-llm-learned",) and req["pred_mlp"] == ("pre-mlp-learned",)
