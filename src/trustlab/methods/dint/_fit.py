"""``fit_intervention``: train a LoReFT/D-ReFT intervention with the shared trainer, the base model frozen.

The loss is next-token cross-entropy on the response tokens (plus ``kl_beta`` times D-ReFT's KL term when
asked). A late-layer intervention trains by top-K replay (:class:`trustlab.llm.PolicyForward` caches the
residual stream entering block ``layer`` once); layer 0 backpropagates through the whole model.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, Interval, Satisfies
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.llm.rules import LanguageModel, Tokenizer
from trustlab.methods.dint._tasks import TaskData, load_task_jsonl

__all__ = ["InterventionFit", "PositionOverlapWarning", "fit_intervention", "tokenize_task"]


class PositionOverlapWarning(UserWarning):
    """Some prompts are shorter than f + l tokens: their first and last positions overlap (each token is
    intervened once)."""


@dataclass
class InterventionFit:
    """What :func:`fit_intervention` did: the trainer's history, the learned sigma and the costs."""

    history: Any
    layer: int
    n_params: int
    replay_blocks: int | None
    sigma_mean: float | None = None
    sigma_by_dim: list[float] = field(default_factory=list)
    train_seconds: float = 0.0


def _is_intervention(v: Any) -> bool:
    from trustlab.methods.dint._edit import _ReFTBase

    return isinstance(v, _ReFTBase)


def _example_intervention() -> Any:
    from trustlab.methods.dint._edit import LoReFT

    return LoReFT(layer=0, rank=2, random_state=0)


INTERVENTION = Satisfies(_is_intervention, "a LoReFT or DReFT intervention", ["loreft", 3],
                         valid=_example_intervention())
#: the causal LM (``trustlab.llm.load_model`` or ``tiny_random_llama``) and its tokenizer
MODEL, TOKENIZER = LanguageModel(), Tokenizer()
_FORWARD = Satisfies(lambda v: hasattr(v, "k_top") and hasattr(v, "sequences"),
                     "a trustlab.llm.PolicyForward of the tokenised data", ["forward", 3])


TASK = Satisfies(lambda v: isinstance(v, TaskData | str | os.PathLike), "TaskData or the path of a JSONL task",
                 [3, None], valid=TaskData(("What is 1 + 1?",), ("2",)))


def _as_task(data: Any) -> TaskData:
    return data if isinstance(data, TaskData) else load_task_jsonl(data)


def _tokenizer(model: Any, tokenizer: Any) -> Any:
    tok = tokenizer if tokenizer is not None else getattr(model, "trustlab_tokenizer", None)
    if tok is None:
        raise ConfigError("Pass tokenizer=... (trustlab.llm.load_model attaches one to the models it loads).")
    return tok


@validate_args(model=[MODEL], data=[TASK], tokenizer=[None, TOKENIZER], chat=[Boolean()],
               system=[str, None])
def tokenize_task(model: Any, data: Any, tokenizer: Any = None, *, chat: bool = True, system: str | None = None) -> Any:
    """Tokenise (prompt, gold answer) rows into a :class:`trustlab.llm.SequenceSet` (chat template, EOS)."""
    from trustlab.llm import tokenize_pairs

    task = _as_task(data)
    return tokenize_pairs(_tokenizer(model, tokenizer), list(task.prompts), list(task.answers), chat=chat,
                          system=system)


@validate_args(model=[Satisfies(lambda m: hasattr(m, "parameters"), "a torch module", [3, "model"])])
@contextlib.contextmanager
def frozen_base(model: Any) -> Iterator[None]:
    """Every parameter of ``model`` has ``requires_grad=False`` inside the block (flags restored on exit)."""
    params = list(model.parameters())
    flags = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, f in zip(params, flags, strict=True):
            p.requires_grad_(f)


def prompt_mask(seqs: Any, rows: Any, width: int) -> Any:
    """``[n, width]`` bool mask of the prompt tokens of ``rows`` of a right-padded SequenceSet."""
    import torch

    plen = torch.as_tensor(np.asarray(seqs.prompt_len)[np.asarray(rows)])
    return torch.arange(width)[None, :] < plen[:, None]


def replay_for(model: Any, layer: int) -> int | None:
    """Replay depth that starts at block ``layer`` (None for layer 0: the full model)."""
    from trustlab.llm import dims

    return None if layer == 0 else dims(model).n_layers - int(layer)


class _Objective:
    def __init__(self, forward: Any, intervention: Any, kl_beta: float) -> None:
        self.forward, self.iv, self.kl_beta = forward, intervention, float(kl_beta)
        self.n_items = len(forward.sequences)

    def __call__(self, rows: Any) -> Any:
        from trustlab.llm import StepOutput, sft_loss

        ids, _, resp = self.forward.batch(rows)
        with self.iv.prompt_positions(prompt_mask(self.forward.sequences, rows, ids.shape[1])):
            lp = self.forward.token_logprobs(rows)
        mask = resp.clone().to(lp.device)
        mask[:, 0] = False
        loss = sft_loss(lp, mask)
        metrics = {"nll": float(loss.detach())}
        if self.kl_beta > 0:
            kl = sum(m.last_kl for m in self.iv.module_ if getattr(m, "last_kl", None) is not None)
            loss = loss + self.kl_beta * kl
            metrics["kl"] = float(kl.detach())
        return StepOutput(loss, metrics)


def _warn_overlap(seqs: Any, positions: str) -> None:
    from trustlab.methods.dint._modules import parse_positions

    f, last = parse_positions(positions)
    short = int((np.asarray(seqs.prompt_len) < f + last).sum())
    if short:
        warnings.warn(f"{short} prompt(s) have fewer than f + l = {f + last} tokens ({positions!r}); their first and "
                      "last positions overlap and each token is intervened once.", PositionOverlapWarning,
                      stacklevel=3)


@validate_args(model=[MODEL], intervention=[INTERVENTION], data=[TASK], tokenizer=[None, TOKENIZER],
               steps=[Interval(int, 0, None)], batch_size=[Interval(int, 1, None)],
               lr=[Interval(float, 0, None, closed="neither"), None], warmup_steps=[Interval(int, 0, None)],
               schedule=[Satisfies(lambda v: v in ("constant", "linear", "cosine"), "one of constant/linear/cosine",
                                   ["step"], valid="linear")],
               chat=[Boolean()], system=[str, None], random_state=["random_state"],
               cache_dir=[str, os.PathLike, None], threads=[Interval(int, 1, None), None], forward=[None, _FORWARD])
def fit_intervention(
    model: Any, intervention: Any, data: Any, tokenizer: Any = None, *, steps: int = 50, batch_size: int = 8,
    lr: float | None = None, warmup_steps: int = 0, schedule: str = "linear", chat: bool = True,
    system: str | None = None, random_state: Any = 0, cache_dir: Any = None, threads: int | None = None,
    forward: Any = None,
) -> InterventionFit:
    """Train ``intervention`` on ``data`` (TaskData or JSONL path) with the base ``model`` frozen.

    ``lr`` defaults to the anchors' 9e-4 (LoReFT) / 3e-3 (D-ReFT). ``steps=0`` keeps the initial weights (an
    empty history; experiment ``dint``'s knockout). After training the intervention's
    modules hold the learned weights; ``intervention.apply(model)`` uses them. ``forward`` (a
    :class:`trustlab.llm.PolicyForward` of the tokenised ``data`` replaying from the intervention's block,
    e.g. ``InterventionEvaluator.forward(data, layer)``) reuses one replay cache across several fits.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> from trustlab.methods.dint import LoReFT, arith_lite
    >>> model, tok = tiny_random_llama(n_layers=2)
    >>> fit = fit_intervention(model, LoReFT(layer=1, rank=2, random_state=0), arith_lite(4), tok, steps=2, batch_size=2)
    >>> fit.history.n_steps, fit.replay_blocks
    (2, 1)
    """
    from trustlab.core.seeding import check_random_state, spawn_seed
    from trustlab.llm import PolicyForward, train
    from trustlab.llm.sites import model_device, unwrap
    from trustlab.llm.trainer import FitHistory

    inner = unwrap(model)
    k = replay_for(inner, intervention.layer)
    if forward is not None:
        if forward.k_top != k:
            raise InputError(f"The 'forward' argument of fit_intervention must replay from block {intervention.layer} "
                             f"(replay={k}). Got replay={forward.k_top}.")
        seqs = forward.sequences
    else:
        seqs = tokenize_task(inner, data, tokenizer, chat=chat, system=system)
    _warn_overlap(seqs, intervention.positions)
    seed = spawn_seed(check_random_state(random_state, owner="fit_intervention"))
    handle = intervention.apply(inner)
    intervention.reset_noise(seed)
    try:
        with frozen_base(inner):
            fwd = forward or PolicyForward(inner, seqs, replay=k, share_prompts=False, cache_dir=cache_dir)
            obj = _Objective(fwd, intervention, getattr(intervention, "kl_beta", 0.0))
            if steps == 0:  # the untrained intervention
                hist = FitHistory(n_trainable=int(sum(p.numel() for p in intervention.module_.parameters())),
                                  settings={"steps": 0})
            else:
                hist = train(intervention.module_, obj, steps=steps, batch_size=batch_size,
                             lr=float(lr if lr is not None else intervention._default_lr), warmup_steps=warmup_steps,
                             schedule=schedule, random_state=seed, device=str(model_device(inner)), threads=threads)
            intervention.module_.eval()
            sig = learned_sigma(inner, intervention, seqs, forward=fwd)
    finally:
        handle.restore()
    return InterventionFit(hist, intervention.layer, intervention.n_params, k,
                           None if sig is None else float(np.mean(sig)), [] if sig is None else sig.tolist(),
                           hist.wall_time_s)


def learned_sigma(model: Any, intervention: Any, seqs: Any, *, forward: Any = None, max_rows: int = 64) -> Any:
    """Mean D-ReFT sigma per subspace dimension over the intervened prompt tokens (None for LoReFT)."""
    import torch

    from trustlab.llm import trace
    from trustlab.methods.dint._modules import parse_positions, select_positions

    mods = [m for m in intervention.module_ if hasattr(m, "sigma")]
    if not mods:
        return None
    if forward is None:
        raise InputError("learned_sigma needs the PolicyForward of the training set.")
    rows = np.arange(min(len(seqs), max_rows))
    ids, _, _ = forward.batch(rows)
    f, last = parse_positions(intervention.positions)
    out = f"blocks.{intervention.layer}.resid_post"  # the states the intervention sees (an all-False mask: no edit)
    with torch.no_grad(), trace(model, [out]) as tr, \
            intervention.prompt_positions(torch.zeros(ids.shape, dtype=torch.bool)):
        forward.hidden(rows)
    h = tr[out]
    fm, lm = select_positions(prompt_mask(seqs, rows, ids.shape[1]), f, last)
    sel = (fm | lm).to(h.device)
    with torch.no_grad():
        s = torch.stack([m.sigma(h[sel]).mean(0) for m in mods]).mean(0)
    return s.detach().cpu().numpy()
