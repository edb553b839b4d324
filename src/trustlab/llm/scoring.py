"""Scoring with a causal LM: response-masked log-probs, option scoring, sequential KL (generation: ``_generate``).

All functions batch their inputs and compute the LM head only at the positions they need (the head is
49,152 x 576 on SmolLM2, a quarter of a forward's FLOPs at every position).

Conventions: ``response_mask[b, t] = 1`` marks token ``t`` as scored, i.e. predicted from tokens
``< t``; position 0 is never scored. Log-probs are natural logs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import Boolean, InstanceOf, Options
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.optional import require
from trustlab.llm._argrules import HIDDEN, HIDDEN_ANY
from trustlab.llm._batching import (
    position_ids_from_mask,
)
from trustlab.llm.rules import MASK, POSITIVE_INT, TEXTS, TOKEN_IDS, LanguageModel, Tokenizer, check_token_ids
from trustlab.llm.sites import arch_spec, base_model, dims, get_module, model_device, unwrap

torch = require("torch", purpose="trustlab.llm scoring")

__all__ = [
    "encode_responses",
    "gather_logprobs",
    "head_logits",
    "score_options",
    "score_responses",
    "sequence_logprobs",
    "sequential_kl",
    "token_logprobs",
]


@dataclass(frozen=True)
class EncodedBatch:
    """Padded token ids with the attention mask and the mask of scored (response) tokens."""

    input_ids: Any
    attention_mask: Any
    response_mask: Any


@dataclass(frozen=True)
class SequenceScores:
    """Per-sequence log-prob sum, length-normalised mean and number of scored tokens (numpy arrays)."""

    sum: np.ndarray
    mean: np.ndarray
    n_tokens: np.ndarray


@dataclass(frozen=True)
class OptionScores:
    """Multiple-choice scores ``[n_prompts, n_options]`` and the chosen option per prompt."""

    scores: np.ndarray
    choice: np.ndarray
    sum: np.ndarray
    n_tokens: np.ndarray


@dataclass(frozen=True)
class KLResult:
    """Sequential KL(model || reference): per token ``[B, T]`` (0 where unscored) and per sequence ``[B]``."""

    per_token: np.ndarray
    per_sequence: np.ndarray


@validate_args(model=[LanguageModel()], hidden=[HIDDEN_ANY], token_ids=[TOKEN_IDS, None])
def head_logits(model: Any, hidden: Any, token_ids: Any = None) -> Any:
    """Apply the LM head to final (normed) hidden states, optionally for a few vocabulary entries only.

    Applies Gemma's final logit soft-capping when the config has one.

    Example
    -------
    >>> import torch
    >>> from trustlab.llm import tiny_random_llama
    >>> model, _ = tiny_random_llama()
    >>> head_logits(model, torch.zeros(3, 72), token_ids=[5, 7]).shape
    torch.Size([3, 2])
    """
    inner = unwrap(model)
    head = get_module(inner, arch_spec(inner).lm_head)
    if token_ids is None or type(head) is not torch.nn.Linear:  # e.g. a LoRA-wrapped head: full call
        logits = head(hidden)
        if token_ids is not None:
            logits = logits[..., torch.as_tensor(token_ids, dtype=torch.long, device=logits.device)]
    else:
        ids = torch.as_tensor(token_ids, dtype=torch.long, device=head.weight.device)
        bias = head.bias[ids] if head.bias is not None else None
        logits = torch.nn.functional.linear(hidden, head.weight[ids], bias)
    cap = getattr(inner.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def _final_hidden(model: Any, input_ids: Any, attention_mask: Any) -> Any:
    """Final normed hidden states [B, T, d] without computing the head."""
    base = base_model(model)
    dev = model_device(model)
    out = base(
        input_ids=input_ids.to(dev),
        attention_mask=attention_mask.to(dev),
        position_ids=position_ids_from_mask(attention_mask).to(dev),
        use_cache=False,
    )
    return out.last_hidden_state


@validate_args(model=[LanguageModel()], hidden=[HIDDEN], input_ids=[TOKEN_IDS], response_mask=MASK[:1])
def gather_logprobs(model: Any, hidden: Any, input_ids: Any, response_mask: Any) -> Any:
    """Log-prob of each scored token from final hidden states, head applied at scored positions only.

    Returns a ``[B, T]`` float32 tensor, 0 where ``response_mask`` is 0 (differentiable w.r.t.
    ``hidden`` and the head).

    Example
    -------
    >>> import torch
    >>> from trustlab.llm import tiny_random_llama
    >>> model, _ = tiny_random_llama()
    >>> ids = torch.tensor([[5, 6, 7]])
    >>> h = model.model(ids).last_hidden_state
    >>> gather_logprobs(model, h, ids, torch.tensor([[0, 1, 1]])).shape
    torch.Size([1, 3])
    """
    input_ids = input_ids.to(hidden.device)
    resp = torch.as_tensor(response_mask).to(hidden.device).bool().clone()
    resp[:, 0] = False
    sel = resp[:, 1:]
    h = hidden[:, :-1][sel]
    targets = input_ids[:, 1:][sel]
    logits = head_logits(model, h).float()
    lp = torch.log_softmax(logits, dim=-1).gather(-1, targets[:, None])[:, 0]
    out = torch.zeros(input_ids.shape, dtype=torch.float32, device=hidden.device)
    out[:, 1:] = out[:, 1:].masked_scatter(sel, lp) if lp.numel() else out[:, 1:]
    return out


def _check_ids(input_ids: Any, attention_mask: Any, response_mask: Any, owner: str, model: Any = None
               ) -> tuple[Any, Any, Any]:
    ids = torch.as_tensor(input_ids)
    if ids.is_floating_point() or ids.dtype == torch.bool:
        raise InputError(
            f"The 'input_ids' of {owner} must be integer token ids. Got dtype {ids.dtype} instead."
        )
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
        raise InputError(
            f"The 'input_ids' of {owner} must be a non-empty [batch, seq] array. Got {tuple(ids.shape)}."
        )
    mask = (
        torch.ones_like(ids) if attention_mask is None else torch.as_tensor(attention_mask).reshape(ids.shape)
    )
    resp = mask if response_mask is None else torch.as_tensor(response_mask)
    if resp.shape != ids.shape:
        raise InputError(
            f"The 'response_mask' of {owner} must have shape {tuple(ids.shape)}. Got {tuple(resp.shape)}."
        )
    if model is not None:
        check_token_ids(model, ids, owner=owner, name="input_ids")
    # a token is scored only when the token before it is real (never the first token, never after a pad)
    prev_real = torch.zeros_like(mask, dtype=torch.bool)
    prev_real[:, 1:] = mask[:, :-1].bool()
    return ids.long(), mask.long(), resp.bool() & mask.bool() & prev_real


@validate_args(model=[LanguageModel()], input_ids=[TOKEN_IDS], attention_mask=MASK, response_mask=MASK,
               batch_size=[POSITIVE_INT], grad=[Boolean()])
def token_logprobs(
    model: Any,
    input_ids: Any,
    attention_mask: Any = None,
    response_mask: Any = None,
    *,
    batch_size: int = 8,
    grad: bool = False,
) -> Any:
    """Per-token log-probs ``[B, T]`` of the scored tokens (0 elsewhere), batched.

    ``response_mask`` defaults to every real token after the first (a token is only scored when the
    token before it is real). With ``grad=True`` the result stays
    in the autograd graph (for DPO-style losses); otherwise it is computed under ``no_grad``.

    Example
    -------
    >>> import torch
    >>> from trustlab.llm import tiny_random_llama
    >>> model, _ = tiny_random_llama()
    >>> token_logprobs(model, torch.tensor([[5, 6, 7]])).shape
    torch.Size([1, 3])
    """
    ids, mask, resp = _check_ids(input_ids, attention_mask, response_mask, "token_logprobs", model)
    dims(model)  # validates the architecture
    ctx = contextlib.nullcontext() if grad else torch.no_grad()
    parts = []
    with ctx:
        for s in range(0, ids.shape[0], batch_size):
            sl = slice(s, s + batch_size)
            h = _final_hidden(model, ids[sl], mask[sl])
            parts.append(gather_logprobs(model, h, ids[sl], resp[sl]))
    return torch.cat(parts, dim=0)


@validate_args(model=[LanguageModel()], input_ids=[TOKEN_IDS], attention_mask=MASK, response_mask=MASK,
               batch_size=[POSITIVE_INT])
def sequence_logprobs(
    model: Any, input_ids: Any, attention_mask: Any = None, response_mask: Any = None, *, batch_size: int = 8
) -> SequenceScores:
    """Sum, length-normalised mean and count of scored-token log-probs per sequence."""
    ids, mask, resp = _check_ids(input_ids, attention_mask, response_mask, "sequence_logprobs", model)
    lp = token_logprobs(model, ids, mask, resp, batch_size=batch_size)
    resp = resp.clone()
    resp[:, 0] = False
    n = resp.sum(1).numpy()
    total = lp.sum(1).cpu().numpy().astype(np.float64)
    return SequenceScores(total, total / np.maximum(n, 1), n)


def _chat_prompt(tok: Any, prompt: str, system: str | None) -> str:
    if not getattr(tok, "chat_template", None):
        raise ConfigError("chat=True needs a tokenizer with a chat template; this one has none.")
    msgs = ([{"role": "system", "content": system}] if system is not None else []) + [
        {"role": "user", "content": prompt}
    ]
    return tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)


@validate_args(tokenizer=[Tokenizer()], prompts=[TEXTS], responses=[TEXTS], chat=[Boolean()],
               system=[InstanceOf(str), None], add_eos=[Boolean()], padding_side=[Options(("right", "left"))])
def encode_responses(
    tokenizer: Any,
    prompts: Sequence[str],
    responses: Sequence[str],
    *,
    chat: bool = False,
    system: str | None = None,
    add_eos: bool = False,
    padding_side: str = "right",
) -> EncodedBatch:
    """Tokenise prompt/response pairs (separately, then concatenated) with a mask over response tokens.

    The prompt gets the tokenizer's special tokens (none for SmolLM2, BOS for Gemma) unless ``chat``
    (the template holds them); the response gets none. ``add_eos`` appends the EOS token.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> _, tok = tiny_random_llama()
    >>> b = encode_responses(tok, ["Q: 2+2? A:"], [" 4"])
    >>> int(b.response_mask.sum())
    2
    """
    if isinstance(prompts, str) or isinstance(responses, str):
        raise InputError("encode_responses needs lists of prompts and responses, not single strings.")
    if len(prompts) == 0 or len(prompts) != len(responses):
        raise InputError(
            f"encode_responses needs as many prompts as responses (at least one). Got {len(prompts)} prompts "
            f"and {len(responses)} responses."
        )
    from trustlab.llm._tokenize_pairs import _encode  # the one (prompt, response) tokeniser

    seqs = _encode(tokenizer, prompts, responses, chat=chat, system=system, add_eos=add_eos, max_length=None,
                   max_prompt_length=None, owner="encode_responses")
    return seqs.padded(padding_side)


@validate_args(model=[LanguageModel()], tokenizer=[Tokenizer()], prompts=[TEXTS], responses=[TEXTS],
               chat=[Boolean()], system=[InstanceOf(str), None], add_eos=[Boolean()], batch_size=[POSITIVE_INT])
def score_responses(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    responses: Sequence[str],
    *,
    chat: bool = False,
    system: str | None = None,
    add_eos: bool = False,
    batch_size: int = 8,
) -> SequenceScores:
    """Log-prob of each response given its prompt (sum, length-normalised mean, token count).

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> s = score_responses(model, tok, ["The sky is"], [" blue"])
    >>> s.sum.shape
    (1,)
    """
    b = encode_responses(tokenizer, prompts, responses, chat=chat, system=system, add_eos=add_eos)
    _check_len(model, b.input_ids, b.attention_mask, "score_responses")
    return sequence_logprobs(model, b.input_ids, b.attention_mask, b.response_mask, batch_size=batch_size)


def _check_len(model: Any, ids: Any, mask: Any, owner: str) -> None:
    n_ctx = dims(model).n_ctx
    longest = int(mask.sum(1).max())
    if n_ctx and longest > n_ctx:
        raise InputError(
            f"An input to {owner} has {longest} tokens, more than the model's context of {n_ctx}."
        )


@validate_args(model=[LanguageModel()], tokenizer=[Tokenizer()], prompts=[TEXTS],
               options=[TEXTS, SequenceOf(TEXTS)], normalize=[Boolean()], chat=[Boolean()],
               system=[InstanceOf(str), None], batch_size=[POSITIVE_INT])
def score_options(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    options: Sequence[str] | Sequence[Sequence[str]],
    *,
    normalize: bool = True,
    chat: bool = False,
    system: str | None = None,
    batch_size: int = 8,
) -> OptionScores:
    """Multiple choice by log-prob: score every option after every prompt and pick the best.

    ``options`` is one list shared by all prompts or one list per prompt (same length). ``normalize``
    uses the length-normalised mean log-prob, else the sum.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> r = score_options(model, tok, ["2+2="], [" 4", " five"])
    >>> r.scores.shape, r.choice.shape
    ((1, 2), (1,))
    """
    if isinstance(prompts, str):
        prompts = [prompts]
    if len(prompts) == 0:
        raise InputError("score_options needs at least one prompt. Got an empty list instead.")
    if len(options) and all(isinstance(o, str) for o in options):
        per = [list(options)] * len(prompts)
    else:
        per = [list(o) for o in options]
    if len(per) != len(prompts) or not per[0] or any(len(o) != len(per[0]) for o in per):
        raise InputError(
            "score_options needs one shared list of options or one equally long list per prompt "
            f"(got {len(per)} lists for {len(prompts)} prompts)."
        )
    k = len(per[0])
    flat_p = [p for p, opts in zip(prompts, per) for _ in opts]
    flat_o = [o for opts in per for o in opts]
    s = score_responses(model, tokenizer, flat_p, flat_o, chat=chat, system=system, batch_size=batch_size)
    mean, total, n = (a.reshape(len(prompts), k) for a in (s.mean, s.sum, s.n_tokens))
    scores = mean if normalize else total
    return OptionScores(scores, scores.argmax(1), total, n)


@validate_args(model=[LanguageModel()], reference=[LanguageModel(), None], input_ids=[TOKEN_IDS], attention_mask=MASK,
               response_mask=MASK, batch_size=[POSITIVE_INT])
def sequential_kl(
    model: Any,
    reference: Any,
    input_ids: Any,
    attention_mask: Any = None,
    response_mask: Any = None,
    *,
    batch_size: int = 8,
) -> KLResult:
    """Sum over scored positions of KL(p_model(. | x_<t) || p_reference(. | x_<t)).

    ``reference=None`` uses ``model.disable_adapter()`` (a PEFT model's base weights) as the reference.

    Example
    -------
    >>> import torch
    >>> from trustlab.llm import tiny_random_llama
    >>> m1, _ = tiny_random_llama(random_state=0); m2, _ = tiny_random_llama(random_state=1)
    >>> kl = sequential_kl(m1, m2, torch.tensor([[5, 6, 7, 8]]))
    >>> bool(kl.per_sequence[0] > 0)
    True
    """
    ids, mask, resp = _check_ids(input_ids, attention_mask, response_mask, "sequential_kl", model)
    resp = resp.clone()
    resp[:, 0] = False
    if reference is None and not hasattr(model, "disable_adapter"):
        raise ConfigError("sequential_kl(reference=None) needs a PEFT model (disable_adapter); pass a model.")
    out = torch.zeros(ids.shape, dtype=torch.float32)
    with torch.no_grad():
        for s in range(0, ids.shape[0], batch_size):
            sl = slice(s, s + batch_size)
            sel = resp[sl][:, 1:]
            logp = torch.log_softmax(
                head_logits(model, _final_hidden(model, ids[sl], mask[sl])[:, :-1][sel]).float(), -1
            )
            if reference is None:
                with model.disable_adapter():
                    h_ref = _final_hidden(model, ids[sl], mask[sl])
                logq = torch.log_softmax(head_logits(model, h_ref[:, :-1][sel]).float(), -1)
            else:
                h_ref = _final_hidden(reference, ids[sl], mask[sl])
                logq = torch.log_softmax(head_logits(reference, h_ref[:, :-1][sel]).float(), -1)
            kl = (logp.exp() * (logp - logq)).sum(-1).cpu()
            block = out[sl]
            block[:, 1:] = block[:, 1:].masked_scatter(sel, kl) if kl.numel() else block[:, 1:]
            out[sl] = block
    return KLResult(out.numpy(), out.sum(1).numpy().astype(np.float64))
