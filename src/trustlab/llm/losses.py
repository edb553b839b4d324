"""Training losses as pure tensor functions of log-probs (no model inside): SFT, DPO family, SimPO, KL.

Inputs are per-sequence summed response log-probs (``policy_chosen`` etc., shape ``[B]``) and, where a
loss normalises by length, the response-token counts; per-token inputs are ``[B, T]`` with a response
mask. Every preference loss returns the batch mean by default (``reduction="none"`` gives one value per
pair). The formulas follow trl 1.16 (checked against it in the tests):

* ``dpo``: ``-log sigmoid(beta * ((pc - rc) - (pr - rr)))`` (trl ``loss_type="sigmoid"``), with optional
  conservative label smoothing.
* ``ipo``: ``(((pc - rc) - (pr - rr)) - 1 / (2 beta))^2``; with token counts the log-ratios are
  length-normalised first, as trl does (trl ``"ipo"``).
* ``dpo_norm`` (length-normalised DPO): DPO on mean per-token log-ratios (trl ``"sigmoid_norm"``).
* ``simpo``: ``-log sigmoid(beta * (mean_c - mean_r) - gamma)``, reference-free (trl CPO ``"simpo"``).
* :func:`sequence_kl`: sum over response positions of the full-vocabulary KL between policy and reference.
"""

from __future__ import annotations

from typing import Any

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval, Options
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.optional import require

torch = require("torch", purpose="trustlab.llm losses")
F = torch.nn.functional

__all__ = [
    "REFERENCE_FREE",
    "dpo_loss",
    "ipo_loss",
    "length_normalized_dpo_loss",
    "preference_loss",
    "preference_margins",
    "sequence_kl",
    "sft_loss",
    "simpo_loss",
    "token_kl",
    "topk_kl",
]

#: preference loss names accepted by :func:`preference_loss` and :class:`trustlab.llm.PreferenceObjective`
PREFERENCE_LOSSES = ("dpo", "ipo", "dpo_norm", "simpo")
#: losses that need no reference log-probs
REFERENCE_FREE = frozenset({"simpo"})

_VEC = [ArrayLike(ndim=1)]
_BETA = [Interval(float, 0, None, closed="neither")]
_RED = [Options(("mean", "sum", "none"))]
_SMOOTH = [Interval(float, 0, 0.5, closed="left")]


def _t(x: Any, like: Any = None) -> Any:
    if isinstance(x, torch.Tensor):
        return x
    dev = like.device if isinstance(like, torch.Tensor) else None
    return torch.as_tensor(x, dtype=torch.float64 if like is None else like.dtype, device=dev)


def _same_shape(owner: str, **xs: Any) -> list[Any]:
    ts = [_t(v) for v in xs.values()]
    shapes = {tuple(t.shape) for t in ts}
    if len(shapes) != 1:
        got = ", ".join(f"{k} {tuple(t.shape)}" for k, t in zip(xs, ts))
        raise InputError(f"The inputs of {owner} must have one shape [B]. Got {got}.")
    dtype = ts[0].dtype
    for t in ts[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    if not dtype.is_floating_point:
        dtype = torch.float32
    return [t.to(dtype) for t in ts]


def _reduce(x: Any, reduction: str) -> Any:
    return x.mean() if reduction == "mean" else x.sum() if reduction == "sum" else x


def _sigmoid_loss(logits: Any, beta: float, label_smoothing: float) -> Any:
    out = -F.logsigmoid(beta * logits)
    if label_smoothing:
        out = (1 - label_smoothing) * out - label_smoothing * F.logsigmoid(-beta * logits)
    return out


@validate_args(policy_chosen=_VEC, policy_rejected=_VEC, ref_chosen=_VEC, ref_rejected=_VEC, beta=_BETA,
               label_smoothing=_SMOOTH, reduction=_RED)
def dpo_loss(policy_chosen: Any, policy_rejected: Any, ref_chosen: Any, ref_rejected: Any, *, beta: float = 0.1,
             label_smoothing: float = 0.0, reduction: str = "mean") -> Any:
    """DPO (sigmoid) loss on summed response log-probs.

    Examples
    --------
    >>> import torch
    >>> round(float(dpo_loss(torch.zeros(2), torch.zeros(2), torch.zeros(2), torch.zeros(2))), 6)  # log 2
    0.693147
    """
    pc, pr, rc, rr = _same_shape("dpo_loss", policy_chosen=policy_chosen, policy_rejected=policy_rejected,
                                 ref_chosen=ref_chosen, ref_rejected=ref_rejected)
    return _reduce(_sigmoid_loss((pc - rc) - (pr - rr), float(beta), float(label_smoothing)), reduction)


@validate_args(policy_chosen=_VEC, policy_rejected=_VEC, ref_chosen=_VEC, ref_rejected=_VEC, beta=_BETA,
               chosen_tokens=[ArrayLike(ndim=1, low=1), None], rejected_tokens=[ArrayLike(ndim=1, low=1), None],
               reduction=_RED)
def ipo_loss(policy_chosen: Any, policy_rejected: Any, ref_chosen: Any, ref_rejected: Any, *, beta: float = 0.1,
             chosen_tokens: Any = None, rejected_tokens: Any = None, reduction: str = "mean") -> Any:
    """IPO loss; with token counts the log-ratios are length-normalised first (trl's form).

    Examples
    --------
    >>> import torch
    >>> float(ipo_loss(torch.zeros(1), torch.zeros(1), torch.zeros(1), torch.zeros(1), beta=0.5))
    1.0
    """
    pc, pr, rc, rr = _same_shape("ipo_loss", policy_chosen=policy_chosen, policy_rejected=policy_rejected,
                                 ref_chosen=ref_chosen, ref_rejected=ref_rejected)
    dc, dr = pc - rc, pr - rr
    if (chosen_tokens is None) != (rejected_tokens is None):
        raise ConfigError("ipo_loss needs both chosen_tokens and rejected_tokens, or neither.")
    if chosen_tokens is not None:
        dc, dr = dc / _t(chosen_tokens, dc), dr / _t(rejected_tokens, dr)
    return _reduce((dc - dr - 1.0 / (2.0 * float(beta))) ** 2, reduction)


@validate_args(policy_chosen=_VEC, policy_rejected=_VEC, ref_chosen=_VEC, ref_rejected=_VEC,
               chosen_tokens=[ArrayLike(ndim=1, low=1)], rejected_tokens=[ArrayLike(ndim=1, low=1)], beta=_BETA,
               label_smoothing=_SMOOTH, reduction=_RED)
def length_normalized_dpo_loss(policy_chosen: Any, policy_rejected: Any, ref_chosen: Any, ref_rejected: Any,
                               chosen_tokens: Any, rejected_tokens: Any, *, beta: float = 0.1,
                               label_smoothing: float = 0.0, reduction: str = "mean") -> Any:
    """DPO on mean per-token log-ratios (trl ``sigmoid_norm``; FPO without its feature term).

    Examples
    --------
    >>> import torch
    >>> z = torch.zeros(1)
    >>> round(float(length_normalized_dpo_loss(z, z, z, z, torch.ones(1), torch.ones(1))), 6)
    0.693147
    """
    pc, pr, rc, rr = _same_shape("length_normalized_dpo_loss", policy_chosen=policy_chosen,
                                 policy_rejected=policy_rejected, ref_chosen=ref_chosen, ref_rejected=ref_rejected)
    nc, nr = _t(chosen_tokens, pc), _t(rejected_tokens, pr)
    logits = (pc - rc) / nc - (pr - rr) / nr
    return _reduce(_sigmoid_loss(logits, float(beta), float(label_smoothing)), reduction)


@validate_args(policy_chosen=_VEC, policy_rejected=_VEC, chosen_tokens=[ArrayLike(ndim=1, low=1)],
               rejected_tokens=[ArrayLike(ndim=1, low=1)], beta=_BETA, gamma=[Interval(float, None, None)],
               label_smoothing=_SMOOTH, reduction=_RED)
def simpo_loss(policy_chosen: Any, policy_rejected: Any, chosen_tokens: Any, rejected_tokens: Any, *,
               beta: float = 2.0, gamma: float = 0.5, label_smoothing: float = 0.0, reduction: str = "mean") -> Any:
    """SimPO: ``-log sigmoid(beta * (mean_c - mean_r) - gamma)`` on length-normalised log-probs (no reference).

    Examples
    --------
    >>> import torch
    >>> round(float(simpo_loss(torch.zeros(1), torch.zeros(1), torch.ones(1), torch.ones(1), gamma=0.0)), 4)
    0.6931
    """
    pc, pr = _same_shape("simpo_loss", policy_chosen=policy_chosen, policy_rejected=policy_rejected)
    logits = pc / _t(chosen_tokens, pc) - pr / _t(rejected_tokens, pr) - float(gamma) / float(beta)
    return _reduce(_sigmoid_loss(logits, float(beta), float(label_smoothing)), reduction)


@validate_args(token_logps=[ArrayLike(ndim=2)], response_mask=[ArrayLike(ndim=2)],
               reduction=[Options(("token_mean", "sequence_mean", "sum"))])
def sft_loss(token_logps: Any, response_mask: Any, *, reduction: str = "token_mean") -> Any:
    """Response-masked negative log-likelihood from per-token log-probs ``[B, T]``.

    ``token_mean``: mean over all response tokens of the batch (what HF's ``labels`` loss and trl's SFT
    term compute); ``sequence_mean``: mean over sequences of each one's mean NLL; ``sum``: mean over
    sequences of each one's summed NLL.

    Examples
    --------
    >>> import torch
    >>> float(sft_loss(torch.tensor([[0.0, -1.0, -3.0]]), torch.tensor([[0, 1, 1]])))
    2.0
    """
    lp = _t(token_logps)
    mask = _t(response_mask).to(lp.device).bool()
    if mask.shape != lp.shape:
        raise InputError(f"sft_loss needs token_logps and response_mask of one shape. Got {tuple(lp.shape)} "
                         f"and {tuple(mask.shape)}.")
    if not bool(mask.any()):
        raise InputError("sft_loss got a response_mask with no scored token.")
    nll = -(lp * mask)
    if reduction == "token_mean":
        return nll.sum() / mask.sum()
    per = nll.sum(1)
    if reduction == "sequence_mean":
        per = per / mask.sum(1).clamp(min=1)
    return per.mean()


@validate_args(policy_chosen=_VEC, policy_rejected=_VEC, ref_chosen=[ArrayLike(ndim=1), None],
               ref_rejected=[ArrayLike(ndim=1), None], beta=_BETA)
def preference_margins(policy_chosen: Any, policy_rejected: Any, ref_chosen: Any = None, ref_rejected: Any = None,
                       *, beta: float = 0.1) -> Any:
    """Implicit reward margins ``beta * ((pc - rc) - (pr - rr))`` (reference-free without ref log-probs).

    A pair is ranked correctly when its margin is > 0 (the preference accuracy of DPO papers).

    Examples
    --------
    >>> import torch
    >>> preference_margins(torch.tensor([-1.0]), torch.tensor([-2.0]), beta=1.0).tolist()
    [1.0]
    """
    if (ref_chosen is None) != (ref_rejected is None):
        raise ConfigError("preference_margins needs both ref_chosen and ref_rejected, or neither.")
    if ref_chosen is None:
        pc, pr = _same_shape("preference_margins", policy_chosen=policy_chosen, policy_rejected=policy_rejected)
        return float(beta) * (pc - pr)
    pc, pr, rc, rr = _same_shape("preference_margins", policy_chosen=policy_chosen,
                                 policy_rejected=policy_rejected, ref_chosen=ref_chosen, ref_rejected=ref_rejected)
    return float(beta) * ((pc - rc) - (pr - rr))


def _name_rule() -> Any:
    return [Options(PREFERENCE_LOSSES)]


@validate_args(name=_name_rule(), policy_chosen=_VEC, policy_rejected=_VEC, ref_chosen=[ArrayLike(ndim=1), None],
               ref_rejected=[ArrayLike(ndim=1), None], chosen_tokens=[ArrayLike(ndim=1, low=1), None],
               rejected_tokens=[ArrayLike(ndim=1, low=1), None], beta=_BETA, gamma=[Interval(float, None, None)],
               label_smoothing=_SMOOTH, reduction=_RED)
def preference_loss(name: str, policy_chosen: Any, policy_rejected: Any, ref_chosen: Any = None,
                    ref_rejected: Any = None, chosen_tokens: Any = None, rejected_tokens: Any = None, *,
                    beta: float = 0.1, gamma: float = 0.5, label_smoothing: float = 0.0,
                    reduction: str = "mean") -> Any:
    """One of :data:`PREFERENCE_LOSSES` by name, with one signature (what the trainer calls).

    Examples
    --------
    >>> import torch
    >>> z, one = torch.zeros(1), torch.ones(1)
    >>> round(float(preference_loss("simpo", z, z, chosen_tokens=one, rejected_tokens=one, beta=2.0, gamma=0.0)), 4)
    0.6931
    """
    needs_ref = name not in REFERENCE_FREE
    if needs_ref and (ref_chosen is None or ref_rejected is None):
        raise ConfigError(f"The {name!r} loss needs reference log-probs (ref_chosen and ref_rejected).")
    if name in ("dpo_norm", "simpo") and (chosen_tokens is None or rejected_tokens is None):
        raise ConfigError(f"The {name!r} loss needs chosen_tokens and rejected_tokens.")
    if name == "dpo":
        return dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=beta,
                        label_smoothing=label_smoothing, reduction=reduction)
    if name == "ipo":
        return ipo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=beta,
                        chosen_tokens=chosen_tokens, rejected_tokens=rejected_tokens, reduction=reduction)
    if name == "dpo_norm":
        return length_normalized_dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, chosen_tokens,
                                          rejected_tokens, beta=beta, label_smoothing=label_smoothing,
                                          reduction=reduction)
    return simpo_loss(policy_chosen, policy_rejected, chosen_tokens, rejected_tokens, beta=beta, gamma=gamma,
                      label_smoothing=label_smoothing, reduction=reduction)


_ORDER = [Options(("policy_ref", "ref_policy"))]


def _logits_rule() -> Any:
    from trustlab.core.constraints import Satisfies

    return [Satisfies(lambda x: isinstance(x, torch.Tensor) and x.ndim >= 1 and x.is_floating_point(),
                      "a floating-point torch tensor of logits or log-probs [..., vocab]",
                      invalid=["logits", None, 3.0], valid=NotImplemented)]


@validate_args(policy_logits=_logits_rule(), reference_logits=_logits_rule(), order=_ORDER,
               _example=lambda: {"policy_logits": torch.zeros(2, 3), "reference_logits": torch.zeros(2, 3)})
def token_kl(policy_logits: Any, reference_logits: Any, *, order: str = "policy_ref") -> Any:
    """Full-vocabulary KL per position, over the last dim: ``KL(policy || ref)`` or ``KL(ref || policy)``.

    Logits or log-probs are accepted (both are passed through ``log_softmax``).

    Examples
    --------
    >>> import torch
    >>> float(token_kl(torch.zeros(1, 4), torch.zeros(1, 4))[0])
    0.0
    """
    if policy_logits.shape != reference_logits.shape:
        raise InputError(f"token_kl needs logits of one shape. Got {tuple(policy_logits.shape)} and "
                         f"{tuple(reference_logits.shape)}.")
    lp = torch.log_softmax(policy_logits.float(), -1)
    lq = torch.log_softmax(reference_logits.float().to(lp.device), -1)
    if order == "ref_policy":
        lp, lq = lq, lp
    return (lp.exp() * (lp - lq)).sum(-1)


@validate_args(policy_logits=_logits_rule(), reference_logits=_logits_rule(), response_mask=[ArrayLike(ndim=2)],
               order=_ORDER,
               _example=lambda: {"policy_logits": torch.zeros(1, 2, 3), "reference_logits": torch.zeros(1, 2, 3)})
def sequence_kl(policy_logits: Any, reference_logits: Any, response_mask: Any, *, order: str = "policy_ref") -> Any:
    """Sequence-level KL ``[B]``: the sum over response positions of :func:`token_kl`.

    ``policy_logits`` and ``reference_logits`` are ``[B, T, V]`` and row ``t`` predicts token ``t + 1``
    (the HF logits layout); ``response_mask[b, t]`` marks token ``t`` as scored, so the KL at position
    ``t - 1`` enters. ``order="ref_policy"`` gives TDPO's / FPO's sequential ``KL(pi_ref || pi_theta)``.

    Examples
    --------
    >>> import torch
    >>> float(sequence_kl(torch.zeros(1, 3, 5), torch.zeros(1, 3, 5), torch.tensor([[0, 1, 1]]))[0])
    0.0
    """
    if policy_logits.ndim != 3:
        raise InputError(f"sequence_kl needs [B, T, V] logits. Got shape {tuple(policy_logits.shape)}.")
    mask = _t(response_mask).to(policy_logits.device).bool()
    if mask.shape != policy_logits.shape[:2]:
        raise InputError(f"The response_mask of sequence_kl must have shape {tuple(policy_logits.shape[:2])}. "
                         f"Got {tuple(mask.shape)}.")
    kl = token_kl(policy_logits[:, :-1], reference_logits[:, :-1], order=order)
    return (kl * mask[:, 1:]).sum(1)


@validate_args(policy_logits=_logits_rule(), ref_ids=[ArrayLike(ndim=2, dtype="integer", low=0)],
               ref_logps=[ArrayLike(ndim=2)],
               _example=lambda: {"policy_logits": torch.zeros(2, 3), "ref_ids": torch.zeros(2, 1, dtype=torch.long)})
def topk_kl(policy_logits: Any, ref_ids: Any, ref_logps: Any) -> Any:
    """``KL(ref || policy)`` per position ``[n]`` restricted to the reference's cached top-k tokens.

    ``sum_j p_ref(v_j) (log p_ref(v_j) - log p_policy(v_j))`` over the k stored tokens ``v_j``: exact when
    they hold all of the reference's mass, otherwise the tail is left out (use a larger k, or the full
    :func:`token_kl`, when the reference is flat).

    Examples
    --------
    >>> import torch
    >>> lp = torch.log_softmax(torch.tensor([[2.0, 0.0, -1.0]]), -1)
    >>> ids = torch.tensor([[0, 1, 2]])
    >>> round(float(topk_kl(lp, ids, lp.gather(-1, ids))[0]), 6)
    0.0
    """
    ids = _t(ref_ids).long().to(policy_logits.device)
    q = _t(ref_logps).to(policy_logits.device).float()
    if ids.shape != q.shape or ids.shape[0] != policy_logits.shape[0]:
        raise InputError(f"topk_kl needs ref_ids and ref_logps of shape [n, k] with n = {policy_logits.shape[0]}. "
                         f"Got {tuple(ids.shape)} and {tuple(q.shape)}.")
    lp = torch.log_softmax(policy_logits.float(), -1).gather(-1, ids)
    return (q.exp() * (q - lp)).sum(-1)
