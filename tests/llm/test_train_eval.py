"""Evaluation helpers (generation with rewards, preference accuracy) and the resource meter."""

from __future__ import annotations

import numpy as np
import pytest
from rss_probe import allocate

from trustlab.core.exceptions import InputError
from trustlab.core.seeding import global_rng_state, same_global_rng_state
from trustlab.data.prefs import make_preferences
from trustlab.llm import (
    evaluate_generations,
    generate,
    measure_peak_rss,
    median_step_time,
    preference_accuracy,
    time_steps,
    tokenize_preferences,
)


def test_sampled_generation_is_seeded_and_local(tiny):
    model, tok = tiny
    before = global_rng_state()
    kw = dict(max_new_tokens=6, do_sample=True, temperature=1.5)
    a = generate(model, tok, ["Hi", "Tell me a story"], random_state=3, **kw)
    b = generate(model, tok, ["Hi", "Tell me a story"], random_state=3, **kw)
    c = generate(model, tok, ["Hi", "Tell me a story"], random_state=4, **kw)
    assert a == b and a != c and same_global_rng_state(before, global_rng_state())
    greedy = generate(model, tok, ["Hi"], max_new_tokens=4)
    assert greedy == generate(model, tok, ["Hi"], max_new_tokens=4)


def test_evaluate_generations_with_a_verifiable_reward(tiny):
    model, tok = tiny
    data = make_preferences(6, random_state=0)
    ev = evaluate_generations(model, tok, data.prompts, data.reward, max_new_tokens=4, do_sample=True,
                              n_samples=2, random_state=0)
    assert ev.rewards.shape == (6, 2) and len(ev.responses) == 6 and len(ev.responses[0]) == 2
    assert ev.mean_reward == pytest.approx(float(ev.rewards.mean()))
    perfect = evaluate_generations(model, tok, data.prompts[:2], lambda rs: [1.0] * len(rs), max_new_tokens=2)
    assert perfect.mean_reward == 1.0
    with pytest.raises(InputError, match="returned 1 values for 2 responses"):
        evaluate_generations(model, tok, data.prompts[:2], lambda rs: [1.0], max_new_tokens=2)


def test_preference_accuracy_reference_free(tiny):
    model, tok = tiny
    pairs = tokenize_preferences(tok, ["a", "b"], ["x", "y"], ["x x x x", "y y y y"])
    ev = preference_accuracy(model, pairs, reference=None, beta=1.0)
    assert ev.margins.shape == (2,) and np.allclose(ev.margins, ev.chosen_rewards - ev.rejected_rewards)
    same = preference_accuracy(model, pairs, reference="cache")  # policy == reference: every margin is 0
    assert np.allclose(same.margins, 0.0, atol=1e-6) and same.accuracy == 0.0


def test_step_timing():
    assert median_step_time([9.0, 1.0, 2.0, 3.0], warmup=1) == 2.0
    with pytest.raises(InputError, match="more than warmup"):
        median_step_time([1.0], warmup=1)
    t = time_steps(lambda: sum(range(1000)), n_steps=3, warmup=1)
    assert len(t.times) == 3 and t.median_s >= 0


def test_peak_rss_in_a_fresh_process():
    small = measure_peak_rss(allocate, 1)
    big = measure_peak_rss(allocate, 800)
    assert big.value == 800 * 2**20 // 8 and small.rss_before_mb > 0
    assert big.peak_mb - small.peak_mb > 700  # the high-water mark sees the 800 MB block
    # and not this (torch-sized) parent's memory, which ru_maxrss would carry over fork + exec
    assert small.peak_mb < 300 and small.source in ("VmHWM", "ru_maxrss")


def test_distinct_n():
    from trustlab.core.exceptions import TrustlabError
    from trustlab.llm import distinct_n

    assert distinct_n(["a b c", "a b d"], n=2) == 0.75  # bigrams ab bc ab bd: 3 distinct of 4
    assert distinct_n(["The cat", "the CAT"], n=2) == 0.5  # lower-cased
    assert distinct_n(["x y"], n=1) == 1.0 and np.isnan(distinct_n(["one", ""], n=2))  # no bigram at all
    with pytest.raises(TrustlabError, match="'n'"):
        distinct_n(["a b"], n=0)
    with pytest.raises(TrustlabError, match="texts"):
        distinct_n("a b c", n=2)
