"""Frozen-prefix replay: cache ``hidden_states[L - K]`` once, then run only the top K blocks + norm + head.

The bottom ``L - K`` blocks run once under ``no_grad``; every later forward (and backward) touches only
the top ``K`` blocks, so top-K LoRA training or late-layer interventions cost about ``K / L`` of a full
pass. Replay builds the causal mask and rotary embeddings explicitly (transformers 5.x computes them in
the model's forward, not in the blocks) and equals a full forward to float precision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Boolean, CallableRule, Interval, Options, validate_value
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.optional import require
from trustlab.llm._argrules import HIDDEN, MASK_TENSOR, POSITION_IDS, _row_indices
from trustlab.llm._batching import encode_texts, pad_batch, position_ids_from_mask
from trustlab.llm.rules import LanguageModel
from trustlab.llm.sites import arch_spec, dims, get_module, model_device, unwrap

torch = require("torch", purpose="trustlab.llm PrefixCache")

__all__ = ["PrefixCache", "replay_blocks"]

#: why the replay methods take any value: they run every optimisation step (no validate_args wrapper there)
_ROWS = "None, a slice, row indices or a bool mask: checked in the body by _rows on this per-step path"


def _restricted_mask(masking: Any, config: Any, hidden: Any, attention_mask: Any, position_ids: Any,
                     and_mask_function: Any) -> Any:
    """The causal mask further restricted by the index-based ``and_mask_function`` (the packed layouts here).

    transformers' ``create_causal_mask`` evaluates any custom mask function under four nested ``vmap``s (it
    cannot know the function is index-based), which cost ~24 ms per step of a top-4 DPO step (6 %); ours are
    index-based, so for the sdpa and eager layouts the same mask is built by broadcasting (``use_vmap=False``),
    equal element for element (tested). Other attention implementations keep transformers' own path.
    """
    impl = getattr(config, "_attn_implementation", None)
    if impl not in ("sdpa", "eager"):
        return masking.create_causal_mask(config, hidden, attention_mask, None, position_ids,
                                          and_mask_function=and_mask_function)
    b, t = int(hidden.shape[0]), int(hidden.shape[1])
    return masking.ALL_MASK_ATTENTION_FUNCTIONS[impl](
        batch_size=b, q_length=t, kv_length=t, q_offset=0, kv_offset=0,
        mask_function=masking.and_masks(masking.causal_mask_function, and_mask_function),
        attention_mask=None if attention_mask is None else attention_mask.to(device=hidden.device, dtype=torch.bool),
        allow_is_causal_skip=False, dtype=hidden.dtype, config=config, use_vmap=False, device=hidden.device)


def _layer_inputs(model: Any, hidden: Any, attention_mask: Any, position_ids: Any,
                  and_mask_function: Any = None) -> Any:
    """Per-layer (mask, rotary) getter for ``hidden`` [B, T, d], as the model's own forward builds them.

    ``and_mask_function(batch, head, q, kv) -> bool`` further restricts which keys a query sees (the
    transformers mask-function protocol), e.g. to pack several responses after one shared prompt.
    """
    tf = require("transformers", purpose="trustlab.llm PrefixCache")
    masking = tf.masking_utils
    inner = unwrap(model)
    spec = arch_spec(inner)
    config = inner.config
    # positional arguments: the cache argument was renamed (past_key_values -> cache) in transformers 5.x
    args = (config, hidden, attention_mask, None, position_ids)
    n_layers = dims(inner).n_layers
    if spec.masks == "layer_types" and getattr(config, "layer_types", None):
        types = list(config.layer_types)
    elif spec.masks == "sliding_window" and getattr(config, "sliding_window", None) is not None:
        types = ["sliding_attention"] * n_layers
    else:
        types = ["full_attention"] * n_layers
    builders = {"full_attention": masking.create_causal_mask,
                "sliding_attention": masking.create_sliding_window_causal_mask}
    if and_mask_function is None:
        masks = {t: builders[t](*args) for t in set(types)}
    else:
        fns = {"full_attention": and_mask_function}
        if "sliding_attention" in types:
            # a restricted (packed) layout puts tokens at other indices than their positions: the window must
            # count positions (q - kv < window, as transformers' overlay does on unpacked indices)
            window, pos = int(config.sliding_window), position_ids

            def by_position(b: Any, h: Any, q: Any, kv: Any) -> Any:
                return and_mask_function(b, h, q, kv) & (pos[b, q] - pos[b, kv] < window)

            fns["sliding_attention"] = by_position
        masks = {t: _restricted_mask(masking, config, hidden, attention_mask, position_ids, fns[t])
                 for t in set(types)}
    if spec.positions == "absolute":  # added to the embedding before block 0: nothing to pass
        pes: dict[str, Any] = dict.fromkeys(types)
    elif spec.positions == "rotary_per_type":
        rotary = get_module(inner, spec.rotary)
        pes = {t: rotary(hidden, position_ids, t) for t in set(types)}
    else:
        pe = get_module(inner, spec.rotary)(hidden, position_ids)
        pes = dict.fromkeys(types, pe)
    return lambda i: (masks[types[i]], pes[types[i]])


@validate_args(model=[LanguageModel()], hidden=[HIDDEN], attention_mask=[MASK_TENSOR],
               position_ids=[POSITION_IDS], start=[Interval(int, 0, None)], final_norm=[Boolean()],
               end=[Interval(int, 0, None), None], and_mask_function=[CallableRule(), None])
def replay_blocks(
    model: Any,
    hidden: Any,
    attention_mask: Any,
    position_ids: Any,
    start: int,
    *,
    final_norm: bool = True,
    end: int | None = None,
    and_mask_function: Any = None,
) -> Any:
    """Run blocks ``start..end-1`` (default: to the last; then the final norm) of ``model`` on
    residual-stream states ``hidden``.

    ``end`` stops before block ``end`` (no final norm then); ``and_mask_function`` restricts attention
    further (see :func:`_layer_inputs`).

    Example
    -------
    >>> import torch
    >>> from trustlab.llm import tiny_random_llama
    >>> model, _ = tiny_random_llama()
    >>> ids = torch.tensor([[5, 6, 7]])
    >>> hs = model(ids, output_hidden_states=True).hidden_states
    >>> out = replay_blocks(model, hs[1], torch.ones(1, 3), torch.arange(3)[None], start=1)
    >>> bool(torch.allclose(out, hs[-1], atol=1e-5))
    True
    """
    inner = unwrap(model)
    spec = arch_spec(inner)
    layers = get_module(inner, spec.layers)
    layer_inputs = _layer_inputs(model, hidden, attention_mask, position_ids, and_mask_function)
    h = hidden
    stop = len(layers) if end is None else int(end)
    for i in range(start, stop):
        mask, pe = layer_inputs(i)
        rotary = {} if pe is None else {"position_embeddings": pe}
        out = layers[i](h, attention_mask=mask, position_ids=position_ids, **rotary)
        h = out[0] if isinstance(out, tuple) else out
    return get_module(inner, spec.final_norm)(h) if final_norm and stop == len(layers) else h


class PrefixCache:
    """Cache the residual stream entering block ``L - k_top`` and replay only the top ``k_top`` blocks.

    Parameters
    ----------
    model : causal LM
    k_top : int
        Number of top blocks to replay, in ``[1, n_layers]``.
    inputs : list of str, list of id sequences, or 2-d ids (+ ``attention_mask``)
    attention_mask : 2-d array, optional
    tokenizer : optional
        Needed for texts when the model carries none.
    batch_size : int, default=16
        Chunk size for the one-off bottom pass.
    padding_side : {"right", "left"}, default="right"

    Attributes
    ----------
    hidden : tensor [N, T, d_model]
        ``hidden_states[L - k_top]`` (no grad).
    input_ids, attention_mask, position_ids : tensors [N, T]

    Notes
    -----
    ``forward()`` equals ``model(input_ids, attention_mask=..., position_ids=pc.position_ids).logits``;
    the position ids count real tokens only, so a left-padded row matches its unpadded forward.

    Example
    -------
    >>> import torch
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> pc = PrefixCache(model, 1, ["a cat sat", "dogs"])
    >>> full = model(pc.input_ids, attention_mask=pc.attention_mask, position_ids=pc.position_ids).logits
    >>> bool(torch.allclose(pc.forward(), full, atol=1e-5))
    True
    """

    def __init__(
        self,
        model: Any,
        k_top: int,
        inputs: Any,
        *,
        attention_mask: Any = None,
        tokenizer: Any = None,
        batch_size: int = 16,
        padding_side: str = "right",
    ) -> None:
        from trustlab.llm._batching import _pad_id
        from trustlab.llm.hooks import trace

        inner = unwrap(model)
        n_layers = dims(inner).n_layers
        if isinstance(k_top, bool) or not isinstance(k_top, int | np.integer) or not 1 <= k_top <= n_layers:
            raise ConfigError(
                f"The 'k_top' argument of PrefixCache must be an int in [1, {n_layers}]. Got {k_top!r} instead."
            )
        self.model = model
        self.k_top = int(k_top)
        self.start = n_layers - self.k_top
        seqs = encode_texts(
            inputs, model=inner, tokenizer=tokenizer, owner="PrefixCache", attention_mask=attention_mask
        )
        self.input_ids, self.attention_mask = pad_batch(seqs, _pad_id(inner, tokenizer), padding_side)
        self.position_ids = position_ids_from_mask(self.attention_mask)
        site = "embed" if self.start == 0 else f"blocks.{self.start - 1}.resid_post"
        parts = []
        with torch.no_grad():
            for s in range(0, len(seqs), batch_size):
                sl = slice(s, s + batch_size)
                # run each chunk only over its own real columns (exact: pads are masked and carry no
                # information); the stored states are zero at the columns a chunk does not use
                cols = torch.nonzero(self.attention_mask[sl].any(0))[:, 0]
                lo, hi = int(cols[0]), int(cols[-1]) + 1
                with trace(model, [site], stop_after="auto") as tr:
                    dev = model_device(inner)
                    tr.run(
                        self.input_ids[sl, lo:hi].to(dev),
                        attention_mask=self.attention_mask[sl, lo:hi].to(dev),
                        position_ids=self.position_ids[sl, lo:hi].to(dev),
                        use_cache=False,
                        logits_to_keep=1,
                    )
                h = tr[site]
                if hi - lo != self.input_ids.shape[1]:
                    full = h.new_zeros((h.shape[0], self.input_ids.shape[1], h.shape[2]))
                    full[:, lo:hi] = h
                    h = full
                parts.append(h)
        self.hidden = torch.cat(parts, dim=0)

    @classmethod
    @validate_args(model=[LanguageModel()], k_top=[Interval(int, 1, None)], hidden=[HIDDEN],
                   input_ids=[ArrayLike(ndim=2, dtype="integer", low=0)],
                   attention_mask=[ArrayLike(ndim=2, dtype="integer", low=0, high=1)])
    def from_states(cls, model: Any, k_top: int, hidden: Any, input_ids: Any, attention_mask: Any) -> PrefixCache:
        """A cache built from stored ``hidden_states[L - k_top]`` (e.g. read back from disk), no bottom pass.

        The caller is responsible for the states belonging to ``model``'s bottom blocks and these tokens
        (``trustlab.llm.PolicyForward`` checks a fingerprint before using stored states).
        """
        n_layers = dims(unwrap(model)).n_layers
        if isinstance(k_top, bool) or not isinstance(k_top, int | np.integer) or not 1 <= k_top <= n_layers:
            raise ConfigError(
                f"The 'k_top' argument of PrefixCache.from_states must be an int in [1, {n_layers}]. "
                f"Got {k_top!r} instead."
            )
        ids, mask = torch.as_tensor(input_ids).long(), torch.as_tensor(attention_mask).long()
        if ids.ndim != 2 or mask.shape != ids.shape or tuple(hidden.shape[:2]) != tuple(ids.shape):
            raise InputError(
                "PrefixCache.from_states needs input_ids and attention_mask of one [N, T] shape and hidden "
                f"[N, T, d]. Got {tuple(ids.shape)}, {tuple(mask.shape)} and {tuple(hidden.shape)}."
            )
        self = cls.__new__(cls)
        self.model, self.k_top, self.start = model, int(k_top), n_layers - int(k_top)
        self.input_ids, self.attention_mask = ids, mask
        self.position_ids = position_ids_from_mask(mask)
        self.hidden = hidden
        return self

    def __len__(self) -> int:
        return int(self.hidden.shape[0])

    def _rows(self, rows: Any) -> Any:
        if rows is None or isinstance(rows, slice):
            return slice(None) if rows is None else rows
        idx = rows if isinstance(rows, torch.Tensor) else torch.as_tensor(np.asarray(rows))
        if idx.dtype == torch.bool:  # a mask of rows
            idx = torch.nonzero(idx)[:, 0]
        return torch.as_tensor(_row_indices(idx, len(self), owner="PrefixCache"))

    @takes_any(rows=_ROWS)
    def hidden_out(self, rows: Sequence[int] | Any = None) -> Any:
        """Final normed hidden states ``[n, T, d]`` of the chosen rows (differentiable through the top K)."""
        r = self._rows(rows)
        dev = self.hidden.device
        return replay_blocks(
            self.model,
            self.hidden[r],
            self.attention_mask[r].to(dev),
            self.position_ids[r].to(dev),
            self.start,
        )

    @takes_any(rows=_ROWS, positions='None, "last" or a bool mask [n, T]: checked in the body on this per-step path')
    def forward(self, rows: Sequence[int] | Any = None, *, positions: Any = None) -> Any:
        """Logits of the chosen rows, computed through the top ``k_top`` blocks only.

        Parameters
        ----------
        rows : indices or bool mask, optional
            Rows of the cached batch (default all).
        positions : None, "last" or bool mask [n, T]
            None: ``[n, T, vocab]``; ``"last"``: each row's last real token ``[n, vocab]``; a mask:
            ``[n_selected, vocab]``. The head runs only at the selected positions.
        """
        from trustlab.llm._batching import last_positions
        from trustlab.llm.scoring import head_logits

        if isinstance(positions, str) and positions != "last":
            validate_value("PrefixCache.forward", "positions", positions, [Options(("last",)), None], noun="argument")
        r = self._rows(rows)
        h = self.hidden_out(r)
        if positions is None:
            return head_logits(self.model, h)
        if isinstance(positions, str):
            lp = last_positions(self.attention_mask[r]).to(h.device)
            return head_logits(self.model, h[torch.arange(h.shape[0], device=h.device), lp])
        mask = torch.as_tensor(positions).bool()
        if mask.shape != h.shape[:2]:
            raise InputError(
                f"The 'positions' mask of PrefixCache.forward must have shape {tuple(h.shape[:2])}. "
                f"Got {tuple(mask.shape)} instead."
            )
        return head_logits(self.model, h[mask.to(h.device)])

    __call__ = forward
