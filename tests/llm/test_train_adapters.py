"""LoRA adapters via peft: layer/module specs, seeding, reference policy, save/load, merge, fingerprints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trustlab.core.exceptions import ConfigError, UnknownNameError
from trustlab.core.seeding import global_rng_state, same_global_rng_state
from trustlab.llm import (
    active_hooks,
    adapter_layers,
    add_lora,
    is_adapted,
    load_adapter,
    merge_adapter,
    reference_policy,
    reset_lora,
    resolve_layers,
    save_adapter,
    save_merged,
    weights_fingerprint,
)
from trustlab.llm.adapters import trainable_parameters

IDS = torch.tensor([[5, 6, 7, 8, 9, 10]])


def _perturb_lora(model, seed=0):
    """Random LoRA B (peft initialises it at zero, which would make every test below trivial)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)


def test_layer_specs(make_tiny):
    m = make_tiny(n_layers=4)
    assert resolve_layers(m, "top2") == [2, 3]
    assert resolve_layers(m, "all") == [0, 1, 2, 3]
    assert resolve_layers(m, [3, 1]) == [1, 3]
    assert resolve_layers(m, range(2)) == [0, 1]
    with pytest.raises(ConfigError, match="top 5 blocks, but the model has 4"):
        resolve_layers(m, "top5")
    with pytest.raises(ConfigError, match=r"block indices in \[0, 3\]"):
        resolve_layers(m, [1, 4])
    with pytest.raises(ConfigError, match="The 'layers' argument of add_lora"):
        add_lora(m, layers="bottom2")


def test_add_lora_targets_only_the_chosen_blocks_and_modules(make_tiny):
    pm = add_lora(make_tiny(n_layers=4), layers=[1, 3], modules=["q_proj", "mlp.down_proj"], r=2)
    names = set(trainable_parameters(pm))
    assert adapter_layers(pm) == [1, 3]
    assert {n.split(".lora_")[0] for n in names} == {
        "model.layers.1.self_attn.q_proj", "model.layers.1.mlp.down_proj",
        "model.layers.3.self_attn.q_proj", "model.layers.3.mlp.down_proj"}
    assert all(".lora_" in n for n in names)
    assert add_lora(make_tiny(n_layers=2), layers="all", modules="mlp", r=2) is not None


def test_unknown_module_is_refused_and_leaves_the_model_untouched(make_tiny):
    m = make_tiny()
    before = [n for n, _ in m.named_modules()]
    with pytest.raises(UnknownNameError, match="Did you mean one of 'q_proj'"):
        add_lora(m, layers="top2", modules=["q_prj"])
    with pytest.raises(UnknownNameError, match="Unknown module group"):
        add_lora(m, modules="attn")
    assert [n for n, _ in m.named_modules()] == before and not is_adapted(m)
    assert all(p.requires_grad for p in m.parameters())


def test_seeded_initialisation_leaves_global_rng_alone(make_tiny):
    before = global_rng_state()
    a = add_lora(make_tiny(), layers="top2", random_state=3)
    b = add_lora(make_tiny(), layers="top2", random_state=3)
    c = add_lora(make_tiny(), layers="top2", random_state=4)
    assert same_global_rng_state(before, global_rng_state())
    pa, pb, pc = trainable_parameters(a), trainable_parameters(b), trainable_parameters(c)
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    assert not all(torch.equal(pa[k], pc[k]) for k in pa)
    with pytest.raises(ConfigError, match="already has peft adapters"):
        add_lora(a)


def _reference_reset(model, seed, order):
    """The loop the experiments (fpo, antidote, wmattack) each had before reset_lora, for the exact draws."""
    import math

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in order(model.named_parameters()):
            if "lora_A" in name:
                torch.nn.init.kaiming_uniform_(p, a=math.sqrt(5), generator=gen)
            elif "lora_B" in name:
                p.zero_()


@pytest.mark.parametrize("name_order, order", [(False, list), (True, sorted)])
def test_reset_lora_gives_a_fresh_adapter_with_the_old_draws(make_tiny, name_order, order):
    base = make_tiny()
    with torch.no_grad():
        want = base(IDS).logits.clone()
    pm, ref = add_lora(base, layers="top2", random_state=0), add_lora(make_tiny(), layers="top2", random_state=0)
    _perturb_lora(pm)
    before = global_rng_state()
    reset_lora(pm, 7, name_order=name_order)
    assert same_global_rng_state(before, global_rng_state())
    _reference_reset(ref, 7, order)
    got, exp = trainable_parameters(pm), trainable_parameters(ref)
    assert all(torch.equal(got[k], exp[k]) for k in got)
    assert any("lora_A" in k and got[k].abs().sum() > 0 for k in got)
    with torch.no_grad():
        assert torch.allclose(pm(input_ids=IDS).logits, want, atol=1e-6)  # lora_B = 0: the base model again
    with pytest.raises(ConfigError, match="needs a model with LoRA adapters"):
        reset_lora(make_tiny(), 0)


def test_reference_policy_is_the_base_model(make_tiny):
    base = make_tiny()
    with torch.no_grad():
        want = base(IDS).logits.clone()
    pm = add_lora(base, layers="top2")
    _perturb_lora(pm)
    with torch.no_grad():
        adapted = pm(input_ids=IDS).logits
        with reference_policy(pm):
            ref = pm(input_ids=IDS).logits
    assert torch.allclose(ref, want, atol=1e-6) and not torch.allclose(adapted, want, atol=1e-3)
    with pytest.raises(ConfigError, match="needs a peft model"):
        with reference_policy(make_tiny()):
            pass


def test_save_load_round_trip_is_exact(make_tiny, tmp_path):
    pm = add_lora(make_tiny(seed=2), layers="top2", r=4)
    _perturb_lora(pm, seed=1)
    folder = save_adapter(pm, tmp_path / "adapter")
    files = sorted(p.name for p in folder.iterdir())
    assert "adapter_model.safetensors" in files and not any(f.endswith((".bin", ".pt", ".pkl")) for f in files)
    loaded = load_adapter(make_tiny(seed=2), folder)
    a, b = pm.state_dict(), loaded.state_dict()
    lora = [k for k in a if "lora_" in k]
    assert lora and set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)
    with torch.no_grad():
        assert torch.equal(pm(input_ids=IDS).logits, loaded(input_ids=IDS).logits)
    assert not any(p.requires_grad for p in loaded.parameters())
    assert trainable_parameters(load_adapter(make_tiny(seed=2), folder, trainable=True))
    save_adapter(pm, folder)  # overwriting an existing folder works
    assert not list(tmp_path.glob(".adapter*"))  # no temporary folder left behind


def test_merge_and_merged_export(make_tiny, tmp_path):
    from trustlab.llm import load_model

    pm = add_lora(make_tiny(), layers="top2", r=4)
    _perturb_lora(pm)
    with torch.no_grad():
        want = pm(input_ids=IDS).logits.clone()
    merged = merge_adapter(pm)
    assert not is_adapted(merged) and is_adapted(pm)
    with torch.no_grad():
        assert torch.allclose(merged(IDS).logits, want, atol=1e-4, rtol=1e-4)
        assert torch.equal(pm(input_ids=IDS).logits, want)  # the peft model is unchanged
    folder = save_merged(pm, tmp_path / "merged")
    back = load_model(folder)
    with torch.no_grad():
        assert torch.allclose(back.model(IDS).logits, want, atol=1e-4, rtol=1e-4)


def test_weights_fingerprint_ignores_adapters_and_sees_base_changes(make_tiny):
    base = make_tiny(seed=5)
    fp = weights_fingerprint(base)
    pm = add_lora(base, layers="top2")
    _perturb_lora(pm)
    assert weights_fingerprint(pm) == fp
    bottom = weights_fingerprint(pm, prefixes=["model.embed_tokens", "model.layers.0", "model.layers.1"])
    with torch.no_grad():
        pm.base_model.model.model.layers[3].mlp.up_proj.weight[0, 0] += 1.0
    assert weights_fingerprint(pm) != fp
    assert weights_fingerprint(pm, prefixes=["model.embed_tokens", "model.layers.0", "model.layers.1"]) == bottom
    assert active_hooks(pm) == 0 and np.isfinite(1.0)
