"""Padding, positions and ``collect`` on the tiny random llama."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trustlab.llm as L
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.llm import run_with_cache

TEXTS = ["a cat", "the dog ran far away today", "hello there my friend", "x"]
SITES = ["blocks.0.resid_post", "blocks.1.head_out", "embed"]


def _single(model, ids, sites):
    """Unpadded, one sequence at a time: the reference."""
    _, cache = run_with_cache(model, torch.tensor([ids]), sites)
    return {s: cache[s][0].float().numpy() for s in sites}


def test_position_helpers():
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 0], [0, 0, 0, 1]])
    assert L.last_positions(mask).tolist() == [3, 2, 3]
    assert L.position_ids_from_mask(mask).tolist() == [[0, 0, 0, 1], [0, 1, 2, 2], [0, 0, 0, 0]]
    valid = L.valid_positions(mask)
    assert valid.tolist() == [
        [False, False, False, True],
        [False, True, True, False],
        [False, False, False, True],
    ]
    assert L.valid_positions(mask, skip_first=False).tolist() == mask.bool().tolist()
    ids, m = L.pad_batch([[1, 2], [3]], pad_id=0, side="left")
    assert ids.tolist() == [[1, 2], [0, 3]] and m.tolist() == [[1, 1], [0, 1]]
    with pytest.raises(ConfigError, match="'side' argument of pad_batch"):
        L.pad_batch([[1]], 0, side="middle")


@pytest.mark.parametrize("side", ["right", "left"])
def test_collect_matches_unpadded_runs(tiny, side):
    model, tok = tiny
    seqs = tok(TEXTS, add_special_tokens=False)["input_ids"]
    refs = [_single(model, s, SITES) for s in seqs]
    last = L.collect(model, TEXTS, SITES, positions="last", batch_size=3, padding_side=side, progress=False)
    mean = L.collect(model, TEXTS, SITES, positions="mean", batch_size=3, padding_side=side, progress=False)
    allp = L.collect(model, TEXTS, SITES, positions="all", batch_size=2, padding_side=side, progress=False)
    assert last.index is None
    for s in SITES:
        assert last[s].dtype == np.float32
        for i, r in enumerate(refs):
            np.testing.assert_allclose(last[s][i], r[s][-1], atol=1e-5)
            expect = r[s][1:].mean(0) if len(r[s]) > 1 else r[s][0]  # first token skipped
            np.testing.assert_allclose(mean[s][i], expect, atol=1e-5)
        stacked = np.concatenate([r[s][1:] if len(r[s]) > 1 else r[s] for r in refs])
        np.testing.assert_allclose(allp[s], stacked, atol=1e-5)
    assert last["blocks.1.head_out"].shape == (4, 9, 8)
    expect_index = [(i, p) for i, s in enumerate(seqs) for p in (range(1, len(s)) if len(s) > 1 else [0])]
    assert [tuple(x) for x in allp.index] == expect_index


def test_collect_with_mask_and_ids(tiny):
    model, tok = tiny
    seqs = tok(TEXTS, add_special_tokens=False)["input_ids"]
    masks = [np.arange(len(s)) % 2 == 0 for s in seqs]  # includes position 0: the user asked for it
    out = L.collect(model, seqs, ["blocks.0.mlp_out"], positions=masks, progress=False)
    refs = [_single(model, s, ["blocks.0.mlp_out"])["blocks.0.mlp_out"] for s in seqs]
    expect = np.concatenate([r[m] for r, m in zip(refs, masks)])
    np.testing.assert_allclose(out["blocks.0.mlp_out"], expect, atol=1e-5)
    assert out.index[:, 1].tolist() == [p for m in masks for p in np.nonzero(m)[0]]
    ids, att = L.pad_batch(seqs, 2, "left")
    padded = L.collect(model, ids, ["blocks.0.mlp_out"], attention_mask=att, progress=False)
    np.testing.assert_allclose(padded["blocks.0.mlp_out"], np.stack([r[-1] for r in refs]), atol=1e-5)


def test_collect_stop_after_equals_full(tiny4):
    model, _ = tiny4
    a = L.collect(model, TEXTS, ["blocks.1.resid_post"], stop_after="auto", progress=False)
    b = L.collect(model, TEXTS, ["blocks.1.resid_post"], stop_after=None, progress=False)
    np.testing.assert_array_equal(a["blocks.1.resid_post"], b["blocks.1.resid_post"])
    logits = L.collect(model, TEXTS[:2], ["logits"], progress=False)["logits"]
    assert logits.shape == (2, 49152) and np.isfinite(logits).all()


def test_collect_left_padding_has_no_nans(tiny):
    model, _ = tiny
    out = L.collect(
        model, TEXTS, ["blocks.1.resid_post"], positions="all", padding_side="left", progress=False
    )
    assert np.isfinite(out["blocks.1.resid_post"]).all()


@pytest.mark.parametrize(
    ("inputs", "kwargs", "exc", "match"),
    [
        ([], {}, InputError, "at least one"),
        (["fine", ""], {}, InputError, "Item 1 .* no tokens"),
        (np.ones((2, 3), dtype=np.float32), {}, InputError, "must be integers"),
        ([[1.5, 2.0]], {}, InputError, "integer token ids"),
        (["word " * 300], {}, InputError, "more than the model's context of 256"),
        (["a"], {"positions": "first"}, ConfigError, "'positions'"),
        (["a"], {"batch_size": 0}, ConfigError, "batch_size"),
        (["a"], {"sites": ["blocks.0.pattern"]}, ConfigError, "pattern"),
        (["a"], {"sites": ["blocks.9.mlp_out"]}, InputError, r"\[0, 1\]"),
        (["a b"], {"positions": [np.array([True, True, True, True])]}, InputError, "only be False-padded"),
    ],
)
def test_collect_errors(tiny, inputs, kwargs, exc, match):
    sites = kwargs.pop("sites", ["embed"])
    with pytest.raises(exc, match=match):
        L.collect(tiny[0], inputs, sites, progress=False, **kwargs)


def test_collect_needs_a_tokenizer_for_texts(tiny):
    model, tok = L.tiny_random_llama(random_state=0, tokenizer=tiny[1])
    del model.trustlab_tokenizer
    with pytest.raises(ConfigError, match="no tokenizer"):
        L.collect(model, ["text"], ["embed"], progress=False)
    assert L.collect(model, ["text"], ["embed"], tokenizer=tok, progress=False)["embed"].shape == (1, 72)


def test_head_means(tiny):
    model, tok = tiny
    texts = TEXTS[:3]
    means = L.head_means(model, texts, layers=[0, 1])
    allp = L.collect(model, texts, ["blocks.1.head_out"], positions="all", progress=False)
    np.testing.assert_allclose(means[1], allp["blocks.1.head_out"].mean(0), atol=1e-6)
    assert set(means) == {0, 1}


def test_token_ids_outside_the_vocabulary_are_refused(tiny):
    """Issue 15: collect(model, [[1, 10**7]]) failed in torch with "index out of range in self"."""
    import torch

    model, _ = tiny
    vocab = model.config.vocab_size
    with pytest.raises(InputError, match=rf"'inputs' argument of collect must hold token ids in \[0, {vocab - 1}\]"
                                         r".*Got the id 10000000 in item 0"):
        L.collect(model, [[1, 10**7]], ["blocks.0.resid_post"], progress=False)
    with pytest.raises(InputError, match="Got the id -1"):
        L.collect(model, [[1, 2], [-1, 3]], ["blocks.0.resid_post"], progress=False)
    with pytest.raises(InputError, match=rf"'input_ids' argument of token_logprobs .* Got the id {vocab}"):
        L.token_logprobs(model, torch.tensor([[1, vocab]]))
    with pytest.raises(InputError, match="'corrupt' argument of patch_all_heads"):
        L.patch_all_heads(model, [1, 2, 10**7], [1, 2, 3], [5])
