"""Evaluation helpers for fine-tuned models: preference accuracy and rewards of generated responses.

* :func:`preference_accuracy`: the fraction of held-out pairs whose implicit reward margin is > 0
  (DPO papers' "Acc"), from the policy's and the reference's response log-probs.
* :func:`evaluate_generations`: batched greedy or sampled generation through the chat template
  (:func:`trustlab.llm.generate`) scored by any reward function, e.g. the verifiable rewards of
  :class:`trustlab.data.prefs.PreferenceData`.
* :func:`distinct_n`: the share of distinct word n-grams among responses (diversity of samples).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import Boolean, CallableRule, Interval, Options, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.optional import require
from trustlab.llm._tokenize_pairs import PreferencePairs
from trustlab.llm.losses import preference_margins
from trustlab.llm.policy import PolicyForward
from trustlab.llm.refcache import ReferenceCache
from trustlab.llm.rules import Tokenizer
from trustlab.llm.sites import unwrap

torch = require("torch", purpose="trustlab.llm evaluation")

__all__ = ["distinct_n", "evaluate_generations", "preference_accuracy"]


@dataclass(frozen=True)
class PreferenceEval:
    """Implicit-reward margins per pair and the preference accuracy (fraction of margins > 0)."""

    accuracy: float
    margins: np.ndarray
    chosen_rewards: np.ndarray
    rejected_rewards: np.ndarray

    @property
    def mean_margin(self) -> float:
        return float(self.margins.mean())


@dataclass(frozen=True)
class GenerationEval:
    """Generated responses ``[n_prompts][n_samples]``, their rewards ``[n_prompts, n_samples]`` and the mean."""

    responses: list[list[str]]
    rewards: np.ndarray
    mean_reward: float


def _pairs_example() -> dict[str, Any]:
    from trustlab.llm._small import tiny_random_llama
    from trustlab.llm._tokenize_pairs import tokenize_preferences

    model, tok = tiny_random_llama()
    pairs = tokenize_preferences(tok, ["2 + 2?"], ["4"], ["5"])
    return {"policy": PolicyForward(model, pairs.sequences, replay=None), "pairs": pairs}


@validate_args(
    _example=_pairs_example,
    policy=[PolicyForward, Satisfies(lambda m: isinstance(m, torch.nn.Module), "a torch causal LM",
                                     invalid=["not-a-model"])],
    pairs=[PreferencePairs],
    reference=[ReferenceCache, Options(["cache"]), None],
    beta=[Interval(float, 0, None, closed="neither")],
    length_normalized=[Boolean()],
    batch_size=[Interval(int, 1, None)],
    replay=[Interval(int, 1, None), Options(["auto"]), None],
)
def preference_accuracy(policy: Any, pairs: PreferencePairs, *, reference: Any = "cache", beta: float = 0.1,
                        length_normalized: bool = False, batch_size: int = 32, replay: Any = "auto") -> PreferenceEval:
    """Preference accuracy of ``policy`` on ``pairs``: the fraction of pairs with implicit reward margin > 0.

    Parameters
    ----------
    policy : PolicyForward on ``pairs.sequences``, or a causal LM
    pairs : PreferencePairs
    reference : ReferenceCache, "cache" or None, default="cache"
        ``"cache"`` computes the reference log-probs now (adapters disabled); None gives reference-free
        margins (SimPO's implicit reward).
    beta : float, default=0.1
    length_normalized : bool, default=False
        Use mean per-token log-probs (SimPO / length-normalised DPO rewards).
    batch_size : int, default=32
    replay : "auto", int or None
        When ``policy`` is a model.

    Examples
    --------
    >>> from trustlab.llm import tiny_random_llama, tokenize_preferences
    >>> model, tok = tiny_random_llama()
    >>> pairs = tokenize_preferences(tok, ["2 + 2?", "3 + 3?"], ["4", "6"], ["5", "7"])
    >>> preference_accuracy(model, pairs, reference=None).margins.shape
    (2,)
    """
    fwd = policy if isinstance(policy, PolicyForward) else PolicyForward(policy, pairs.sequences, replay=replay)
    if fwd.sequences is not pairs.sequences and fwd.sequences.fingerprint() != pairs.sequences.fingerprint():
        raise InputError("The PolicyForward passed to preference_accuracy was built on other sequences.")
    if reference == "cache":
        reference = ReferenceCache.compute(fwd, batch_size=batch_size)
    elif isinstance(reference, ReferenceCache):
        reference.check(fwd)
    n = pairs.n_pairs
    pol, cnt = torch.zeros(2 * n, dtype=torch.float64), torch.zeros(2 * n, dtype=torch.float64)
    was = unwrap(fwd.model).training
    fwd.model.eval()
    try:
        with torch.no_grad():
            for rows in fwd.batches(batch_size):  # pairs kept together: their prompt is shared
                out = fwd.sequence_logprobs(rows)
                t = torch.as_tensor(rows)
                pol[t], cnt[t] = out.sum.double().cpu(), out.n_tokens.double().cpu()
    finally:
        fwd.model.train(was)
    ref = reference.sum.double() if reference is not None else torch.zeros_like(pol)
    if length_normalized:
        pol, ref = pol / cnt, ref / cnt
    rc = ref[:n] if reference is not None else None
    rr = ref[n:] if reference is not None else None
    m = preference_margins(pol[:n], pol[n:], rc, rr, beta=beta).numpy()
    chosen = (beta * (pol[:n] - ref[:n])).numpy()
    rejected = (beta * (pol[n:] - ref[n:])).numpy()
    return PreferenceEval(float((m > 0).mean()), m, chosen, rejected)


def _gen_example() -> dict[str, Any]:
    from trustlab.llm._small import tiny_random_llama

    model, tok = tiny_random_llama()
    return {"model": model, "tokenizer": tok}


@validate_args(
    _example=_gen_example,
    model=[Satisfies(lambda m: isinstance(m, torch.nn.Module), "a torch causal LM", invalid=["not-a-model"])],
    tokenizer=[Tokenizer()],
    prompts=[SequenceOf(str)],
    reward=[CallableRule()],
    max_new_tokens=[Interval(int, 1, None)],
    chat=[Boolean()],
    system=[str, None],
    do_sample=[Boolean()],
    temperature=[Interval(float, 0, None, closed="neither")],
    top_p=[Interval(float, 0, 1, closed="right")],
    n_samples=[Interval(int, 1, None)],
    random_state=["random_state"],
    batch_size=[Interval(int, 1, None)],
)
def evaluate_generations(model: Any, tokenizer: Any, prompts: Sequence[str],
                         reward: Callable[[list[str]], Any], *, max_new_tokens: int = 16, chat: bool = True,
                         system: str | None = None, do_sample: bool = False, temperature: float = 1.0,
                         top_p: float = 1.0, n_samples: int = 1, random_state: Any = 0,
                         batch_size: int = 8) -> GenerationEval:
    """Generate responses to ``prompts`` and score them with ``reward``.

    ``reward(responses)`` receives one response per prompt (in the order of ``prompts``) and returns one
    float each; it is called once per sample round. Greedy decoding gives the same responses every
    round, so use ``n_samples > 1`` with ``do_sample=True``.

    Examples
    --------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> ev = evaluate_generations(model, tok, ["Hi"], lambda rs: [float(len(r) > 0) for r in rs],
    ...                           max_new_tokens=2)
    >>> ev.rewards.shape
    (1, 1)
    """
    from trustlab.core.seeding import check_random_state, spawn_seed
    from trustlab.llm._generate import generate

    rng = check_random_state(random_state, owner="evaluate_generations")
    rounds, scores = [], []
    for _ in range(n_samples):
        out = generate(model, tokenizer, list(prompts), max_new_tokens=max_new_tokens, chat=chat, system=system,
                       batch_size=batch_size, do_sample=do_sample, temperature=temperature, top_p=top_p,
                       random_state=spawn_seed(rng) if do_sample else None)
        r = np.asarray(reward(out), dtype=np.float64).reshape(-1)
        if r.shape[0] != len(prompts):
            raise InputError(f"The reward of evaluate_generations returned {r.shape[0]} values for "
                             f"{len(prompts)} responses.")
        rounds.append(out)
        scores.append(r)
    rewards = np.stack(scores, axis=1)
    responses = [[rounds[j][i] for j in range(n_samples)] for i in range(len(prompts))]
    return GenerationEval(responses, rewards, float(rewards.mean()))


@validate_args(texts=[SequenceOf(str)], n=[Interval(int, 1, None)])
def distinct_n(texts: Sequence[str], *, n: int = 2) -> float:
    """Distinct-n of ``texts``: the number of distinct word n-grams over the total number of word n-grams,
    pooled over all texts (words are lower-cased whitespace tokens; an n-gram never spans two texts).

    Returns NaN when no text has ``n`` words (there is nothing to be diverse). Use it on several samples of
    one prompt to measure sampling diversity (the spec's distinct-2 of 5 samples at T = 1).

    Examples
    --------
    >>> distinct_n(["the cat sat", "the cat ran"], n=2)
    0.75
    """
    grams = []
    for t in texts:
        w = str(t).lower().split()
        grams += [tuple(w[i:i + n]) for i in range(len(w) - n + 1)]
    return float(len(set(grams)) / len(grams)) if grams else float("nan")
