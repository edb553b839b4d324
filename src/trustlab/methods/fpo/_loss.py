"""FPO and TDPO losses as pure tensor functions (beside the shared losses of :mod:`trustlab.llm.losses`).

``pc, pr`` are the policy's summed response log-probs of chosen / rejected ``[B]``, ``rc, rr`` the
reference's, ``nc, nr`` the response-token counts. FPO (paper Eq. 11, the released ``fpo.py``)::

    u = (pc - rc) / nc - (pr - rr) / nr - alpha * (D(x, y_l) - sg(D(x, y_w)))
    loss = -log sigmoid(beta * u)

with :func:`feature_distance` ``D = (1/k) sum_{i in I} (cbar_theta,i - cbar_ref,i)^2`` on the pooled SAE
features, ``I = topk(cbar_theta) U topk(cbar_ref)`` (paper; ``union=False``: the policy's top-k only, as
the released code). With ``alpha = 0`` FPO is length-normalised DPO (trl ``sigmoid_norm``). TDPO (Zeng et
al. 2024, the baseline of the paper) uses the sequential KL ``sum_t KL(pi_ref || pi_theta)`` instead of D
and unnormalised log-ratios; variant 2 stops the gradient of the chosen KL, variant 1 does not and has no
alpha.
"""

from __future__ import annotations

from typing import Any

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Boolean, Interval, Options, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.optional import require

torch = require("torch", purpose="trustlab.methods.fpo losses")
F = torch.nn.functional

__all__ = ["feature_distance", "fpo_loss", "tdpo_loss"]

_VEC = [ArrayLike(ndim=1)]
_COUNTS = [ArrayLike(ndim=1, low=1)]
_BETA = [Interval(float, 0, None, closed="neither")]
_ALPHA = [Interval(float, 0, None)]
_RED = [Options(("mean", "sum", "none"))]


def _tensors(owner: str, **xs: Any) -> list[Any]:
    ts = [x if isinstance(x, torch.Tensor) else torch.as_tensor(x, dtype=torch.float64) for x in xs.values()]
    if len({tuple(t.shape) for t in ts}) != 1:
        got = ", ".join(f"{k} {tuple(t.shape)}" for k, t in zip(xs, ts))
        raise InputError(f"The inputs of {owner} must have one shape [B]. Got {got}.")
    dtype = ts[0].dtype
    for t in ts[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    dtype = dtype if dtype.is_floating_point else torch.float32
    dev = ts[0].device
    return [t.to(dtype=dtype, device=dev) for t in ts]


def _reduce(x: Any, reduction: str) -> Any:
    return x.mean() if reduction == "mean" else x.sum() if reduction == "sum" else x


def _feats_rule() -> Any:
    return [Satisfies(lambda x: isinstance(x, torch.Tensor) and x.ndim == 2 and x.is_floating_point(),
                      "a floating-point torch tensor [B, width] of pooled SAE features", invalid=["f", None],
                      valid=NotImplemented)]


@validate_args(policy_features=_feats_rule(), reference_features=_feats_rule(), k=[Interval(int, 1, None)],
               union=[Boolean()], weights=[Satisfies(lambda w: w is None or (isinstance(w, torch.Tensor) and w.ndim == 1),
                                                     "None or a 1-d torch tensor [width]", invalid=["w"],
                                                     valid=NotImplemented)],
               _example=lambda: {"policy_features": torch.zeros(1, 4), "reference_features": torch.zeros(1, 4), "k": 2})
def feature_distance(policy_features: Any, reference_features: Any, k: int, *, union: bool = True,
                     weights: Any = None) -> Any:
    """FPO's feature-level distance ``D`` per row ``[B]`` (paper Eq. 10).

    ``(1/k) sum_{i in I} w_i (p_i - r_i)^2`` with ``I = topk(p) U topk(r)`` (``union=False``: ``topk(p)``,
    the released code). ``weights`` (``[width]``, default 1) is the per-feature weighting of the paper's
    targeted-control runs (Table 4). The gradient flows into ``policy_features`` only.

    Examples
    --------
    >>> import torch
    >>> p, r = torch.tensor([[3.0, 0.0, 1.0]]), torch.tensor([[0.0, 2.0, 1.0]])
    >>> feature_distance(p, r, k=1).tolist()  # I = {0} U {1}: (9 + 4) / 1
    [13.0]
    """
    if policy_features.shape != reference_features.shape:
        raise InputError(f"feature_distance needs policy and reference features of one shape [B, width]. Got "
                         f"{tuple(policy_features.shape)} and {tuple(reference_features.shape)}.")
    width = policy_features.shape[1]
    if k > width:
        raise InputError(f"The 'k' argument of feature_distance must be an int in [1, width={width}]. Got {k} instead.")
    r = reference_features.detach().to(policy_features)
    mask = torch.zeros_like(policy_features, dtype=torch.bool)
    mask.scatter_(1, policy_features.detach().topk(k, dim=1).indices, True)
    if union:
        mask.scatter_(1, r.topk(k, dim=1).indices, True)
    sq = (policy_features - r) ** 2
    if weights is not None:
        if weights.shape[0] != width:
            raise InputError(f"The 'weights' of feature_distance must have length width={width}. Got {weights.shape[0]}.")
        sq = sq * weights.to(sq)
    return (sq * mask).sum(1) / k


@validate_args(policy_chosen=_VEC, policy_rejected=_VEC, ref_chosen=_VEC, ref_rejected=_VEC, chosen_tokens=_COUNTS,
               rejected_tokens=_COUNTS, distance_chosen=[ArrayLike(ndim=1, low=0)],
               distance_rejected=[ArrayLike(ndim=1, low=0)], beta=_BETA, alpha=_ALPHA, stop_gradient=[Boolean()],
               reduction=_RED)
def fpo_loss(policy_chosen: Any, policy_rejected: Any, ref_chosen: Any, ref_rejected: Any, chosen_tokens: Any,
             rejected_tokens: Any, distance_chosen: Any, distance_rejected: Any, *, beta: float = 0.1,
             alpha: float = 0.5, stop_gradient: bool = True, reduction: str = "mean") -> Any:
    """FPO loss ``-log sigmoid(beta * (LPD_norm - alpha * (D_l - sg(D_w))))`` (module docstring).

    ``distance_*`` are :func:`feature_distance` of the chosen and rejected responses. ``stop_gradient``
    (default, the paper's choice) detaches ``D_w``.

    Examples
    --------
    >>> import torch
    >>> z, one = torch.zeros(1), torch.ones(1)
    >>> round(float(fpo_loss(z, z, z, z, one, one, z, z)), 6)  # log 2
    0.693147
    """
    pc, pr, rc, rr, nc, nr, dc, dr = _tensors(
        "fpo_loss", policy_chosen=policy_chosen, policy_rejected=policy_rejected, ref_chosen=ref_chosen,
        ref_rejected=ref_rejected, chosen_tokens=chosen_tokens, rejected_tokens=rejected_tokens,
        distance_chosen=distance_chosen, distance_rejected=distance_rejected)
    dc = dc.detach() if stop_gradient else dc
    u = (pc - rc) / nc - (pr - rr) / nr - float(alpha) * (dr - dc)
    return _reduce(-F.logsigmoid(float(beta) * u), reduction)


@validate_args(policy_chosen=_VEC, policy_rejected=_VEC, ref_chosen=_VEC, ref_rejected=_VEC,
               kl_chosen=[ArrayLike(ndim=1)], kl_rejected=[ArrayLike(ndim=1)], beta=_BETA, alpha=_ALPHA,
               variant=[Options((1, 2))], reduction=_RED)
def tdpo_loss(policy_chosen: Any, policy_rejected: Any, ref_chosen: Any, ref_rejected: Any, kl_chosen: Any,
              kl_rejected: Any, *, beta: float = 0.1, alpha: float = 0.5, variant: int = 2,
              reduction: str = "mean") -> Any:
    """TDPO loss with sequential KLs ``sum_t KL(pi_ref || pi_theta)`` of the chosen / rejected responses.

    Variant 2: ``u = (pc - rc) - (pr - rr) - alpha * (KL_l - sg(KL_w))``; variant 1: ``... - (KL_l - KL_w)``
    (no alpha, no stop-gradient); ``loss = -log sigmoid(beta * u)``. KLs come from
    :func:`trustlab.llm.sequence_kl` with ``order="ref_policy"``.

    Examples
    --------
    >>> import torch
    >>> z = torch.zeros(2)
    >>> round(float(tdpo_loss(z, z, z, z, z, z)), 6)
    0.693147
    """
    pc, pr, rc, rr, kc, kr = _tensors("tdpo_loss", policy_chosen=policy_chosen, policy_rejected=policy_rejected,
                                      ref_chosen=ref_chosen, ref_rejected=ref_rejected, kl_chosen=kl_chosen,
                                      kl_rejected=kl_rejected)
    margin = (pc - rc) - (pr - rr)
    u = margin - (kr - kc) if variant == 1 else margin - float(alpha) * (kr - kc.detach())
    return _reduce(-F.logsigmoid(float(beta) * u), reduction)
