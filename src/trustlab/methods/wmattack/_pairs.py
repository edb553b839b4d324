"""Preference pairs by the paper's rule (``scripts/preprocess_dpo.py`` of the D-Diaa/MarkLLM fork), and DPO of
a LoRA paraphraser on the shared trainer (:mod:`trustlab.llm`: replay, reference cache).

Rule, per source text x (watermarked under a surrogate key, kept only if that key detects it) and its
sampled paraphrases p: chosen = {p : quality >= q and not detected}; rejected = {p : quality < q or
detected (or undecided: too short)}; skip x when chosen is empty; if rejected is empty use x itself; one
pair per chosen p with a uniformly drawn rejected one.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.seeding import as_seed, check_random_state
from trustlab.llm.rules import LanguageModel, Tokenizer
from trustlab.methods.wmattack._generation import PARAPHRASE_SYSTEM, paraphrase_messages

__all__ = ["PreferenceSet", "build_preference_pairs", "TrainedParaphraser", "train_paraphraser"]


@dataclass(frozen=True)
class PreferenceSet:
    """Pairs: ``prompts`` (the paraphraser's user message), ``chosen``, ``rejected``, ``source`` index per
    pair, and ``counts`` (sources, kept, skipped per reason, fallbacks to the source as rejected)."""

    prompts: list[str]
    chosen: list[str]
    rejected: list[str]
    source: np.ndarray
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def n_pairs(self) -> int:
        return len(self.chosen)

    @validate_args(rows=[Satisfies(lambda v: not isinstance(v, str | bytes) and all(isinstance(i, numbers.Integral)
                                                                                      for i in v),
                                   "row indices (an iterable of ints)", [None, "rows", [0.5]], valid=[0])])
    def subset(self, rows: Sequence[int]) -> PreferenceSet:
        rows = list(rows)
        return PreferenceSet([self.prompts[i] for i in rows], [self.chosen[i] for i in rows],
                             [self.rejected[i] for i in rows], self.source[rows], dict(self.counts))


def _nested(rule: Any) -> Satisfies:
    return Satisfies(lambda v: isinstance(v, list | tuple) and len(v) > 0 and all(
        isinstance(r, list | tuple) and all(rule(x) for x in r) for r in v),
        "a non-empty list with one list per source", invalid=[None, [], "x", [[object()]]])


_BOOLS = _nested(lambda x: x is None or isinstance(x, bool | np.bool_))
_REALS = _nested(lambda x: isinstance(x, int | float | np.floating) and not isinstance(x, bool))


def _pairs_example() -> dict[str, Any]:
    return {"sources": ["a"], "candidates": [["b", "c"]], "detected": [[False, True]], "quality": [[0.9, 0.9]]}


@validate_args(_pairs_example, sources=[SequenceOf(InstanceOf(str))], candidates=[_nested(lambda x: isinstance(x, str))],
               detected=[_BOOLS], quality=[_REALS], quality_threshold=[Interval(float, None, None)],
               source_detected=[SequenceOf(InstanceOf(bool)), None], random_state=["random_state"])
def build_preference_pairs(sources: Sequence[str], candidates: Sequence[Sequence[str]],
                           detected: Sequence[Sequence[bool | None]], quality: Sequence[Sequence[float]], *,
                           quality_threshold: float = 0.75, source_detected: Sequence[bool] | None = None,
                           random_state: Any = 0) -> PreferenceSet:
    """Preference pairs from labelled paraphrase candidates (``detected[i][j]``: flagged under source i's
    surrogate key, None = too short to decide; ``quality[i][j]``: e.g. MiniLM cosine to the source).

    Every chosen text is undetected by construction (asserted). Example
    -------
    >>> p = build_preference_pairs(["src"], [["good", "flagged"]], [[False, True]], [[0.9, 0.9]])
    >>> (p.chosen, p.rejected)
    (['good'], ['flagged'])
    """
    n = len(sources)
    for name, v in (("candidates", candidates), ("detected", detected), ("quality", quality)):
        if len(v) != n or any(len(v[i]) != len(candidates[i]) for i in range(min(n, len(v)))):
            raise InputError(f"The '{name}' argument of build_preference_pairs must have one entry per source "
                             f"({n}) and per candidate. Got {len(v)} row(s) instead.")
    if source_detected is not None and len(source_detected) != n:
        raise InputError("The 'source_detected' argument of build_preference_pairs must have one flag per source "
                         f"({n}). Got {len(source_detected)} instead.")
    rng = check_random_state(random_state, owner="build_preference_pairs")
    out: dict[str, list[Any]] = {"prompts": [], "chosen": [], "rejected": [], "source": []}
    counts = {"sources": n, "source_not_detected": 0, "no_chosen": 0, "rejected_is_source": 0, "kept_sources": 0}
    for i, x in enumerate(sources):
        if source_detected is not None and not source_detected[i]:
            counts["source_not_detected"] += 1
            continue
        good = [(c, d) for c, d, q in zip(candidates[i], detected[i], quality[i], strict=True)
                if d is False and q >= quality_threshold]
        bad = [c for c, d, q in zip(candidates[i], detected[i], quality[i], strict=True)
               if d is not False or q < quality_threshold]
        if not good:
            counts["no_chosen"] += 1
            continue
        if not bad:
            bad = [x]
            counts["rejected_is_source"] += 1
        counts["kept_sources"] += 1
        for c, d in good:
            assert d is False, "a chosen paraphrase is detected: the pair rule is broken"
            rej = bad[int(rng.integers(len(bad)))]
            if rej == c:
                continue
            out["prompts"].append(paraphrase_messages(x))
            out["chosen"].append(c)
            out["rejected"].append(rej)
            out["source"].append(i)
    counts["pairs"] = len(out["chosen"])
    return PreferenceSet(out["prompts"], out["chosen"], out["rejected"], np.asarray(out["source"], dtype=int), counts)


@dataclass
class TrainedParaphraser:
    """A DPO-tuned LoRA paraphraser: the peft ``model``, the trainer's ``history`` (FitHistory), held-out
    preference accuracy and mean reward margin (the spec's fallback criterion), pair counts, settings."""

    model: Any
    history: Any
    held_accuracy: float
    held_margin: float
    n_train: int
    n_held: int
    settings: dict[str, Any]
    forward: Any = field(default=None, repr=False)
    reference: Any = field(default=None, repr=False)


def _group_split(pairs: PreferenceSet, held_out: float, seed: int) -> tuple[list[int], list[int]]:
    groups = np.unique(pairs.source)
    rng = np.random.default_rng(seed)
    n_held = int(round(held_out * len(groups))) if held_out > 0 else 0
    n_held = min(max(n_held, 1 if held_out > 0 else 0), len(groups) - 1)
    held_g = set(rng.permutation(groups)[:n_held].tolist())
    held = [i for i in range(pairs.n_pairs) if pairs.source[i] in held_g]
    return [i for i in range(pairs.n_pairs) if i not in set(held)], held


def _train_example() -> dict[str, Any]:
    from trustlab.llm import tiny_random_llama

    m, t = tiny_random_llama()
    return {"model": m, "tokenizer": t, "pairs": build_preference_pairs(**_pairs_example())}


@validate_args(_train_example, model=[LanguageModel()], tokenizer=[Tokenizer()], pairs=[InstanceOf(PreferenceSet)],
               layers=[InstanceOf(str)], r=[Interval(int, 1, None)], alpha=[Interval(float, 0, None, closed="neither")],
               beta=[Interval(float, 0, None, closed="neither")], lr=[Interval(float, 0, None, closed="neither")],
               steps=[Interval(int, 1, None)], batch_size=[Interval(int, 1, None)],
               warmup_steps=[Interval(int, 0, None)], held_out=[Interval(float, 0, 1, closed="left")],
               max_length=[Interval(int, 8, None)], random_state=["random_state"], system=[InstanceOf(str)],
               previous=[InstanceOf(TrainedParaphraser), None])
def train_paraphraser(model: Any, tokenizer: Any, pairs: PreferenceSet, *, layers: str = "top4", r: int = 8,
                      alpha: float = 16.0, beta: float = 0.1, lr: float = 5e-4, steps: int = 20, batch_size: int = 8,
                      warmup_steps: int = 2, held_out: float = 0.2, max_length: int = 384, random_state: Any = 0,
                      system: str = PARAPHRASE_SYSTEM, previous: TrainedParaphraser | None = None) -> TrainedParaphraser:
    """DPO (beta = TRL's default 0.1) of a LoRA paraphraser on ``pairs``; held-out pairs split by source.

    A plain ``model`` gets LoRA adapters (``add_lora(layers, r, alpha)``); a peft model (e.g. from a
    ``previous`` run) has its LoRA re-initialised from ``random_state``, and ``previous``'s replay and
    reference caches are reused when it trained on the same pairs. The frozen bottom blocks are replayed
    from a cache (partial LoRA, the spec's CPU plan).
    """
    from trustlab.llm import (
        PolicyForward,
        PreferenceObjective,
        ReferenceCache,
        add_lora,
        preference_accuracy,
        tokenize_preferences,
        train,
    )
    from trustlab.llm.adapters import is_adapted, reset_lora

    if pairs.n_pairs < 2 or len(np.unique(pairs.source)) < 2:
        raise InputError(f"The 'pairs' argument of train_paraphraser must hold pairs from at least 2 sources. Got "
                         f"{pairs.n_pairs} pair(s) from {len(np.unique(pairs.source))} source(s) instead.")
    seed = as_seed(random_state)
    tr, ho = _group_split(pairs, held_out, 42)  # the fork's fixed split seed
    tk = lambda p: tokenize_preferences(tokenizer, p.prompts, p.chosen, p.rejected, system=system,  # noqa: E731
                                        max_length=max_length)
    if is_adapted(model):
        reset_lora(model, seed)
        policy = model
    else:
        policy = add_lora(model, layers=layers, r=r, alpha=alpha, random_state=seed)
    same = previous is not None and previous.model is policy and previous.settings.get("pairs_hash") == _phash(pairs)
    if same:
        fwd, ref = previous.forward, previous.reference
    else:
        p_tr = tk(pairs.subset(tr))
        p_ho = tk(pairs.subset(ho)) if ho else None
        fwd = (PolicyForward(policy, p_tr.sequences), p_tr, None if p_ho is None else
               PolicyForward(policy, p_ho.sequences), p_ho)
        ref = (ReferenceCache.compute(fwd[0]), None if p_ho is None else ReferenceCache.compute(fwd[2]))
    obj = PreferenceObjective(fwd[0], fwd[1], loss="dpo", beta=beta, reference=ref[0])
    hist = train(policy, obj, steps=steps, batch_size=batch_size, lr=lr, warmup_steps=min(warmup_steps, steps - 1),
                 random_state=seed)
    acc, margin = float("nan"), float("nan")
    if fwd[2] is not None:
        ev = preference_accuracy(fwd[2], fwd[3], reference=ref[1], beta=beta)
        acc, margin = ev.accuracy, ev.mean_margin
    policy.eval()
    settings = {"layers": layers, "r": r, "alpha": alpha, "beta": beta, "lr": lr, "steps": steps,
                "batch_size": batch_size, "seed": seed, "pairs_hash": _phash(pairs)}
    return TrainedParaphraser(policy, hist, acc, margin, fwd[1].n_pairs, 0 if fwd[3] is None else fwd[3].n_pairs,
                              settings, fwd, ref)


def _phash(pairs: PreferenceSet) -> str:
    from trustlab.core.hashing import content_hash

    return content_hash(pairs.prompts, pairs.chosen, pairs.rejected)[:16]

