"""Dialogues -> per-token residual-stream activations of their detection masks (via ``trustlab.llm.collect``).

Dialogues of one call that render to the same token ids (e.g. an instructed pair and the same statement
with another detection mask) are run once, on the union of their masks, and each gets its own tokens back.
With ``cache_dir`` the activations are also stored on disk, one entry per (model fingerprint, layer,
tokenised dialogues), so a second script on the same model and dialogues reads them instead of running
the model again (see :func:`trustlab.llm.cached_arrays`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from trustlab.core.constraints import Interval, validate_value
from trustlab.core.exceptions import InputError, UnknownNameError
from trustlab.core.hashing import content_hash
from trustlab.methods.deception._dialogue import Dialogue, TokenizedDialogues, _is_padding, tokenize_dialogues
from trustlab.methods.deception._probe import DialogueActivations

__all__ = ["ActivationExtractor"]

#: bump when what is stored for a key changes
_FORMAT = 1


def _layer_site(layer: int, n_layers: int) -> str:
    """The hook site holding ``hidden_states[layer]``: ``blocks.{layer}.resid_pre`` (layer < n_layers) or
    the last block's ``resid_post`` (layer == n_layers)."""
    if isinstance(layer, bool) or not isinstance(layer, int | np.integer) or not 0 <= layer <= n_layers:
        raise UnknownNameError(
            f"Unknown layer {layer!r}: hidden_states has indices 0..{n_layers} for this model ({n_layers} blocks)."
        )
    return f"blocks.{int(layer)}.resid_pre" if layer < n_layers else f"blocks.{n_layers - 1}.resid_post"


class ActivationExtractor:
    """Turn dialogues into :class:`DialogueActivations` for a set of layers, cached in memory and optionally on disk.

    Parameters
    ----------
    model, tokenizer
        Any causal LM supported by :mod:`trustlab.llm` (``load_model(...)``, your own HF folder, or
        ``tiny_random_llama`` in tests), on any device.
    layers : int or sequence of int
        Indices into ``hidden_states``; only blocks up to the deepest one are run.
    padding : (int, int)
        Extra tokens around the detected messages (left, right).
    batch_size : int
    cache_dir : path or True, optional
        Store and reuse activations on disk: a folder, or True for ``trustlab.llm.cache_root()``. The key of an
        entry is (model fingerprint, layer, hash of the tokenised dialogues and masks), so another model,
        a fine-tuned copy, another tokenizer or other dialogues never read a stale entry. Labels and meta
        are not part of the key (they do not change activations). Default: nothing is written.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> from trustlab.methods.deception import Dialogue, Message
    >>> model, tok = tiny_random_llama()
    >>> ex = ActivationExtractor(model, tok, layers=[1])
    >>> acts = ex([Dialogue([Message("user", "Hi"), Message("assistant", "Hello there.", detect=True)])])
    >>> acts.acts[1].shape[1]
    72
    """

    def __init__(self, model: Any, tokenizer: Any, *, layers: int | Sequence[int], padding: tuple[int, int] = (0, 0),
                 batch_size: int = 16, cache_dir: str | os.PathLike[str] | bool | None = None) -> None:
        from trustlab.llm import dims

        owner = "ActivationExtractor"
        validate_value(owner, "batch_size", batch_size, [Interval(int, 1, None)])
        if not _is_padding(padding):
            raise InputError(f"The 'padding' parameter of {owner} must be a pair of ints >= 0 (left, right). "
                             f"Got {padding!r} instead.")
        if not (cache_dir is None or cache_dir is True or isinstance(cache_dir, str | os.PathLike)):
            raise InputError(f"The 'cache_dir' parameter of {owner} must be None, True or a folder path. "
                             f"Got {cache_dir!r} instead.")
        self.model, self.tokenizer = model, tokenizer
        d = dims(model)
        self.n_layers, self.n_ctx = d.n_layers, d.n_ctx
        self.layers = [int(layers)] if isinstance(layers, int | np.integer) else sorted({int(x) for x in layers})
        if not self.layers:
            raise InputError(f"The 'layers' parameter of {owner} needs at least one layer. Got none.")
        self.sites = {layer: _layer_site(layer, self.n_layers) for layer in self.layers}
        self.padding = tuple(padding)
        self.batch_size = batch_size
        self.cache_dir = cache_dir
        self._cache: dict[str, DialogueActivations] = {}
        #: per call: which layers were read from the disk cache
        self.last_hits: dict[int, bool] = {}

    def __call__(self, dialogues: Sequence[Dialogue], *, key: str | None = None,
                 progress: bool = False) -> DialogueActivations:
        """Activations of ``dialogues`` (kept in memory under ``key`` when given)."""
        if key is not None and key in self._cache:
            return self._cache[key]
        dialogues = list(dialogues)
        td = tokenize_dialogues(self.tokenizer, dialogues, padding=self.padding, n_ctx=self.n_ctx)
        uniq, owner = _unique_sequences(td)
        acts, groups = self._activations(uniq, progress)
        if owner is not None:
            rows = _own_rows(td, uniq, owner, np.asarray(groups))
            acts, groups = {la: a[rows] for la, a in acts.items()}, np.repeat(np.arange(len(td)), td.n_detected)
        labels = np.array([d.label for d in dialogues], dtype=object)
        out = DialogueActivations(acts, groups, labels, [dict(d.meta) for d in dialogues])
        if len(out) != len(dialogues) or np.any(out.n_tokens != td.n_detected):
            raise InputError("Some detected tokens were not captured (internal error in the detection masks).")
        if key is not None:
            self._cache[key] = out
        return out

    def _collect(self, td: TokenizedDialogues, layers: list[int], progress: bool) -> tuple[dict[int, Any], Any]:
        from trustlab.llm import collect

        raw = collect(self.model, td.input_ids, [self.sites[la] for la in layers], positions=td.masks,
                      batch_size=self.batch_size, tokenizer=self.tokenizer, skip_first=True, progress=progress)
        return {la: np.asarray(raw[self.sites[la]], dtype=np.float32) for la in layers}, raw.index[:, 0]

    def _activations(self, td: TokenizedDialogues, progress: bool) -> tuple[dict[int, np.ndarray], np.ndarray]:
        if self.cache_dir is None:
            acts, groups = self._collect(td, self.layers, progress)
            self.last_hits = dict.fromkeys(self.layers, False)
            return acts, groups
        from trustlab.llm import cached_arrays, model_fingerprint

        fingerprint = model_fingerprint(self.model)
        tokens = content_hash([list(map(int, ids)) for ids in td.input_ids], [m.astype(np.uint8) for m in td.masks])
        keys = {la: {"format": _FORMAT, "model": fingerprint, "layer": la, "site": self.sites[la], "tokens": tokens}
                for la in self.layers}
        done: dict[int, dict[str, np.ndarray]] = {}
        for layer in self.layers:  # read what is stored; _Missing stops a build before anything is written
            try:
                done[layer], _ = cached_arrays(keys[layer], _missing, cache_dir=self.cache_dir, kind="activations")
            except _Missing:
                pass
        self.last_hits = {la: la in done for la in self.layers}
        missing = [la for la in self.layers if la not in done]
        if missing:  # one model pass for every layer not stored yet
            acts, groups = self._collect(td, missing, progress)
            for la in missing:
                arrays = {"acts": acts[la], "dialogue": np.asarray(groups, dtype=np.int64)}
                done[la], _ = cached_arrays(keys[la], lambda a=arrays: a, cache_dir=self.cache_dir,
                                            kind="activations")
        return {la: done[la]["acts"] for la in self.layers}, done[self.layers[0]]["dialogue"]


def _unique_sequences(td: TokenizedDialogues) -> tuple[TokenizedDialogues, list[int] | None]:
    """One entry per distinct token sequence, its mask the union of its dialogues' masks; ``owner[i]`` is the
    entry of dialogue ``i`` (None when every sequence is distinct)."""
    first: dict[tuple[int, ...], int] = {}
    owner = [first.setdefault(tuple(ids), len(first)) for ids in td.input_ids]
    if len(first) == len(td):
        return td, None
    ids: list[list[int]] = [[] for _ in first]
    masks: list[np.ndarray] = [np.zeros(0, bool) for _ in first]
    texts = [""] * len(first)
    for i, u in enumerate(owner):
        if masks[u].size:
            masks[u] = masks[u] | td.masks[i]
        else:
            ids[u], masks[u], texts[u] = td.input_ids[i], td.masks[i].copy(), td.texts[i]
    return TokenizedDialogues(ids, masks, texts), owner


def _own_rows(td: TokenizedDialogues, uniq: TokenizedDialogues, owner: list[int], groups: np.ndarray) -> np.ndarray:
    """Row indices (into the activations of ``uniq``) of each dialogue's own detected tokens, in dialogue order."""
    starts = np.concatenate([[0], np.cumsum(np.bincount(groups, minlength=len(uniq)))])
    out = []
    for i, u in enumerate(owner):
        own = td.masks[i][np.nonzero(uniq.masks[u])[0]]  # which of the union's tokens are this dialogue's
        out.append(starts[u] + np.nonzero(own)[0])
    return np.concatenate(out) if out else np.zeros(0, np.int64)


class _Missing(Exception):
    pass


def _missing() -> dict[str, np.ndarray]:
    raise _Missing
