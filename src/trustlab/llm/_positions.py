"""Padding and position bookkeeping, all derived from the attention mask (either padding side)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import Boolean, Interval, Options, Satisfies
from trustlab.core.exceptions import ConfigError
from trustlab.core.optional import require
from trustlab.llm.rules import MASK, _is_ids_row

_ID_ROW = Satisfies(_is_ids_row, "a sequence of integer token ids", invalid=["abc", 1.5], valid=[1, 2])
_MASK_ONLY = [m for m in MASK if m is not None]

torch = require("torch", purpose="trustlab.llm")

__all__ = ["last_positions", "pad_batch", "position_ids_from_mask", "valid_positions"]


@validate_args(seqs=[SequenceOf(_ID_ROW)], pad_id=[Interval(int, 0, None)], side=[Options(("right", "left"))])
def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int, side: str = "right") -> tuple[Any, Any]:
    """Pad id lists into ``(input_ids [B, T], attention_mask [B, T])`` long tensors.

    Example
    -------
    >>> ids, mask = pad_batch([[5, 6, 7], [8]], pad_id=0, side="left")
    >>> ids.tolist(), mask.tolist()
    ([[5, 6, 7], [0, 0, 8]], [[1, 1, 1], [0, 0, 1]])
    """
    if side not in ("left", "right"):
        raise ConfigError(f"The padding side must be 'left' or 'right'. Got {side!r} instead.")
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), int(pad_id), dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        sl = slice(width - len(s), width) if side == "left" else slice(0, len(s))
        ids[i, sl] = torch.as_tensor(list(s), dtype=torch.long)
        mask[i, sl] = 1
    return ids, mask


@validate_args(attention_mask=_MASK_ONLY)
def position_ids_from_mask(attention_mask: Any) -> Any:
    """Position ids counting real tokens only (0 at each row's first real token; pads get 0).

    With these, a left-padded row gets the same rotary positions as the unpadded sequence.

    Example
    -------
    >>> import torch
    >>> position_ids_from_mask(torch.tensor([[0, 1, 1], [1, 1, 1]])).tolist()
    [[0, 0, 1], [0, 1, 2]]
    """
    mask = torch.as_tensor(attention_mask).long()
    return (mask.cumsum(-1) - 1).clamp(min=0)


@validate_args(attention_mask=_MASK_ONLY)
def last_positions(attention_mask: Any) -> Any:
    """Index of each row's last real token (works for left and right padding).

    Example
    -------
    >>> import torch
    >>> last_positions(torch.tensor([[1, 1, 0], [0, 1, 1]])).tolist()
    [1, 2]
    """
    mask = torch.as_tensor(attention_mask).long()
    ar = torch.arange(mask.shape[-1], device=mask.device)
    return (mask * (ar + 1)).argmax(-1)


def first_positions(attention_mask: Any) -> Any:
    """Index of each row's first real token."""
    mask = torch.as_tensor(attention_mask).long()
    return mask.argmax(-1)


@validate_args(attention_mask=_MASK_ONLY, skip_first=[Boolean()])
def valid_positions(attention_mask: Any, skip_first: bool = True) -> Any:
    """Bool mask of positions that statistics should use: real tokens, minus each row's first token.

    Rows with a single real token keep it (there is nothing else to use).

    Example
    -------
    >>> import torch
    >>> valid_positions(torch.tensor([[0, 1, 1, 1], [1, 0, 0, 0]])).tolist()
    [[False, False, True, True], [True, False, False, False]]
    """
    mask = torch.as_tensor(attention_mask).bool()
    if not skip_first:
        return mask.clone()
    out = mask.clone()
    rows = torch.arange(mask.shape[0], device=mask.device)
    multi = mask.sum(-1) > 1
    out[rows[multi], first_positions(mask)[multi]] = False
    return out


def _pad_id(model: Any, tokenizer: Any) -> int:
    """Padding id: the tokenizer's pad token, else the model config's pad then EOS token, else the
    tokenizer's EOS token, else 0. ``model=None`` (tokenising without a model) skips the config."""
    tok = tokenizer if tokenizer is not None else getattr(model, "trustlab_tokenizer", None)
    config = getattr(model, "config", None)
    for cand in (
        getattr(tok, "pad_token_id", None),
        getattr(config, "pad_token_id", None),
        getattr(config, "eos_token_id", None),
        getattr(tok, "eos_token_id", None),
    ):
        if isinstance(cand, list | tuple) and cand:
            cand = cand[0]
        if isinstance(cand, int):
            return cand
    return 0
