"""Pooled SAE features and the offline reference feature cache (what the released FPO code lacks).

:func:`pooled_features` is the masked mean over response tokens of the SAE features of hidden states
(position 0 and pads excluded; the released code divides by the padded length instead).
:class:`FeatureCache` holds the reference policy's pooled features of every sequence, computed once with
the adapters disabled, so an FPO step runs no reference forward. Its fingerprint covers the tokens, the
adapter-free reference weights, the SAE and the settings (site, pooling, stored top-k); a mismatch is
refused, never silently reused.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import PATH, ArrayLike, validate_args
from trustlab.core.constraints import Interval, Options, Satisfies
from trustlab.core.exceptions import AssetNotFoundError, InputError
from trustlab.core.hashing import content_hash
from trustlab.core.optional import require
from trustlab.methods.fpo._sae import SparseAutoencoder, _forward_rule, _fwd_example

torch = require("torch", purpose="trustlab.methods.fpo feature cache")

__all__ = ["FeatureCache", "pooled_features"]

_FORMAT = "1"
POOLING = "masked-mean-response-tokens"
_SITE = [Options(("resid", "final_norm"))]
_TOP_K = [Interval(int, 1, None), None]


def response_positions(forward: Any, rows: Any) -> Any:
    """Boolean ``[n, w]`` mask of the response tokens of ``rows`` (attention mask applied, position 0 off)."""
    _, att, resp = forward.batch(rows)
    mask = resp.bool() & att.bool()
    mask[:, 0] = False
    return mask


def _hidden_rule() -> Any:
    return [Satisfies(lambda x: isinstance(x, torch.Tensor) and x.ndim == 3, "a torch tensor [n, w, d]",
                      invalid=["h", None], valid=NotImplemented)]


@validate_args(sae=[SparseAutoencoder], hidden=_hidden_rule(),
               mask=[Satisfies(lambda x: isinstance(x, torch.Tensor) and x.ndim == 2, "a torch tensor [n, w]",
                               invalid=["m", None], valid=NotImplemented)],
               _example=lambda: {"sae": SparseAutoencoder(4, 8, k=2), "hidden": torch.zeros(1, 2, 4),
                                 "mask": torch.tensor([[False, True]])})
def pooled_features(sae: SparseAutoencoder, hidden: Any, mask: Any) -> Any:
    """Mean SAE features over the masked tokens of each row ``[n, width]`` (gradient flows into ``hidden``).

    Examples
    --------
    >>> import torch
    >>> sae = SparseAutoencoder(4, 8, k=2)
    >>> pooled_features(sae, torch.randn(2, 3, 4), torch.tensor([[0, 1, 1], [0, 1, 0]]).bool()).shape
    torch.Size([2, 8])
    """
    m = mask.to(hidden.device).bool()
    if m.shape != hidden.shape[:2]:
        raise InputError(f"pooled_features needs a mask of shape {tuple(hidden.shape[:2])}. Got {tuple(m.shape)}.")
    counts = m.sum(1)
    if bool((counts == 0).any()):
        raise InputError(f"pooled_features got rows with no response token: {torch.nonzero(counts == 0)[:, 0].tolist()}.")
    c = sae.encode(hidden[m])
    row = torch.nonzero(m)[:, 0]
    out = torch.zeros(hidden.shape[0], sae.width, dtype=c.dtype, device=c.device).index_add(0, row, c)
    pooled = out / counts.to(c)[:, None]
    if not bool(torch.isfinite(pooled).all()):
        raise InputError("pooled_features produced NaN or Inf (non-finite activations).")
    return pooled


def features_of(forward: Any, sae: SparseAutoencoder, rows: Any, hidden_pre: Any, site: str) -> Any:
    """Pooled features of ``rows`` from their last-block output ``hidden_pre`` at ``site``."""
    h = forward.final_norm(hidden_pre) if site == "final_norm" else hidden_pre
    return pooled_features(sae, h, response_positions(forward, rows))


def _sparsify(f: Any, top_k: int | None) -> Any:
    if not top_k or top_k >= f.shape[1]:
        return f
    v, i = f.topk(top_k, dim=1)
    return torch.zeros_like(f).scatter(1, i, v)


@dataclass
class FeatureCache:
    """Reference pooled SAE features ``[N, width]`` of every row of a SequenceSet, fingerprinted.

    ``top_k`` (when set) keeps only each row's k largest entries, zero elsewhere (the paper's O(2Nk)
    storage); the default keeps the full pooled vector (exact for the union top-k set).
    """

    features: Any
    fingerprint: dict[str, str]

    def __len__(self) -> int:
        return int(self.features.shape[0])

    @staticmethod
    @validate_args(forward=_forward_rule(), sae=[SparseAutoencoder], site=_SITE, top_k=_TOP_K)
    def expected_fingerprint(forward: Any, sae: SparseAutoencoder, *, site: str = "resid",
                             top_k: int | None = None) -> dict[str, str]:
        from trustlab.llm import weights_fingerprint

        return {"tokens": forward.sequences.fingerprint(), "model": weights_fingerprint(forward.model),
                "sae": sae.fingerprint(),
                "settings": content_hash({"site": site, "pooling": POOLING, "top_k": top_k, "format": _FORMAT})}

    @classmethod
    @validate_args(_example=lambda: {**_fwd_example(), "sae": SparseAutoencoder(72, 16, k=4)},
                   forward=_forward_rule(), sae=[SparseAutoencoder], site=_SITE, top_k=_TOP_K,
                   batch_size=[Interval(int, 1, None)])
    def compute(cls, forward: Any, sae: SparseAutoencoder, *, site: str = "resid", top_k: int | None = None,
                batch_size: int = 32) -> FeatureCache:
        """Reference features of every row of ``forward.sequences`` (adapters disabled, one pass)."""
        from trustlab.llm import is_adapted

        if sae.d_in != forward.model.config.hidden_size:
            raise InputError(f"The 'sae' of FeatureCache.compute has d_in={sae.d_in}, but the model's hidden size "
                             f"is {forward.model.config.hidden_size}.")
        n = len(forward.sequences)
        out: Any = None
        ctx = forward.model.disable_adapter() if is_adapted(forward.model) else contextlib.nullcontext()
        was = forward.model.training
        forward.model.eval()
        try:
            with torch.no_grad(), ctx:
                for rows in forward.batches(batch_size):
                    rows = np.sort(rows)
                    f = features_of(forward, sae, rows, forward.hidden(rows, final_norm=False), site)
                    if out is None:
                        out = torch.zeros(n, sae.width, dtype=f.dtype)
                    out[torch.as_tensor(rows)] = _sparsify(f, top_k).cpu()
        finally:
            forward.model.train(was)
        return cls(out, cls.expected_fingerprint(forward, sae, site=site, top_k=top_k))

    @validate_args(rows=[ArrayLike(dtype="integer", min_len=0)])
    def rows(self, rows: Any) -> Any:
        """Features of ``rows`` ``[n, width]``."""
        return self.features[torch.as_tensor(np.asarray(rows, dtype=np.int64).reshape(-1))]

    @validate_args(forward=_forward_rule(), sae=[SparseAutoencoder], site=_SITE, top_k=_TOP_K)
    def check(self, forward: Any, sae: SparseAutoencoder, *, site: str = "resid", top_k: int | None = None) -> None:
        """Raise InputError unless this cache belongs to ``forward``'s tokens and weights, ``sae`` and settings."""
        want = self.expected_fingerprint(forward, sae, site=site, top_k=top_k)
        stale = [k for k, v in want.items() if self.fingerprint.get(k) != v]
        if stale:
            why = {"tokens": "the tokenised sequences differ", "model": "the reference model's weights differ",
                   "sae": "the sparse autoencoder differs", "settings": "it was computed with other settings "
                   "(site, pooling or top_k)"}
            raise InputError("This FeatureCache is stale: " + "; ".join(why[k] for k in stale) + ". Recompute it "
                             "with FeatureCache.compute for these sequences, this model and this SAE.")

    @validate_args(path=[PATH])
    def save(self, path: str | os.PathLike[str]) -> Path:
        """One safetensors file (atomic), the fingerprint in its metadata."""
        from safetensors.torch import save_file

        from trustlab.results.result import atomic_write

        meta = {"fingerprint": json.dumps(self.fingerprint, sort_keys=True), "format": _FORMAT,
                "kind": "trustlab-fpo-features"}
        return atomic_write(path, lambda tmp: save_file({"features": self.features.contiguous()}, tmp, metadata=meta))

    @classmethod
    @validate_args(path=[PATH], forward=[None, *_forward_rule()], sae=[None, SparseAutoencoder], site=_SITE, top_k=_TOP_K)
    def load(cls, path: str | os.PathLike[str], *, forward: Any = None, sae: SparseAutoencoder | None = None,
             site: str = "resid", top_k: int | None = None) -> FeatureCache:
        """Read a cache written by :meth:`save`; with ``forward`` and ``sae`` a stale one is refused."""
        from safetensors import safe_open

        p = Path(path).expanduser()
        if not p.is_file():
            raise AssetNotFoundError(f"No FPO feature cache at {str(p)!r}.")
        with safe_open(str(p), framework="pt") as fh:
            meta = fh.metadata() or {}
            feats = fh.get_tensor("features") if "features" in fh.keys() else None
        if meta.get("kind") != "trustlab-fpo-features" or feats is None:
            raise InputError(f"The file {str(p)!r} is not a trustlab FPO feature cache.")
        cache = cls(feats, json.loads(meta["fingerprint"]))
        if forward is not None and sae is not None:
            cache.check(forward, sae, site=site, top_k=top_k)
        return cache
