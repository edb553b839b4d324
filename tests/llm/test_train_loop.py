"""The training loop: determinism, accumulation, schedule, clipping, evaluation, early stopping, cleanup."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.seeding import global_rng_state, same_global_rng_state
from trustlab.core.threads import thread_state
from trustlab.llm import (
    PolicyForward,
    PreferenceObjective,
    ReferenceCache,
    SFTObjective,
    StepOutput,
    active_hooks,
    add_lora,
    preference_accuracy,
    tokenize_pairs,
    tokenize_preferences,
    trace,
    train,
)
from trustlab.llm.adapters import trainable_parameters

PROMPTS = [f"What is {a} + {b}?" for a, b in [(2, 3), (4, 4), (7, 1), (5, 6), (3, 9), (8, 2), (1, 1), (6, 6)]]
CHOSEN = [str(a + b) for a, b in [(2, 3), (4, 4), (7, 1), (5, 6), (3, 9), (8, 2), (1, 1), (6, 6)]]
REJECTED = [f"Let me think. It is {int(c) + 1}, I believe." for c in CHOSEN]


@pytest.fixture
def setup(make_tiny, tiny):
    def make(seed=0, dropout=0.0):
        pm = add_lora(make_tiny(n_layers=4, seed=1), layers="top2", r=4, dropout=dropout, random_state=seed)
        pairs = tokenize_preferences(tiny[1], PROMPTS, CHOSEN, REJECTED)
        return pm, pairs

    return make


def _params(model):
    return {k: v.detach().clone() for k, v in trainable_parameters(model).items()}


def test_same_seed_gives_identical_adapters_and_leaves_globals_alone(setup):
    runs = []
    for _ in range(2):
        pm, pairs = setup(dropout=0.1)
        np.random.seed(11)
        torch.manual_seed(11)
        rng_before, threads_before = global_rng_state(), thread_state()
        h = train(pm, PreferenceObjective(pm, pairs), steps=4, batch_size=3, lr=1e-2, random_state=7, threads=1)
        assert same_global_rng_state(rng_before, global_rng_state()) and thread_state() == threads_before
        runs.append((_params(pm), h.loss))
    assert runs[0][1] == runs[1][1]
    assert all(torch.equal(runs[0][0][k], runs[1][0][k]) for k in runs[0][0])
    pm, pairs = setup(dropout=0.1)
    train(pm, PreferenceObjective(pm, pairs), steps=4, batch_size=3, lr=1e-2, random_state=8)
    assert not all(torch.equal(runs[0][0][k], v) for k, v in _params(pm).items())


def test_dpo_training_learns_the_preferences(setup):
    pm, pairs = setup()
    obj = PreferenceObjective(pm, pairs, loss="dpo", beta=0.5)
    before = preference_accuracy(obj.forward, pairs, reference=obj.reference, beta=0.5)
    assert before.accuracy == 0.0 and np.allclose(before.margins, 0.0, atol=1e-6)  # policy == reference at init
    h = train(pm, obj, steps=15, batch_size=4, lr=2e-2, warmup_steps=2)
    after = preference_accuracy(obj.forward, pairs, reference=obj.reference, beta=0.5)
    assert after.accuracy == 1.0 and np.mean(h.loss[-3:]) < h.loss[0] == pytest.approx(math.log(2), rel=1e-5)
    assert h.metrics["accuracy"][-1] == 1.0 and h.n_trainable > 0 and h.peak_rss_mb > 0


def test_gradient_accumulation_equals_one_big_batch(setup):
    results = []
    for bs, acc in ((8, 1), (4, 2), (2, 4)):
        pm, pairs = setup()
        h = train(pm, PreferenceObjective(pm, pairs), steps=1, batch_size=bs, grad_accum=acc, lr=1e-2)
        results.append((_params(pm), h.grad_norm[0], h.loss[0]))
    for p, gn, loss in results[1:]:
        assert gn == pytest.approx(results[0][1], rel=1e-5) and loss == pytest.approx(results[0][2], rel=1e-6)
        assert all(torch.allclose(p[k], results[0][0][k], atol=1e-6) for k in p)


def test_warmup_schedule_and_clipping(setup):
    pm, pairs = setup()
    h = train(pm, PreferenceObjective(pm, pairs), steps=6, batch_size=2, lr=0.1, warmup_steps=3, schedule="linear",
              max_grad_norm=1e-3)
    assert h.lr[:3] == pytest.approx([0.1 / 3, 0.2 / 3, 0.1])
    assert h.lr[3] > h.lr[4] > h.lr[5] > 0
    assert max(h.grad_norm) > 1e-3  # the recorded norm is the one before clipping
    h2 = train(pm, SFTObjective(pm, pairs.sequences), steps=2, batch_size=2, lr=0.1, schedule="cosine")
    assert h2.n_steps == 2 and all(math.isfinite(x) for x in h2.loss)


def test_eval_every_early_stopping_and_restore_best(setup):
    pm, pairs = setup()
    obj = PreferenceObjective(pm, pairs)
    scores = iter([0.5, 0.9, 0.4, 0.3, 0.2, 0.1])
    snapshots = []

    def evaluate():
        snapshots.append(_params(pm))
        return {"score": next(scores)}

    h = train(pm, obj, steps=20, batch_size=2, lr=1e-2, eval_every=2, evaluate=evaluate, monitor="score",
              patience=2, eval_at_start=True)
    assert [e["step"] for e in h.evals] == [0, 2, 4, 6]
    assert h.stopped_early and h.best_step == 2 and h.best_value == 0.9 and h.restored_best
    assert h.n_steps == 6
    assert all(torch.equal(v, snapshots[1][k]) for k, v in _params(pm).items())
    with pytest.raises(InputError, match="no 'acc' to monitor"):
        train(pm, obj, steps=2, batch_size=2, evaluate=lambda: {"x": 1.0}, monitor="acc", eval_every=1)


def test_nothing_survives_a_step_that_raises(setup):
    pm, pairs = setup()
    obj = PreferenceObjective(pm, pairs)
    pm.eval()
    rng_before, threads_before = global_rng_state(), thread_state()
    calls = []

    class Boom:
        n_items = 8

        def __call__(self, rows):
            calls.append(rows)
            with trace(pm, ["blocks.3.resid_post"]):
                out = obj(rows)
                if len(calls) == 2:
                    raise RuntimeError("boom")
            return out

    with pytest.raises(RuntimeError, match="boom"):
        train(pm, Boom(), steps=3, batch_size=2, threads=1, progress=True)
    assert active_hooks(pm) == 0 and not pm.training
    assert same_global_rng_state(rng_before, global_rng_state()) and thread_state() == threads_before
    assert all(p.grad is None for p in trainable_parameters(pm).values())


def test_custom_objective_and_bad_arguments(setup, make_tiny):
    pm, pairs = setup()
    fwd = PolicyForward(pm, pairs.sequences)

    class MeanLogp:
        n_items = len(pairs.sequences)

        def __call__(self, rows):
            return -fwd.sequence_logprobs(rows).mean.mean()

    every = np.arange(len(pairs.sequences))
    with torch.no_grad():
        before = float(MeanLogp()(every))
    train(pm, MeanLogp(), steps=3, batch_size=4, lr=1e-2)
    with torch.no_grad():
        assert float(MeanLogp()(every)) < before
    with pytest.raises(ConfigError, match="no parameter that requires grad"):
        plain = make_tiny()
        for p in plain.parameters():
            p.requires_grad_(False)
        train(plain, MeanLogp(), steps=1)
    with pytest.raises(ConfigError, match="The 'lr' argument of train"):
        train(pm, MeanLogp(), lr=0.0)
    with pytest.raises(ConfigError, match="The 'objective' argument of train"):
        train(pm, lambda rows: 0.0)
    with pytest.raises(ConfigError, match="StepOutput or a scalar loss"):
        train(pm, type("Bad", (), {"n_items": 2, "__call__": lambda self, r: 1.0})(), steps=1, batch_size=1)
    assert isinstance(StepOutput(torch.tensor(0.0)).metrics, dict)


def test_preference_objective_options(setup, tmp_path):
    pm, pairs = setup()
    with pytest.raises(ConfigError, match="The 'beta' argument of PreferenceObjective.__init__"):
        PreferenceObjective(pm, pairs, beta=0.0)
    with pytest.raises(ConfigError, match="needs a reference"):
        PreferenceObjective(pm, pairs, loss="ipo", reference=None)
    online = PreferenceObjective(pm, pairs, reference="online")
    cached = PreferenceObjective(online.forward, pairs, reference="cache", cache_dir=tmp_path)
    assert len(list((tmp_path / "reference").glob("*.safetensors"))) == 1
    with torch.no_grad():
        a, b = online(np.arange(8)).loss, cached(np.arange(8)).loss
    assert float(a) == pytest.approx(float(b), abs=1e-6)
    simpo = PreferenceObjective(online.forward, pairs, loss="simpo", beta=2.0, gamma=0.5)
    assert simpo.reference is None
    anchored = PreferenceObjective(online.forward, pairs, reference=cached.reference, sft_weight=1.0)
    with torch.no_grad():
        assert float(anchored(np.arange(8)).loss) > float(b)


def test_stale_reference_cache_is_refused(setup, tiny, tmp_path):
    pm, pairs = setup()
    fwd = PolicyForward(pm, pairs.sequences)
    ref = ReferenceCache.compute(fwd, top_k=3)
    path = ref.save(tmp_path / "ref.safetensors")
    back = ReferenceCache.load(path, forward=fwd)
    assert torch.equal(back.sum, ref.sum) and torch.equal(back.topk_ids, ref.topk_ids)
    ids, lps = back.topk([1, 0])
    assert ids.shape == (int(ref.n_tokens[1] + ref.n_tokens[0]), 3)
    other = tokenize_preferences(tiny[1], PROMPTS[:4], CHOSEN[:4], REJECTED[:4])
    with pytest.raises(InputError, match="stale: the tokenised sequences differ"):
        ReferenceCache.load(path, forward=PolicyForward(pm, other.sequences))
    with pytest.raises(InputError, match="stale"):
        PreferenceObjective(PolicyForward(pm, other.sequences), other, reference=back)
    w = pm.base_model.model.model.layers[3].mlp.up_proj.weight
    keep = w[0, 0].item()
    with torch.no_grad():
        w[0, 0] += 1.0
    with pytest.raises(InputError, match="stale: the reference model's weights differ"):
        back.check(fwd)
    with torch.no_grad():  # training the adapter does not make the reference stale
        w[0, 0] = keep
        for name, p in pm.named_parameters():
            if "lora_B" in name:
                p.add_(0.1)
    back.check(fwd)


def test_sft_objective_trains_and_replay_cache_is_checked(setup, tiny):
    pm, _ = setup()
    seqs = tokenize_pairs(tiny[1], PROMPTS, CHOSEN)
    obj = SFTObjective(pm, seqs)
    with torch.no_grad():
        pm.base_model.model.model.layers[0].mlp.up_proj.weight[0, 0] += 1.0
    with pytest.raises(InputError, match="stale"):
        train(pm, obj, steps=1)
    obj.forward.refresh()
    every = np.arange(len(seqs))
    with torch.no_grad():
        before = float(obj(every).loss)
    h = train(pm, obj, steps=8, batch_size=4, lr=3e-2)
    with torch.no_grad():
        assert float(obj(every).loss) < before and h.metrics["nll"][0] == pytest.approx(h.loss[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no stray warnings from the loop
        train(pm, obj, steps=1, batch_size=2)
