"""FPO and TDPO as objectives of the shared trainer :func:`trustlab.llm.train` (no training loop here).

:class:`FPOObjective` runs one policy forward per step (top-K replay, chosen and rejected packed by shared
prompt), takes the last block's output, applies the final norm for the log-probs and the frozen SAE for
the pooled features, and reads the reference log-probs and reference features from offline caches
(:class:`trustlab.llm.ReferenceCache`, :class:`FeatureCache`). ``reference="online"`` / ``features="online"``
recompute them every step with the adapters disabled (what the released code does; the exactness test
compares the two). :class:`TDPOObjective` is the TDPO baseline: an online reference forward and the
full-vocabulary sequential KL at every response token.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, Interval, Options
from trustlab.core.exceptions import ConfigError
from trustlab.core.optional import require
from trustlab.llm.refcache import ReferenceCache
from trustlab.methods.fpo._cache import FeatureCache, features_of
from trustlab.methods.fpo._loss import feature_distance, fpo_loss, tdpo_loss
from trustlab.methods.fpo._sae import SparseAutoencoder

torch = require("torch", purpose="trustlab.methods.fpo objectives")

__all__ = ["FPOObjective", "PostNormSAEWarning", "TDPOObjective"]


class PostNormSAEWarning(UserWarning):
    """Features taken after the final norm (HF ``hidden_states[-1]``) for an SAE of the residual stream."""


def _forward(policy: Any, pairs: Any, replay: Any, owner: str) -> Any:
    from trustlab.llm import PolicyForward, PreferencePairs

    if not isinstance(pairs, PreferencePairs):
        raise ConfigError(f"The 'pairs' argument of {owner} must be PreferencePairs (tokenize_preferences). "
                          f"Got {type(pairs).__name__} instead.")
    if isinstance(policy, PolicyForward):
        if policy.sequences.fingerprint() != pairs.sequences.fingerprint():
            raise ConfigError(f"The PolicyForward passed to {owner} was built on other sequences.")
        return policy
    if not isinstance(policy, torch.nn.Module):
        raise ConfigError(f"{owner} needs a causal LM or a PolicyForward. Got {type(policy).__name__} instead.")
    return PolicyForward(policy, pairs.sequences, replay=replay)


def _adapters_off(model: Any) -> Any:
    from trustlab.llm import is_adapted

    return model.disable_adapter() if is_adapted(model) else contextlib.nullcontext()


class FPOObjective:
    """Feature-level constrained preference optimisation (paper Eq. 11) for :func:`trustlab.llm.train`.

    Parameters
    ----------
    policy : peft causal LM or PolicyForward on ``pairs.sequences``
    pairs : PreferencePairs
    sae : SparseAutoencoder
        Frozen, trained on the reference model's last-block activations (``d_in`` = hidden size).
    beta : float > 0, default=0.1
    alpha : float >= 0, default=0.5
        Weight of the feature term; 0 gives length-normalised DPO.
    k : int, default=32
        Top-k features per sequence in ``D`` (1 <= k <= sae.width).
    layer : int, default=-1
        The SAE's block; only the last block (-1 or n_layers - 1) is supported (the paper's deepest
        residual choice; every LoRA block sits below it).
    mode : {"paper", "official"}, default="paper"
        "paper": union top-k, features of the block output before the final norm. "official": the released
        code's choices, the policy's top-k only and features after the final norm (warns
        :class:`PostNormSAEWarning`).
    reference : "cache", "online" or ReferenceCache, default="cache"
    features : "cache", "online" or FeatureCache, default="cache"
    feature_weights : tensor [width], optional
        Per-feature weights inside ``D`` (the paper's targeted control).
    stop_gradient : bool, default=True
        Detach ``D`` of the chosen response (paper).
    units : {"raw", "normalised"}, default="raw"
        Units of ``D``: "raw" measures features of the un-normalised activations (``D / s^2`` with the SAE's
        input scale ``s``), the scale of the paper's Gemma Scope SAEs, for which alpha = 0.5 was set;
        "normalised" uses the features of the unit-norm inputs, where ``D`` is ``s^2`` (~1e-5 for SmolLM2)
        times smaller and alpha = 0.5 leaves FPO equal to length-normalised DPO.
    replay : "auto", int or None, default="auto"
    """

    @validate_args(
        sae=[SparseAutoencoder], beta=[Interval(float, 0, None, closed="neither")], alpha=[Interval(float, 0, None)],
        k=[Interval(int, 1, None)], layer=[Interval(int, None, None)], mode=[Options(("paper", "official"))],
        reference=[Options(("cache", "online")), ReferenceCache], features=[Options(("cache", "online")), FeatureCache],
        stop_gradient=[Boolean()], replay=[Interval(int, 1, None), Options(["auto"]), None],
        units=[Options(("raw", "normalised"))],
        policy="no_validation", pairs="no_validation", feature_weights="no_validation",
    )
    def __init__(self, policy: Any, pairs: Any, sae: SparseAutoencoder, *, beta: float = 0.1, alpha: float = 0.5,
                 k: int = 32, layer: int = -1, mode: str = "paper", reference: Any = "cache",
                 features: Any = "cache", feature_weights: Any = None, stop_gradient: bool = True,
                 replay: Any = "auto", units: str = "raw") -> None:
        from trustlab.llm import dims

        self.forward = _forward(policy, pairs, replay, "FPOObjective")
        model = self.forward.model
        n_layers, d = dims(model).n_layers, model.config.hidden_size
        if not -n_layers <= layer < n_layers:
            raise ConfigError(f"The 'layer' argument of FPOObjective must be a block index in [-{n_layers}, "
                              f"{n_layers - 1}]. Got {layer} instead.")
        if layer % n_layers != n_layers - 1:
            raise ConfigError(f"FPOObjective supports the SAE at the last block only (layer=-1 or {n_layers - 1}, "
                              f"the paper's choice). Got layer={layer}.")
        if sae.d_in != d:
            raise ConfigError(f"The 'sae' of FPOObjective has d_in={sae.d_in}, but the model's hidden size is {d}: "
                              "train the SAE on this model's activations (collect_activations).")
        if k > sae.width:
            raise ConfigError(f"The 'k' argument of FPOObjective must be an int in [1, sae.width={sae.width}]. "
                              f"Got {k} instead.")
        self.site = "resid" if mode == "paper" else "final_norm"
        if self.site == "final_norm":
            warnings.warn("FPOObjective(mode='official') encodes the last block's states after the final norm "
                          "(hidden_states[-1]) with an SAE of the residual stream, as the released code does; "
                          "the SAE was trained on pre-norm activations.", PostNormSAEWarning, stacklevel=2)
        self.pairs, self.sae = pairs, sae.requires_grad_(False)
        self.beta, self.alpha, self.k, self.union = float(beta), float(alpha), int(k), mode == "paper"
        self.weights, self.stop_gradient = feature_weights, bool(stop_gradient)
        self.units, self.unit = units, sae.distance_units(units)
        if reference == "cache":
            reference = ReferenceCache.compute(self.forward)
        elif isinstance(reference, ReferenceCache):
            reference.check(self.forward)
        if features == "cache":
            features = FeatureCache.compute(self.forward, sae, site=self.site)
        elif isinstance(features, FeatureCache):
            features.check(self.forward, sae, site=self.site)
        self.reference, self.features = reference, features

    @property
    def n_items(self) -> int:
        return self.pairs.n_pairs

    def prepare(self) -> None:
        self.forward.check_fresh()

    def _reference(self, seq: np.ndarray) -> tuple[Any, Any]:
        """Reference (summed log-probs, pooled features) of sequence rows, cached or online."""
        ref_sum = feats = None
        if self.reference != "online":
            ref_sum = self.reference.rows(seq)[0]
        if self.features != "online":
            feats = self.features.rows(seq)
        if ref_sum is None or feats is None:
            with torch.no_grad(), _adapters_off(self.forward.model):
                h = self.forward.hidden(seq, final_norm=False)
                if ref_sum is None:
                    ref_sum = self.forward.sequence_logprobs(seq, hidden=self.forward.final_norm(h)).sum
                if feats is None:
                    feats = features_of(self.forward, self.sae, seq, h, self.site)
        return ref_sum, feats

    def __call__(self, rows: Any) -> Any:
        from trustlab.llm import StepOutput

        c, r = self.pairs.rows(rows)
        seq, b = np.concatenate([c, r]), len(c)
        h = self.forward.hidden(seq, final_norm=False)
        lp = self.forward.sequence_logprobs(seq, hidden=self.forward.final_norm(h))
        feats = features_of(self.forward, self.sae, seq, h, self.site)
        ref_sum, ref_feats = self._reference(seq)
        ref_sum = ref_sum.to(device=lp.sum.device, dtype=lp.sum.dtype)
        dist = self.unit * feature_distance(feats, ref_feats.to(feats), self.k, union=self.union,
                                            weights=self.weights)
        n = lp.n_tokens.to(lp.sum)
        loss = fpo_loss(lp.sum[:b], lp.sum[b:], ref_sum[:b], ref_sum[b:], n[:b], n[b:], dist[:b], dist[b:],
                        beta=self.beta, alpha=self.alpha, stop_gradient=self.stop_gradient)
        with torch.no_grad():
            m = (lp.sum[:b] - ref_sum[:b]) / n[:b] - (lp.sum[b:] - ref_sum[b:]) / n[b:]
        return StepOutput(loss, {"margin": float(self.beta * m.mean()), "accuracy": float((m > 0).float().mean()),
                                 "feature_mse_rejected": float(dist[b:].detach().mean()),
                                 "feature_mse_chosen": float(dist[:b].detach().mean())})


def response_logits(forward: Any, rows: Any, hidden: Any = None) -> tuple[Any, Any, Any]:
    """Full-vocabulary logits at the positions predicting response tokens ``[m, V]``, the targets ``[m]`` and
    the row of each ``[m]`` (row-major order)."""
    from trustlab.llm.scoring import head_logits

    ids, att, resp = forward.batch(rows)
    h = forward.hidden(rows) if hidden is None else hidden
    sel = (resp.bool() & att.bool()).to(h.device)
    sel[:, 0] = False
    pred = h[:, :-1][sel[:, 1:]]
    targets = ids.to(h.device)[:, 1:][sel[:, 1:]]
    row = torch.nonzero(sel[:, 1:])[:, 0]
    return head_logits(forward.model, pred).float(), targets, row


def _segment_sum(values: Any, row: Any, n: int) -> Any:
    return torch.zeros(n, dtype=values.dtype, device=values.device).index_add(0, row, values)


class TDPOObjective:
    """TDPO (token-level DPO, Zeng et al. 2024) for :func:`trustlab.llm.train`: online reference, full-vocab KL.

    Parameters
    ----------
    policy : peft causal LM or PolicyForward on ``pairs.sequences``
    pairs : PreferencePairs
    beta : float > 0, default=0.1
    alpha : float >= 0, default=0.5
    variant : {1, 2}, default=2
    replay : "auto", int or None, default="auto"
    """

    @validate_args(beta=[Interval(float, 0, None, closed="neither")], alpha=[Interval(float, 0, None)],
                   variant=[Options((1, 2))], replay=[Interval(int, 1, None), Options(["auto"]), None],
                   policy="no_validation", pairs="no_validation")
    def __init__(self, policy: Any, pairs: Any, *, beta: float = 0.1, alpha: float = 0.5, variant: int = 2,
                 replay: Any = "auto") -> None:
        from trustlab.llm import is_adapted

        self.forward = _forward(policy, pairs, replay, "TDPOObjective")
        if not is_adapted(self.forward.model):
            raise ConfigError("TDPOObjective needs a peft model (its adapters are disabled for the online reference).")
        self.pairs, self.beta, self.alpha, self.variant = pairs, float(beta), float(alpha), int(variant)

    @property
    def n_items(self) -> int:
        return self.pairs.n_pairs

    def prepare(self) -> None:
        self.forward.check_fresh()

    def __call__(self, rows: Any) -> Any:
        from trustlab.llm import StepOutput, token_kl

        c, r = self.pairs.rows(rows)
        seq, b = np.concatenate([c, r]), len(c)
        logits, targets, row = response_logits(self.forward, seq)
        with torch.no_grad(), _adapters_off(self.forward.model):
            ref_logits, _, _ = response_logits(self.forward, seq)
        lp = torch.log_softmax(logits, -1).gather(-1, targets[:, None])[:, 0]
        rlp = torch.log_softmax(ref_logits, -1).gather(-1, targets[:, None])[:, 0]
        kl = token_kl(logits, ref_logits, order="ref_policy")
        n = len(seq)
        ps, rs, ks = _segment_sum(lp, row, n), _segment_sum(rlp, row, n), _segment_sum(kl, row, n)
        loss = tdpo_loss(ps[:b], ps[b:], rs[:b], rs[b:], ks[:b], ks[b:], beta=self.beta, alpha=self.alpha,
                         variant=self.variant)
        with torch.no_grad():
            m = (ps[:b] - rs[:b]) - (ps[b:] - rs[b:])
        return StepOutput(loss, {"margin": float(self.beta * m.mean()), "accuracy": float((m > 0).float().mean()),
                                 "kl_rejected": float(ks[b:].detach().mean())})
