"""Argument rules for functions that take a language model, a tokenizer, texts or token ids.

Use them with :func:`trustlab.core.arguments.validate_args` like any other rule::

    from trustlab.core.arguments import validate_args
    from trustlab.llm.rules import LanguageModel, TEXTS_OR_IDS

    @validate_args(model=[LanguageModel()], inputs=[TEXTS_OR_IDS])
    def my_probe(model, inputs): ...

The rules check the kind of object without importing torch (a model is a ``torch.nn.Module`` with a
``config``). Checks that need the model itself, such as token ids against its vocabulary, happen in the
function bodies (:func:`check_token_ids`).
"""

from __future__ import annotations

import functools
import numbers
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import NO_EXAMPLE, Constraint, InstanceOf, Interval, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.llm._argrules import ID_SEQUENCES

#: why a rule's ``is_satisfied_by`` takes any value: testing values is what a rule does
_RULE_INPUT = "a rule tests any value"

__all__ = ["TorchModule", "LanguageModel", "Tokenizer", "TEXTS_OR_IDS", "TEXTS", "SITES", "TOKEN_IDS", "MASK", "POSITIVE_INT",
           "check_token_ids"]


def _is_module(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.nn.Module)


@functools.cache
def _example_model() -> Any:
    """A one-layer random llama built from a config (no files), for generated argument tests."""
    import torch
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return transformers.LlamaForCausalLM(cfg).eval()


class TorchModule(Constraint):
    """Any ``torch.nn.Module`` (the functions that inspect an architecture explain what they support)."""

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        return _is_module(value)

    def describe(self) -> str:
        return "a torch.nn.Module"

    def invalid_examples(self) -> list[Any]:
        return [None, "model", 3]

    def valid_example(self) -> Any:
        try:
            return _example_model()
        except ImportError:
            return NO_EXAMPLE


class LanguageModel(TorchModule):
    """A loaded causal language model: a ``torch.nn.Module`` with a ``config`` (transformers or PEFT)."""

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        return _is_module(value) and hasattr(value, "config")

    def describe(self) -> str:
        return "a causal language model (a torch.nn.Module with a config, e.g. from trustlab.llm.load_model)"


@functools.cache
def _example_tokenizer() -> Any:
    from tokenizers import Tokenizer as _Tok
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    tok = _Tok(WordLevel({"[UNK]": 0, "[PAD]": 1, "a": 2, "cat": 3}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")


class Tokenizer(Constraint):
    """A tokenizer: callable on texts, with ``encode`` (a transformers tokenizer, e.g. from load_tokenizer)."""

    @takes_any(value=_RULE_INPUT)
    def is_satisfied_by(self, value: Any) -> bool:
        return callable(value) and callable(getattr(value, "encode", None)) and not isinstance(value, type)

    def describe(self) -> str:
        return "a tokenizer (e.g. from trustlab.llm.load_model or load_tokenizer)"

    def invalid_examples(self) -> list[Any]:
        return ["smollm2-135m-instruct", 3, [1, 2]]

    def valid_example(self) -> Any:
        try:
            return _example_tokenizer()
        except ImportError:
            return NO_EXAMPLE


def _is_ids_row(v: Any) -> bool:
    if _is_module(v) or isinstance(v, str | bytes):
        return False
    arr = np.asarray(v.cpu() if hasattr(v, "cpu") else v)
    return arr.ndim == 1 and (arr.size == 0 or arr.dtype.kind in "iu")


def _texts_or_ids(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value)
    if type(value).__module__.startswith(("torch", "numpy")) and hasattr(value, "shape"):
        return len(value.shape) in (1, 2) and not str(value.dtype).startswith(("torch.float", "float", "bool",
                                                                              "torch.bool", "torch.complex"))
    if not isinstance(value, list | tuple) or not value:
        return False
    if all(isinstance(v, str) for v in value):
        return True
    return all(_is_ids_row(v) for v in value)


class _Data(Satisfies):
    """A data rule: its errors are :class:`InputError` (bad data), not ConfigError (a bad setting)."""

    error_class = InputError


class _Texts(SequenceOf):
    error_class = InputError


def _why_not_texts_or_ids(value: Any) -> str:
    if isinstance(value, list | tuple) and not value:
        return "it is empty: pass at least one text or token-id sequence"
    dtype = str(getattr(value, "dtype", ""))
    if "float" in dtype or "bool" in dtype or "complex" in dtype:
        return f"dtype {dtype}: token ids must be integers (tokenizer ids, torch.long)"
    if isinstance(value, list | tuple):
        kinds = {type(v).__name__ for v in value}
        if "str" in kinds and len(kinds) > 1:
            return "it mixes texts and token ids"
        bad = next((i for i, v in enumerate(value) if not isinstance(v, str) and not _is_ids_row(v)), None)
        if bad is not None:
            return f"item {bad} is not a 1-d sequence of integer token ids"
    return ""


#: a text, a non-empty list of texts or of token-id sequences, or a 1-/2-d integer array or tensor of ids
TEXTS_OR_IDS = _Data(
    _texts_or_ids, "a text, a non-empty list of texts or of token-id sequences, or a 2-d integer array of ids",
    invalid=[None, 3, [], [1.5, 2.5], np.zeros((2, 2))], valid=["a cat"])
TEXTS_OR_IDS.why_not = _why_not_texts_or_ids  # type: ignore[attr-defined]
#: a non-empty list of texts
TEXTS = _Texts(InstanceOf(str))
#: one site name or a list of them
SITES = [InstanceOf(str), SequenceOf(InstanceOf(str))]
#: a [batch, seq] (or 1-d) integer array or tensor of token ids >= 0
TOKEN_IDS = ArrayLike(ndim=(1, 2), dtype="integer", low=0)
#: an optional 0/1 (or bool) mask of the ids' shape
MASK = [ArrayLike(ndim=(1, 2), dtype="integer", low=0, high=1), None]
POSITIVE_INT = Interval(int, 1, None)


def _vocab_size(model: Any) -> int | None:
    from trustlab.llm.sites import unwrap

    config = getattr(unwrap(model), "config", None)
    size = getattr(config, "vocab_size", None)
    if size is None and hasattr(config, "get_text_config"):
        size = getattr(config.get_text_config(), "vocab_size", None)
    return int(size) if isinstance(size, numbers.Integral) else None


@validate_args(model=[LanguageModel()], seqs=[ID_SEQUENCES], owner=[InstanceOf(str)], name=[InstanceOf(str)])
def check_token_ids(model: Any, seqs: Sequence[Sequence[int]] | Any, *, owner: str, name: str = "inputs") -> None:
    """Raise :class:`InputError` when a token id is negative or not below the model's vocabulary size.

    ``seqs`` is a list of id lists or an integer array/tensor. Without the check, an out-of-range id fails
    deep in torch ("index out of range in self") or, on some devices, reads garbage.
    """
    vocab = _vocab_size(model)
    if vocab is None:
        return
    is_array = hasattr(seqs, "shape")
    if is_array:
        arr = np.asarray(seqs.detach().cpu() if hasattr(seqs, "detach") else seqs)
        rows = [arr.reshape(-1)]
    else:
        rows = [np.asarray(s, dtype=np.int64) for s in seqs]
    for i, row in enumerate(rows):
        if row.size and (row.min() < 0 or row.max() >= vocab):
            bad = int(row.max()) if row.max() >= vocab else int(row.min())
            where = "" if is_array else f" in item {i}"
            raise InputError(
                f"The '{name}' argument of {owner} must hold token ids in [0, {vocab - 1}] (the model's vocabulary "
                f"has {vocab} entries). Got the id {bad}{where} instead; encode texts with the model's own "
                "tokenizer.")
