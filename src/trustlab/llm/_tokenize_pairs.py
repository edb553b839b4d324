"""Tokenise (prompt, response) pairs for training: chat template, response masks, truncation, preferences.

The prompt (through the chat template by default) and the response are tokenised **separately** and the
ids concatenated, so a training sequence is exactly what the model sees when it generates the response
after the prompt. Whether tokenising the joined text would give the same prompt tokens (the prefix
property) is checked and recorded per row in ``boundary_merge``; a BPE merge across the boundary
therefore never shifts the response mask.

Sequences are stored right-padded; every consumer takes masks and rotary positions from the attention
mask, so :meth:`SequenceSet.padded` can hand out left-padded copies with identical results.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import Boolean, Interval, Options
from trustlab.core.exceptions import InputError
from trustlab.core.hashing import content_hash
from trustlab.core.optional import require
from trustlab.llm._argrules import ROWS, _row_indices
from trustlab.llm._batching import _pad_id, pad_batch
from trustlab.llm.rules import Tokenizer
from trustlab.llm.scoring import EncodedBatch, _chat_prompt

torch = require("torch", purpose="trustlab.llm training data")

__all__ = ["SequenceSet", "PreferencePairs", "tokenize_pairs", "tokenize_preferences"]


#: a [N, T] 0/1 (or bool) mask
_MASK_2D = ArrayLike(ndim=2, dtype="integer", low=0, high=1)


@dataclass(frozen=True)
class SequenceSet:
    """Tokenised sequences with a mask of the tokens a loss scores, right-padded.

    Attributes
    ----------
    input_ids : tensor [N, T] long
    attention_mask : tensor [N, T] long
    response_mask : tensor [N, T] bool
        True at response tokens (each is predicted from the tokens before it; never at position 0).
    prompt_len, response_len : ndarray [N]
        Token counts after truncation.
    boundary_merge : ndarray [N] bool
        True where tokenising prompt + response as one text gives different prompt tokens (a BPE merge
        across the boundary); the stored ids are the separately tokenised ones either way.
    prompt_truncated, response_truncated : ndarray [N] bool
    pad_id : int
    """

    input_ids: Any
    attention_mask: Any
    response_mask: Any
    prompt_len: np.ndarray
    response_len: np.ndarray
    boundary_merge: np.ndarray
    prompt_truncated: np.ndarray
    response_truncated: np.ndarray
    pad_id: int = 0
    _hash: list = field(default_factory=list, repr=False, compare=False)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @classmethod
    @validate_args(input_ids=[ArrayLike(ndim=2, dtype="integer", low=0)],
                   attention_mask=[_MASK_2D], response_mask=[_MASK_2D], pad_id=[Interval(int, 0, None)])
    def from_arrays(cls, input_ids: Any, attention_mask: Any, response_mask: Any, *, pad_id: int = 0) -> SequenceSet:
        """Build a set from padded arrays (either padding side); rows are re-packed right-padded.

        ``response_mask`` marks the scored tokens; each row needs at least one scored token after its
        first real token.
        """
        ids = torch.as_tensor(np.asarray(input_ids) if not isinstance(input_ids, torch.Tensor) else input_ids)
        att = torch.as_tensor(np.asarray(attention_mask) if not isinstance(attention_mask, torch.Tensor)
                              else attention_mask).bool()
        resp = torch.as_tensor(np.asarray(response_mask) if not isinstance(response_mask, torch.Tensor)
                               else response_mask).bool()
        if ids.ndim != 2 or att.shape != ids.shape or resp.shape != ids.shape or ids.shape[0] == 0:
            raise InputError(
                "SequenceSet.from_arrays needs input_ids, attention_mask and response_mask of one non-empty "
                f"[N, T] shape. Got {tuple(ids.shape)}, {tuple(att.shape)} and {tuple(resp.shape)}."
            )
        if ids.is_floating_point() or ids.dtype == torch.bool:
            raise InputError(f"The input_ids of SequenceSet.from_arrays must be integers. Got {ids.dtype}.")
        seqs, masks, plen = [], [], []
        for i in range(ids.shape[0]):
            keep = att[i]
            row, r = ids[i][keep].tolist(), resp[i][keep].tolist()
            r[:1] = [False] * min(1, len(r))
            if not any(r):
                raise InputError(
                    f"Row {i} passed to SequenceSet.from_arrays has no scored token after its first real token."
                )
            seqs.append(row)
            masks.append([int(x) for x in r])  # 0/1 rows: pad_batch takes integer rows, not bools
            plen.append(r.index(True))
        return _pack(seqs, masks, np.asarray(plen), pad_id=pad_id)

    @validate_args(side=[Options(("right", "left"))])
    def padded(self, side: str = "right") -> EncodedBatch:
        """The sequences as an :class:`~trustlab.llm.scoring.EncodedBatch`, padded on ``side``."""
        if side == "right":
            return EncodedBatch(self.input_ids, self.attention_mask, self.response_mask)
        seqs, masks = self._rows_as_lists()
        ids, att = pad_batch(seqs, self.pad_id, side)
        resp, _ = pad_batch(masks, 0, side)
        return EncodedBatch(ids, att, resp.bool())

    def _rows_as_lists(self) -> tuple[list[list[int]], list[list[int]]]:
        n = self.attention_mask.sum(1).tolist()
        return ([self.input_ids[i, :k].tolist() for i, k in enumerate(n)],
                [self.response_mask[i, :k].long().tolist() for i, k in enumerate(n)])

    @validate_args(rows=[ROWS])
    def subset(self, rows: Any) -> SequenceSet:
        """The set restricted to ``rows`` (indices), trimmed to its longest row."""
        idx = np.asarray(rows, dtype=np.int64).reshape(-1)
        if idx.size == 0 or idx.min() < 0 or idx.max() >= len(self):
            raise InputError(f"SequenceSet.subset rows must be indices in [0, {len(self) - 1}]. Got {idx.tolist()}.")
        t = torch.as_tensor(idx)
        width = int(self.attention_mask[t].sum(1).max())
        return SequenceSet(
            self.input_ids[t, :width], self.attention_mask[t, :width], self.response_mask[t, :width],
            self.prompt_len[idx], self.response_len[idx], self.boundary_merge[idx],
            self.prompt_truncated[idx], self.response_truncated[idx], self.pad_id,
        )

    def fingerprint(self) -> str:
        """Content hash of the real tokens and response masks (padding does not enter)."""
        if not self._hash:
            seqs, masks = self._rows_as_lists()
            self._hash.append(content_hash({"ids": [np.asarray(s, np.int64) for s in seqs],
                                            "resp": [np.asarray(m, np.int8) for m in masks]}))
        return self._hash[0]


def _pack(seqs: list[list[int]], masks: list[list[int]], plen: np.ndarray, *, pad_id: int,
          merge: np.ndarray | None = None, p_trunc: np.ndarray | None = None,
          r_trunc: np.ndarray | None = None) -> SequenceSet:
    n = len(seqs)
    ids, att = pad_batch(seqs, pad_id, "right")
    resp, _ = pad_batch(masks, 0, "right")  # callers pass 0/1 integer rows (pad_batch refuses bools)
    rlen = resp.sum(1).numpy().astype(np.int64)
    zeros = np.zeros(n, dtype=bool)
    return SequenceSet(ids, att, resp.bool(), np.asarray(plen, np.int64), rlen,
                       zeros.copy() if merge is None else merge, zeros.copy() if p_trunc is None else p_trunc,
                       zeros.copy() if r_trunc is None else r_trunc, int(pad_id))


@dataclass(frozen=True)
class PreferencePairs:
    """Tokenised preference pairs: rows ``0..n-1`` of ``sequences`` are the chosen responses and rows
    ``n..2n-1`` the rejected ones (pair ``i`` = rows ``i`` and ``n + i``).

    Attributes
    ----------
    sequences : SequenceSet
        ``2 * n_pairs`` rows.
    kept : ndarray [n_pairs]
        Index of each kept pair in the lists passed in (pairs with identical chosen and rejected
        responses are skipped with a warning).
    """

    sequences: SequenceSet
    kept: np.ndarray

    @property
    def n_pairs(self) -> int:
        return len(self.kept)

    def __len__(self) -> int:
        return self.n_pairs

    @takes_any(pairs="pair indices on the per-step path: checked in the body (integer indices in [0, n_pairs))")
    def rows(self, pairs: Any) -> tuple[np.ndarray, np.ndarray]:
        """Sequence rows ``(chosen, rejected)`` of the pair indices ``pairs``."""
        p = _row_indices(pairs, self.n_pairs, owner="PreferencePairs.rows", name="pairs", allow_empty=True)
        return p, p + self.n_pairs

    @validate_args(pairs=[ROWS])
    def subset(self, pairs: Any) -> PreferencePairs:
        """The pairs ``pairs`` (indices into ``0..n_pairs-1``) as a new set."""
        c = _row_indices(pairs, self.n_pairs, owner="PreferencePairs.subset", name="pairs")
        r = c + self.n_pairs
        return PreferencePairs(self.sequences.subset(np.concatenate([c, r])), self.kept[c])


def _prompt_texts(tokenizer: Any, prompts: Sequence[str], chat: bool, system: str | None) -> list[str]:
    return [_chat_prompt(tokenizer, p, system) if chat else p for p in prompts]


def _encode(tokenizer: Any, prompts: Sequence[str], responses: Sequence[str], *, chat: bool, system: str | None,
            add_eos: bool, max_length: int | None, max_prompt_length: int | None, owner: str,
            row_names: Sequence[str] | None = None) -> SequenceSet:
    if len(prompts) != len(responses):
        raise InputError(
            f"{owner} needs one response per prompt. Got {len(prompts)} prompts and {len(responses)} responses."
        )
    texts = _prompt_texts(tokenizer, prompts, chat, system)
    p_ids = tokenizer(list(texts), add_special_tokens=not chat)["input_ids"]
    r_ids = tokenizer(list(responses), add_special_tokens=False)["input_ids"]
    joint = tokenizer([t + r for t, r in zip(texts, responses)], add_special_tokens=not chat)["input_ids"]
    eos = tokenizer.eos_token_id
    seqs, masks, plen = [], [], []
    n = len(texts)
    merge, p_trunc, r_trunc = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    for i, (p, r, j) in enumerate(zip(p_ids, r_ids, joint)):
        name = row_names[i] if row_names is not None else f"pair {i}"
        p, r = list(p), list(r)
        merge[i] = list(j[: len(p)]) != p
        if not p:
            raise InputError(f"Prompt {i} has no tokens ({name} passed to {owner}); a response needs at least "
                             "one token before it.")
        if not r:
            raise InputError(
                f"Response {i} has no tokens ({name} passed to {owner}): it is empty after tokenisation "
                f"({responses[i]!r}); every response needs at least one token."
            )
        if add_eos:
            r.append(int(eos))
        if max_prompt_length is not None and len(p) > max_prompt_length:
            p, p_trunc[i] = p[-max_prompt_length:], True
        if max_length is not None and len(p) + len(r) > max_length:
            room = max_length - len(p)
            if room < 1:
                raise InputError(
                    f"The response of {name} passed to {owner} is truncated away: its prompt has {len(p)} "
                    f"tokens and max_length is {max_length}. Raise max_length or set max_prompt_length "
                    f"below {max_length}."
                )
            r, r_trunc[i] = r[:room], True
        seqs.append(p + r)
        masks.append([0] * len(p) + [1] * len(r))
        plen.append(len(p))
    return _pack(seqs, masks, np.asarray(plen), pad_id=_pad_id(None, tokenizer), merge=merge,
                 p_trunc=p_trunc, r_trunc=r_trunc)


_TOKENIZE_RULES = dict(
    tokenizer=[Tokenizer()],
    prompts=[SequenceOf(str)],
    chat=[Boolean()],
    system=[str, None],
    add_eos=[Boolean()],
    max_length=[Interval(int, 2, None), None],
    max_prompt_length=[Interval(int, 1, None), None],
)


def _tok_example() -> dict[str, Any]:
    from trustlab.llm.loading import load_tokenizer

    return {"tokenizer": load_tokenizer()}


@validate_args(_example=_tok_example, responses=[SequenceOf(str)], **_TOKENIZE_RULES)
def tokenize_pairs(
    tokenizer: Any,
    prompts: Sequence[str],
    responses: Sequence[str],
    *,
    chat: bool = True,
    system: str | None = None,
    add_eos: bool = True,
    max_length: int | None = None,
    max_prompt_length: int | None = None,
) -> SequenceSet:
    """Tokenise (prompt, response) pairs into a :class:`SequenceSet` with a response mask.

    Parameters
    ----------
    tokenizer : HF tokenizer
    prompts, responses : list of str
        One response per prompt.
    chat : bool, default=True
        Render each prompt as a user turn through the tokenizer's chat template (with the generation
        prompt), as :func:`trustlab.llm.generate` does; False tokenises the raw prompt (with the
        tokenizer's own special tokens, e.g. BOS).
    system : str, optional
        System message for the chat template (SmolLM2's template inserts its default one otherwise).
    add_eos : bool, default=True
        Append the EOS token (``<|im_end|>`` for SmolLM2) to each response, so the model learns to stop.
    max_length : int, optional
        Longest sequence; longer ones lose the end of their response. A response cut to nothing is an
        error.
    max_prompt_length : int, optional
        Longest prompt; longer prompts keep their last tokens (the end of the template).

    Returns
    -------
    SequenceSet

    Raises
    ------
    InputError
        For a response with no tokens, a response truncated away, or mismatched list lengths.

    Examples
    --------
    >>> from trustlab.llm import tiny_random_llama
    >>> _, tok = tiny_random_llama()
    >>> s = tokenize_pairs(tok, ["What is 2 + 2?"], ["4"])
    >>> int(s.response_len[0])  # '4' and the EOS token
    2
    """
    return _encode(tokenizer, prompts, responses, chat=chat, system=system, add_eos=add_eos,
                   max_length=max_length, max_prompt_length=max_prompt_length, owner="tokenize_pairs")


@validate_args(_example=_tok_example, chosen=[SequenceOf(str)], rejected=[SequenceOf(str)], **_TOKENIZE_RULES)
def tokenize_preferences(
    tokenizer: Any,
    prompts: Sequence[str],
    chosen: Sequence[str],
    rejected: Sequence[str],
    *,
    chat: bool = True,
    system: str | None = None,
    add_eos: bool = True,
    max_length: int | None = None,
    max_prompt_length: int | None = None,
) -> PreferencePairs:
    """Tokenise preference triples (prompt, chosen, rejected) into :class:`PreferencePairs`.

    Same options as :func:`tokenize_pairs`. A pair whose chosen and rejected responses are identical
    (as text, or as tokens after truncation) carries no preference: it is skipped with a warning.

    Examples
    --------
    >>> from trustlab.llm import tiny_random_llama
    >>> _, tok = tiny_random_llama()
    >>> p = tokenize_preferences(tok, ["2 + 2?"], ["4"], ["5"])
    >>> p.n_pairs, len(p.sequences)
    (1, 2)
    """
    n = len(prompts)
    if not len(chosen) == len(rejected) == n:
        raise InputError(
            "tokenize_preferences needs one chosen and one rejected response per prompt. Got "
            f"{n} prompts, {len(chosen)} chosen and {len(rejected)} rejected."
        )
    names = [f"pair {i}" for i in range(n)]
    kw = dict(chat=chat, system=system, add_eos=add_eos, max_length=max_length,
              max_prompt_length=max_prompt_length, owner="tokenize_preferences")
    c = _encode(tokenizer, prompts, chosen, row_names=[f"{s} (chosen)" for s in names], **kw)
    r = _encode(tokenizer, prompts, rejected, row_names=[f"{s} (rejected)" for s in names], **kw)
    cs, _ = c._rows_as_lists()
    rs, _ = r._rows_as_lists()
    same = [i for i in range(n) if chosen[i] == rejected[i] or cs[i] == rs[i]]
    if same:
        warnings.warn(
            f"tokenize_preferences skipped {len(same)} pair(s) whose chosen and rejected responses are "
            f"identical (pairs {same[:10]}{'...' if len(same) > 10 else ''}): they carry no preference.",
            UserWarning,
            stacklevel=3,
        )
    kept = np.asarray([i for i in range(n) if i not in set(same)], dtype=np.int64)
    if kept.size == 0:
        raise InputError("tokenize_preferences: every pair has identical chosen and rejected responses.")
    both = _concat(c.subset(kept), r.subset(kept))
    return PreferencePairs(both, kept)


def _concat(a: SequenceSet, b: SequenceSet) -> SequenceSet:
    sa, ma = a._rows_as_lists()
    sb, mb = b._rows_as_lists()
    cat = np.concatenate
    return _pack(sa + sb, ma + mb, cat([a.prompt_len, b.prompt_len]), pad_id=a.pad_id,
                 merge=cat([a.boundary_merge, b.boundary_merge]),
                 p_trunc=cat([a.prompt_truncated, b.prompt_truncated]),
                 r_trunc=cat([a.response_truncated, b.response_truncated]))
