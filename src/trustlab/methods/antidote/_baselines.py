"""Fine-tuning-stage baselines as objectives of the shared trainer (:func:`trustlab.llm.train`), and the
teacher-forced option choice used for the harmful score (HS_tf) and the benign accuracy.

* :class:`LisaObjective` (Lisa-lite, Huang et al. 2024): bi-state optimisation that alternates
  ``align_steps`` steps on alignment data with ``user_steps`` steps on the user's data, each with the proximal
  term ``rho / 2 * ||theta - theta_switch||^2`` to the trainable weights at the last switch.
* :class:`LDIFSObjective` (LDIFS-lite, Mukhoti et al. 2024): SFT loss plus ``weight`` times the mean squared
  distance between the policy's final hidden states and the aligned (adapter-disabled) model's, on the
  fine-tuning batch's tokens.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Interval, Satisfies
from trustlab.core.seeding import check_random_state

__all__ = ["LisaObjective", "LDIFSObjective", "choose_options"]


def _sft(fwd: Any) -> Any:
    """The shared response-masked NLL objective (token mean) on ``fwd``'s own sequences."""
    from trustlab.llm import SFTObjective

    return SFTObjective(fwd, fwd.sequences)


def _is_forward(f: Any) -> bool:
    from trustlab.llm import PolicyForward

    return isinstance(f, PolicyForward)


_FWD = [Satisfies(_is_forward, "a trustlab.llm.PolicyForward", invalid=["fwd"])]


class LisaObjective:
    """Lisa-lite: alternate alignment and user steps with a proximal term to the weights at the last switch.

    Parameters
    ----------
    user, align : PolicyForward
        The user's fine-tuning data and the alignment data, on the same peft model (the trained parameters
        are that model's ``requires_grad`` ones).
    align_steps, user_steps : int, default=1, 4
        Length of each state (the trainer calls the objective once per micro-batch).
    rho : float, default=1.0
        Proximal strength.
    random_state : int, Generator or None
        Order of the alignment rows.
    """

    @validate_args(user=_FWD, align=_FWD, align_steps=[Interval(int, 1, None)], user_steps=[Interval(int, 1, None)],
                   rho=[Interval("real", 0, None)], random_state=["random_state"])
    def __init__(self, user: Any, align: Any, *, align_steps: int = 1, user_steps: int = 4, rho: float = 1.0,
                 random_state: Any = 0) -> None:
        self.user, self.align = user, align
        self._user_nll, self._align_nll = _sft(user), _sft(align)
        self.align_steps, self.user_steps, self.rho = int(align_steps), int(user_steps), float(rho)
        self._rng = check_random_state(random_state, owner="LisaObjective")
        self._params = [p for p in user.model.parameters() if p.requires_grad]
        self._anchor: list[Any] | None = None
        self._calls = 0

    @property
    def n_items(self) -> int:
        return len(self.user.sequences)

    def prepare(self) -> None:
        self.user.check_fresh()
        self.align.check_fresh()

    def __call__(self, rows: Any) -> Any:
        import torch

        from trustlab.llm import StepOutput

        period = self.align_steps + self.user_steps
        phase = self._calls % period
        aligning = phase < self.align_steps
        if phase in (0, self.align_steps) or self._anchor is None:
            self._anchor = [p.detach().clone() for p in self._params]
        self._calls += 1
        if aligning:
            a_rows = self._rng.choice(len(self.align.sequences), size=len(rows), replace=False)
            loss = self._align_nll(np.sort(a_rows)).loss
        else:
            loss = self._user_nll(rows).loss
        prox = sum(((p - a) ** 2).sum() for p, a in zip(self._params, self._anchor, strict=True))
        total = loss + 0.5 * self.rho * prox
        return StepOutput(total, {"nll": float(loss.detach()), "aligning": float(aligning),
                                  "prox": float(torch.as_tensor(prox).detach())})


class LDIFSObjective:
    """LDIFS-lite: SFT loss + ``weight`` x mean squared distance of the final hidden states to the aligned model.

    The aligned model's states are those of ``forward``'s model with its adapter disabled (computed once,
    under ``no_grad``), at every real token of the batch.
    """

    @validate_args(forward=_FWD, weight=[Interval("real", 0, None)], batch_size=[Interval(int, 1, None)])
    def __init__(self, forward: Any, *, weight: float = 1.0, batch_size: int = 16) -> None:
        import torch

        from trustlab.llm import reference_policy

        self.forward, self.weight = forward, float(weight)
        self._nll = _sft(forward)
        n = len(forward.sequences)
        chunks = [np.arange(i, min(i + batch_size, n)) for i in range(0, n, batch_size)]
        width = int(forward.sequences.input_ids.shape[1])
        with torch.no_grad(), reference_policy(forward.model):
            parts = []
            for c in chunks:
                h = forward.hidden(c).float().cpu()
                parts.append(torch.nn.functional.pad(h, (0, 0, 0, width - h.shape[1])))
        self._ref = torch.cat(parts)

    @property
    def n_items(self) -> int:
        return len(self.forward.sequences)

    def prepare(self) -> None:
        self.forward.check_fresh()

    def __call__(self, rows: Any) -> Any:
        from trustlab.llm import StepOutput

        _, att, _ = self.forward.batch(rows)
        h = self.forward.hidden(rows)
        ref = self._ref[np.asarray(rows)][:, : h.shape[1]].to(h.device)
        m = att.to(h.device).bool()
        dist = ((h - ref) ** 2).sum(-1)[m].mean()
        loss = self._nll(rows).loss
        return StepOutput(loss + self.weight * dist, {"nll": float(loss.detach()), "feature_dist": float(dist.detach())})


def _fwd_example() -> dict[str, Any]:
    from trustlab.llm import PolicyForward, add_lora, tiny_random_llama, tokenize_pairs

    model, tok = tiny_random_llama(n_layers=2)
    pol = add_lora(model, layers="top1", r=2)
    return {"forward": PolicyForward(pol, tokenize_pairs(tok, ["Is it good?", "Is it good?"], ["yes", "no"]))}


@validate_args(_example=_fwd_example, forward=_FWD, n_options=[Interval(int, 2, None)],
               batch_size=[Interval(int, 1, None)])
def choose_options(forward: Any, n_options: int = 2, *, batch_size: int = 16) -> np.ndarray:
    """Index of the option with the highest length-normalised response log-prob, per item.

    ``forward``'s sequences hold ``n_options`` consecutive rows per item (the same prompt with each option
    as the response). HS_tf = share of items choosing the compliance option; accuracy = share choosing the
    label.
    """
    import torch

    from trustlab.core.exceptions import InputError

    n = len(forward.sequences)
    if n % n_options:
        raise InputError(f"choose_options needs {n_options} rows per item; the forward has {n} rows.")
    out = []
    with torch.no_grad():
        for i in range(0, n, batch_size * n_options):
            rows = np.arange(i, min(i + batch_size * n_options, n))
            out.append(forward.sequence_logprobs(rows).mean.float().cpu().numpy())
    return np.concatenate(out).reshape(-1, n_options).argmax(1)
