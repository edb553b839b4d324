"""PrefixCache replay and scoring on the tiny random llama."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trustlab.llm as L
from trustlab.core.exceptions import ConfigError, InputError

TEXTS = ["a cat sat on the mat", "dogs", "the quick brown fox jumps"]


# ------------------------------------------------------------------------------------------- prefix
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("k_top", [1, 2, 4])
def test_prefix_replay_equals_full_forward(tiny4, side, k_top):
    model, _ = tiny4
    pc = L.PrefixCache(model, k_top, TEXTS, padding_side=side)
    with torch.no_grad():
        full = model(pc.input_ids, attention_mask=pc.attention_mask, position_ids=pc.position_ids).logits
        got = pc.forward()
    real = pc.attention_mask.bool()
    assert torch.allclose(got[real], full[real], atol=1e-5)
    with torch.no_grad():
        last = pc.forward([2, 0], positions="last")
    rows = torch.tensor([2, 0])
    expect = full[rows, L.last_positions(pc.attention_mask[rows])]
    assert torch.allclose(last, expect, atol=1e-5)
    mask = pc.attention_mask[[1]].bool()
    with torch.no_grad():
        assert torch.allclose(pc.forward([1], positions=mask), full[1][mask[0]], atol=1e-5)


def test_prefix_backward_reaches_only_top_blocks(tiny4):
    model, _ = L.tiny_random_llama(random_state=1, n_layers=4, tokenizer=tiny4[1])
    pc = L.PrefixCache(model, 2, TEXTS)
    model.zero_grad()
    loss = pc.forward(positions=pc.attention_mask.bool()).logsumexp(-1).mean()
    loss.backward()
    grads = {i: model.model.layers[i].mlp.down_proj.weight.grad for i in range(4)}
    assert grads[0] is None and grads[1] is None
    top = {i: grads[i].clone() for i in (2, 3)}
    model.zero_grad()
    full = model(pc.input_ids, attention_mask=pc.attention_mask, position_ids=pc.position_ids).logits
    full[pc.attention_mask.bool()].logsumexp(-1).mean().backward()
    for i in (2, 3):
        assert torch.allclose(top[i], model.model.layers[i].mlp.down_proj.weight.grad, atol=1e-6, rtol=1e-4)


def test_prefix_errors(tiny):
    model, _ = tiny
    with pytest.raises(ConfigError, match=r"\[1, 2\]. Got 3"):
        L.PrefixCache(model, 3, TEXTS)
    with pytest.raises(InputError, match="at least one"):
        L.PrefixCache(model, 1, [])
    pc = L.PrefixCache(model, 1, TEXTS)
    with pytest.raises(InputError, match=r"\[0, 2\]"):
        pc.forward([5])
    with pytest.raises(InputError, match="shape"):
        pc.forward(positions=torch.ones(2, 2, dtype=torch.bool))
    assert len(pc) == 3


# ------------------------------------------------------------------------------------------- scoring
def _manual_logprobs(model, ids):
    with torch.no_grad():
        logits = model(ids).logits
    lp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
    return torch.cat([torch.zeros(ids.shape[0], 1), lp], 1)


def test_token_logprobs_match_manual_and_padding(tiny):
    model, tok = tiny
    seqs = tok(TEXTS, add_special_tokens=False)["input_ids"]
    manual = [_manual_logprobs(model, torch.tensor([s]))[0] for s in seqs]
    for side in ("right", "left"):
        ids, mask = L.pad_batch(seqs, 2, side)
        lp = L.token_logprobs(model, ids, mask, batch_size=2)
        for i in range(len(seqs)):
            row = lp[i][mask[i].bool()]
            assert torch.allclose(row, manual[i], atol=1e-5)
            assert row[0] == 0
        assert torch.all(lp[~mask.bool()] == 0)
    scores = L.sequence_logprobs(model, *L.pad_batch(seqs, 2, "right"))
    np.testing.assert_allclose(scores.sum, [float(m.sum()) for m in manual], rtol=1e-5)
    assert scores.n_tokens.tolist() == [len(s) - 1 for s in seqs]
    np.testing.assert_allclose(scores.mean, scores.sum / np.maximum(scores.n_tokens, 1))


def test_token_logprobs_grad(tiny):
    model, _ = L.tiny_random_llama(random_state=0, tokenizer=tiny[1])
    lp = L.token_logprobs(model, torch.tensor([[5, 6, 7, 8]]), grad=True)
    lp.sum().backward()
    assert model.model.layers[0].mlp.up_proj.weight.grad is not None
    assert not L.token_logprobs(model, torch.tensor([[5, 6, 7]])).requires_grad


def test_head_logits_subset(tiny):
    model, _ = tiny
    h = torch.randn(4, 72)
    full = L.head_logits(model, h)
    assert torch.allclose(L.head_logits(model, h, token_ids=[3, 9, 40000]), full[:, [3, 9, 40000]], atol=1e-6)


def test_score_responses_and_options(tiny):
    model, tok = tiny
    prompts, responses = ["The sky is", "Two plus two is"], [" blue", " four and more"]
    batch = L.encode_responses(tok, prompts, responses)
    n_resp = [len(tok(r, add_special_tokens=False)["input_ids"]) for r in responses]
    assert batch.response_mask.sum(1).tolist() == n_resp
    s = L.score_responses(model, tok, prompts, responses)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        ids = tok(p, add_special_tokens=False)["input_ids"] + tok(r, add_special_tokens=False)["input_ids"]
        manual = _manual_logprobs(model, torch.tensor([ids]))[0, -n_resp[i] :].sum()
        assert abs(s.sum[i] - float(manual)) < 1e-4
    assert s.n_tokens.tolist() == n_resp
    opts = L.score_options(model, tok, ["Q1", "Q2"], [" yes", " no way"], normalize=False)
    assert opts.scores.shape == (2, 2) and opts.choice.tolist() == opts.scores.argmax(1).tolist()
    single = L.score_responses(model, tok, ["Q2"], [" no way"])
    assert abs(opts.scores[1, 1] - single.sum[0]) < 1e-4
    per = L.score_options(model, tok, ["Q1", "Q2"], [[" a", " b"], [" c", " d"]])
    np.testing.assert_allclose(per.scores, per.sum / per.n_tokens, rtol=1e-6)
    chat = L.encode_responses(tok, ["Hi"], [" Hello"], chat=True, system="Be brief.")
    text = tok.decode(chat.input_ids[0])
    assert "<|im_start|>user" in text and "Be brief." in text and text.endswith(" Hello")


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda m, t: L.encode_responses(t, ["a"], ["b", "c"]), InputError, "as many prompts"),
        (lambda m, t: L.encode_responses(t, "a", "b"), InputError, "must be a list of"),
        (lambda m, t: L.encode_responses(t, ["a"], [""]), InputError, "Response 0 has no tokens"),
        (lambda m, t: L.score_options(m, t, ["a", "b"], [[" x"], [" y", " z"]]), InputError, "equally long"),
        (lambda m, t: L.token_logprobs(m, torch.ones(1, 3)), InputError, "integer token ids"),
        (
            lambda m, t: L.token_logprobs(
                m, torch.ones(1, 3, dtype=torch.long), response_mask=torch.ones(2, 2)
            ),
            InputError,
            "response_mask",
        ),
        (lambda m, t: L.score_responses(m, t, ["word " * 300], [" x"]), InputError, "context of 256"),
        (lambda m, t: L.generate(m, t, ["hi"], max_new_tokens=300, chat=False), InputError, "context"),
        (lambda m, t: L.generate(m, t, ["hi"], max_new_tokens=0), ConfigError, "max_new_tokens"),
        (lambda m, t: L.sequential_kl(m, None, torch.tensor([[1, 2]])), ConfigError, "PEFT"),
    ],
)
def test_scoring_errors(tiny, call, exc, match):
    with pytest.raises(exc, match=match):
        call(*tiny)


def test_sequential_kl(tiny):
    model, tok = tiny
    other, _ = L.tiny_random_llama(random_state=3, tokenizer=tok)
    ids, mask = L.pad_batch(tok([TEXTS[0], TEXTS[2]], add_special_tokens=False)["input_ids"], 2, "left")
    self_kl = L.sequential_kl(model, model, ids, mask)
    assert np.allclose(self_kl.per_sequence, 0, atol=1e-6)
    kl = L.sequential_kl(model, other, ids, mask)
    assert (kl.per_sequence > 0).all() and (kl.per_token >= -1e-6).all()
    seq = tok(TEXTS[0], add_special_tokens=False)["input_ids"]
    t = torch.tensor([seq])
    with torch.no_grad():
        p = torch.log_softmax(model(t).logits[0, :-1], -1)
        q = torch.log_softmax(other(t).logits[0, :-1], -1)
    manual = (p.exp() * (p - q)).sum(-1).sum()
    one = L.sequential_kl(model, other, t)
    assert abs(one.per_sequence[0] - float(manual)) < 1e-4


def test_generate_is_greedy_and_batch_invariant(tiny):
    model, tok = tiny
    prompts = ["Once upon a time", "Hi"]
    batched = L.generate(model, tok, prompts, max_new_tokens=4, chat=False)
    for p, out in zip(prompts, batched):
        ids = torch.tensor([tok(p, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            for _ in range(4):
                nxt = model(ids).logits[0, -1].argmax()
                ids = torch.cat([ids, nxt.view(1, 1)], 1)
                if int(nxt) == tok.eos_token_id:
                    break
        n_prompt = len(tok(p, add_special_tokens=False)["input_ids"])
        assert out == tok.decode(ids[0, n_prompt:], skip_special_tokens=True)
    assert len(L.generate(model, tok, "Hello", max_new_tokens=2)) == 1


def test_pad_id_order():
    from types import SimpleNamespace as NS

    from trustlab.llm._batching import _pad_id

    tok = NS(pad_token_id=None, eos_token_id=7)
    # without a model (tokenising only): the tokenizer's pad, else its EOS, else 0
    assert _pad_id(None, NS(pad_token_id=3, eos_token_id=7)) == 3
    assert _pad_id(None, tok) == 7
    assert _pad_id(None, NS(pad_token_id=None, eos_token_id=None)) == 0
    # with a model, its config's pad / EOS (first of a list) come before the tokenizer's EOS
    assert _pad_id(NS(config=NS(pad_token_id=None, eos_token_id=[5, 6])), tok) == 5
    assert _pad_id(NS(config=NS(pad_token_id=4, eos_token_id=5)), tok) == 4


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_restricted_mask_equals_transformers_vmap_path(tiny4, impl):
    """Issue 45: the packed-layout mask is built by broadcasting (no vmap); it equals create_causal_mask's."""
    from transformers import masking_utils as mu

    from trustlab.llm.prefix import _restricted_mask

    config = tiny4[0].config
    old = config._attn_implementation
    config._attn_implementation = impl
    try:
        g = torch.Generator().manual_seed(0)
        hidden = torch.randn(3, 7, config.hidden_size, generator=g)
        att = torch.ones(3, 7, dtype=torch.long)
        att[1, 5:] = 0
        pos = torch.arange(7).repeat(3, 1)
        seg = torch.randint(0, 3, (3, 7), generator=g)

        def fn(b, h, q, kv):
            return (seg[b, kv] == 0) | (seg[b, kv] == seg[b, q])

        ours = _restricted_mask(mu, config, hidden, att, pos, fn)
        ref = mu.create_causal_mask(config, hidden, att, None, pos, and_mask_function=fn)
        assert ours.shape == ref.shape and ours.dtype == ref.dtype
        assert torch.equal(ours, ref)
    finally:
        config._attn_implementation = old
