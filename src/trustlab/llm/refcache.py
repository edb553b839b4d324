"""Reference log-probs computed once: per sequence (and optionally per token / top-k), fingerprinted.

A preference loss needs the reference policy's log-probs of every chosen and rejected response. They do
not change while the adapter trains, so :meth:`ReferenceCache.compute` evaluates them once (with the
adapters disabled, through the same top-K replay as training) and the training step runs no reference
forward. The cache carries a fingerprint of (tokens, adapter-free reference weights, settings); it is
written as safetensors only to a path the user gives, and :meth:`ReferenceCache.load` /
:meth:`ReferenceCache.check` refuse a cache whose fingerprint does not match the data and model in use.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.arguments import PATH, validate_args
from trustlab.core.constraints import Boolean, InstanceOf, Interval, Satisfies
from trustlab.core.exceptions import AssetNotFoundError, ConfigError, InputError
from trustlab.core.hashing import content_hash
from trustlab.core.optional import require
from trustlab.llm._argrules import _row_indices
from trustlab.llm.adapters import is_adapted, weights_fingerprint
from trustlab.llm.policy import PolicyForward
from trustlab.llm.sites import unwrap

torch = require("torch", purpose="trustlab.llm ReferenceCache")

__all__ = ["ReferenceCache"]

_FORMAT = "1"
_MODEL = Satisfies(lambda m: isinstance(m, torch.nn.Module), "a torch causal LM", invalid=["not-a-model"])
#: rows/topk run every training step: no validate_args wrapper there, the body checks the indices
_ROWS = "row indices: checked in the body (integer indices in [0, N)) on this per-step path"


@dataclass
class ReferenceCache:
    """Reference log-probs of every row of a :class:`~trustlab.llm.SequenceSet`.

    Attributes
    ----------
    sum : tensor [N] float64
        Summed response-token log-probs.
    n_tokens : tensor [N] long
    fingerprint : dict
        ``tokens``, ``model`` (adapter-free reference weights) and ``settings`` hashes.
    token_logps : tensor [N, T] or None
        Per-token log-probs (0 off the response), with ``per_token=True``.
    topk_ids, topk_logps : tensor [n_response_tokens, k] or None
        The reference's top-k next-token ids and log-probs at every response token, in row-major order
        of the response mask (with ``top_k > 0``); see :func:`trustlab.llm.topk_kl`.
    """

    sum: Any
    n_tokens: Any
    fingerprint: dict[str, str]
    token_logps: Any = None
    topk_ids: Any = None
    topk_logps: Any = None
    _offsets: Any = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.sum.shape[0])

    # --------------------------------------------------------------------------------------- compute
    @classmethod
    @validate_args(
        _example=lambda: {"forward": _example_forward()},
        forward=[PolicyForward],
        reference=[_MODEL, None],
        top_k=[Interval(int, 0, None)],
        per_token=[Boolean()],
        batch_size=[Interval(int, 1, None)],
        cache_dir=[str, os.PathLike, None],
    )
    def compute(cls, forward: PolicyForward, *, reference: Any = None, top_k: int = 0, per_token: bool = False,
                batch_size: int = 32, cache_dir: str | os.PathLike[str] | None = None) -> ReferenceCache:
        """Reference log-probs of every row of ``forward.sequences``.

        Parameters
        ----------
        forward : PolicyForward
            The policy's forward on the set; the reference runs through it (same replay cache) with the
            adapters disabled.
        reference : causal LM, optional
            A separate reference model (run through the full model). Default: ``forward.model`` with its
            adapters disabled, or as it is when it has none.
        top_k : int, default=0
            Also store the reference's top-k next-token distribution at each response token.
        per_token : bool, default=False
            Also store per-token log-probs.
        batch_size : int, default=32
        cache_dir : path, optional
            Read/write ``<cache_dir>/reference/<fingerprint>.safetensors``.
        """
        seqs = forward.sequences
        ref_model = forward.model if reference is None else reference
        fp = {"tokens": seqs.fingerprint(), "model": weights_fingerprint(ref_model),
              "settings": content_hash({"top_k": int(top_k), "per_token": bool(per_token), "format": _FORMAT})}
        path = None
        if cache_dir is not None:
            path = Path(cache_dir).expanduser() / "reference" / f"{content_hash(fp)[:32]}.safetensors"
            if path.is_file():
                return cls.load(path, expected=fp)
        fwd = forward if reference is None else PolicyForward(reference, seqs, replay=None)
        ctx = forward.model.disable_adapter() if reference is None and is_adapted(forward.model) else (
            contextlib.nullcontext())
        sums, counts, toks, ids_k, lps_k, order = [], [], [], [], [], []
        was = unwrap(fwd.model).training
        fwd.model.eval()
        try:
            with torch.no_grad(), ctx:
                for rows in fwd.batches(batch_size):
                    rows = np.sort(rows)
                    order.append(rows)
                    _, _, resp = fwd.batch(rows)
                    h = fwd.hidden(rows)
                    lp = _gather(fwd, h, rows)
                    sums.append(lp.sum(1).double().cpu())
                    counts.append(resp[:, 1:].sum(1).long())
                    if per_token:
                        full = torch.zeros(len(rows), seqs.input_ids.shape[1])
                        full[:, : lp.shape[1]] = lp.cpu()
                        toks.append(full)
                    if top_k:
                        i, v = _topk(fwd, h, resp, int(top_k))
                        ids_k.append(i)
                        lps_k.append(v)
        finally:
            fwd.model.train(was)
        # back to row order (the top-k rows follow the response tokens of each row in row order)
        perm = torch.as_tensor(np.concatenate(order))
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(len(perm))
        topk_ids = topk_lps = None
        if top_k:
            sizes = torch.cat(counts)
            pieces_i = list(torch.cat(ids_k).split(sizes.tolist()))
            pieces_v = list(torch.cat(lps_k).split(sizes.tolist()))
            topk_ids = torch.cat([pieces_i[int(j)] for j in inv])
            topk_lps = torch.cat([pieces_v[int(j)] for j in inv])
        cache = cls(torch.cat(sums)[inv], torch.cat(counts)[inv], fp,
                    torch.cat(toks)[inv] if per_token else None, topk_ids, topk_lps)
        if path is not None:
            cache.save(path)
        return cache

    # ------------------------------------------------------------------------------------------- use
    @takes_any(rows=_ROWS)
    def rows(self, rows: Any) -> tuple[Any, Any]:
        """``(sum, n_tokens)`` of ``rows`` as tensors."""
        idx = torch.as_tensor(_row_indices(rows, len(self), owner="ReferenceCache.rows", allow_empty=True))
        return self.sum[idx], self.n_tokens[idx]

    @takes_any(rows=_ROWS)
    def topk(self, rows: Any) -> tuple[Any, Any]:
        """Top-k reference ids and log-probs ``[n_tokens_of_rows, k]`` of ``rows``, in row order."""
        if self.topk_ids is None:
            raise ConfigError("This ReferenceCache holds no top-k distribution; compute it with top_k > 0.")
        if self._offsets is None:
            self._offsets = torch.cat([torch.zeros(1, dtype=torch.long), self.n_tokens.cumsum(0)])
        idx = _row_indices(rows, len(self), owner="ReferenceCache.topk")
        sel = torch.cat([torch.arange(int(self._offsets[i]), int(self._offsets[i + 1])) for i in idx])
        return self.topk_ids[sel], self.topk_logps[sel]

    @validate_args(forward=[PolicyForward], reference=[_MODEL, None])
    def check(self, forward: PolicyForward, *, reference: Any = None) -> None:
        """Raise InputError unless this cache belongs to ``forward``'s tokens and reference weights."""
        ref_model = forward.model if reference is None else reference
        _compare(self.fingerprint, {"tokens": forward.sequences.fingerprint(),
                                    "model": weights_fingerprint(ref_model)}, "this ReferenceCache")

    # ---------------------------------------------------------------------------------------- files
    @validate_args(path=[PATH])
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the cache as one safetensors file (atomically); the fingerprint goes in its metadata."""
        from safetensors.torch import save_file

        from trustlab.results.result import atomic_write

        tensors = {"sum": self.sum.contiguous(), "n_tokens": self.n_tokens.contiguous()}
        for name in ("token_logps", "topk_ids", "topk_logps"):
            if getattr(self, name) is not None:
                tensors[name] = getattr(self, name).contiguous()
        meta = {"fingerprint": json.dumps(self.fingerprint, sort_keys=True), "format": _FORMAT}
        return atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=meta))

    @classmethod
    @validate_args(path=[PATH], forward=[PolicyForward, None], reference=[_MODEL, None],
                   expected=[InstanceOf(dict), None])
    def load(cls, path: str | os.PathLike[str], *, forward: PolicyForward | None = None, reference: Any = None,
             expected: dict[str, str] | None = None) -> ReferenceCache:
        """Read a cache written by :meth:`save`; with ``forward`` (or ``expected``) a stale one is refused."""
        from safetensors import safe_open

        p = Path(path).expanduser()
        if not p.is_file():
            raise AssetNotFoundError(f"No reference cache at {str(p)!r}.")
        with safe_open(str(p), framework="pt") as fh:
            meta = fh.metadata() or {}
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}
        if meta.get("format") != _FORMAT or "fingerprint" not in meta:
            raise InputError(f"The file {str(p)!r} is not a trustlab reference cache (format {meta.get('format')!r}).")
        cache = cls(tensors["sum"], tensors["n_tokens"], json.loads(meta["fingerprint"]),
                    tensors.get("token_logps"), tensors.get("topk_ids"), tensors.get("topk_logps"))
        if expected is not None:
            _compare(cache.fingerprint, expected, f"the reference cache {str(p)!r}")
        if forward is not None:
            cache.check(forward, reference=reference)
        return cache


def _compare(have: dict[str, str], want: dict[str, str], what: str) -> None:
    stale = [k for k, v in want.items() if have.get(k) != v]
    if stale:
        why = {"tokens": "the tokenised sequences differ", "model": "the reference model's weights differ",
               "settings": "it was computed with other settings"}
        reasons = "; ".join(why.get(k, k) for k in stale)
        raise InputError(f"{what[0].upper()}{what[1:]} is stale: {reasons}. Recompute it with "
                         "ReferenceCache.compute for these sequences and this model.")


def _gather(fwd: PolicyForward, h: Any, rows: Any) -> Any:
    from trustlab.llm.scoring import gather_logprobs

    ids, _, resp = fwd.batch(rows)
    return gather_logprobs(fwd.model, h, ids, resp)


def _topk(fwd: PolicyForward, h: Any, resp: Any, k: int) -> tuple[Any, Any]:
    from trustlab.llm.scoring import head_logits

    sel = resp.clone().to(h.device)
    sel[:, 0] = False
    pred = h[:, :-1][sel[:, 1:]]  # hidden state predicting each response token, row-major order
    lp = torch.log_softmax(head_logits(fwd.model, pred).float(), -1)
    v, i = lp.topk(min(k, lp.shape[-1]), dim=-1)
    return i.cpu(), v.cpu()


def _example_forward() -> PolicyForward:
    from trustlab.llm.policy import _example

    return PolicyForward(**_example())
