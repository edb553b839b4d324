"""Tokenisation of (prompt, response) pairs and preference triples for training."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from trustlab.core.exceptions import ConfigError, InputError
from trustlab.llm import SequenceSet, tokenize_pairs, tokenize_preferences


def test_chat_template_and_response_mask(tiny):
    _, tok = tiny
    s = tokenize_pairs(tok, ["What is 2 + 2?", "Capital of France?"], ["4", "Paris"])
    for i, (p, r) in enumerate([("What is 2 + 2?", "4"), ("Capital of France?", "Paris")]):
        text = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
        p_ids = tok(text, add_special_tokens=False).input_ids
        r_ids = tok(r, add_special_tokens=False).input_ids + [tok.eos_token_id]
        n = int(s.attention_mask[i].sum())
        assert s.input_ids[i, :n].tolist() == p_ids + r_ids
        assert s.response_mask[i, :n].tolist() == [False] * len(p_ids) + [True] * len(r_ids)
        assert s.prompt_len[i] == len(p_ids) and s.response_len[i] == len(r_ids)
    assert not s.response_mask[s.attention_mask == 0].any()  # pads are never scored


def test_system_prompt_and_raw_prompts(tiny):
    _, tok = tiny
    a = tokenize_pairs(tok, ["Hi"], ["Hello"])
    b = tokenize_pairs(tok, ["Hi"], ["Hello"], system="Be brief.")
    raw = tokenize_pairs(tok, ["Q: Hi A:"], [" Hello"], chat=False, add_eos=False)
    assert a.prompt_len[0] != b.prompt_len[0]
    assert raw.input_ids[0, : raw.prompt_len[0]].tolist() == tok("Q: Hi A:").input_ids
    assert raw.response_len[0] == len(tok(" Hello", add_special_tokens=False).input_ids)


def test_prefix_property_boundary_merge_is_recorded(tiny):
    """Tokenising 'Hello wor' + 'ld' jointly merges across the boundary; the parts are kept separate."""
    _, tok = tiny
    s = tokenize_pairs(tok, ["Hello wor", "Hello"], ["ld", " world"], chat=False, add_eos=False)
    assert s.boundary_merge.tolist() == [True, False]
    n = int(s.attention_mask[0].sum())
    assert s.input_ids[0, :n].tolist() == tok("Hello wor").input_ids + tok("ld", add_special_tokens=False).input_ids


def test_left_and_right_padding_give_the_same_rows(tiny):
    _, tok = tiny
    s = tokenize_pairs(tok, ["a", "a much longer prompt here"], ["b c d", "e"])
    left = s.padded("left")
    assert left.attention_mask[:, -1].all() and not left.attention_mask[:, 0].all()
    back = SequenceSet.from_arrays(left.input_ids, left.attention_mask, left.response_mask, pad_id=s.pad_id)
    assert torch.equal(back.input_ids, s.input_ids) and torch.equal(back.response_mask, s.response_mask)
    assert back.fingerprint() == s.fingerprint()


def test_truncation(tiny):
    _, tok = tiny
    full = tokenize_pairs(tok, ["What is 2 + 2?"], ["four and a bit more text"])
    p = int(full.prompt_len[0])
    cut = tokenize_pairs(tok, ["What is 2 + 2?"], ["four and a bit more text"], max_length=p + 2)
    assert cut.response_len[0] == 2 and cut.response_truncated[0]
    short = tokenize_pairs(tok, ["What is 2 + 2?"], ["four"], max_prompt_length=5)
    assert short.prompt_len[0] == 5 and short.prompt_truncated[0]
    n = int(short.attention_mask[0].sum())
    assert short.input_ids[0, :5].tolist() == full.input_ids[0, p - 5 : p].tolist()
    assert n == 5 + full.response_len[0] - (full.response_len[0] - short.response_len[0])


def test_bad_inputs(tiny):
    _, tok = tiny
    with pytest.raises(InputError, match="empty after tokenisation"):
        tokenize_pairs(tok, ["Hi"], [""])
    with pytest.raises(InputError, match="truncated away"):
        tokenize_pairs(tok, ["What is 2 + 2?"], ["4"], max_length=5)
    with pytest.raises(InputError, match="one response per prompt"):
        tokenize_pairs(tok, ["a", "b"], ["c"])
    with pytest.raises(ConfigError, match="The 'max_length' argument of tokenize_pairs"):
        tokenize_pairs(tok, ["a"], ["b"], max_length=0)


def test_preferences_skip_identical_pairs_with_a_warning(tiny):
    _, tok = tiny
    with pytest.warns(UserWarning, match="skipped 1 pair"):
        p = tokenize_preferences(tok, ["a", "b", "c"], ["x", "same", "y"], ["z", "same", "w"])
    assert p.kept.tolist() == [0, 2] and p.n_pairs == 2 and len(p.sequences) == 4
    c, r = p.rows([0, 1])
    assert c.tolist() == [0, 1] and r.tolist() == [2, 3]
    with pytest.raises(InputError, match="every pair"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tokenize_preferences(tok, ["a"], ["x"], ["x"])


def test_subset_and_fingerprint(tiny):
    _, tok = tiny
    p = tokenize_preferences(tok, ["a", "bb bb", "c"], ["x", "y", "z"], ["u", "v", "w"])
    sub = p.subset([1])
    assert sub.n_pairs == 1 and sub.kept.tolist() == [1]
    assert sub.sequences.fingerprint() != p.sequences.fingerprint()
    assert np.array_equal(sub.sequences.input_ids[0, : int(sub.sequences.attention_mask[0].sum())],
                          p.sequences.input_ids[1, : int(p.sequences.attention_mask[1].sum())])
