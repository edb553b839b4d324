"""Tokenising, padding and position bookkeeping, and ``collect``: activations over a corpus as numpy arrays.

Padding may be on either side: everything is derived from the attention mask. Statistics (``"mean"``,
``"all"``) skip pads and, by default, the first real token of each sequence (SmolLM2's first-token
residual norm reaches ~25k against ~50-700 elsewhere, so it would dominate any pooled statistic).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import Boolean, InstanceOf, Interval, Options
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.optional import require
from trustlab.llm._argrules import ROW_MASKS
from trustlab.llm._positions import (  # noqa: F401  (re-exported: callers import them from here)
    _pad_id,
    first_positions,
    last_positions,
    pad_batch,
    position_ids_from_mask,
    valid_positions,
)
from trustlab.llm.rules import (
    MASK,
    POSITIVE_INT,
    SITES,
    TEXTS_OR_IDS,
    LanguageModel,
    Tokenizer,
    check_token_ids,
)
from trustlab.llm.sites import dims, model_device, resolve_sites, unwrap

torch = require("torch", purpose="trustlab.llm")

__all__ = ["Activations", "collect", "encode_texts", "head_means"]


def _tokenizer_of(model: Any, tokenizer: Any, owner: str) -> Any:
    tok = tokenizer if tokenizer is not None else getattr(unwrap(model), "trustlab_tokenizer", None)
    if tok is None:
        raise ConfigError(
            f"{owner} got texts but no tokenizer. Pass tokenizer=... (load_model returns one) or token ids."
        )
    return tok


@validate_args(texts=[TEXTS_OR_IDS], model=[LanguageModel(), None], tokenizer=[Tokenizer(), None],
               owner=[InstanceOf(str)], attention_mask=MASK, n_ctx=[POSITIVE_INT, None],
               add_special_tokens=[Boolean()])
def encode_texts(
    texts: Any,
    *,
    model: Any = None,
    tokenizer: Any = None,
    owner: str = "collect",
    attention_mask: Any = None,
    n_ctx: int | None = None,
    add_special_tokens: bool = True,
) -> list[list[int]]:
    """Normalise texts or token ids to a list of unpadded id lists, validating them.

    Accepts a list of str (tokenised with the tokenizer's own special tokens, e.g. Gemma's BOS; SmolLM2
    adds none), a list of id sequences, or a 2-d tensor/array of ids with an optional ``attention_mask``
    (padding is stripped).

    Raises
    ------
    InputError
        For an empty input, an empty sequence, non-integer ids, or a sequence longer than the context.

    Example
    -------
    >>> encode_texts([[1, 2, 3], [4, 5]])
    [[1, 2, 3], [4, 5]]
    """
    if isinstance(texts, str):
        texts = [texts]
    if isinstance(texts, np.ndarray | torch.Tensor):
        seqs = _ids_from_array(texts, attention_mask, owner)
    else:
        seqs = _ids_from_items(texts, model, tokenizer, owner, add_special_tokens)
    if len(seqs) == 0:
        raise InputError(f"{owner} needs at least one text or token-id sequence. Got an empty list instead.")
    if model is not None:
        check_token_ids(model, seqs, owner=owner, name="texts" if owner == "encode_texts" else "inputs")
    if n_ctx is None and model is not None:
        n_ctx = dims(model).n_ctx
    _check_lengths(seqs, n_ctx, owner)
    return [list(s) for s in seqs]


def _ids_from_array(texts: Any, attention_mask: Any, owner: str) -> list[list[int]]:
    """Id rows from a 1-d/2-d integer tensor or array, padding stripped by ``attention_mask``."""
    arr = torch.as_tensor(texts)
    if arr.is_floating_point() or arr.dtype == torch.bool or arr.is_complex():
        raise InputError(
            f"The token ids passed to {owner} must be integers. Got dtype {arr.dtype} instead; "
            "pass tokenizer ids (torch.long)."
        )
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2:
        raise InputError(
            f"The token ids passed to {owner} must be 1-d or 2-d. Got shape {tuple(arr.shape)}."
        )
    if attention_mask is None:
        return arr.tolist()
    mask = torch.as_tensor(attention_mask).bool()
    if mask.shape != arr.shape:
        raise InputError(
            f"The attention_mask passed to {owner} must have the ids' shape {tuple(arr.shape)}. "
            f"Got {tuple(mask.shape)} instead."
        )
    return [row[m].tolist() for row, m in zip(arr, mask)]


def _ids_from_items(texts: Any, model: Any, tokenizer: Any, owner: str, add_special_tokens: bool) -> list:
    """Id rows from a list of texts (tokenised) or of 1-d integer id sequences."""
    try:
        items = list(texts)
    except TypeError as exc:
        raise InputError(
            f"{owner} needs a list of texts or token-id sequences. Got {type(texts).__name__} instead."
        ) from exc
    if items and all(isinstance(t, str) for t in items):
        tok = _tokenizer_of(model, tokenizer, owner)
        return tok(items, add_special_tokens=add_special_tokens)["input_ids"]
    seqs = []
    for i, s in enumerate(items):
        if isinstance(s, str):
            raise InputError(f"{owner} got a mix of texts and token ids (item {i} is a str).")
        a = np.asarray(s.cpu() if isinstance(s, torch.Tensor) else s)
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise InputError(
                f"Item {i} passed to {owner} must be a 1-d sequence of integer token ids. "
                f"Got dtype {a.dtype} and shape {a.shape} instead."
            )
        seqs.append([int(x) for x in a])
    return seqs


def _check_lengths(seqs: Sequence[Sequence[int]], n_ctx: int | None, owner: str) -> None:
    for i, s in enumerate(seqs):
        if len(s) == 0:
            raise InputError(f"Item {i} passed to {owner} has no tokens. Remove empty texts.")
        if n_ctx and len(s) > n_ctx:
            raise InputError(
                f"Item {i} passed to {owner} has {len(s)} tokens, more than the model's context of {n_ctx}. "
                "Truncate or split it."
            )


class Activations(dict):
    """``collect`` output: site -> float32 array; ``index`` maps rows to (example, token position).

    ``index`` is None for one row per example (``"last"``, ``"mean"``); for ``"all"`` or a mask it is an
    int array ``[n_rows, 2]`` of (example index, position in the unpadded sequence).
    """

    index: np.ndarray | None = None


def _user_mask(positions: Any, seqs: list[list[int]]) -> list[np.ndarray]:
    if isinstance(positions, np.ndarray | torch.Tensor) and np.asarray(positions).ndim == 2:
        rows = [np.asarray(r, dtype=bool) for r in np.asarray(positions)]
    else:
        rows = [np.asarray(r, dtype=bool) for r in positions]
    if len(rows) != len(seqs):
        raise InputError(f"The 'positions' mask of collect has {len(rows)} rows for {len(seqs)} inputs.")
    out = []
    for i, (r, s) in enumerate(zip(rows, seqs)):
        if r.ndim != 1 or r.shape[0] < len(s) or r[len(s) :].any():
            raise InputError(
                f"Row {i} of the 'positions' mask must be a 1-d bool array over the {len(s)} tokens of item {i} "
                f"(longer rows may only be False-padded). Got shape {r.shape}."
            )
        out.append(r[: len(s)])
    return out


def _select(act: Any, how: Any, mask: Any, valid: Any, sel: Any) -> Any:
    """Reduce a captured [B, T, ...] activation according to ``how``."""
    mask, valid = mask.to(act.device), valid.to(act.device)
    sel = sel.to(act.device) if sel is not None else None
    if how == "last":
        return act[torch.arange(act.shape[0]), last_positions(mask)]
    if how == "mean":
        w = valid.to(act.dtype).reshape(*valid.shape, *([1] * (act.ndim - 2)))
        return (act * w).sum(1) / w.sum(1).clamp(min=1)
    return act[sel]


@validate_args(model=[LanguageModel()], inputs=[TEXTS_OR_IDS], sites=SITES,
               positions=[Options(("last", "mean", "all")), ROW_MASKS],
               batch_size=[POSITIVE_INT], tokenizer=[Tokenizer(), None], attention_mask=MASK,
               stop_after=[Interval(int, 0, None), Options(("auto",)), None], skip_first=[Boolean()],
               padding_side=[Options(("right", "left"))], progress=[Boolean()])
def collect(
    model: Any,
    inputs: Any,
    sites: str | Sequence[str],
    *,
    positions: Any = "last",
    batch_size: int = 16,
    tokenizer: Any = None,
    attention_mask: Any = None,
    stop_after: int | str | None = "auto",
    skip_first: bool = True,
    padding_side: str = "right",
    progress: bool = True,
) -> Activations:
    """Run ``model`` over many inputs in chunks and return activations at ``sites`` as float32 arrays.

    Parameters
    ----------
    inputs : list of str, list of id sequences, or 2-d ids (+ ``attention_mask``)
    sites : str or sequence of str
        Canonical sites (not ``pattern``).
    positions : {"last", "mean", "all"} or bool mask, default="last"
        ``"last"``: the last real token -> ``[N, ...]``. ``"mean"``: mean over real tokens except the first
        -> ``[N, ...]``. ``"all"``: every real token except the first, stacked -> ``[n_rows, ...]``.
        A mask (one bool row per input over its unpadded tokens): those tokens, stacked.
    batch_size : int, default=16
    stop_after : int, "auto" or None, default="auto"
        Skip blocks after the last one the sites need.
    skip_first : bool, default=True
        Drop each sequence's first real token from ``"mean"`` and ``"all"``.
    padding_side : {"right", "left"}
        Results do not depend on it (rotary positions come from the mask).
    progress : bool
        Show a tqdm bar.

    Returns
    -------
    Activations
        A dict site -> float32 array (``head_out``: ``[..., n_heads, d_head]``), with ``.index``.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> acts = collect(model, ["a cat", "the dog ran"], ["blocks.1.resid_post"], progress=False)
    >>> acts["blocks.1.resid_post"].shape
    (2, 72)
    """
    from tqdm.auto import tqdm

    inner = unwrap(model)
    site_objs = _collect_sites(inner, sites, batch_size)
    seqs = encode_texts(inputs, model=inner, tokenizer=tokenizer, attention_mask=attention_mask)
    how, user_rows = _positions_rule(positions, seqs)
    names = [s.name for s in site_objs]
    pad_id = _pad_id(inner, tokenizer)
    order = np.argsort([-len(s) for s in seqs], kind="stable")
    chunks: dict[str, list[np.ndarray]] = {n: [] for n in names}
    idx_chunks: list[np.ndarray] = []
    need_logits = any(s.kind == "logits" for s in site_objs)
    bar = tqdm(total=len(seqs), desc="collect", unit="seq", disable=not progress, leave=False)
    try:
        for start in range(0, len(seqs), batch_size):
            rows = order[start : start + batch_size]
            ids, mask = pad_batch([seqs[r] for r in rows], pad_id, padding_side)
            valid = valid_positions(mask, skip_first)
            sel = _selection(how, rows, mask, valid, user_rows)
            tr = _run_batch(model, inner, names, ids, mask, need_logits, stop_after)
            for n in names:
                chunks[n].append(_pooled(tr[n], n, ids, how, mask, valid, sel))
            if sel is not None:
                b, p = torch.nonzero(sel, as_tuple=True)
                first = first_positions(mask)
                idx_chunks.append(np.stack([rows[b.numpy()], (p - first[b]).numpy()], axis=1))
            bar.update(len(rows))
    finally:
        bar.close()
    return _assemble(how, names, chunks, idx_chunks, order)


def _collect_sites(inner: Any, sites: Any, batch_size: Any) -> list:
    """The canonical sites ``collect`` can pool, or a clear error."""
    site_objs = resolve_sites(inner, sites)
    if not site_objs:
        raise InputError("collect needs at least one site. Got an empty list instead.")
    if any(s.kind == "pattern" for s in site_objs):
        raise ConfigError("collect does not pool attention patterns; capture 'pattern' sites with trace().")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer) or batch_size < 1:
        raise ConfigError(
            f"The 'batch_size' argument of collect must be an int >= 1. Got {batch_size!r} instead."
        )
    return site_objs


def _positions_rule(positions: Any, seqs: list[list[int]]) -> tuple[str, Any]:
    """``(how, user mask rows)``: how is "last", "mean", "all" or "mask" (then the rows are checked)."""
    if isinstance(positions, str):
        if positions not in ("last", "mean", "all"):
            raise ConfigError(
                "The 'positions' argument of collect must be 'last', 'mean', 'all' or a bool mask. "
                f"Got {positions!r} instead."
            )
        return positions, None
    return "mask", _user_mask(positions, seqs)


def _selection(how: str, rows: Any, mask: Any, valid: Any, user_rows: Any) -> Any:
    """Bool ``[B, T]`` of the token positions to stack (``"all"``/``"mask"``), else None."""
    if how == "all":
        return valid
    if how != "mask":
        return None
    sel = torch.zeros_like(mask, dtype=torch.bool)
    first = first_positions(mask)
    for j, r in enumerate(rows):
        pos = np.nonzero(user_rows[r])[0]
        sel[j, first[j] + torch.as_tensor(pos, dtype=torch.long)] = True
    return sel


def _run_batch(model: Any, inner: Any, names: list[str], ids: Any, mask: Any, need_logits: bool,
               stop_after: Any) -> Any:
    """One traced forward pass over a padded batch; returns the trace."""
    from trustlab.llm.hooks import trace

    dev = model_device(inner)
    kwargs: dict[str, Any] = {
        "attention_mask": mask.to(dev),
        "position_ids": position_ids_from_mask(mask).to(dev),
        "use_cache": False,
    }
    if not need_logits:
        kwargs["logits_to_keep"] = 1
    with torch.no_grad(), trace(model, names, stop_after=stop_after) as tr:
        tr.run(ids.to(dev), **kwargs)
    return tr


def _pooled(act: Any, name: str, ids: Any, how: str, mask: Any, valid: Any, sel: Any) -> np.ndarray:
    if name == "logits" and act.shape[1] != ids.shape[1]:
        raise ConfigError("collect could not capture full-length logits.")
    return _select(act, how, mask, valid, sel).float().cpu().numpy()


def _assemble(how: str, names: list[str], chunks: dict, idx_chunks: list, order: Any) -> Activations:
    """Put the batches' rows back in input order (and, for stacked tokens, sort the index)."""
    out = Activations()
    if how in ("last", "mean"):
        inv = np.empty_like(order)
        inv[order] = np.arange(len(order))
        for n in names:
            out[n] = np.concatenate(chunks[n], axis=0)[inv]
        return out
    index = np.concatenate(idx_chunks, axis=0) if idx_chunks else np.zeros((0, 2), dtype=np.int64)
    reorder = np.lexsort((index[:, 1], index[:, 0]))
    for n in names:
        out[n] = np.concatenate(chunks[n], axis=0)[reorder]
    out.index = index[reorder].astype(np.int64)
    return out


@validate_args(model=[LanguageModel()], inputs=[TEXTS_OR_IDS], layers=[SequenceOf(Interval(int, 0, None)), None],
               batch_size=[POSITIVE_INT], tokenizer=[Tokenizer(), None], skip_first=[Boolean()], progress=[Boolean()])
def head_means(
    model: Any,
    inputs: Any,
    *,
    layers: Sequence[int] | None = None,
    batch_size: int = 16,
    tokenizer: Any = None,
    skip_first: bool = True,
    progress: bool = False,
) -> dict[int, np.ndarray]:
    """Mean ``head_out`` per layer over all valid tokens of ``inputs`` (for mean ablation).

    Returns a dict layer -> float32 array ``[n_heads, d_head]``; the token-weighted mean over real
    tokens, skipping each sequence's first token.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> m = head_means(model, ["a b c", "d e"], layers=[1])
    >>> m[1].shape
    (9, 8)
    """
    n_layers = dims(model).n_layers
    layers = list(range(n_layers)) if layers is None else list(layers)
    sites = [f"blocks.{layer}.head_out" for layer in layers]
    acts = collect(
        model,
        inputs,
        sites,
        positions="all",
        batch_size=batch_size,
        tokenizer=tokenizer,
        skip_first=skip_first,
        progress=progress,
    )
    return {layer: acts[s].mean(axis=0) for layer, s in zip(layers, sites)}
