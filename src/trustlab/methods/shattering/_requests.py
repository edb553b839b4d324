"""Edit requests (token-level) and the key covariance of an MLP down-projection.

An :class:`EditRequest` says which token to make the model predict after each prompt and at which token of
each prompt the subject's key is read (ROME's ``subject_last``); :func:`text_request` builds one from text
for a Hugging Face tokenizer and :func:`kg_request` from a synthetic fact. Both the synthetic decoder and
SmolLM2 are Llama-architecture models, so the module path comes from :mod:`trustlab.llm`'s site table.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval, RandomStateRule
from trustlab.core.exceptions import InputError, UnsupportedModelError
from trustlab.core.threads import limit_threads
from trustlab.methods.shattering._kg import CyclicKG
from trustlab.methods.shattering._model import query_tokens

__all__ = ["DistanceZeroWarning", "EditRequest", "KeyStats", "down_proj", "key_covariance", "kg_request", "text_request"]


class DistanceZeroWarning(UserWarning):
    """An edit asks for the answer the model already gives (counterfactual distance 0)."""


@dataclass
class EditRequest:
    """A single-token knowledge edit.

    ``prompts``: token-id lists after which ``target`` should be predicted; ``key_positions``: index (may be
    negative) of the key token in each prompt; ``kl_prompts``/``kl_positions``: prompts whose next-token
    distribution is kept (ROME's "{subject} is a"); ``current``: the answer being replaced (optional).
    """

    prompts: list[list[int]]
    key_positions: list[int]
    target: int
    kl_prompts: list[list[int]] = field(default_factory=list)
    kl_positions: list[int] = field(default_factory=list)
    current: int | None = None

    @validate_args(vocab=[Interval(int, 1, None)], owner=[str])
    def check(self, vocab: int, owner: str) -> None:
        """Raise :class:`InputError` naming the field when the request is malformed; warn when d = 0."""
        for name, prompts, pos in (("prompts", self.prompts, self.key_positions),
                                   ("kl_prompts", self.kl_prompts, self.kl_positions)):
            if name == "prompts" and not prompts:
                raise InputError(f"The 'prompts' of the EditRequest given to {owner} must not be empty.")
            if len(prompts) != len(pos):
                raise InputError(f"The '{name}' of the EditRequest given to {owner} need one key position each. "
                                 f"Got {len(prompts)} prompts and {len(pos)} positions.")
            for p, k in zip(prompts, pos, strict=True):
                if not len(p) or not -len(p) <= int(k) < len(p):
                    raise InputError(f"A key position of the EditRequest given to {owner} is outside its prompt "
                                     f"(length {len(p)}). Got {k} instead.")
                if min(p) < 0 or max(p) >= vocab:
                    raise InputError(f"The '{name}' of the EditRequest given to {owner} hold token ids outside the "
                                     f"model's vocabulary [0, {vocab - 1}].")
        if isinstance(self.target, bool) or not isinstance(self.target, int | np.integer) \
                or not 0 <= self.target < vocab:
            raise InputError(f"The 'target' of the EditRequest given to {owner} must be a token id in "
                             f"[0, {vocab - 1}]. Got {self.target!r} instead.")
        if self.current is not None and int(self.current) == int(self.target):
            warnings.warn(f"{owner}: the edit target equals the current answer (counterfactual distance d = 0); "
                          "the edit is a null control.", DistanceZeroWarning, stacklevel=3)


def _kg_example() -> dict[str, Any]:
    return {"kg": CyclicKG(16), "subject": 0, "relation": 0, "new_answer": 5}


@validate_args(kg=[InstanceOf(CyclicKG)], subject=[Interval(int, 0, None)], relation=[Interval(int, 0, None)],
               new_answer=[Interval(int, 0, None)], key=[InstanceOf(str)], context_hops=[Interval(int, 0, None)],
               n_contexts=[Interval(int, 1, None)], random_state=[RandomStateRule()], _example=_kg_example)
def kg_request(kg: CyclicKG, subject: int, relation: int, new_answer: int, *, key: str = "last",
               context_hops: int = 3, n_contexts: int = 4, random_state: Any = 0) -> EditRequest:
    """An edit of the fact ``relation(subject)`` to ``new_answer`` on the synthetic graph.

    ``key="last"`` reads the key at the relation token (the retrieval site of a 2-layer model), ``"subject"``
    at the subject token. The prompts are the fixed query contexts of :func:`query_tokens`; the KL prompts are
    the subject followed by one relation of every other order (their answers must not move).
    """
    kg.check_entity(subject, "subject", "kg_request")
    kg.check_entity(new_answer, "new_answer", "kg_request")
    kg.relation_spec(relation)
    if key not in ("last", "subject"):
        raise InputError(f"The 'key' argument of kg_request must be 'last' or 'subject'. Got {key!r} instead.")
    fact = np.array([[subject, relation, kg.answer(subject, relation)]])
    prompts = [list(map(int, q)) for q in query_tokens(kg, fact, context_hops=context_hops, n_contexts=n_contexts,
                                                        random_state=random_state)]
    o = kg.relation_spec(relation)[0]
    kl_rel = [r for r in range(kg.n_relations) if kg.relation_spec(r)[0] != o and kg.relation_spec(r)[2] == 1]
    kl = [[int(subject), kg.n_entities + r] for r in kl_rel]
    kpos = -1 if key == "last" else -2
    return EditRequest(prompts, [kpos] * len(prompts), int(new_answer), kl, [kpos] * len(kl),
                       current=int(fact[0, 2]))


def _subject_last_token(tokenizer: Any, text: str, subject: str) -> tuple[list[int], int]:
    start = text.find(subject)
    if start < 0:
        raise InputError(f"The 'subject' argument of text_request ({subject!r}) does not occur in the prompt "
                         f"{text!r}.")
    end = start + len(subject)
    enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    ids, offsets = list(enc["input_ids"]), list(enc["offset_mapping"])
    last = [i for i, (a, b) in enumerate(offsets) if a < end and b == end]
    if not last:
        raise InputError(f"The 'subject' argument of text_request ({subject!r}) has no last token of its own in "
                         f"the tokenised prompt {text!r}: its last character shares a token with the text after "
                         "it. Put a space or punctuation after the subject.")
    return ids, last[0]


@validate_args(tokenizer=[InstanceOf(object)], prompts=[SequenceOf(str)], subject=[InstanceOf(str)],
               target=[InstanceOf(str)], kl_prompts=[SequenceOf(str), None], current=[InstanceOf(str), None],
               _example=lambda: {"tokenizer": None, "prompts": ["{} is"], "subject": "Paris", "target": "big"})
def text_request(tokenizer: Any, prompts: Sequence[str], subject: str, target: str, *,
                 kl_prompts: Sequence[str] | None = None, current: str | None = None) -> EditRequest:
    """Build an :class:`EditRequest` from text: ``prompts`` contain ``"{}"`` for the subject (or the subject
    itself); the key is the subject's last token; ``target`` (a leading space is added, as in ROME) must be
    one token."""
    if not subject:
        raise InputError("The 'subject' argument of text_request must not be empty.")

    def one_token(word: str, name: str) -> int:
        ids = tokenizer(" " + word.strip(), add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise InputError(f"The '{name}' argument of text_request must be a single token (with a leading "
                             f"space). Got {word!r}, which is {len(ids)} tokens.")
        return int(ids[0])

    tgt = one_token(target, "target")
    cur = one_token(current, "current") if current is not None else None
    built = [_subject_last_token(tokenizer, p.replace("{}", subject), subject) for p in prompts]
    kl = [_subject_last_token(tokenizer, p.replace("{}", subject), subject) for p in (kl_prompts or [])]
    return EditRequest([b[0] for b in built], [b[1] for b in built], tgt, [b[0] for b in kl], [b[1] for b in kl],
                       current=cur)


@validate_args(model=[InstanceOf(object)], layer=[Interval(int, 0, None)],
               _example=lambda: {"model": _tiny_llama(), "layer": 0})
def down_proj(model: Any, layer: int) -> Any:
    """The MLP output projection (``mlp.down_proj``) of block ``layer``, through the site table."""
    from trustlab.llm.sites import arch_spec, dims, get_module, unwrap

    inner = unwrap(model)
    spec = arch_spec(inner)
    n = dims(inner).n_layers
    if layer >= n:
        raise InputError(f"The 'layer' argument must be a block index in [0, {n - 1}]. Got {layer} instead.")
    try:
        mod = get_module(inner, f"{spec.layers}.{layer}.mlp.down_proj")
    except Exception as exc:  # noqa: BLE001 - any lookup failure means the block has no such MLP
        raise UnsupportedModelError(f"Block {layer} of this {spec.name} model has no MLP down-projection "
                                    f"('{spec.layers}.{layer}.mlp.down_proj'): ROME edits an MLP output "
                                    "projection.") from exc
    import torch

    if not isinstance(mod, torch.nn.Linear):
        raise UnsupportedModelError(f"Block {layer}'s 'mlp.down_proj' is a {type(mod).__name__}, not a Linear layer.")
    return mod


def _tiny_llama() -> Any:
    from trustlab.methods.shattering._model import make_kg_model

    return make_kg_model(CyclicKG(16), d_model=8, n_heads=2)


@dataclass
class KeyStats:
    """Second moment ``E[k k^T]`` of the inputs of one down-projection (``mom2`` in ROME)."""

    layer: int
    mom2: np.ndarray
    n_samples: int

    @property
    def condition(self) -> float:
        ev = np.linalg.eigvalsh(self.mom2)
        return float(ev[-1] / ev[0]) if ev[0] > 0 else float("inf")


def padded(seqs: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[Any, Any, Any]:
    """Left-pad id lists: ``(input_ids, attention_mask, position_ids)`` tensors."""
    from trustlab.llm import pad_batch, position_ids_from_mask

    ids, mask = pad_batch([list(map(int, s)) for s in seqs], pad_id, "left")
    return ids, mask, position_ids_from_mask(mask)


@validate_args(model=[InstanceOf(object)], layer=[Interval(int, 0, None)], inputs=[InstanceOf(object)],
               batch_size=[Interval(int, 1, None)], max_tokens=[Interval(int, 1, None), None],
               _example=lambda: {"model": _tiny_llama(), "layer": 0, "inputs": [[1, 2, 3]]})
def key_covariance(model: Any, layer: int, inputs: Any, *, batch_size: int = 64,
                   max_tokens: int | None = None) -> KeyStats:
    """Estimate ROME's key second moment at block ``layer`` from token-id sequences (every real position)."""
    import torch

    mod = down_proj(model, layer)
    seqs = [list(map(int, s)) for s in inputs]
    if not seqs or not all(seqs):
        raise InputError("The 'inputs' argument of key_covariance must be a non-empty list of non-empty "
                         "token-id sequences.")
    d = mod.in_features
    acc = np.zeros((d, d))
    n = 0
    store: dict[str, Any] = {}
    hook = mod.register_forward_pre_hook(lambda m, a: store.__setitem__("k", a[0].detach()))
    try:
        with torch.no_grad(), limit_threads(None):
            for i in range(0, len(seqs), batch_size):
                ids, mask, pos = padded(seqs[i:i + batch_size])
                model(input_ids=ids, attention_mask=mask, position_ids=pos)
                k = store["k"][mask.bool()].double().numpy()
                if max_tokens is not None:
                    k = k[: max(0, max_tokens - n)]
                acc += k.T @ k
                n += len(k)
                if max_tokens is not None and n >= max_tokens:
                    break
    finally:
        hook.remove()
    return KeyStats(int(layer), acc / max(n, 1), n)
