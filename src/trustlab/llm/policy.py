"""The policy's forward on a tokenised set: through the full model, or by top-K prefix replay.

:class:`PolicyForward` computes final hidden states and response log-probs for rows of a
:class:`~trustlab.llm.SequenceSet`. With ``replay=K`` (or ``"auto"``, which picks the smallest K that
holds every trainable parameter) the residual stream entering block ``L - K`` is computed once for the
whole set (:class:`~trustlab.llm.PrefixCache`) and every later forward and backward runs only the top K
blocks, the final norm, and the LM head at the scored positions. This equals the full forward (and its
gradients with respect to parameters in the top K blocks) to float precision.

The replay cache is fingerprinted by the tokens, the adapter-free weights of the embedding and the
bottom blocks, and K; :meth:`PolicyForward.check_fresh` refuses a cache whose bottom weights changed
(e.g. after merging an adapter), and ``cache_dir`` keeps the states on disk as safetensors.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, Interval, Options, Satisfies
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.hashing import content_hash
from trustlab.core.optional import require
from trustlab.llm._argrules import _row_indices
from trustlab.llm._batching import position_ids_from_mask
from trustlab.llm._tokenize_pairs import SequenceSet
from trustlab.llm.adapters import _LAYER, _plain_name, weights_fingerprint
from trustlab.llm.prefix import PrefixCache, replay_blocks
from trustlab.llm.scoring import gather_logprobs
from trustlab.llm.sites import arch_spec, base_model, dims, embed_states, get_module, model_device, unwrap

torch = require("torch", purpose="trustlab.llm PolicyForward")

__all__ = ["PolicyForward", "replay_depth"]

_FORMAT = 1
#: why the per-step methods take any value (no validate_args wrapper there, it costs more than their checks)
_ROWS = "row indices: checked in the body by _rows (integer indices in [0, N)) on this per-step path"
_STATES = "a tensor on the per-step path: its shape is checked in the body, its values by the layers"
_FLAG = "read for its truth value on the per-step path; replay_blocks checks it as a bool under replay"


@dataclass(frozen=True)
class SequenceLogprobs:
    """Per-sequence sum of response-token log-probs and the number of response tokens (torch tensors)."""

    sum: Any
    n_tokens: Any

    @property
    def mean(self) -> Any:
        return self.sum / self.n_tokens.clamp(min=1)


def _bottom_prefixes(model: Any, start: int) -> list[str]:
    spec = arch_spec(unwrap(model))
    return [*spec.bottom] + [f"{spec.layers}.{i}" for i in range(start)]


def _offending(model: Any, start: int) -> list[str]:
    """Parameters below block ``start`` (embedding included) that are trainable or adapter weights."""
    spec = arch_spec(unwrap(model))
    bad = []
    for name, p in unwrap(model).named_parameters():
        plain = _plain_name(name)
        m = _LAYER.search(plain)
        below = (m is not None and int(m.group(1)) < start) or plain.startswith(tuple(b + "." for b in spec.bottom))
        if below and (p.requires_grad or plain != name or ".lora_" in name):
            bad.append(plain)
    # a head tied to a trainable embedding changes the bottom too
    emb = getattr(unwrap(model), "get_input_embeddings", lambda: None)()
    if emb is not None and emb.weight.requires_grad and spec.embed + ".weight" not in bad:
        bad.append(spec.embed + ".weight")
    return bad


@validate_args(_example=lambda: {"model": _example()["model"]},
               model=[Satisfies(lambda m: isinstance(m, torch.nn.Module), "a torch causal LM", invalid=["not-a-model"])])
def replay_depth(model: Any) -> int | None:
    """Smallest K whose top-K replay holds every trainable parameter (and every adapter), else None.

    None means replay saves nothing or is not exact: no trainable parameters, or some in block 0 or in the
    embedding.

    Examples
    --------
    >>> from trustlab.llm import tiny_random_llama, add_lora
    >>> replay_depth(add_lora(tiny_random_llama(n_layers=4)[0], layers="top1", r=2))
    1
    """
    inner = unwrap(model)
    n = dims(inner).n_layers
    names = [(n_, p) for n_, p in inner.named_parameters() if p.requires_grad or ".lora_" in n_]
    if not any(p.requires_grad for _, p in names):
        return None
    layers = [int(m.group(1)) for n_, _ in names if (m := _LAYER.search(_plain_name(n_)))]
    lowest = min(layers) if layers else n - 1  # only the final norm / head trainable: replay the last block
    if lowest == 0 or _offending(model, lowest):
        return None
    return n - lowest


def _model_ok(m: Any) -> bool:
    return isinstance(m, torch.nn.Module)


@dataclass(frozen=True)
class _Packing:
    """Rows packed by shared prompt: one sequence per prompt (prompt once, then each member's response).

    A response token sees the prompt and its own response only (``seg``); positions restart after the
    prompt for every response, so each row's states equal those of its own unpacked sequence.
    """

    ids: Any  # [G, W] token ids
    att: Any  # [G, W]
    pos: Any  # [G, W] position ids (= the row position each packed state comes from)
    seg: Any  # [G, W] 0 prompt, j > 0 member j's response, -1 pad
    src_row: Any  # [G, W] row whose cached state fills each packed position
    unpack: Any  # [n, w] flat index into G * W for every (row, position)

    def visible(self) -> Any:
        seg = self.seg

        def mask(b: Any, h: Any, q: Any, kv: Any) -> Any:
            s_kv = seg[b, kv]
            return (s_kv == 0) | (s_kv == seg[b, q])

        return mask


def _prompt_groups(seqs: SequenceSet) -> np.ndarray:
    """Group id per row: rows with the same prompt tokens share one."""
    ids, plen = seqs.input_ids, seqs.prompt_len
    seen: dict[tuple[int, ...], int] = {}
    return np.asarray([seen.setdefault(tuple(ids[i, : plen[i]].tolist()), len(seen)) for i in range(len(seqs))],
                      dtype=np.int64)


def _pack(seqs: SequenceSet, groups: np.ndarray, rows: np.ndarray) -> _Packing | None:
    """Pack ``rows`` by prompt group; None when no two rows share a prompt."""
    members: dict[int, list[int]] = {}
    for r in rows.tolist():
        members.setdefault(int(groups[r]), []).append(r)
    if len(members) == len(rows):
        return None
    lengths = seqs.attention_mask.sum(1).tolist()
    ids_l, pos_l, seg_l, src_l = [], [], [], []
    where: dict[int, tuple[int, int, int]] = {}  # row -> (group index, prompt length, offset of its response)
    for g, mem in enumerate(members.values()):
        p = int(seqs.prompt_len[mem[0]])
        ids, pos, seg, src = seqs.input_ids[mem[0], :p].tolist(), list(range(p)), [0] * p, [mem[0]] * p
        for j, r in enumerate(mem, 1):
            where[r] = (g, p, len(ids))
            n = lengths[r]
            ids += seqs.input_ids[r, p:n].tolist()
            pos += list(range(p, n))
            seg += [j] * (n - p)
            src += [r] * (n - p)
        ids_l.append(ids), pos_l.append(pos), seg_l.append(seg), src_l.append(src)
    width = max(len(x) for x in ids_l)

    def pad(rows_: list[list[int]], fill: int) -> Any:
        return torch.as_tensor([x + [fill] * (width - len(x)) for x in rows_], dtype=torch.long)

    att = pad([[1] * len(x) for x in ids_l], 0)
    w = max(lengths[r] for r in rows.tolist())
    unpack = torch.zeros((len(rows), w), dtype=torch.long)
    for i, r in enumerate(rows.tolist()):
        g, p, off = where[r]
        t = torch.arange(lengths[r])
        unpack[i, : lengths[r]] = g * width + torch.where(t < p, t, off + t - p)
    return _Packing(pad(ids_l, seqs.pad_id), att, pad(pos_l, 0), pad(seg_l, -1), pad(src_l, rows[0]), unpack)


class PolicyForward:
    """Hidden states and response log-probs of a model on a :class:`SequenceSet`, optionally by replay.

    Parameters
    ----------
    model : causal LM (plain or peft)
    sequences : SequenceSet
    replay : "auto", int or None, default="auto"
        None: run the full model every time. K: cache ``hidden_states[L-K]`` once and replay the top K
        blocks (every trainable parameter and adapter must sit in them). "auto": :func:`replay_depth`.
    share_prompts : bool, default=True
        Under replay, rows of one batch that share a prompt (a preference pair's chosen and rejected
        response) are packed into one sequence, the prompt once and each response attending to it and to
        itself only; the states equal the unpacked ones (to float precision) at a fraction of the cost.
        The one-off bottom pass packs the same way. Hooks on the replayed blocks then see the packed
        layout; use ``hidden()`` (per row) or ``share_prompts=False`` when they need rows.
    batch_size : int, default=16
        Rows per chunk of the one-off bottom pass.
    cache_dir : path, optional
        Keep the replay states on disk (``<cache_dir>/replay/<key>.safetensors``) and reuse them in later
        runs; nothing is written without it.

    Attributes
    ----------
    k_top : int or None
        The replay depth in use (None: full model).
    start : int
        First replayed block (0 for the full model).

    Examples
    --------
    >>> from trustlab.llm import tiny_random_llama, add_lora, tokenize_pairs
    >>> model, tok = tiny_random_llama(n_layers=4)
    >>> peft_model = add_lora(model, layers="top2", r=2)
    >>> seqs = tokenize_pairs(tok, ["2 + 2?", "Capital of France?"], ["4", "Paris"])
    >>> fwd = PolicyForward(peft_model, seqs)
    >>> fwd.k_top, tuple(fwd.sequence_logprobs([0, 1]).sum.shape)
    (2, (2,))
    """

    @validate_args(
        _example=lambda: _example(),
        model=[Satisfies(_model_ok, "a torch causal LM", invalid=["not-a-model"])],
        sequences=[SequenceSet],
        replay=[Interval(int, 1, None), Options(["auto"]), None],
        share_prompts=[Boolean()],
        batch_size=[Interval(int, 1, None)],
        cache_dir=[str, os.PathLike, None],
    )
    def __init__(self, model: Any, sequences: SequenceSet, *, replay: Any = "auto", share_prompts: bool = True,
                 batch_size: int = 16, cache_dir: str | os.PathLike[str] | None = None) -> None:
        inner = unwrap(model)
        n_layers = dims(inner).n_layers
        if replay == "auto":
            k = replay_depth(model)
        elif replay is None:
            k = None
        else:
            k = int(replay)
            if k > n_layers:
                raise ConfigError(
                    f"The 'replay' argument of PolicyForward asks to replay the top {k} blocks, but the model "
                    f"has {n_layers} blocks. Use an int in [1, {n_layers}], 'auto' or None."
                )
            bad = _offending(model, n_layers - k)
            if bad:
                raise ConfigError(
                    f"Replay of the top {k} blocks (blocks {n_layers - k}-{n_layers - 1}) is not exact for this "
                    f"model: {len(bad)} parameter(s) below them are trainable or adapted ({bad[:3]}...). Use "
                    "replay='auto', a larger K, or None."
                )
        self.model, self.sequences, self.k_top = model, sequences, k
        self.start = 0 if k is None else n_layers - k
        self.batch_size, self.cache_dir, self.share_prompts = int(batch_size), cache_dir, bool(share_prompts)
        self._groups = _prompt_groups(sequences) if share_prompts else np.arange(len(sequences))
        self._prefix: PrefixCache | None = None
        self.fingerprint: dict[str, str] = {}
        if k is not None:
            self.refresh()

    # -------------------------------------------------------------------------------- replay cache
    def _bottom_fingerprint(self) -> str:
        return weights_fingerprint(self.model, prefixes=_bottom_prefixes(self.model, self.start))

    def refresh(self) -> None:
        """(Re)build the replay cache for the current bottom weights (a no-op for the full model)."""
        if self.k_top is None:
            return
        fp = {"tokens": self.sequences.fingerprint(), "bottom_weights": self._bottom_fingerprint(),
              "k_top": str(self.k_top), "format": str(_FORMAT)}
        key = content_hash(fp)
        seqs = self.sequences
        path = Path(self.cache_dir).expanduser() / "replay" / f"{key[:32]}.safetensors" if self.cache_dir else None
        hidden = _read_states(path, key) if path is not None else None
        was = self.model.training
        self.model.eval()
        try:
            if hidden is None:
                hidden = self._bottom_pass()
            if path is not None:
                _write_states(path, hidden, key)
        finally:
            self.model.train(was)
        dev = model_device(self.model)
        self._prefix = PrefixCache.from_states(self.model, self.k_top, hidden.to(dev), seqs.input_ids,
                                               seqs.attention_mask)
        self.fingerprint = fp

    def _bottom_pass(self) -> Any:
        """``hidden_states[start]`` of every row ``[N, T, d]``, rows of a prompt group computed packed."""
        seqs = self.sequences
        lengths = seqs.attention_mask.sum(1).numpy()
        # chunks of whole prompt groups, longest first (similar lengths pad little)
        order = np.argsort(-lengths, kind="stable")
        by_group: dict[int, list[int]] = {}
        for r in order.tolist():
            by_group.setdefault(int(self._groups[r]), []).append(r)
        chunks, cur = [], []
        for mem in by_group.values():
            if cur and len(cur) + len(mem) > self.batch_size:
                chunks.append(cur)
                cur = []
            cur += mem
        chunks.append(cur)
        out = None
        dev = model_device(self.model)
        with torch.no_grad():
            for rows in chunks:
                rows_a = np.asarray(rows)
                h = self._bottom_chunk(rows_a, dev)
                if out is None:
                    out = h.new_zeros((len(seqs), seqs.input_ids.shape[1], h.shape[-1]))
                out[torch.as_tensor(rows_a), : h.shape[1]] = h
        return out

    def _bottom_chunk(self, rows: np.ndarray, dev: Any) -> Any:
        pk = _pack(self.sequences, self._groups, rows) if self.share_prompts else None
        if pk is None:
            ids, att, _ = self.batch(rows)
            pos = position_ids_from_mask(att)
            h = embed_states(self.model, ids.to(dev), pos.to(dev))
            return replay_blocks(self.model, h, att.to(dev), pos.to(dev), 0, end=self.start) if self.start else h
        h = embed_states(self.model, pk.ids.to(dev), pk.pos.to(dev))
        if self.start:
            h = replay_blocks(self.model, h, pk.att.to(dev), pk.pos.to(dev), 0, end=self.start,
                              and_mask_function=_on(pk, dev).visible())
        return h.reshape(-1, h.shape[-1])[pk.unpack.to(dev)]

    def check_fresh(self) -> None:
        """Raise InputError when the bottom weights changed since the replay cache was built."""
        if self.k_top is None:
            return
        now = self._bottom_fingerprint()
        if now != self.fingerprint["bottom_weights"]:
            raise InputError(
                "The replay cache of this PolicyForward is stale: the embedding or the bottom "
                f"{self.start} blocks changed since it was built (e.g. an adapter was merged into the base "
                "weights). Call forward.refresh() or build a new PolicyForward."
            )

    # ------------------------------------------------------------------------------------ forwards
    def _rows(self, rows: Any) -> Any:
        return _row_indices(rows, len(self.sequences), owner="PolicyForward")

    @takes_any(rows=_ROWS)
    def batch(self, rows: Any) -> tuple[Any, Any, Any]:
        """``(input_ids, attention_mask, response_mask)`` of ``rows``, trimmed to their longest row."""
        idx = torch.as_tensor(self._rows(rows))
        s = self.sequences
        w = int(s.attention_mask[idx].sum(1).max())
        return s.input_ids[idx, :w], s.attention_mask[idx, :w], s.response_mask[idx, :w]

    @takes_any(rows=_ROWS, final_norm=_FLAG)
    def hidden(self, rows: Any, *, final_norm: bool = True) -> Any:
        """Final hidden states ``[n, w, d]`` of ``rows`` (after the final norm unless ``final_norm=False``,
        then the last block's output); differentiable w.r.t. the replayed blocks.

        Hooks registered on the model's blocks (e.g. :func:`trustlab.llm.trace`) fire for the blocks that
        run: all of them for the full model, the top K under replay (packed when rows share prompts).
        """
        idx = self._rows(rows)
        ids, att, _ = self.batch(idx)
        dev = model_device(self.model)
        pos = position_ids_from_mask(att)
        if self.k_top is None:
            return self._full_hidden(ids.to(dev), att.to(dev), pos.to(dev), final_norm)
        cache = self._prefix.hidden
        pk = _pack(self.sequences, self._groups, idx) if self.share_prompts else None
        if pk is None:
            h0 = cache[torch.as_tensor(idx).to(cache.device), : ids.shape[1]]
            return replay_blocks(self.model, h0.to(dev), att.to(dev), pos.to(dev), self.start,
                                 final_norm=final_norm)
        pk = _on(pk, cache.device)
        h0 = cache[pk.src_row, pk.pos].to(dev)
        pk = _on(pk, dev)
        h = replay_blocks(self.model, h0, pk.att, pk.pos, self.start, final_norm=final_norm,
                          and_mask_function=pk.visible())
        return h.reshape(-1, h.shape[-1])[pk.unpack]

    @takes_any(rows=_ROWS)
    def input_states(self, rows: Any) -> Any:
        """States entering the first replayed block for ``rows``, ``[n, w, d]`` (trimmed like :meth:`batch`;
        no grad): the cached ``hidden_states[start]`` under replay, the embedding output (``hidden_states[0]``) for the full model.

        With :meth:`replay_states` this lets a caller perturb the replay input (e.g. a local-stability
        measure) without running the bottom blocks again.
        """
        idx = self._rows(rows)
        ids, att, _ = self.batch(idx)
        if self.k_top is None:
            dev = model_device(self.model)
            with torch.no_grad():
                return embed_states(self.model, ids.to(dev), position_ids_from_mask(att).to(dev))
        cache = self._prefix.hidden
        return cache[torch.as_tensor(idx).to(cache.device), : ids.shape[1]].to(model_device(self.model))

    @takes_any(rows=_ROWS, states=_STATES, final_norm=_FLAG)
    def replay_states(self, rows: Any, states: Any, *, final_norm: bool = True) -> Any:
        """Final hidden states of ``rows`` computed from ``states`` (shaped like :meth:`input_states`) by
        running blocks ``start..L-1`` (rows are not packed)."""
        idx = self._rows(rows)
        ids, att, _ = self.batch(idx)
        if tuple(getattr(states, "shape", ())[:2]) != tuple(ids.shape):
            raise InputError(f"PolicyForward.replay_states needs states of shape [{ids.shape[0]}, {ids.shape[1]}, d] "
                             f"for these rows. Got {tuple(getattr(states, 'shape', ()))}.")
        dev = model_device(self.model)
        return replay_blocks(self.model, states.to(dev), att.to(dev), position_ids_from_mask(att).to(dev),
                             self.start, final_norm=final_norm)

    def _full_hidden(self, ids: Any, att: Any, pos: Any, final_norm: bool) -> Any:
        base = base_model(self.model)
        if final_norm:
            return base(input_ids=ids, attention_mask=att, position_ids=pos, use_cache=False).last_hidden_state
        from trustlab.llm.hooks import trace

        site = f"blocks.{dims(self.model).n_layers - 1}.resid_post"
        with trace(self.model, [site], detach=False) as tr:  # differentiable, like the replay path
            base(input_ids=ids, attention_mask=att, position_ids=pos, use_cache=False)
        return tr[site]

    @takes_any(hidden="a tensor on the per-step path: the norm layer checks its last dimension")
    def final_norm(self, hidden: Any) -> Any:
        """Apply the model's final norm (to the output of ``hidden(rows, final_norm=False)``)."""
        inner = unwrap(self.model)
        return get_module(inner, arch_spec(inner).final_norm)(hidden)

    @takes_any(rows=_ROWS, hidden="None or final hidden states: gather_logprobs checks them (HIDDEN rule)")
    def token_logprobs(self, rows: Any, *, hidden: Any = None) -> Any:
        """Log-prob of each response token ``[n, w]`` (0 elsewhere), LM head at response positions only.

        ``hidden`` (the final normed states of ``rows``, e.g. from ``hidden(rows)``) skips the forward.
        """
        idx = self._rows(rows)
        ids, _, resp = self.batch(idx)
        return gather_logprobs(self.model, self.hidden(idx) if hidden is None else hidden, ids, resp)

    @takes_any(rows=_ROWS, hidden="None or final hidden states: gather_logprobs checks them (HIDDEN rule)")
    def sequence_logprobs(self, rows: Any, *, hidden: Any = None) -> SequenceLogprobs:
        """Per-row sum of response-token log-probs and response-token counts (on the model's device)."""
        idx = self._rows(rows)
        lp = self.token_logprobs(idx, hidden=hidden)
        _, _, resp = self.batch(idx)
        n = resp[:, 1:].sum(1).to(lp.device)
        return SequenceLogprobs(lp.sum(1), n)

    @validate_args(batch_size=[Interval(int, 1, None)])
    def batches(self, batch_size: int) -> list[np.ndarray]:
        """All rows in chunks of at most ``batch_size``, rows that share a prompt kept together (so that
        whole-set passes such as the reference cache pack them)."""
        order = np.argsort(self._groups, kind="stable")
        return [order[s : s + batch_size] for s in range(0, len(order), batch_size)]

    def __len__(self) -> int:
        return len(self.sequences)


def _on(pk: _Packing, dev: Any) -> _Packing:
    return _Packing(*(getattr(pk, f).to(dev) for f in ("ids", "att", "pos", "seg", "src_row", "unpack")))


def _read_states(path: Path, key: str) -> Any:
    if not path.is_file():
        return None
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        meta = fh.metadata() or {}
        if meta.get("key") != key:
            return None
        return fh.get_tensor("hidden")


def _write_states(path: Path, hidden: Any, key: str) -> None:
    from safetensors.torch import save_file

    from trustlab.results.result import atomic_write

    atomic_write(path, lambda tmp: save_file({"hidden": hidden.detach().cpu().contiguous()}, tmp,
                                             metadata={"key": key, "format": str(_FORMAT)}))


def _example() -> dict[str, Any]:
    from trustlab.llm._small import tiny_random_llama
    from trustlab.llm._tokenize_pairs import tokenize_pairs

    model, tok = tiny_random_llama()
    return {"model": model, "sequences": tokenize_pairs(tok, ["Hi"], ["Hello"])}
