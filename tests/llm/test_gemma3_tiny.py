"""The gemma3 site table, prefix replay (sliding-window layers) and shared-KV patching on a tiny random Gemma 3."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trustlab.llm as L


@pytest.fixture(scope="module")
def gemma():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    cfg = Gemma3TextConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=64,
        sliding_window=4,  # shorter than the test sequences, so the sliding masks matter
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        final_logit_softcapping=30.0,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return Gemma3ForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def ids():
    g = torch.Generator().manual_seed(0)
    return torch.randint(3, 128, (2, 10), generator=g)


def test_gemma3_sites_equal_hand_computation(gemma, ids):
    assert L.arch_spec(gemma).name == "gemma3"
    with torch.no_grad(), L.trace(gemma, L.site_names(gemma)) as tr:
        out = gemma(ids, output_hidden_states=True)
    hs = out.hidden_states
    assert torch.equal(tr["logits"], out.logits)
    for i, layer in enumerate(gemma.model.layers):
        p = f"blocks.{i}."
        assert torch.equal(tr[p + "resid_pre"], hs[i])
        if i < 2:
            assert torch.equal(tr[p + "resid_post"], hs[i + 1])
        with torch.no_grad():
            attn = layer.post_attention_layernorm(layer.self_attn.o_proj(tr[p + "head_out"].flatten(-2)))
            assert torch.allclose(attn, tr[p + "attn_out"], atol=1e-5)
            assert torch.allclose(tr[p + "resid_pre"] + tr[p + "attn_out"], tr[p + "resid_mid"], atol=1e-5)
        assert torch.allclose(tr[p + "resid_mid"] + tr[p + "mlp_out"], tr[p + "resid_post"], atol=1e-5)


def test_gemma3_prefix_replay_is_exact(gemma, ids):
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # left padding
    for k in (1, 2, 3):
        pc = L.PrefixCache(gemma, k, ids, attention_mask=mask, padding_side="left")
        with torch.no_grad():
            full = gemma(pc.input_ids, attention_mask=pc.attention_mask, position_ids=pc.position_ids).logits
            got = pc.forward()
        real = pc.attention_mask.bool()
        assert torch.allclose(got[real], full[real], atol=1e-5), k


def test_gemma3_patch_all_heads_matches_naive(gemma, ids):
    res = L.patch_all_heads(gemma, ids[0], ids[1], [5, 6], batch_size=4)
    _, cache = L.run_with_cache(gemma, ids[1:], [f"blocks.{i}.head_out" for i in range(3)])
    for layer in range(3):
        for head in range(4):
            val = torch.zeros(4, 8)
            val[head] = cache[f"blocks.{layer}.head_out"][0, -1, head]
            edit = L.Edit(f"blocks.{layer}.head_out", val, "replace", positions=-1, heads=[head])
            with torch.no_grad(), L.trace(gemma, [], edit=edit):
                naive = gemma(ids[:1]).logits[0, -1, [5, 6]]
            np.testing.assert_allclose(res.logits[layer, head], naive.numpy(), atol=1e-5)


def test_gemma3_head_logits_softcap(gemma):
    h = torch.randn(3, 32)
    with torch.no_grad():
        full = L.head_logits(gemma, h)
        assert full.abs().max() <= 30.0
        assert torch.allclose(L.head_logits(gemma, h, token_ids=[4, 9]), full[:, [4, 9]], atol=1e-6)
