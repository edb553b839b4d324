"""The fine-tuning layer on the real SmolLM2-135M-Instruct (marker ``llm``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trustlab.llm as L
from trustlab.data.prefs import make_preferences

pytestmark = pytest.mark.llm


@pytest.fixture(scope="module")
def fresh(smollm2):
    """A second copy of SmolLM2 (adapters mutate their model; the session model stays clean)."""
    return L.load_model("smollm2-135m-instruct")


@pytest.fixture(scope="module")
def lora_model(fresh):
    pm = L.add_lora(fresh.model, layers="top4", modules=["q_proj", "k_proj", "v_proj", "o_proj"], r=8, alpha=16)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a trained-looking adapter, so that every LoRA tensor has a gradient
        for name, p in pm.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.01)
    return pm


def test_replay_equals_full_model_on_smollm2(lora_model, fresh):
    tok = fresh.tokenizer
    data = make_preferences(4, random_state=0)
    pairs = L.tokenize_preferences(tok, data.prompts, data.chosen, data.rejected)
    full = L.PolicyForward(lora_model, pairs.sequences, replay=None)
    replay = L.PolicyForward(lora_model, pairs.sequences)  # auto: K=4, prompts shared
    assert replay.k_top == 4 and replay.start == 26
    ref = L.ReferenceCache.compute(replay)
    ref_full = L.ReferenceCache.compute(full)
    assert torch.allclose(ref.sum, ref_full.sum, atol=1e-4)
    grads, losses = [], []
    for fwd in (full, replay):
        lora_model.zero_grad(set_to_none=True)
        loss = L.PreferenceObjective(fwd, pairs, reference=ref)(np.arange(4)).loss
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append({n: p.grad.clone() for n, p in lora_model.named_parameters() if p.requires_grad})
    assert abs(losses[0] - losses[1]) <= 1e-5
    assert len(grads[0]) == 32
    for name, g in grads[0].items():
        assert torch.allclose(g, grads[1][name], atol=1e-5, rtol=1e-4), (name, float((g - grads[1][name]).abs().max()))
    lora_model.zero_grad(set_to_none=True)


def test_a_few_dpo_steps_on_smollm2(lora_model, fresh, tmp_path):
    tok = fresh.tokenizer
    train_d, test_d = make_preferences(40, random_state=1).split(8)
    pairs = L.tokenize_preferences(tok, train_d.prompts, train_d.chosen, train_d.rejected)
    obj = L.PreferenceObjective(lora_model, pairs, beta=0.1)
    every = np.arange(pairs.n_pairs)
    with torch.no_grad():
        before = float(obj(every).loss)
    hist = L.train(lora_model, obj, steps=6, batch_size=8, lr=5e-4, random_state=0)
    with torch.no_grad():
        after = float(obj(every).loss)
    assert hist.n_steps == 6 and all(np.isfinite(hist.loss)) and after < before
    assert hist.median_step_time(warmup=1) > 0 and hist.settings["steps"] == 6
    folder = L.save_adapter(lora_model, tmp_path / "dpo-adapter")
    back = L.load_adapter(L.load_model("smollm2-135m-instruct").model, folder)
    fwd_back = L.PolicyForward(back, pairs.sequences, replay=4)
    with torch.no_grad():
        a = obj.forward.sequence_logprobs([0, 1]).sum
        b = fwd_back.sequence_logprobs([0, 1]).sum
    assert torch.allclose(a, b, atol=1e-4)
