"""Top-K replay training equals training through the full model (loss and LoRA gradients, 1e-5)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trustlab.core.exceptions import ConfigError, InputError
from trustlab.llm import (
    PolicyForward,
    PreferenceObjective,
    ReferenceCache,
    SFTObjective,
    add_lora,
    replay_depth,
    tokenize_pairs,
    tokenize_preferences,
    trace,
)

PROMPTS = ["What is 2 + 2?", "Name the capital of France.", "Say hi", "What colour is the sky on a clear day?"]
CHOSEN = ["4", "Paris", "Hi!", "Blue"]
REJECTED = ["Five, I think, or maybe six", "Berlin", "No.", "It is green, obviously, every single day"]


def nonzero_lora_b(pm, seed=0):
    """Random (seeded) LoRA B matrices, so that every LoRA tensor has a gradient; returns ``pm``."""
    g = torch.Generator().manual_seed(seed + 10)
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    return pm


def _lora_model(make_tiny, layers="top2", seed=0):
    pm = add_lora(make_tiny(n_layers=4, seed=seed), layers=layers, modules="all-linear", r=4, random_state=seed)
    return nonzero_lora_b(pm, seed)


def _grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def _same_grad(a, b, rtol=1e-5):
    """Equal up to float32 reassociation: the error is scaled by the tensor's largest entry, not each entry's.

    Replay and packing sum the same terms in another order, so an entry near 0 of a gradient whose entries
    reach 30 carries an absolute error of about 1e-6 x 30. An entrywise atol / rtol of 1e-5 does not allow
    that: it failed on one CPU (6e-5 at scale 34) after passing on another. A wrong replay or packing differs
    by O(1) of the scale."""
    return bool((a - b).abs().max() <= rtol * max(1.0, float(b.abs().max())))


def _step(model, objective, rows):
    model.zero_grad(set_to_none=True)
    loss = objective(rows).loss
    loss.backward()
    return float(loss.detach()), _grads(model)


@pytest.mark.parametrize("loss", ["dpo", "simpo"])
def test_replay_equals_full_model_for_loss_and_lora_grads(make_tiny, tiny, loss):
    _, tok = tiny
    pm = _lora_model(make_tiny)
    pairs = tokenize_preferences(tok, PROMPTS, CHOSEN, REJECTED)
    full = PolicyForward(pm, pairs.sequences, replay=None)
    replay = PolicyForward(pm, pairs.sequences, replay=2)
    assert replay.k_top == 2 and replay.start == 2 and full.k_top is None
    ref = ReferenceCache.compute(full)
    rows = np.array([0, 2, 3])
    l_full, g_full = _step(pm, PreferenceObjective(full, pairs, loss=loss, reference=ref), rows)
    l_rep, g_rep = _step(pm, PreferenceObjective(replay, pairs, loss=loss, reference=ref), rows)
    assert abs(l_full - l_rep) <= 1e-5
    assert g_full.keys() == g_rep.keys() and len(g_full) == 2 * 7 * 2  # A and B of 7 modules in 2 blocks
    for name in g_full:
        assert g_full[name].abs().max() > 0, name
        assert _same_grad(g_rep[name], g_full[name]), name


def test_replay_sft_and_reference_cache_match_full(make_tiny, tiny):
    _, tok = tiny
    pm = _lora_model(make_tiny, seed=3)
    seqs = tokenize_pairs(tok, PROMPTS, REJECTED)
    full, rep = PolicyForward(pm, seqs, replay=None), PolicyForward(pm, seqs, replay="auto")
    assert rep.k_top == 2
    l_full, g_full = _step(pm, SFTObjective(full, seqs), [0, 1, 2, 3])
    l_rep, g_rep = _step(pm, SFTObjective(rep, seqs), [0, 1, 2, 3])
    assert abs(l_full - l_rep) <= 1e-5
    assert all(torch.allclose(g_full[k], g_rep[k], atol=1e-5, rtol=1e-5) for k in g_full)
    a, b = ReferenceCache.compute(full, top_k=5, per_token=True), ReferenceCache.compute(rep, top_k=5, per_token=True)
    assert torch.allclose(a.sum, b.sum, atol=1e-5) and torch.equal(a.n_tokens, b.n_tokens)
    assert torch.allclose(a.token_logps, b.token_logps, atol=1e-5) and torch.equal(a.topk_ids, b.topk_ids)
    with torch.no_grad(), pm.disable_adapter():  # the cache holds the adapter-free reference
        base = full.sequence_logprobs([0, 1, 2, 3]).sum
    assert torch.allclose(a.sum.float(), base, atol=1e-5)


def test_replay_rows_do_not_depend_on_batch_composition(make_tiny, tiny):
    _, tok = tiny
    pm = _lora_model(make_tiny, seed=4)
    seqs = tokenize_pairs(tok, PROMPTS, REJECTED)
    rep = PolicyForward(pm, seqs, replay=2)
    with torch.no_grad():
        together = rep.sequence_logprobs([0, 1, 2, 3]).sum
        alone = torch.cat([rep.sequence_logprobs([i]).sum for i in range(4)])
    assert torch.allclose(together, alone, atol=1e-5)


def test_replay_depth_and_bad_specs(make_tiny, tiny):
    _, tok = tiny
    seqs = tokenize_pairs(tok, PROMPTS[:2], CHOSEN[:2])
    pm = _lora_model(make_tiny, layers=[1, 3])
    assert replay_depth(pm) == 3
    with pytest.raises(ConfigError, match="top 5 blocks, but the model has 4"):
        PolicyForward(pm, seqs, replay=5)
    with pytest.raises(ConfigError, match="not exact for this model"):
        PolicyForward(pm, seqs, replay=2)
    assert replay_depth(_lora_model(make_tiny, layers="all")) is None  # block 0 trainable: nothing to cache
    assert replay_depth(make_tiny()) is None  # a plain model trains everything, embedding included
    head_only = make_tiny()
    for name, p in head_only.named_parameters():
        p.requires_grad_(name == "model.norm.weight")
    assert replay_depth(head_only) == 1  # only the final norm trains: replaying the last block suffices
    with pytest.raises(ConfigError, match="The 'replay' argument of PolicyForward"):
        PolicyForward(pm, seqs, replay=0)


def test_stale_replay_cache_is_refused(make_tiny, tiny):
    _, tok = tiny
    pm = _lora_model(make_tiny)
    seqs = tokenize_pairs(tok, PROMPTS[:2], CHOSEN[:2])
    rep = PolicyForward(pm, seqs, replay=2)
    rep.check_fresh()
    with torch.no_grad():  # a change above the cached part keeps the cache valid
        pm.base_model.model.model.layers[3].mlp.up_proj.base_layer.weight[0, 0] += 1.0
    rep.check_fresh()
    with torch.no_grad():
        pm.base_model.model.model.layers[0].mlp.up_proj.weight[0, 0] += 1.0
    with pytest.raises(InputError, match="replay cache of this PolicyForward is stale"):
        rep.check_fresh()
    rep.refresh()
    rep.check_fresh()


def test_replay_states_on_disk_only_with_a_cache_dir(make_tiny, tiny, tmp_path):
    _, tok = tiny
    pm = _lora_model(make_tiny)
    seqs = tokenize_pairs(tok, PROMPTS, CHOSEN)
    a = PolicyForward(pm, seqs, replay=2, cache_dir=tmp_path)
    files = list((tmp_path / "replay").glob("*.safetensors"))
    assert len(files) == 1
    b = PolicyForward(pm, seqs, replay=2, cache_dir=tmp_path)
    assert torch.equal(a._prefix.hidden, b._prefix.hidden)
    with torch.no_grad():
        pm.base_model.model.model.layers[1].mlp.up_proj.weight[0, 0] += 1.0
    PolicyForward(pm, seqs, replay=2, cache_dir=tmp_path)  # other bottom weights: a second entry
    assert len(list((tmp_path / "replay").glob("*.safetensors"))) == 2


def test_hooks_fire_on_the_replayed_blocks(make_tiny, tiny):
    _, tok = tiny
    pm = _lora_model(make_tiny)
    seqs = tokenize_pairs(tok, PROMPTS[:2], CHOSEN[:2])
    full, rep = PolicyForward(pm, seqs, replay=None), PolicyForward(pm, seqs, replay=2)
    with torch.no_grad():
        with trace(pm, ["blocks.3.resid_post"]) as t1:
            full.hidden([0, 1])
        with trace(pm, ["blocks.3.resid_post"]) as t2:
            rep.hidden([0, 1])
    assert torch.allclose(t1["blocks.3.resid_post"], t2["blocks.3.resid_post"], atol=1e-5)


def test_shared_prompt_packing_is_exact(make_tiny, tiny):
    """Rows sharing a prompt are packed in the replayed blocks (and the bottom pass); results are unchanged."""
    from trustlab.llm.policy import _pack

    _, tok = tiny
    pm = _lora_model(make_tiny, seed=6)
    prompts = ["What is 2 + 2?"] * 3 + ["Name a colour."] * 2 + ["Say hi"]
    responses = ["4", "Four, I am quite sure of it", "5", "Blue", "A colour? Green, maybe.", "Hi!"]
    seqs = tokenize_pairs(tok, prompts, responses)
    packed = PolicyForward(pm, seqs, replay=2, share_prompts=True)
    plain = PolicyForward(pm, seqs, replay=2, share_prompts=False)
    full = PolicyForward(pm, seqs, replay=None)
    rows = np.array([4, 0, 1, 5, 2, 3])
    pk = _pack(seqs, packed._groups, rows)
    assert pk is not None and pk.ids.shape[0] == 3  # three prompts, six rows
    real = seqs.attention_mask.bool()
    assert torch.allclose(packed._prefix.hidden[real], plain._prefix.hidden[real], atol=1e-5)
    out = {}
    for name, fwd in (("packed", packed), ("plain", plain), ("full", full)):
        pm.zero_grad(set_to_none=True)
        lp = fwd.sequence_logprobs(rows).sum
        lp.sum().backward()
        out[name] = (lp.detach(), _grads(pm))
        m = fwd.batch(rows)[1].bool()  # real positions (pads hold no defined state)
        assert torch.allclose(fwd.hidden(rows, final_norm=False)[m], full.hidden(rows, final_norm=False)[m],
                              atol=1e-5)
    for name in ("packed", "plain"):
        assert torch.allclose(out[name][0], out["full"][0], atol=1e-5)
        assert all(_same_grad(out[name][1][k], out["full"][1][k]) for k in out["full"][1]), name
    normed = packed.final_norm(packed.hidden(rows, final_norm=False))
    assert torch.allclose(normed, packed.hidden(rows), atol=1e-5)
    assert torch.allclose(packed.sequence_logprobs(rows, hidden=normed).sum, out["full"][0], atol=1e-5)
