"""Held-out measurements of a preference-tuned policy against its reference: sequential KL, entropy, feature MSE.

:func:`reference_kl` gives, per sequence, the sequential ``KL(pi_ref || pi_theta)`` summed over response
tokens (the paper's controllability metric, Fig. 3) and the policy's mean next-token entropy there;
:func:`feature_mse` gives FPO's feature distance ``D`` of the policy's pooled SAE features to a reference
:class:`FeatureCache`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, Interval, Options
from trustlab.core.optional import require
from trustlab.methods.fpo._cache import FeatureCache, features_of
from trustlab.methods.fpo._loss import feature_distance
from trustlab.methods.fpo._objective import _adapters_off, _segment_sum, response_logits
from trustlab.methods.fpo._sae import ROWS, SparseAutoencoder, _forward_rule, _fwd_example

torch = require("torch", purpose="trustlab.methods.fpo evaluation")

__all__ = ["KLEval", "feature_mse", "reference_kl"]


@dataclass(frozen=True)
class KLEval:
    """Per-sequence sequential KL(ref || policy) ``kl``, mean policy entropy ``entropy`` and token counts."""

    kl: np.ndarray
    entropy: np.ndarray
    n_tokens: np.ndarray

    @property
    def mean_kl(self) -> float:
        return float(self.kl.mean())


def _batches(forward: Any, rows: Any, batch_size: int) -> list[np.ndarray]:
    idx = np.arange(len(forward.sequences)) if rows is None else np.asarray(rows, dtype=np.int64).reshape(-1)
    return [idx[s : s + batch_size] for s in range(0, len(idx), batch_size)]


@validate_args(forward=_forward_rule(), rows=ROWS, batch_size=[Interval(int, 1, None)], _example=_fwd_example)
def reference_kl(forward: Any, rows: Any = None, *, batch_size: int = 16) -> KLEval:
    """Sequential ``KL(pi_ref || pi_theta)`` and policy entropy over the response tokens of ``rows``.

    The reference is ``forward.model`` with its adapters disabled (a plain model gives KL 0).

    Examples
    --------
    >>> from trustlab.llm import PolicyForward, tiny_random_llama, tokenize_pairs
    >>> model, tok = tiny_random_llama()
    >>> fwd = PolicyForward(model, tokenize_pairs(tok, ["Hi"], ["Hello"]), replay=None)
    >>> float(reference_kl(fwd).kl[0])
    0.0
    """
    from trustlab.llm import token_kl

    kls, ents, cnts = [], [], []
    was = forward.model.training
    forward.model.eval()
    try:
        with torch.no_grad():
            for r in _batches(forward, rows, batch_size):
                logits, _, row = response_logits(forward, r)
                with _adapters_off(forward.model):
                    ref, _, _ = response_logits(forward, r)
                kl = token_kl(logits, ref, order="ref_policy")
                lp = torch.log_softmax(logits, -1)
                ent = -(lp.exp() * lp).sum(-1)
                cnt = _segment_sum(torch.ones_like(kl), row, len(r))
                kls.append(_segment_sum(kl, row, len(r)).cpu().numpy())
                ents.append((_segment_sum(ent, row, len(r)) / cnt.clamp(min=1)).cpu().numpy())
                cnts.append(cnt.cpu().numpy())
    finally:
        forward.model.train(was)
    return KLEval(np.concatenate(kls).astype(float), np.concatenate(ents).astype(float),
                  np.concatenate(cnts).astype(int))


@validate_args(forward=_forward_rule(), sae=[SparseAutoencoder], cache=[FeatureCache], rows=ROWS,
               k=[Interval(int, 1, None)], union=[Boolean()], site=[Options(("resid", "final_norm"))], batch_size=[Interval(int, 1, None)], units=[Options(("raw", "normalised"))],
               _example=lambda: _fm_example())
def feature_mse(forward: Any, sae: SparseAutoencoder, cache: FeatureCache, rows: Any = None, *, k: int = 32,
                union: bool = True, site: str = "resid", batch_size: int = 16, units: str = "raw") -> np.ndarray:
    """FPO's ``D`` (union top-k squared difference / k) of the policy's pooled features to ``cache``, per row,
    in ``units`` (:meth:`SparseAutoencoder.distance_units`; "raw" as :class:`FPOObjective`)."""
    unit = sae.distance_units(units)
    cache.check(forward, sae, site=site)
    out = []
    was = forward.model.training
    forward.model.eval()
    try:
        with torch.no_grad():
            for r in _batches(forward, rows, batch_size):
                f = features_of(forward, sae, r, forward.hidden(r, final_norm=False), site)
                d = feature_distance(f, cache.rows(r).to(f), min(k, sae.width), union=union)
                out.append((unit * d).cpu().numpy())
    finally:
        forward.model.train(was)
    return np.concatenate(out).astype(float)


def _fm_example() -> dict[str, Any]:
    ex = _fwd_example()
    sae = SparseAutoencoder(72, 16, k=4)
    return {**ex, "sae": sae, "cache": FeatureCache.compute(ex["forward"], sae), "k": 4}
