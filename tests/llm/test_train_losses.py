"""Losses as pure functions: hand computations, trl 1.16's implementations on fixed logits, edge cases."""

from __future__ import annotations

import math
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from trustlab.core.exceptions import ConfigError, InputError
from trustlab.llm import (
    dpo_loss,
    ipo_loss,
    length_normalized_dpo_loss,
    preference_loss,
    preference_margins,
    sequence_kl,
    sft_loss,
    simpo_loss,
    token_kl,
    topk_kl,
)


def _fixed(seed: int = 0, b: int = 3, t: int = 7, v: int = 11):
    """Fixed policy/reference logits for b pairs ([2b, t, v], chosen rows first) and a completion mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, v, (2 * b, t), generator=g)
    pol = torch.randn(2 * b, t, v, generator=g, dtype=torch.float64)
    ref = torch.randn(2 * b, t, v, generator=g, dtype=torch.float64)
    mask = torch.zeros(2 * b, t, dtype=torch.bool)
    for i in range(2 * b):
        start = 2 + i % 3
        mask[i, start : t - (i % 2)] = True
    return ids, pol, ref, mask


def _token_logps(logits, ids, mask):
    """log p(token t | < t) at completion positions t >= 1, shifted layout [B, T-1] (0 elsewhere)."""
    lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
    return lp * mask[:, 1:]


def _sums(ids, pol, ref, mask):
    b = ids.shape[0] // 2
    pl, rl = _token_logps(pol, ids, mask).sum(1), _token_logps(ref, ids, mask).sum(1)
    n = mask[:, 1:].sum(1).double()
    return pl[:b], pl[b:], rl[:b], rl[b:], n[:b], n[b:]


def test_hand_computations():
    pc, pr = torch.tensor([-1.0, -2.0]), torch.tensor([-3.0, -1.0])
    rc, rr = torch.tensor([-1.5, -1.5]), torch.tensor([-2.0, -2.0])
    nc, nr = torch.tensor([2.0, 4.0]), torch.tensor([1.0, 2.0])
    beta = 0.5
    logits = (pc - rc) - (pr - rr)
    want = -torch.log(torch.sigmoid(beta * logits))
    assert torch.allclose(dpo_loss(pc, pr, rc, rr, beta=beta, reduction="none"), want)
    assert math.isclose(float(dpo_loss(pc, pr, rc, rr, beta=beta)), float(want.mean()), rel_tol=1e-6)
    ipo = ((pc - rc) / nc - (pr - rr) / nr - 1 / (2 * beta)) ** 2
    assert torch.allclose(ipo_loss(pc, pr, rc, rr, beta=beta, chosen_tokens=nc, rejected_tokens=nr,
                                   reduction="none"), ipo)
    norm = -torch.log(torch.sigmoid(beta * ((pc - rc) / nc - (pr - rr) / nr)))
    assert torch.allclose(length_normalized_dpo_loss(pc, pr, rc, rr, nc, nr, beta=beta, reduction="none"), norm)
    simpo = -torch.log(torch.sigmoid(2.0 * (pc / nc - pr / nr) - 0.5))
    assert torch.allclose(simpo_loss(pc, pr, nc, nr, beta=2.0, gamma=0.5, reduction="none"), simpo)
    assert torch.allclose(preference_margins(pc, pr, rc, rr, beta=beta), beta * logits)
    lp = torch.tensor([[0.0, -1.0, -2.0], [0.0, -4.0, 0.0]])
    m = torch.tensor([[0, 1, 1], [0, 1, 0]])
    assert math.isclose(float(sft_loss(lp, m)), 7.0 / 3.0, rel_tol=1e-6)
    assert math.isclose(float(sft_loss(lp, m, reduction="sequence_mean")), (1.5 + 4.0) / 2, rel_tol=1e-6)
    assert math.isclose(float(sft_loss(lp, m, reduction="sum")), (3.0 + 4.0) / 2, rel_tol=1e-6)


def test_numpy_inputs_and_dispatch_agree():
    rng = np.random.default_rng(0)
    x = [rng.normal(size=4) for _ in range(4)]
    n = [rng.integers(1, 5, size=4).astype(float) for _ in range(2)]
    for name in ("dpo", "ipo", "dpo_norm", "simpo"):
        got = preference_loss(name, *x, *n, beta=0.3, gamma=0.2)
        assert torch.isfinite(got)
    assert math.isclose(float(preference_loss("dpo", *x, beta=0.3)), float(dpo_loss(*x, beta=0.3)), rel_tol=1e-12)


def test_identical_chosen_and_rejected_give_log2_and_zero_gradient():
    p = torch.tensor([-3.0, -1.5], requires_grad=True)
    r = torch.tensor([-2.0, -0.5])
    loss = dpo_loss(p, p, r, r, beta=0.1)
    loss.backward()
    assert math.isclose(float(loss), math.log(2), rel_tol=1e-7)
    assert torch.equal(p.grad, torch.zeros(2))


def test_bad_inputs():
    z = torch.zeros(2)
    for bad in (0.0, -0.1):
        with pytest.raises(ConfigError, match="The 'beta' argument of dpo_loss must be a float in \\(0, inf\\)"):
            dpo_loss(z, z, z, z, beta=bad)
    with pytest.raises(ConfigError, match="'beta' argument of simpo_loss"):
        simpo_loss(z, z, torch.ones(2), torch.ones(2), beta=0)
    with pytest.raises(InputError, match="one shape"):
        dpo_loss(z, torch.zeros(3), torch.zeros(3), torch.zeros(3))
    with pytest.raises(InputError, match="NaN"):
        dpo_loss(torch.tensor([float("nan"), 0.0]), z, z, z)
    with pytest.raises(ConfigError, match="needs reference log-probs"):
        preference_loss("dpo", z, z)
    with pytest.raises(InputError, match="'chosen_tokens' argument of simpo_loss"):
        simpo_loss(z, z, torch.zeros(2), torch.ones(2))


def test_kl_functions():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(2, 4, 9, generator=g), torch.randn(2, 4, 9, generator=g)
    mask = torch.tensor([[0, 1, 1, 0], [0, 0, 1, 1]])
    want = F.kl_div(torch.log_softmax(b, -1), torch.log_softmax(a, -1), log_target=True, reduction="none").sum(-1)
    assert torch.allclose(token_kl(a, b), want, atol=1e-6)
    seq = sequence_kl(a, b, mask)
    assert torch.allclose(seq, torch.stack([want[0, 0] + want[0, 1], want[1, 1] + want[1, 2]]), atol=1e-6)
    rev = sequence_kl(a, b, mask, order="ref_policy")
    assert not torch.allclose(seq, rev)
    flat_a, flat_b = a.reshape(-1, 9), b.reshape(-1, 9)
    ids = torch.arange(9).expand(flat_b.shape[0], 9)
    lq = torch.log_softmax(flat_b, -1)
    assert torch.allclose(topk_kl(flat_a, ids, lq), token_kl(flat_a, flat_b, order="ref_policy"), atol=1e-6)
    top3 = lq.topk(3, -1)
    assert (topk_kl(flat_a, top3.indices, top3.values) <= token_kl(flat_a, flat_b, order="ref_policy") + 10).all()


def test_sft_loss_equals_the_hf_labels_loss(tiny):
    model, tok = tiny
    from trustlab.llm import PolicyForward, tokenize_pairs

    s = tokenize_pairs(tok, ["What is 2 + 2?", "Name a colour."], ["4", "Blue, or maybe green"])
    fwd = PolicyForward(model, s, replay=None)
    with torch.no_grad():
        ids, att, resp = fwd.batch([0, 1])
        ours = sft_loss(fwd.token_logprobs([0, 1]), resp)
        labels = ids.masked_fill(~resp, -100)
        hf = model(input_ids=ids, attention_mask=att, labels=labels).loss
    assert math.isclose(float(ours), float(hf), rel_tol=1e-5)


# -- trl 1.16 on the same fixed logits ---------------------------------------------------------------
def _trl_dpo(loss_type: str, beta: float, ids, pol, mask, ref_c, ref_r):
    trl = pytest.importorskip("trl")
    per_token = _token_logps(pol, ids, mask)

    def fake_model(**kwargs):
        zeros = torch.zeros_like(per_token)
        return SimpleNamespace(log_probs=per_token, entropy=zeros, mean_logits=zeros, is_top1=zeros.bool(),
                               aux_loss=None)

    acc = SimpleNamespace(device="cpu", gather_for_metrics=lambda x: x, gather=lambda x: x,
                          unwrap_model=lambda m: m)
    fake = SimpleNamespace(
        model=SimpleNamespace(training=True), accelerator=acc, aux_loss_enabled=False, ld_alpha=None,
        precompute_ref_logps=True, f_divergence_type="reverse_kl", loss_types=[loss_type], loss_weights=[1.0],
        beta=beta, use_weighting=False, label_smoothing=0.0, _metrics={"train": defaultdict(list)},
        _total_train_tokens=0, _tp_size=1, args=SimpleNamespace(), ref_model=None,
    )
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "completion_mask": mask.long(),
              "ref_chosen_logps": ref_c, "ref_rejected_logps": ref_r}
    return trl.DPOTrainer._compute_loss(fake, fake_model, inputs, return_outputs=False)


@pytest.mark.parametrize("trl_name,ours", [("sigmoid", "dpo"), ("ipo", "ipo"), ("sigmoid_norm", "dpo_norm")])
def test_matches_trl_dpo_losses(trl_name, ours):
    ids, pol, ref, mask = _fixed()
    pc, pr, rc, rr, nc, nr = _sums(ids, pol, ref, mask)
    beta = 0.3
    theirs = _trl_dpo(trl_name, beta, ids, pol, mask, rc, rr)
    kw = {"chosen_tokens": nc, "rejected_tokens": nr} if ours != "dpo" else {}
    mine = preference_loss(ours, pc, pr, rc, rr, beta=beta, **kw)
    assert math.isclose(float(mine), float(theirs), rel_tol=1e-10, abs_tol=1e-12)


def test_matches_trl_sft_term():
    ids, pol, ref, mask = _fixed(seed=3)
    theirs = _trl_dpo("sft", 0.1, ids, pol, mask, torch.zeros(3), torch.zeros(3))
    lp = torch.zeros(ids.shape, dtype=torch.float64)
    lp[:, 1:] = _token_logps(pol, ids, mask)
    mine = sft_loss(lp[:3], mask[:3])
    assert math.isclose(float(mine), float(theirs), rel_tol=1e-10)


def test_matches_trl_simpo():
    trl = pytest.importorskip("trl")
    from trl.experimental.cpo import CPOTrainer

    ids, pol, ref, mask = _fixed(seed=5)
    pc, pr, _, _, nc, nr = _sums(ids, pol, ref, mask)
    fake = SimpleNamespace(alpha=0.0, beta=2.0, simpo_gamma=0.5, loss_type="simpo", label_smoothing=0.0,
                           accelerator=SimpleNamespace(device="cpu"))
    losses, _, _ = CPOTrainer.cpo_loss(fake, pc / nc, pr / nr)
    mine = simpo_loss(pc, pr, nc, nr, beta=2.0, gamma=0.5, reduction="none")
    assert trl.__version__ and torch.allclose(mine, losses, rtol=1e-10)
