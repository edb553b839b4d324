"""Tests for trustlab.methods.deception (deception probes, Goldowsky-Dill et al., ICML 2025)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from trustlab.core.exceptions import AssetNotFoundError, InputError, ScaleWarning, UnknownNameError
from trustlab.methods.deception import (
    ActivationExtractor,
    DeceptionProbe,
    Dialogue,
    DialogueActivations,
    Message,
    TextBaseline,
    auroc,
    control,
    control_heldout,
    evaluate_scores,
    instructed_pairs,
    layer_sweep,
    load_dialogues,
    persona_statements,
    recall_at_fpr,
    roleplay,
    sandbagging,
    shuffled_label_probe,
    split_dialogues,
    threshold_at_fpr,
    tokenize_dialogues,
)


def _synthetic(n=80, d=16, tokens=5, sep=3.0, seed=0, layer=9):
    """Dialogues of `tokens` tokens; deceptive tokens are shifted along a planted unit direction."""
    w = np.random.default_rng(123).normal(size=d)
    w /= np.linalg.norm(w)
    rng = np.random.default_rng(seed)
    y = np.array(["honest", "deceptive"] * (n // 2), dtype=object)
    groups = np.repeat(np.arange(n), tokens)
    X = rng.normal(size=(n * tokens, d))
    X += sep * np.outer((y[groups] == "deceptive").astype(float), w)
    return DialogueActivations({layer: X}, groups, y), w


@pytest.fixture(scope="module")
def tok():
    from trustlab.llm import load_tokenizer

    return load_tokenizer()


# ------------------------------------------------------------------------------------------- probe
@pytest.mark.parametrize("method", ["lr", "mms", "lat"])
def test_probe_separates_and_recovers_planted_direction(method):
    train, w = _synthetic(seed=0)
    test, _ = _synthetic(seed=1)
    p = DeceptionProbe(method=method).fit(train, train.labels)
    s = p.score_samples(test)
    lab = np.asarray(test.labels)
    assert auroc(s[lab == "honest"], s[lab == "deceptive"]) > 0.99
    # direction in raw coordinates: w_raw = direction / scale
    raw = p.direction_ / p.scale_
    cos = raw @ w / np.linalg.norm(raw)
    assert cos > 0.9, cos
    P = p.predict_proba(test)
    assert P.shape == (len(test), 2) and np.allclose(P.sum(1), 1)
    assert list(p.classes_) == ["deceptive", "honest"] and p.positive_class_ == "deceptive"
    assert (p.predict(test) == lab).mean() > 0.9


def test_probe_numeric_labels_and_array_input():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 6))
    y = (X[:, 2] > 0).astype(int)
    p = DeceptionProbe().fit(X, y)
    assert p.positive_class_ == 1 and auroc(p.score_samples(X)[y == 0], p.score_samples(X)[y == 1]) > 0.95


def test_aggregations():
    acts, _ = _synthetic(n=4, d=3, tokens=3)
    p = DeceptionProbe(aggregation="mean").fit(acts, acts.labels)
    t = p.token_scores(acts).reshape(4, 3)
    assert np.allclose(p.score_samples(acts), t.mean(1))
    assert np.allclose(p.set_params(aggregation="max").score_samples(acts), t.max(1))
    assert np.allclose(p.set_params(aggregation="last").score_samples(acts), t[:, -1])


def test_bad_inputs():
    acts, _ = _synthetic()
    with pytest.raises(InputError, match="at least 2 classes"):
        DeceptionProbe().fit(acts, np.array(["honest"] * len(acts)))
    with pytest.raises(InputError, match="exactly two classes"):
        DeceptionProbe().fit(acts, np.array(["honest", "deceptive", "ambiguous", "honest"] * (len(acts) // 4)))
    with pytest.raises(UnknownNameError, match="layer 5"):
        DeceptionProbe(layer=5).fit(acts, acts.labels)
    with pytest.raises(InputError, match="empty detection mask"):
        tokenize_dialogues(_FakeTok(), [Dialogue([Message("user", "hi"), Message("assistant", "yo")])])


def test_shuffled_labels_near_chance():
    train, _ = _synthetic(n=200, seed=3)
    test, _ = _synthetic(n=200, seed=4)
    aucs = []
    for s in range(5):
        p = shuffled_label_probe(train, train.labels, random_state=s)
        sc, lab = p.score_samples(test), np.asarray(test.labels)
        aucs.append(auroc(sc[lab == "honest"], sc[lab == "deceptive"]))
    assert abs(np.mean(aucs) - 0.5) < 0.15


def test_layer_sweep_rows():
    acts, _ = _synthetic()
    acts.acts[3] = np.random.default_rng(0).normal(size=acts.acts[9].shape)
    rows = layer_sweep(acts, {"self": acts}, [3, 9])
    by = {r["layer"]: r["auroc"] for r in rows}
    assert by[9] > 0.99 and by[3] < by[9]


# ------------------------------------------------------------------------------------------- metrics
def test_threshold_uses_control_only_and_warns_when_too_small():
    c = np.arange(200.0)
    t = threshold_at_fpr(c, 0.05)
    assert t.effective_fpr == pytest.approx(0.05) and t.n_control == 200
    r1 = recall_at_fpr(c, np.array([1e9, -1e9]), fpr=0.05, n_boot=0)
    r2 = recall_at_fpr(c, np.array([1e9, 1e9, 1e9, -5.0]), fpr=0.05, n_boot=0)
    assert r1.threshold == r2.threshold == t.value  # deceptive scores do not move the threshold
    with pytest.warns(ScaleWarning, match="effective FPR"):
        small = threshold_at_fpr(np.arange(30.0), 0.01)
    assert small.effective_fpr == pytest.approx(1 / 30)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        threshold_at_fpr(np.arange(100.0), 0.01)


def test_recall_ci_and_auroc():
    rng = np.random.default_rng(0)
    c, d, h = rng.normal(size=200), rng.normal(3, 1, size=50), rng.normal(size=50)
    r = recall_at_fpr(c, d, h, fpr=0.05, n_boot=200)
    assert r.recall_ci[0] <= r.recall <= r.recall_ci[1] and r.recall > 0.7
    assert r.honest_flagged < 0.2
    assert auroc([0, 1], [2, 3]) == 1.0 and auroc([1, 1], [1, 1]) == 0.5


# ------------------------------------------------------------------------------------------- data + masks
class _FakeTok:
    def apply_chat_template(self, chat, tokenize=False):
        return "".join(f"<{m['role']}>{m['content']}</>" for m in chat)

    def __call__(self, text, add_special_tokens=False, return_offsets_mapping=True):
        return {"input_ids": [ord(ch) for ch in text], "offset_mapping": [(i, i + 1) for i in range(len(text))]}


def test_masks_cover_exactly_detected_tokens_on_real_template(tok):
    ds = instructed_pairs(4) + roleplay(2) + sandbagging(2)["sandbag"] + control(3) + persona_statements(1)
    td = tokenize_dialogues(tok, ds)
    for d, ids, m in zip(ds, td.input_ids, td.masks):
        got = tok.decode([i for i, k in zip(ids, m) if k])
        assert got.strip() == d.detected_text.strip()
        # tokens just outside the mask are not part of the detected text
        idx = np.nonzero(m)[0]
        assert idx.max() - idx.min() + 1 == len(idx)  # one contiguous block
    # instructed pairs: last 5 words are not detected; honest and deceptive read the same tokens
    a, b = td.masks[0], td.masks[1]
    ia, ib = np.asarray(td.input_ids[0])[a], np.asarray(td.input_ids[1])[b]
    assert np.array_equal(ia, ib) and len(ds[0].detected_text.split()) == len(
        (ds[0].messages[1].content + ds[0].messages[2].content).split()) - 5


def test_mask_padding_and_context(tok):
    d = Dialogue([Message("user", "Is it new?"), Message("assistant", "Yes, it is brand new.", detect=True)])
    m0 = tokenize_dialogues(tok, [d]).masks[0]
    m = tokenize_dialogues(tok, [d], padding=(2, 1)).masks[0]
    i0, i = np.nonzero(m0)[0], np.nonzero(m)[0]
    assert i.min() == i0.min() - 2 and i.max() == i0.max() + 1
    long = Dialogue([Message("user", "word " * 3000), Message("assistant", "ok", detect=True)])
    with pytest.raises(InputError, match="context"):
        tokenize_dialogues(tok, [long], n_ctx=2048)


def test_fake_template_masks():
    d = Dialogue([Message("user", "ab"), Message("assistant", "cd", detect=True), Message("assistant", "ef")])
    td = tokenize_dialogues(_FakeTok(), [d])
    text = td.texts[0]
    assert "".join(ch for ch, k in zip(text, td.masks[0]) if k) == "cd"


def test_shipped_data_sizes():
    assert len(instructed_pairs()) >= 2 * 250 and len(roleplay()) == 80
    sb = sandbagging()
    assert len(sb["sandbag"]) == len(sb["mistake"]) == len(sb["offskill"]) >= 40
    assert 150 <= len(control()) <= 300
    for d in instructed_pairs()[::2]:
        assert len(d.detected_text.split()) >= 7


def test_text_baseline_cannot_read_identical_responses():
    ds = instructed_pairs(30)
    y = [d.label for d in ds]
    tb = TextBaseline(kind="tfidf", view="detected").fit(ds, y)
    s = tb.score_samples(ds)
    assert np.allclose(s[0::2], s[1::2])  # honest and deceptive responses are the same text
    full = TextBaseline(kind="tfidf", view="full").fit(ds, y).score_samples(ds)
    assert auroc(full[0::2], full[1::2]) == 1.0  # the instruction word gives it away


# ------------------------------------------------------------------------------------------- extractor
def test_extractor_tiny_model():
    from trustlab.llm import tiny_random_llama

    model, tk = tiny_random_llama()
    ds = instructed_pairs(3)
    ex = ActivationExtractor(model, tk, layers=[1, 2])
    a = ex(ds, key="x")
    assert a.layers == [1, 2] and len(a) == 6 and a.acts[1].shape[1] == 72
    assert np.array_equal(a.n_tokens, tokenize_dialogues(tk, ds).n_detected)
    assert ex(ds, key="x") is a
    with pytest.raises(UnknownNameError):
        ActivationExtractor(model, tk, layers=[7])
    p = DeceptionProbe(layer=2).fit(a, a.labels)
    assert p.score_samples(a).shape == (6,)


# ------------------------------------------------------------------------------------------- real model
@pytest.mark.llm
def test_real_model_probe_separates_instructed_pairs(smollm2):
    ds = instructed_pairs(40)
    ex = ActivationExtractor(smollm2.model, smollm2.tokenizer, layers=[12], batch_size=16)
    acts = ex(ds)
    train, test = acts.subset(np.arange(0, 60)), acts.subset(np.arange(60, 80))
    p = DeceptionProbe(layer=12).fit(train, train.labels)
    s, lab = p.score_samples(test), np.asarray(test.labels)
    assert auroc(s[lab == "honest"], s[lab == "deceptive"]) > 0.85
    ctl = ex(control(30))
    t = threshold_at_fpr(p.score_samples(ctl), 0.1)
    assert np.isfinite(t.value)


# ------------------------------------------------------------------------------------------- issue 14: sklearn semantics
def test_score_keeps_sklearn_meaning_and_works_in_cross_val_and_grid_search():
    from sklearn.model_selection import GridSearchCV, cross_val_score

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 5))
    y = (X[:, 1] > 0).astype(int)
    p = DeceptionProbe(layer=0).fit(X, y)
    assert p.score(X, y) == pytest.approx(np.mean(p.predict(X) == y))  # accuracy, as in scikit-learn
    assert np.array_equal(p.decision_function(X), p.score_samples(X))  # 0/1 labels: deceptive is classes_[1]
    acc = cross_val_score(DeceptionProbe(layer=0), X, y, cv=3)
    auc = cross_val_score(DeceptionProbe(layer=0), X, y, cv=3, scoring="roc_auc")
    assert acc.shape == (3,) and acc.mean() > 0.8 and auc.mean() > 0.9
    gs = GridSearchCV(DeceptionProbe(layer=0), {"reg_coeff": [1.0, 10.0]}, cv=3, scoring="roc_auc").fit(X, y)
    assert gs.best_params_["reg_coeff"] in (1.0, 10.0)


@pytest.mark.parametrize("labels", [("honest", "deceptive"), (0, 1)])
def test_roc_auc_under_sklearn_is_right_with_default_string_labels(labels):
    """Issue 43: with the default labels classes_ is ['deceptive', 'honest'], so decision_function must be positive
    for 'honest' (classes_[1]); before, cross_val_score(scoring='roc_auc') gave [0.0, 0.0009, 0.0]."""
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GridSearchCV, cross_val_score

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 5))
    y = np.where(X[:, 1] > 0, labels[1], labels[0])
    p = DeceptionProbe(layer=0).fit(X, y)
    assert roc_auc_score(y == labels[1], p.score_samples(X)) > 0.9  # score_samples: higher = more deceptive
    assert roc_auc_score(y == p.classes_[1], p.decision_function(X)) > 0.9  # scikit-learn's orientation
    auc = cross_val_score(DeceptionProbe(layer=0), X, y, cv=3, scoring="roc_auc")
    assert auc.min() > 0.9, auc
    gs = GridSearchCV(DeceptionProbe(layer=0), {"reg_coeff": [1.0, 10.0]}, cv=3, scoring="roc_auc").fit(X, y)
    assert gs.best_score_ > 0.9


def test_detectors_share_one_input_convention():
    ds = instructed_pairs(20)
    y = [d.label for d in ds]
    tb = TextBaseline(kind="tfidf", view="full").fit(ds, y)
    assert tb.score_samples(ds).shape == (40,) and tb.predict_proba(ds).shape == (40, 2)
    assert tb.positive_class_ == "deceptive" and tb.score(ds, y) == 1.0
    with pytest.raises(InputError, match="sequence of Dialogue"):
        tb.score_samples("not dialogues")


# ------------------------------------------------------------------------------------------- issue 15: regressions
def test_regression_capitalised_labels_are_refused_not_inverted():
    acts, _ = _synthetic()
    caps = np.where(np.asarray(acts.labels) == "deceptive", "Deceptive", "Honest")
    with pytest.raises(InputError, match="cannot tell which label is deceptive"):
        DeceptionProbe().fit(acts, caps)
    p = DeceptionProbe(positive_label="Deceptive").fit(acts, caps)
    s, lab = p.score_samples(acts), np.asarray(acts.labels)
    assert p.positive_class_ == "Deceptive" and auroc(s[lab == "honest"], s[lab == "deceptive"]) > 0.99
    with pytest.raises(InputError, match="positive_label"):
        DeceptionProbe(positive_label="lie").fit(acts, caps)
    with pytest.raises(InputError, match="cannot tell"):
        TextBaseline().fit(instructed_pairs(5), ["A", "B"] * 5)


def test_regression_evaluate_scores_reads_numeric_labels():
    rng = np.random.default_rng(0)
    s = np.concatenate([rng.normal(size=30), rng.normal(3, 1, size=30)])
    y = np.array([0] * 30 + [1] * 30)
    rep = evaluate_scores(s, y, rng.normal(size=100), n_boot=0)
    assert rep.n_deceptive == 30 and rep.n_honest == 30 and rep.auroc > 0.9
    strings = evaluate_scores(s, np.where(y == 1, "deceptive", "honest"), rng.normal(size=100), n_boot=0)
    assert strings.auroc == rep.auroc
    assert evaluate_scores(s, np.where(y == 1, "Lie", "Truth"), rng.normal(size=100), n_boot=0,
                           positive_label="Lie").auroc == rep.auroc
    with pytest.raises(InputError, match="cannot tell"):
        evaluate_scores(s, np.where(y == 1, "Lie", "Truth"), rng.normal(size=100), n_boot=0)
    with pytest.raises(InputError, match="0 = honest, 1 = deceptive"):
        evaluate_scores(s, y * 2, rng.normal(size=100), n_boot=0)


def test_regression_public_functions_refuse_bad_arguments():
    with pytest.raises(InputError, match="The 'control_scores' argument of threshold_at_fpr"):
        threshold_at_fpr([np.nan, 1.0], 0.05)
    with pytest.raises(Exception, match="The 'fpr' argument of threshold_at_fpr"):
        threshold_at_fpr([0.0, 1.0], 1.5)
    with pytest.raises(Exception, match="The 'n_boot' argument of recall_at_fpr"):
        recall_at_fpr([0.0, 1.0], [1.0], n_boot=-1)
    with pytest.raises(Exception, match="The 'n_facts' argument of instructed_pairs"):
        instructed_pairs(0)


# ------------------------------------------------------------------------------------------- issue 31: real chat data
def test_from_dict_accepts_the_chat_message_format():
    d = Dialogue.from_dict({"messages": [{"role": "system", "content": "Be nice."},
                                         {"role": "user", "content": "Hi"},
                                         {"role": "assistant", "content": "Hello.", "name": "bot"}],
                            "label": "honest"})
    assert [m.detect for m in d.messages] == [False, False, True] and d.detected_text == "Hello."
    flagged = Dialogue.from_dict([{"role": "user", "content": "Q", "detect": True},
                                  {"role": "assistant", "content": "A"}])
    assert flagged.detected_text == "Q" and flagged.label == "skip"
    assert Dialogue.from_dict(d.to_dict()) == d  # round trip
    assert Dialogue.from_dict({"messages": [["user", "Hi", False], ["assistant", "Yo", True]], "label": "deceptive"})
    with pytest.raises(InputError, match="'role' and 'content'"):
        Dialogue.from_dict({"messages": [{"role": "user", "text": "Hi"}]})
    with pytest.raises(InputError, match=r"'role' of message 0 .* must be one of \['system', 'user', 'assistant'\]. "
                                         "Got 'tool'"):
        Dialogue.from_dict({"messages": [{"role": "tool", "content": "{}"}]})
    with pytest.raises(InputError, match="'detect' flag"):
        Dialogue.from_dict({"messages": [{"role": "assistant", "content": "x", "detect": "yes"}]})
    with pytest.raises(InputError, match="'label' of a Dialogue"):
        Dialogue.from_dict({"messages": [{"role": "assistant", "content": "x"}], "label": "Deceptive"})


def test_load_dialogues_json_and_jsonl(tmp_path):
    rows = [d.to_dict() for d in instructed_pairs(3)]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "b.json").write_text(json.dumps({"dialogues": rows}))
    (tmp_path / "c.json").write_text(json.dumps(rows))
    ref = instructed_pairs(3)
    for name in ("a.jsonl", "b.json", "c.json"):
        got = load_dialogues(tmp_path / name)
        assert got == ref and [d.meta for d in got] == [d.meta for d in ref]
    (tmp_path / "bad.jsonl").write_text(json.dumps(rows[0]) + "\n{oops\n")
    with pytest.raises(InputError, match="bad.jsonl line 2"):
        load_dialogues(tmp_path / "bad.jsonl")
    (tmp_path / "bad2.jsonl").write_text(json.dumps({"messages": [{"role": "bot", "content": "x"}]}) + "\n")
    with pytest.raises(InputError, match="bad2.jsonl line 1"):
        load_dialogues(tmp_path / "bad2.jsonl")
    with pytest.raises(AssetNotFoundError):
        load_dialogues(tmp_path / "missing.json")


def test_split_dialogues_groups_and_reproduces_the_experiment_split():
    ds = instructed_pairs(50)
    tr, va, te = split_dialogues(ds, random_state=3)
    assert len(tr) + len(va) + len(te) == 100
    pairs = [{ds[i].meta["pair"] for i in part} for part in (tr, va, te)]
    assert not (pairs[0] & pairs[1]) and not (pairs[0] & pairs[2]) and not (pairs[1] & pairs[2])
    perm = np.random.default_rng(3).permutation(50)  # the rule: permute pairs, cut at 60 % and 80 %
    assert set(pairs[0]) == set(perm[:30].tolist()) and set(pairs[2]) == set(perm[40:].tolist())
    ctl = control(20)
    a, b = split_dialogues(ctl, (0.5, 0.5), groups=[f"p{i // 2}" for i in range(20)])
    assert len(a) == len(b) == 10 and not {i // 2 for i in a} & {i // 2 for i in b}
    with pytest.raises(InputError, match="groups"):
        split_dialogues(ctl, (0.5, 0.5), groups=[1, 2])
    with pytest.raises(Exception, match="fractions"):
        split_dialogues(ctl, (0.7, 0.7))


def test_persona_statements_are_true_false_twins():
    ds = persona_statements(5)
    assert len(ds) == 20
    assert {(d.meta["persona"], d.meta["true"]) for d in ds[:4]} == {("honest", True), ("honest", False),
                                                                     ("dishonest", True), ("dishonest", False)}
    facts = {d.messages[1].content.split(" ", 1)[0] for d in ds}
    assert facts and all(d.messages[1].detect for d in ds)
    assert ds[0].messages[1].content != ds[1].messages[1].content and ds[0].meta["fact"] >= 0


def test_activation_cache_on_disk_is_keyed_and_reused(tmp_path):
    from trustlab.llm import tiny_random_llama

    model, tk = tiny_random_llama(0)
    ds = instructed_pairs(4)
    ex = ActivationExtractor(model, tk, layers=[1, 2], cache_dir=tmp_path)
    a = ex(ds)
    assert ex.last_hits == {1: False, 2: False} and len(list((tmp_path / "activations").iterdir())) == 2
    b = ActivationExtractor(model, tk, layers=[2, 1], cache_dir=tmp_path)(ds)  # a second script
    for layer in (1, 2):
        assert np.array_equal(a.acts[layer], b.acts[layer])
    ex3 = ActivationExtractor(model, tk, layers=[0, 2], cache_dir=tmp_path)
    c = ex3(ds)
    assert ex3.last_hits == {0: False, 2: True} and np.array_equal(c.acts[2], a.acts[2])
    other, _ = tiny_random_llama(1)  # another model: never a stale hit
    ex4 = ActivationExtractor(other, tk, layers=[1], cache_dir=tmp_path)
    d = ex4(ds)
    assert ex4.last_hits == {1: False} and not np.array_equal(d.acts[1], a.acts[1])
    ex5 = ActivationExtractor(model, tk, layers=[1], cache_dir=tmp_path)
    ex5(instructed_pairs(5))  # other dialogues: a new entry
    assert ex5.last_hits == {1: False}
    no_cache = ActivationExtractor(model, tk, layers=[1])
    no_cache(ds)
    assert len(list((tmp_path / "activations").iterdir())) == 5  # nothing new without cache_dir
    with pytest.raises(InputError, match="cache_dir"):
        ActivationExtractor(model, tk, layers=[1], cache_dir=3)


def test_experiment_declares_quick_passes_and_config_scale_notes():
    from trustlab.experiments import deception as exp

    ids = {c.id for c in exp.CLAIMS}
    assert set(exp.QUICK_EXPECTED_PASS) <= ids and "C5" in ids
    quick = exp.Config.quick().to_dict()
    assert "20 test pairs" in next(c for c in exp.CLAIMS if c.id == "C1").note_for(quick)
    assert "180 benign prompts" in next(c for c in exp.CLAIMS if c.id == "C3a").note_for(exp.Config().to_dict())


def test_tokenizer_without_chat_template_is_refused_clearly():
    class _Base(_FakeTok):
        chat_template = None

    with pytest.raises(InputError, match="no chat template"):
        tokenize_dialogues(_Base(), instructed_pairs(1))


def test_premise_beyond_text_and_knockout():
    """Issue 39: the probe must beat TF-IDF on the tokens it reads by 0.10 AUROC; shuffled probe labels knock out."""
    import dataclasses

    from trustlab.experiments import deception as exp
    from trustlab.results.result import Result

    assert exp.KNOCKOUT == ("shuffle_labels=True",)
    dataclasses.replace(exp.Config.quick(), shuffle_labels=True).validate()
    r = Result("deception", "quick", {})
    r.summary.update(instructed_test_auroc_best=1.0, shuffled_auroc_mean=0.5,
                     auroc_table={"text_tfidf_detected": {"instructed_test": 0.5},
                                  "text_tfidf_full": {"instructed_test": 1.0}})
    assert exp._pre_beyond_text(r).passed is True
    r.summary["instructed_test_auroc_best"] = 0.55
    assert exp._pre_beyond_text(r).passed is False
    r.summary["auroc_table"] = {}
    assert exp._pre_beyond_text(r).passed is False
    req = {c.id: c.requires for c in exp.CLAIMS}
    assert req["C1"] == ("pre-beyond-text",) and req["C3a"] == ("pre-c3a-power",) and req["C4"] == ()
    assert req["C5"] == ("pre-beyond-text", "pre-truth-decodable")


def test_binomial_power_is_exact_and_gives_the_heldout_size():
    """Issue 41: C3a's held-out size from the exact power of scipy's two-sided binomial test (5 % vs 10 %)."""
    from scipy.stats import binom, binomtest

    from trustlab.methods.deception import binomial_test_power, heldout_size_for_power

    for n in (20, 57, 213):
        reject = np.array([binomtest(k, n, 0.05).pvalue < 0.05 for k in range(n + 1)])
        for p1 in (0.05, 0.10):
            assert binomial_test_power(n, 0.05, p1, 0.05) == pytest.approx(binom.pmf(np.arange(n + 1), n, p1)[reject].sum())
    assert binomial_test_power(20) < 0.2  # the old C3a: 20 held-out controls
    n = heldout_size_for_power(0.05, 0.10, 0.05, 0.8)
    assert n == 213 and binomial_test_power(n - 1) < 0.8
    assert all(binomial_test_power(m) >= 0.8 for m in range(n, 2 * n + 1, 7))
    # a threshold fitted on 180 exchangeable controls is not exact: the binomial test then rejects more often
    assert binomial_test_power(n, 0.05, 0.05, n_calibration=180) > 2 * binomial_test_power(n, 0.05, 0.05)
    assert len(control_heldout()) == n
    with pytest.raises(InputError, match="n_max"):
        heldout_size_for_power(0.05, 0.06, n_max=50)
    from trustlab.core.exceptions import TrustlabError

    with pytest.raises(TrustlabError, match="p1"):
        binomial_test_power(10, 0.05, 1.5)


def test_heldout_controls_are_other_prompts_rebuilt_from_the_seed():
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "scripts"
    if not (root / "deception_data" / "scenarios.py").is_file():
        pytest.skip("scripts/ not present (installed package)")
    sys.path.insert(0, str(root / "deception_data"))
    try:
        from scenarios import control_prompts, heldout_control_prompts
    finally:
        sys.path.remove(str(root / "deception_data"))
    held = [d.messages[0].content for d in control_heldout()]
    assert not set(held) & set(control_prompts()) and len(set(held)) == len(held)
    src = (root / "build_deception_data.py").read_text()
    seed = int(src.split("HELDOUT_SEED = ")[1].split()[0])
    assert heldout_control_prompts(len(held), seed) == held


def test_extractor_runs_identical_sequences_once(monkeypatch):
    """An instructed pair and its whole-statement twin are one token sequence: one model pass, own masks back."""
    import trustlab.llm as llm
    from trustlab.llm import tiny_random_llama

    model, tk = tiny_random_llama(0)
    ds = instructed_pairs(3)
    twins = [Dialogue((d.messages[0], Message("assistant", d.messages[1].content + d.messages[2].content,
                                                detect=True)), d.label) for d in ds]
    seen = []
    real = llm.collect
    monkeypatch.setattr(llm, "collect", lambda m, ids, *a, **k: seen.append(len(ids)) or real(m, ids, *a, **k))
    ex = ActivationExtractor(model, tk, layers=[1, 2], batch_size=4)
    both = ex(ds + twins)
    assert seen == [len(ds)]
    alone = ActivationExtractor(model, tk, layers=[1, 2])
    for i, d in enumerate(ds + twins):
        one = alone([d])
        for layer in (1, 2):
            np.testing.assert_allclose(both.subset([i]).acts[layer], one.acts[layer], atol=1e-5)
    assert np.all(both.n_tokens[len(ds):] > both.n_tokens[:len(ds)])  # the twins detect the last 5 words too


def _truth_data(planted: bool, seed: int = 0):
    """Synthetic C5 data: 40 facts x (honest, dishonest) x (true, false); false statements shifted when planted."""
    rng = np.random.default_rng(seed)
    rows, meta = [], []
    for fact in range(40):
        for persona in ("honest", "dishonest"):
            for true in (True, False):
                a = rng.normal(size=(3, 8))
                a[:, 0] += 2.0 * (persona == "dishonest")
                a[:, 1] += 3.0 * (planted and not true)
                rows.append(a)
                meta.append({"fact": fact, "persona": persona, "true": true})
    acts = DialogueActivations({9: np.concatenate(rows).astype(np.float32)}, np.repeat(np.arange(len(rows)), 3),
                               np.array(["honest" if m["persona"] == "honest" else "deceptive" for m in meta]), meta)
    persona_probe = DeceptionProbe(layer=9).fit(acts, acts.labels)
    tf = {"dialogues": [None] * len(rows), "acts": acts, "fact": np.array([m["fact"] for m in meta]),
          "persona": np.array([m["persona"] for m in meta]), "true": np.array([m["true"] for m in meta])}
    return {"seed": seed, "true_false": tf, "facts": {"train": set(range(24)), "held": set(range(24, 40))}}, persona_probe


@pytest.mark.parametrize("planted", [True, False])
def test_truth_premise_reads_truth_and_fails_under_the_knockout(planted):
    import dataclasses

    from trustlab.experiments import deception as exp
    from trustlab.experiments._deception_checks import persona_vs_truth
    from trustlab.results.result import Result

    data, persona_probe = _truth_data(planted)
    for knockout in (False, True):
        r = Result("deception", "quick", {})
        cfg = dataclasses.replace(exp.Config.quick(), shuffle_labels=knockout, truth_layer=9)
        persona_vs_truth(cfg, r, data, {9: persona_probe})
        assert "persona_vs_truth_secondary" not in r.summary and r.summary["persona_vs_truth"]["layer"] == 9
        pv = r.summary["persona_vs_truth"]
        assert pv["n_twins"] == 16 and pv["truth_probe"]["n_train"] == 48
        assert pv["probe"]["persona_auroc"] > 0.9  # the persona probe reads the persona ...
        assert exp._pre_truth(r).passed is (planted and not knockout), pv["truth_probe"]
        if planted and not knockout:
            assert pv["truth_probe"]["auroc_dishonest"] > 0.9


def test_c3a_heldout_fpr_and_its_power_premise():
    """C3a's threshold comes from the calibration controls; a shifted held-out set fails the binomial test."""
    from trustlab.experiments import deception as exp
    from trustlab.experiments._deception_checks import calibration
    from trustlab.results.result import Result

    class _Scorer:  # a dialogue's score = its first activation
        def score_samples(self, a):
            return a.acts[9][np.r_[0, np.cumsum(a.n_tokens)[:-1]], 0]

    def acts(x, labels=None):
        x = np.asarray(x, dtype=np.float32)
        return DialogueActivations({9: np.c_[x, x]}, np.arange(len(x)),
                                   np.array(labels if labels is not None else ["honest"] * len(x)))

    rng = np.random.default_rng(0)
    lab = np.array(["honest", "deceptive"] * 20)
    ev = acts(rng.normal(size=40) + (lab == "deceptive"), lab)
    for shift, passed in ((0.0, True), (1.0, False)):
        data = {"seed": 0, "control": acts(rng.normal(size=400)), "control_hold": acts(rng.normal(size=213) + shift),
                "test": ev, "roleplay": ev, "sandbagging": ev}
        r = Result("deception", "quick", {})
        calibration(exp.Config.quick(), r, data, _Scorer())
        assert exp._pre_c3a_power(r).passed is True and r.summary["c3a_test"]["n_heldout"] == 213
        assert exp._c3a(r).passed is passed, r.summary["heldout_control_fpr"]["0.05"]
    data["control_hold"] = acts(rng.normal(size=60))
    calibration(exp.Config.quick(), r, data, _Scorer())
    assert exp._pre_c3a_power(r).passed is False
