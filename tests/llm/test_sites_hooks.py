"""Sites, trace, edits, ablation and patching on the tiny random llama."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trustlab.llm as L
from trustlab.core.exceptions import (
    ConfigError,
    InputError,
    TrustlabError,
    UnknownNameError,
    UnsupportedModelError,
)
from trustlab.llm import Edit, ablate_heads, active_hooks, patch_activations, run_with_cache, trace

ALL_KINDS = ["resid_pre", "attn_out", "head_out", "resid_mid", "mlp_out", "resid_post"]


@pytest.fixture(scope="module")
def ids(tiny):
    _, tok = tiny
    return tok(["The quick brown fox jumps over the lazy dog"], return_tensors="pt").input_ids


def _forward(model, ids, **kw):
    with torch.no_grad():
        return model(ids, **kw)


# ------------------------------------------------------------------------------------------------ sites
def test_site_names_and_resolution(tiny):
    model, _ = tiny
    names = L.site_names(model)
    assert names[0] == "embed" and names[-1] == "logits"
    assert len(names) == 2 + 2 * 7
    s = L.resolve_site(model, "blocks.1.head_out")
    assert (s.module_path, s.hook, s.layer) == ("model.layers.1.self_attn.o_proj", "pre", 1)
    assert L.arch_spec(model).name == "llama"


@pytest.mark.parametrize(
    ("name", "exc", "match"),
    [
        ("blocks.0.resid_psot", UnknownNameError, "Did you mean one of 'blocks.0.resid_post'"),
        ("emebd", UnknownNameError, "Did you mean 'embed'"),
        ("resid_post", UnknownNameError, "blocks"),
        ("blocks.2.resid_post", InputError, r"must be an int in \[0, 1\]. Got 2 instead"),
        ("blocks.-1.resid_post", InputError, r"\[0, 1\]"),
    ],
)
def test_bad_sites(tiny, name, exc, match):
    with pytest.raises(exc, match=match):
        L.resolve_site(tiny[0], name)


def test_unsupported_architecture():
    from transformers import BloomConfig, BloomForCausalLM

    bloom = BloomForCausalLM(BloomConfig(n_layer=1, hidden_size=8, n_head=2, vocab_size=10))
    with pytest.raises(UnsupportedModelError, match=r"\[gemma3_text, gpt2, llama, .*'bloom'.*not found embed"):
        trace(bloom, ["embed"])
    with pytest.raises(UnsupportedModelError, match="architectures"):
        L.arch_spec(torch.nn.Linear(2, 2))


# ---------------------------------------------------------------------------------------------- capture
def test_captured_sites_equal_hand_computation(tiny, ids):
    model, _ = tiny
    sites = ["embed", "logits"] + [f"blocks.{i}.{k}" for i in range(2) for k in ALL_KINDS]
    with torch.no_grad(), trace(model, sites) as tr:
        out = model(ids, output_hidden_states=True)
    hs = out.hidden_states
    close = dict(atol=1e-5, rtol=1e-5)
    assert torch.equal(tr["embed"], model.model.embed_tokens(ids))
    assert torch.equal(tr["logits"], out.logits)
    for i, layer in enumerate(model.model.layers):
        p = f"blocks.{i}."
        assert torch.equal(tr[p + "resid_pre"], hs[i])
        heads = tr[p + "head_out"]
        assert heads.shape == (1, ids.shape[1], 9, 8)
        with torch.no_grad():
            assert torch.allclose(layer.self_attn.o_proj(heads.flatten(-2)), tr[p + "attn_out"], **close)
            assert torch.allclose(tr[p + "resid_pre"] + tr[p + "attn_out"], tr[p + "resid_mid"], **close)
            mlp = layer.mlp(layer.post_attention_layernorm(tr[p + "resid_mid"]))
            assert torch.allclose(mlp, tr[p + "mlp_out"], **close)
        assert torch.allclose(tr[p + "resid_mid"] + tr[p + "mlp_out"], tr[p + "resid_post"], **close)
    assert torch.equal(tr["blocks.0.resid_post"], hs[1])
    with torch.no_grad():  # the last hidden state is after the final norm
        assert torch.allclose(model.model.norm(tr["blocks.1.resid_post"]), hs[2], **close)


def test_trace_is_transparent_and_cleans_up(tiny, ids):
    model, _ = tiny
    before = active_hooks(model, trustlab_only=False)
    ref = _forward(model, ids).logits
    with torch.no_grad(), trace(model, L.site_names(model)) as tr:
        assert active_hooks(model) > 0
        out = model(ids).logits
    assert torch.equal(out, ref)
    assert active_hooks(model) == 0 and active_hooks(model, trustlab_only=False) == before
    with pytest.raises(UnknownNameError, match="not requested"):
        tr["blocks.0.mlp_out_x"]


def test_no_hook_survives_an_exception(tiny, ids):
    model, _ = tiny

    def boom(act):
        raise RuntimeError("edit failed")

    with pytest.raises(RuntimeError, match="edit failed"):
        with trace(model, ["blocks.0.resid_post"], edit={"blocks.1.mlp_out": boom}):
            model(ids)
    assert active_hooks(model) == 0
    with pytest.raises(RuntimeError), trace(model, L.site_names(model)):
        model(ids.float())  # the forward itself raises
    assert active_hooks(model) == 0
    with pytest.raises(KeyError), trace(model, ["embed"], stop_after=0):
        raise KeyError("user code")
    assert active_hooks(model) == 0


def test_pattern_site(tiny_eager, tiny, ids):
    model, _ = tiny_eager
    with torch.no_grad(), trace(model, ["blocks.1.pattern"]) as tr:
        model(ids)
    pat = tr["blocks.1.pattern"]
    assert pat.shape == (1, 9, ids.shape[1], ids.shape[1])
    assert torch.allclose(pat.sum(-1), torch.ones(1, 9, ids.shape[1]), atol=1e-5)
    assert torch.all(pat.triu(1) == 0)
    with torch.no_grad(), trace(tiny[0], ["blocks.1.pattern"]) as tr:
        tiny[0](ids)
    with pytest.raises(ConfigError, match="eager"):
        tr["blocks.1.pattern"]


# ---------------------------------------------------------------------------------------------- stop
def test_stop_after(tiny4, ids):
    model, _ = tiny4
    full = run_with_cache(model, ids, ["blocks.1.resid_post"])[1]["blocks.1.resid_post"]
    calls = []
    h = model.model.layers[2].register_forward_hook(lambda *a: calls.append(1))
    try:
        reached_end = False
        with torch.no_grad(), trace(model, ["blocks.1.resid_post"], stop_after=1) as tr:
            model(ids)
            reached_end = True  # skipped: the stop exception leaves the block
        assert tr.stopped and not reached_end
        with torch.no_grad(), trace(model, ["blocks.1.resid_post"], stop_after="auto") as tr2:
            assert tr2.run(ids) is None
    finally:
        h.remove()
    assert calls == []
    assert torch.equal(tr["blocks.1.resid_post"], full) and torch.equal(tr2["blocks.1.resid_post"], full)
    with torch.no_grad(), trace(model, ["embed"], stop_after="auto") as tr3:
        tr3.run(ids)
    assert tr3.stopped and tr3["embed"].shape[-1] == 72
    assert active_hooks(model) == 0


@pytest.mark.parametrize(
    ("sites", "stop", "exc", "match"),
    [
        (["blocks.3.resid_post"], 1, ConfigError, "after block stop_after=1"),
        (["logits"], 0, ConfigError, "never be reached"),
        (["embed"], 4, InputError, r"\[0, 3\]. Got 4"),
        (["embed"], "soon", ConfigError, "stop_after"),
    ],
)
def test_stop_after_errors(tiny4, sites, stop, exc, match):
    with pytest.raises(exc, match=match):
        trace(tiny4[0], sites, stop_after=stop)


def test_nested_traces_and_stop(tiny4, ids):
    model, _ = tiny4
    with torch.no_grad(), trace(model, ["blocks.0.resid_post"], stop_after=0) as outer:
        with trace(model, ["embed"]) as inner:
            model(ids)
    assert outer.stopped and not inner.stopped and "embed" in inner
    assert active_hooks(model) == 0


# --------------------------------------------------------------------------------------------- edits
def test_edit_modes(tiny, ids):
    model, _ = tiny
    site = "blocks.0.mlp_out"
    _, clean = run_with_cache(model, ids, [site])
    base = clean[site]
    for edit, expected in [
        (Edit(site, 0.5, "scale"), base * 0.5),
        (
            Edit(site, 1.0, "add", positions=[0, 2]),
            base + torch.tensor([1.0, 0, 1.0] + [0] * (ids.shape[1] - 3))[None, :, None],
        ),
        (
            Edit(site, None, "zero", positions=-1),
            torch.cat([base[:, :-1], torch.zeros_like(base[:, -1:])], 1),
        ),
        (
            Edit(site, torch.ones(72), "replace", positions=slice(1, 3)),
            torch.cat([base[:, :1], torch.ones(1, 2, 72), base[:, 3:]], 1),
        ),
        ({site: lambda a: a * 2}, base * 2),
    ]:
        with torch.no_grad(), trace(model, [site], edit=edit) as tr:
            model(ids)
        assert torch.allclose(tr[site], expected, atol=1e-6), edit


def test_edit_positions_per_row_and_mask(tiny):
    model, tok = tiny
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    site = "blocks.0.attn_out"
    _, clean = run_with_cache(model, ids, [site])
    rows = torch.tensor([1, 3])
    with torch.no_grad(), trace(model, [site], edit=Edit(site, None, "zero", positions=rows)) as tr:
        model(ids)
    got = tr[site]
    assert torch.all(got[0, 1] == 0) and torch.all(got[1, 3] == 0)
    assert torch.equal(got[0, 0], clean[site][0, 0]) and torch.equal(got[1, 1], clean[site][1, 1])
    mask = torch.zeros(2, 4, dtype=torch.bool)
    mask[1, 0] = True
    with torch.no_grad(), trace(model, [site], edit=Edit(site, None, "zero", positions=mask)) as tr:
        model(ids)
    assert torch.all(tr[site][1, 0] == 0) and torch.equal(tr[site][0], clean[site][0])


@pytest.mark.parametrize(
    ("edit", "exc", "match"),
    [
        (Edit("blocks.0.mlp_out", 1.0, "replac"), ConfigError, "Did you mean 'replace'"),
        (Edit("blocks.0.mlp_out", None, "replace"), ConfigError, "needs a 'value'"),
        (Edit("blocks.0.mlp_out", None, "zero", heads=[0]), ConfigError, "head_out"),
        (Edit("blocks.0.head_out", None, "zero", heads=[9]), InputError, r"\[0, 8\]. Got 9"),
        (Edit("blocks.0.resid_mid", None, "zero"), ConfigError, "capture-only"),
        ("not an edit", ConfigError, "'edit' argument"),
    ],
)
def test_bad_edits(tiny, edit, exc, match):
    with pytest.raises(exc, match=match):
        trace(tiny[0], [], edit=edit)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (Edit("blocks.0.mlp_out", torch.ones(5), "replace"), "does not broadcast"),
        (Edit("blocks.0.mlp_out", None, "zero", positions=99), r"Edit positions must be ints"),
        (Edit("blocks.0.mlp_out", None, "zero", positions=torch.ones(3, 3, dtype=torch.bool)), "shape"),
        ({"blocks.0.mlp_out": lambda a: a[:, :1]}, "activation's shape"),
    ],
)
def test_bad_edit_values_at_run_time(tiny, ids, edit, match):
    model, _ = tiny
    with pytest.raises(InputError, match=match), trace(model, [], edit=edit):
        model(ids)
    assert active_hooks(model) == 0


# ------------------------------------------------------------------------------------------- ablation
def test_empty_ablation_is_identity(tiny, ids):
    model, _ = tiny
    ref = _forward(model, ids).logits
    with torch.no_grad(), ablate_heads(model, {}):
        assert torch.equal(model(ids).logits, ref)
    with torch.no_grad(), ablate_heads(model, []):
        assert torch.equal(model(ids).logits, ref)


def test_zero_ablating_every_head_zeroes_attention(tiny, ids):
    model, _ = tiny
    with torch.no_grad(), ablate_heads(model, {0: list(range(9))}), trace(model, ["blocks.0.attn_out"]) as tr:
        model(ids)
    assert torch.all(tr["blocks.0.attn_out"] == 0)


def test_one_head_patch_changes_only_downstream(tiny, ids):
    model, tok = tiny
    sites = ["blocks.0.resid_post", "blocks.1.resid_post"]
    _, clean = run_with_cache(model, ids, sites)
    p = 4
    with torch.no_grad(), ablate_heads(model, [(0, 2)], positions=p), trace(model, sites) as tr:
        model(ids)
    d0 = (tr[sites[0]] - clean[sites[0]]).abs().amax(-1)[0]
    d1 = (tr[sites[1]] - clean[sites[1]]).abs().amax(-1)[0]
    assert torch.all(d0[:p] == 0) and d0[p] > 0 and torch.all(d0[p + 1 :] == 0)  # only position p in layer 0
    assert torch.all(d1[:p] == 0) and torch.all(d1[p:] > 0)  # layer 1 mixes p into later positions
    with torch.no_grad(), ablate_heads(model, {1: 2}, positions=p), trace(model, sites) as tr:
        model(ids)
    assert torch.equal(tr[sites[0]], clean[sites[0]])  # a later layer leaves layer 0 alone


def test_mean_and_resample_ablation(tiny, ids):
    model, tok = tiny
    means = L.head_means(model, ["some text here", "and more text"], layers=[0])
    with (
        torch.no_grad(),
        ablate_heads(model, {0: [1, 4]}, method="mean", means=means),
        trace(model, ["blocks.0.head_out"]) as tr,
    ):
        model(ids)
    got = tr["blocks.0.head_out"][0]
    assert torch.allclose(got[:, 1], torch.as_tensor(means[0][1]).expand_as(got[:, 1]))
    assert not torch.allclose(got[:, 0], torch.as_tensor(means[0][0]).expand_as(got[:, 0]))
    source = {0: np.random.default_rng(0).normal(size=(5, 9, 8)).astype(np.float32)}
    outs = []
    for _ in range(2):
        with (
            torch.no_grad(),
            ablate_heads(model, [(0, 3)], method="resample", source=source, random_state=7, positions=-1),
            trace(model, ["blocks.0.head_out"]) as tr,
        ):
            model(ids.expand(3, -1))
        outs.append(tr["blocks.0.head_out"])
    assert torch.equal(outs[0], outs[1])  # seeded
    last = outs[0][:, -1, 3].numpy()
    assert all(any(np.allclose(row, s) for s in source[0][:, 3]) for row in last)
    with pytest.raises(ConfigError, match="means"):
        ablate_heads(model, {0: [1]}, method="mean")
    with pytest.raises(ConfigError, match="Did you mean 'resample'"):
        ablate_heads(model, {0: [1]}, method="resampel")
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        ablate_heads(model, {5: [1]})


# ------------------------------------------------------------------------------------------- patching
def test_patch_activations_full_residual_gives_clean_output(tiny):
    model, tok = tiny
    a = tok(["one two three four"], return_tensors="pt")
    b = tok(["five six seven eight"], return_tensors="pt")
    assert a.input_ids.shape == b.input_ids.shape
    out_a, clean = run_with_cache(model, a, ["blocks.1.resid_pre"])
    with torch.no_grad(), patch_activations(model, clean):
        patched = model(**b).logits
    assert torch.allclose(patched, out_a.logits, atol=1e-5)
    out_b = model(**b)
    with torch.no_grad(), patch_activations(model, clean, positions=-1):
        last_only = model(**b).logits
    assert torch.equal(last_only[:, :-1], out_b.logits[:, :-1])  # causal: earlier positions untouched
    assert not torch.allclose(last_only[:, -1], out_b.logits[:, -1])


def _naive_head_patch(model, corrupt, clean_heads, layer, head, targets):
    site = f"blocks.{layer}.head_out"
    val = torch.zeros(9, 8)
    val[head] = clean_heads[layer][head]
    edit = Edit(site, val, "replace", positions=-1, heads=[head])
    with torch.no_grad(), trace(model, [], edit=edit):
        return model(corrupt[None]).logits[0, -1, targets]


def test_patch_all_heads_matches_one_forward_per_head(tiny):
    model, tok = tiny
    clean = torch.tensor(tok("The cat sat on the mat").input_ids)
    corrupt = torch.tensor(tok("The dog ran in the park").input_ids)
    targets = [5, 100, 2000]
    res = L.patch_all_heads(model, corrupt, clean, targets, batch_size=5)
    assert res.logits.shape == (2, 9, 3) and res.n_changed == 18
    _, cache = run_with_cache(model, clean[None], ["blocks.0.head_out", "blocks.1.head_out"])
    heads = {i: cache[f"blocks.{i}.head_out"][0, -1] for i in range(2)}
    for layer in range(2):
        for head in range(9):
            naive = _naive_head_patch(model, corrupt, heads, layer, head, targets)
            np.testing.assert_allclose(res.logits[layer, head], naive.numpy(), atol=1e-5)
    base = _forward(model, corrupt[None]).logits[0, -1, targets]
    np.testing.assert_allclose(res.baseline, base.numpy(), atol=1e-5)
    # precomputed clean heads and a subset of layers give the same numbers
    stacked = torch.stack([heads[0], heads[1]])
    sub = L.patch_all_heads(model, corrupt, stacked, targets, layers=[1])
    np.testing.assert_allclose(sub.logits[0], res.logits[1], atol=1e-6)
    # patching with the corrupt run's own values is a no-op, and that is not an error
    same = L.patch_all_heads(model, corrupt, corrupt, targets)
    assert same.n_changed == 0 and np.abs(same.effect).max() < 1e-5
    assert active_hooks(model) == 0


def test_patch_all_heads_detects_silent_noop(tiny, monkeypatch):
    from trustlab.llm import _patching

    model, tok = tiny

    def noop_hook(layer, rows, heads, clean, n_heads, d_head, changed_rows, fired):
        def hook(module, args):
            changed_rows[torch.tensor(rows)] = True
            fired[layer] += 1
            return None

        return hook

    monkeypatch.setattr(_patching, "_patch_hook", noop_hook)
    with pytest.raises(TrustlabError, match="silent no-op"):
        L.patch_all_heads(model, tok("a b c d").input_ids, tok("e f g h").input_ids, [5])


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"corrupt": [5]}, InputError, "at least 2 tokens"),
        ({"corrupt": [[1.0, 2.0]]}, InputError, "integer token ids"),
        ({"target_ids": [10**6]}, InputError, "target_ids"),
        ({"layers": [7]}, InputError, r"\[0, 1\]"),
        ({"batch_size": 1}, ConfigError, "batch_size"),
    ],
)
def test_patch_all_heads_errors(tiny, kwargs, exc, match):
    args = {"corrupt": [5, 6, 7], "clean": [8, 9, 10], "target_ids": [1]} | kwargs
    with pytest.raises(exc, match=match):
        L.patch_all_heads(tiny[0], args.pop("corrupt"), args.pop("clean"), args.pop("target_ids"), **args)


def test_trace_through_peft_wrapper(tiny, ids):
    peft = pytest.importorskip("peft")
    model, tok = L.tiny_random_llama(random_state=0, tokenizer=tiny[1])
    wrapped = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad(), trace(wrapped, ["blocks.1.resid_post"]) as tr:
        wrapped(input_ids=ids)
    assert tr["blocks.1.resid_post"].shape[-1] == 72
    kl = L.sequential_kl(wrapped, None, ids)  # LoRA B starts at 0: adapter == base
    assert np.allclose(kl.per_sequence, 0, atol=1e-6)
    assert active_hooks(wrapped) == 0


def test_logits_site_is_the_model_output_and_editable(tiny, ids):
    model, _ = tiny
    ref = _forward(model, ids).logits
    with torch.no_grad(), trace(model, ["logits"], edit=Edit("logits", 1.0, "add", positions=-1)) as tr:
        out = model(ids).logits
    assert torch.equal(out, tr["logits"])
    assert torch.allclose(out[:, -1], ref[:, -1] + 1) and torch.equal(out[:, :-1], ref[:, :-1])
    with torch.no_grad(), trace(model, ["logits"]) as tr:
        kept = model(ids, logits_to_keep=1).logits
    assert tr["logits"].shape == kept.shape == (1, 1, 49152)
