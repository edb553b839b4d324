"""Training objectives: what :func:`trustlab.llm.train` minimises, one micro-batch of item rows at a time.

An objective is any object with ``n_items`` and ``__call__(rows) -> StepOutput`` (or a scalar loss
tensor), where ``rows`` are item indices; an optional ``prepare()`` runs once before the first step.
:class:`SFTObjective` (response-masked NLL) and :class:`PreferenceObjective` (DPO, IPO, length-normalised
DPO, SimPO, with cached or online reference log-probs) ship here; both run through a
:class:`~trustlab.llm.PolicyForward`, i.e. by top-K replay when the trainable parameters allow it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Interval, Options
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.optional import require
from trustlab.llm._tokenize_pairs import PreferencePairs, SequenceSet
from trustlab.llm.adapters import is_adapted
from trustlab.llm.losses import (
    PREFERENCE_LOSSES,
    REFERENCE_FREE,
    preference_loss,
    preference_margins,
    sft_loss,
)
from trustlab.llm.policy import PolicyForward
from trustlab.llm.refcache import ReferenceCache

torch = require("torch", purpose="trustlab.llm training objectives")

__all__ = ["PreferenceObjective", "SFTObjective", "StepOutput"]


@dataclass(frozen=True)
class StepOutput:
    """What an objective returns for one micro-batch: the scalar loss and float metrics to log."""

    loss: Any
    metrics: dict[str, float] = field(default_factory=dict)


def _forward_of(policy: Any, sequences: SequenceSet, replay: Any, cache_dir: Any, owner: str) -> PolicyForward:
    if isinstance(policy, PolicyForward):
        if policy.sequences is not sequences and policy.sequences.fingerprint() != sequences.fingerprint():
            raise InputError(f"The PolicyForward passed to {owner} was built on other sequences.")
        return policy
    if not isinstance(policy, torch.nn.Module):
        raise ConfigError(f"{owner} needs a causal LM or a PolicyForward. Got {type(policy).__name__} instead.")
    return PolicyForward(policy, sequences, replay=replay, cache_dir=cache_dir)


class SFTObjective:
    """Response-masked NLL of a :class:`~trustlab.llm.SequenceSet` (items = sequences).

    Parameters
    ----------
    policy : causal LM or PolicyForward
    sequences : SequenceSet
    replay : "auto", int or None, default="auto"
        Used when ``policy`` is a model (see :class:`~trustlab.llm.PolicyForward`).
    reduction : {"token_mean", "sequence_mean", "sum"}, default="token_mean"
    cache_dir : path, optional
        Keep the replay states on disk.
    """

    @validate_args(sequences=[SequenceSet], replay=[Interval(int, 1, None), Options(["auto"]), None],
                   reduction=[Options(("token_mean", "sequence_mean", "sum"))], policy="no_validation",
                   cache_dir="no_validation")
    def __init__(self, policy: Any, sequences: SequenceSet, *, replay: Any = "auto", reduction: str = "token_mean",
                 cache_dir: Any = None) -> None:
        self.forward = _forward_of(policy, sequences, replay, cache_dir, "SFTObjective")
        self.reduction = reduction

    @property
    def n_items(self) -> int:
        return len(self.forward.sequences)

    def prepare(self) -> None:
        self.forward.check_fresh()

    def __call__(self, rows: Any) -> StepOutput:
        _, _, resp = self.forward.batch(rows)
        lp = self.forward.token_logprobs(rows)
        mask = resp.clone().to(lp.device)
        mask[:, 0] = False
        loss = sft_loss(lp, mask, reduction=self.reduction)
        return StepOutput(loss, {"nll": float(loss.detach())})


class PreferenceObjective:
    """A preference loss on :class:`~trustlab.llm.PreferencePairs` (items = pairs).

    Parameters
    ----------
    policy : causal LM (usually a peft model from :func:`~trustlab.llm.add_lora`) or PolicyForward
    pairs : PreferencePairs
    loss : {"dpo", "ipo", "dpo_norm", "simpo"}, default="dpo"
    beta : float > 0, default=0.1
    gamma : float, default=0.5
        SimPO's target margin.
    label_smoothing : float in [0, 0.5), default=0
    reference : "cache", "online", ReferenceCache or None, default="cache"
        ``"cache"``: compute the reference log-probs once now (:meth:`ReferenceCache.compute`, adapters
        disabled); ``"online"``: a no-grad forward with the adapters disabled every step (the costly
        default of most trainers); a ReferenceCache is checked against the data and model; None only for
        reference-free losses (SimPO).
    sft_weight : float >= 0, default=0
        Adds ``sft_weight`` times the chosen responses' mean NLL (an RPO-style anchor).
    replay : "auto", int or None, default="auto"
    cache_dir : path, optional
        Keep replay states and the reference cache on disk.
    """

    @validate_args(
        pairs=[PreferencePairs], loss=[Options(PREFERENCE_LOSSES)], beta=[Interval(float, 0, None, closed="neither")],
        gamma=[Interval(float, None, None)], label_smoothing=[Interval(float, 0, 0.5, closed="left")],
        reference=[Options(("cache", "online")), ReferenceCache, None], sft_weight=[Interval(float, 0, None)],
        replay=[Interval(int, 1, None), Options(["auto"]), None], policy="no_validation", cache_dir="no_validation",
    )
    def __init__(self, policy: Any, pairs: PreferencePairs, *, loss: str = "dpo", beta: float = 0.1,
                 gamma: float = 0.5, label_smoothing: float = 0.0, reference: Any = "cache", sft_weight: float = 0.0,
                 replay: Any = "auto", cache_dir: Any = None) -> None:
        self.forward = _forward_of(policy, pairs.sequences, replay, cache_dir, "PreferenceObjective")
        self.pairs, self.loss, self.beta, self.gamma = pairs, loss, float(beta), float(gamma)
        self.label_smoothing, self.sft_weight = float(label_smoothing), float(sft_weight)
        if loss in REFERENCE_FREE:
            reference = None if isinstance(reference, str) else reference
        elif reference is None:
            raise ConfigError(f"The {loss!r} loss needs a reference: pass reference='cache', 'online' or a "
                              "ReferenceCache.")
        if reference == "online" and not is_adapted(self.forward.model):
            raise ConfigError("reference='online' needs a peft model (its adapters are disabled for the reference).")
        if reference == "cache":
            reference = ReferenceCache.compute(self.forward, cache_dir=cache_dir)
        elif isinstance(reference, ReferenceCache):
            reference.check(self.forward)
        self.reference = reference

    @property
    def n_items(self) -> int:
        return self.pairs.n_pairs

    def prepare(self) -> None:
        self.forward.check_fresh()

    @takes_any(seq_rows="sequence rows on the per-step path: ReferenceCache.rows or PolicyForward checks them")
    def reference_logprobs(self, seq_rows: Any) -> tuple[Any, Any]:
        """Reference ``(sum, n_tokens)`` of sequence rows (None, None for reference-free losses)."""
        if self.reference is None:
            return None, None
        if isinstance(self.reference, ReferenceCache):
            return self.reference.rows(seq_rows)
        with torch.no_grad(), self.forward.model.disable_adapter():
            out = self.forward.sequence_logprobs(seq_rows)
        return out.sum.detach(), out.n_tokens

    def __call__(self, rows: Any) -> StepOutput:
        c, r = self.pairs.rows(rows)
        seq_rows = np.concatenate([c, r])
        pol = self.forward.sequence_logprobs(seq_rows)
        b = len(c)
        pc, pr, nc, nr = pol.sum[:b], pol.sum[b:], pol.n_tokens[:b], pol.n_tokens[b:]
        ref_sum, _ = self.reference_logprobs(seq_rows)
        rc = rr = None
        if ref_sum is not None:
            ref_sum = ref_sum.to(device=pc.device, dtype=pc.dtype)
            rc, rr = ref_sum[:b], ref_sum[b:]
        loss = preference_loss(self.loss, pc, pr, rc, rr, nc, nr, beta=self.beta, gamma=self.gamma,
                               label_smoothing=self.label_smoothing)
        if self.sft_weight:
            loss = loss + self.sft_weight * (-(pc / nc.clamp(min=1))).mean()
        with torch.no_grad():
            if self.loss in ("dpo_norm", "simpo"):
                args = (pc / nc, pr / nr) + ((rc / nc, rr / nr) if rc is not None else (None, None))
            else:
                args = (pc, pr, rc, rr)
            m = preference_margins(*args, beta=self.beta)
        return StepOutput(loss, {"margin": float(m.mean()), "accuracy": float((m > 0).float().mean())})
