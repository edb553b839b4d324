"""Dialogues -> per-token residual-stream activations of their detection masks (via ``trustlab.llm.collect``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trustlab.core.exceptions import InputError, UnknownNameError
from trustlab.methods.deception._dialogue import Dialogue, tokenize_dialogues
from trustlab.methods.deception._probe import DialogueActivations

__all__ = ["ActivationExtractor", "layer_site"]


def layer_site(layer: int, n_layers: int) -> str:
    """The hook site holding ``hidden_states[layer]``: ``blocks.{layer}.resid_pre`` (layer < n_layers) or
    the last block's ``resid_post`` (layer == n_layers)."""
    if isinstance(layer, bool) or not isinstance(layer, int | np.integer) or not 0 <= layer <= n_layers:
        raise UnknownNameError(
            f"Unknown layer {layer!r}: hidden_states has indices 0..{n_layers} for this model ({n_layers} blocks)."
        )
    return f"blocks.{int(layer)}.resid_pre" if layer < n_layers else f"blocks.{n_layers - 1}.resid_post"


class ActivationExtractor:
    """Turn dialogues into :class:`DialogueActivations` for a set of layers, with an in-memory cache.

    Parameters
    ----------
    model, tokenizer
        From :func:`trustlab.llm.load_model` (or ``tiny_random_llama`` in tests).
    layers : sequence of int
        Indices into ``hidden_states``; only blocks up to the deepest one are run (``stop_after``).
    padding : (int, int)
        Extra tokens around the detected messages (left, right).
    batch_size : int

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

    def __init__(self, model: Any, tokenizer: Any, *, layers: Sequence[int], padding: tuple[int, int] = (0, 0),
                 batch_size: int = 16) -> None:
        from trustlab.llm import dims

        self.model, self.tokenizer = model, tokenizer
        d = dims(model)
        self.n_layers, self.n_ctx = d.n_layers, d.n_ctx
        self.layers = sorted({int(x) for x in layers}) if not isinstance(layers, int) else [int(layers)]
        if not self.layers:
            raise InputError("ActivationExtractor needs at least one layer.")
        self.sites = {layer: layer_site(layer, self.n_layers) for layer in self.layers}
        self.padding = padding
        self.batch_size = batch_size
        self._cache: dict[str, DialogueActivations] = {}

    def __call__(self, dialogues: Sequence[Dialogue], *, key: str | None = None,
                 progress: bool = False) -> DialogueActivations:
        """Activations of ``dialogues`` (cached under ``key`` when given)."""
        if key is not None and key in self._cache:
            return self._cache[key]
        from trustlab.llm import collect

        dialogues = list(dialogues)
        td = tokenize_dialogues(self.tokenizer, dialogues, padding=self.padding, n_ctx=self.n_ctx)
        sites = [self.sites[layer] for layer in self.layers]
        raw = collect(self.model, td.input_ids, sites, positions=td.masks, batch_size=self.batch_size,
                      tokenizer=self.tokenizer, skip_first=True, progress=progress)
        groups = raw.index[:, 0]
        labels = np.array([d.label for d in dialogues], dtype=object)
        out = DialogueActivations({layer: raw[self.sites[layer]] for layer in self.layers}, groups, labels,
                                  [dict(d.meta) for d in dialogues])
        if len(out) != len(dialogues) or np.any(out.n_tokens != td.n_detected):
            raise InputError("Some detected tokens were not captured (internal error in the detection masks).")
        if key is not None:
            self._cache[key] = out
        return out
