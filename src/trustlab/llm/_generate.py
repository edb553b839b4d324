"""Greedy or sampled generation with a causal LM, batched and left-padded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, CallableRule, InstanceOf, Interval
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.optional import require
from trustlab.llm._batching import _pad_id, _tokenizer_of, encode_texts, pad_batch
from trustlab.llm.rules import POSITIVE_INT, TEXTS, LanguageModel, Tokenizer
from trustlab.llm.scoring import _chat_prompt
from trustlab.llm.sites import dims, model_device, unwrap

torch = require("torch", purpose="trustlab.llm generation")

__all__ = ["generate"]


@validate_args(model=[LanguageModel()], tokenizer=[Tokenizer()], prompts=[InstanceOf(str), TEXTS],
               max_new_tokens=[POSITIVE_INT], chat=[Boolean()], system=[InstanceOf(str), None], batch_size=[POSITIVE_INT],
               do_sample=[Boolean()], temperature=[Interval("real", 0, None, closed="neither")],
               top_p=[Interval("real", 0, 1, closed="right")], top_k=[Interval(int, 1, None), None],
               random_state=["random_state"], logits_processor=[CallableRule(), None])
def generate(
    model: Any,
    tokenizer: Any,
    prompts: str | Sequence[str],
    *,
    max_new_tokens: int = 32,
    chat: bool = True,
    system: str | None = None,
    batch_size: int = 8,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int | None = None,
    random_state: Any = None,
    logits_processor: Any = None,
) -> list[str]:
    """Greedy (default) or sampled continuations of ``prompts`` (through the chat template by default), batched.

    With ``do_sample=True`` tokens are drawn at ``temperature`` (nucleus ``top_p``, optional ``top_k``);
    the draws are seeded from ``random_state`` and leave the global RNG states unchanged.
    ``logits_processor``: optional zero-argument callable returning a list of transformers logits
    processors, called once per batch (fresh state per batch, e.g. a watermark's embedding processor).

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> out = generate(model, tok, ["Hi"], max_new_tokens=3, chat=False)
    >>> len(out)
    1
    """
    if isinstance(prompts, str):
        prompts = [prompts]
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ConfigError(
            f"The 'max_new_tokens' argument of generate must be an int >= 1. Got {max_new_tokens!r}."
        )
    tok = _tokenizer_of(model, tokenizer, "generate")
    texts = [_chat_prompt(tok, p, system) if chat else p for p in prompts]
    seqs = encode_texts(
        texts, model=unwrap(model), tokenizer=tok, owner="generate", add_special_tokens=not chat
    )
    n_ctx = dims(model).n_ctx
    if n_ctx and max(len(s) for s in seqs) + max_new_tokens > n_ctx:
        raise InputError(
            f"A prompt plus max_new_tokens={max_new_tokens} exceeds the model's context of {n_ctx}."
        )
    if do_sample and (not isinstance(temperature, int | float) or isinstance(temperature, bool) or temperature <= 0
                      or not isinstance(top_p, int | float) or not 0 < top_p <= 1):
        raise ConfigError(
            f"Sampling in generate needs temperature > 0 and top_p in (0, 1]. Got {temperature!r} and {top_p!r}."
        )
    from trustlab.core.seeding import check_random_state, isolated_global_rng, spawn_seed

    seed = spawn_seed(check_random_state(random_state, owner="generate")) if do_sample else None
    sampling = (
        {"do_sample": True, "temperature": float(temperature), "top_p": float(top_p), "top_k": top_k or 0}
        if do_sample
        else {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    )
    pad = _pad_id(unwrap(model), tok)
    eos = tok.eos_token_id
    results: list[str] = []
    with torch.no_grad(), isolated_global_rng(seed):
        for s in range(0, len(seqs), batch_size):
            ids, mask = pad_batch(seqs[s : s + batch_size], pad, "left")
            ids, mask = ids.to(model_device(model)), mask.to(model_device(model))
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                pad_token_id=pad,
                eos_token_id=eos,
                **({"logits_processor": _tf_list(logits_processor())} if logits_processor is not None else {}),
                **sampling,
            )
            results += tok.batch_decode(out[:, ids.shape[1] :], skip_special_tokens=True)
    return results


def _tf_list(procs: Any) -> Any:
    tf = require("transformers", purpose="trustlab.llm generation")
    return procs if isinstance(procs, tf.LogitsProcessorList) else tf.LogitsProcessorList(list(procs or []))
