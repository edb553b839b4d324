"""Accuracy of a model with or without an intervention, under the robustness protocol's perturbations.

ArithLite-style tasks are scored by **teacher-forced exact match**: a row is correct when the greedy
token equals the gold token at every response position (the answer and EOS), which is exactly "greedy
decoding returns the answer and stops", at the cost of one forward. Choice tasks (``options``) compare
the summed log-prob of each option. Perturbations (the paper's protocol could not be retrieved; this one
is the spec's):

* activation noise ``N(0, (c * rms_token(h))^2)`` added to the residual stream entering a block, at the
  prompt tokens except the first (its norm is 10-500x the others on SmolLM2);
* intervention-weight noise: Gaussian noise of relative scale ``s`` (times each matrix's RMS) on R and W;
* input shift: any other TaskData (held-out templates, distractors, number words).

Rows are replayed from a cached residual stream wherever possible (:class:`trustlab.llm.PolicyForward`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Options, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.methods.dint._fit import (
    INTERVENTION,
    MODEL,
    TASK,
    TOKENIZER,
    _as_task,
    frozen_base,
    prompt_mask,
    tokenize_task,
)
from trustlab.methods.dint._tasks import TaskData

__all__ = ["InterventionEvaluator", "RobustnessReport", "RobustnessRow", "robustness_report", "normalised_auc"]

_TASK_DATA = InstanceOf(TaskData)


@dataclass(frozen=True)
class RobustnessRow:
    """One condition: accuracy (mean over draws) and its sd over draws (0 for deterministic arms)."""

    perturbation: str  # "clean", "act_noise@<layer>", "weight_noise", "shift:<name>"
    level: float
    inference: str  # "deterministic", "sample" or "mean"
    accuracy: float
    sd: float
    n_draws: int


@dataclass
class RobustnessReport:
    """Accuracy per perturbation level and the normalised AUC (mean accuracy over levels / clean accuracy)."""

    rows: list[RobustnessRow] = field(default_factory=list)
    nauc: dict[str, float] = field(default_factory=dict)

    @validate_args(perturbation=[str], level=[Interval("real", 0, None)],
                   inference=[None, Options(("deterministic", "sample", "mean"))])
    def accuracy(self, perturbation: str, level: float = 0.0, inference: str | None = None) -> float:
        for r in self.rows:
            if r.perturbation == perturbation and abs(r.level - level) < 1e-12 and inference in (None, r.inference):
                return r.accuracy
        raise InputError(f"No row for {perturbation!r} at level {level} ({inference}). Got "
                         f"{sorted({r.perturbation for r in self.rows})}.")


@validate_args(levels=[SequenceOf(Interval("real", 0, None))], accuracies=[SequenceOf(Interval("real", 0, 1))])
def normalised_auc(levels: Any, accuracies: Any) -> float:
    """Mean accuracy over the levels divided by the accuracy at the lowest level (the clean one).

    Example
    -------
    >>> normalised_auc([0, 0.1, 0.2], [0.8, 0.6, 0.4])
    0.75
    """
    lv, acc = np.asarray(levels, float), np.asarray(accuracies, float)
    if len(lv) != len(acc) or len(lv) == 0:
        raise InputError(f"normalised_auc needs one accuracy per level. Got {len(lv)} levels, {len(acc)} accuracies.")
    clean = float(acc[np.argmin(lv)])
    return float(acc.mean() / clean) if clean > 0 else float("nan")


def _noise_fn(mask_box: dict[str, Any], c: float, gen: Any) -> Any:
    import torch

    def fn(h: Any) -> Any:
        mask = mask_box["mask"].to(h.device)
        rank = torch.cumsum(mask.long(), 1)
        sel = (mask & (rank > 1))[..., None]  # prompt tokens except the first
        rms = h.pow(2).mean(-1, keepdim=True).sqrt()
        eps = torch.randn(h.shape, generator=gen, dtype=h.dtype).to(h.device)
        return torch.where(sel, h + c * rms * eps, h)

    return fn


# the arguments accuracy and item_scores share (one rule set for both)
_DRAW_ARGS = dict(task=[_TASK_DATA], intervention=[INTERVENTION, None], noise_layer=[Interval(int, 0, None), None],
                  noise_level=[Interval("real", 0, None)], weight_noise=[Interval("real", 0, None)],
                  inference=[Options(("sample", "mean")), None], n_draws=[Interval(int, 1, None)],
                  random_state=["random_state"])


class InterventionEvaluator:
    """Scores tasks on one frozen ``model``; caches the replay states of every (task, first block) it needs.

    Parameters
    ----------
    model : causal LM
    tokenizer : optional (``load_model`` attaches one)
    batch_size : int, default=32
    chat, system : as :func:`trustlab.llm.tokenize_pairs`
    replay : bool, default=True
        Replay the top blocks from cached states (False: the full model every pass, e.g. for a model with
        adapters in its bottom blocks).
    """

    def __init__(self, model: Any, tokenizer: Any = None, *, batch_size: int = 32, chat: bool = True,
                 system: str | None = None, replay: bool = True) -> None:
        from trustlab.llm.sites import unwrap

        self.model, self.tokenizer = unwrap(model), tokenizer
        self.batch_size, self.chat, self.system, self.replay = int(batch_size), chat, system, bool(replay)
        self._seqs: dict[int, Any] = {}
        self._fwd: dict[tuple[int, int], Any] = {}

    @validate_args(task=[_TASK_DATA])
    def sequences(self, task: Any) -> Any:
        key = id(task)
        if key not in self._seqs:
            if task.options is None:
                s = tokenize_task(self.model, task, self.tokenizer, chat=self.chat, system=self.system)
            else:
                from trustlab.llm import tokenize_pairs
                from trustlab.methods.dint._fit import _tokenizer

                prompts = [p for p, o in zip(task.prompts, task.options, strict=True) for _ in o]
                opts = [x for o in task.options for x in o]
                s = tokenize_pairs(_tokenizer(self.model, self.tokenizer), prompts, opts, chat=self.chat,
                                   system=self.system)
            self._seqs[key] = (task, s)
        return self._seqs[key][1]

    @validate_args(task=[_TASK_DATA], start=[Interval(int, 0, None)])
    def forward(self, task: Any, start: int) -> Any:
        from trustlab.llm import PolicyForward, dims

        key = (id(task), int(start))
        if key not in self._fwd:
            seqs = self.sequences(task)
            k = None if (start == 0 or not self.replay) else dims(self.model).n_layers - int(start)
            with frozen_base(self.model):
                self._fwd[key] = PolicyForward(self.model, seqs, replay=k, share_prompts=False)
        return self._fwd[key]

    def _row_scores(self, fwd: Any, rows: Any) -> Any:
        """Exact match (bool per row) or summed option log-probs, for the current hooks."""
        import torch

        from trustlab.llm.scoring import head_logits

        ids, _, resp = fwd.batch(rows)
        h = fwd.hidden(rows)
        sel = resp.clone().bool()
        sel[:, 0] = False
        hs, tgt = h[:, :-1][sel[:, 1:]], ids[:, 1:][sel[:, 1:]].to(h.device)
        logits = head_logits(self.model, hs).float()
        ok = (logits.argmax(-1) == tgt).cpu()
        lp = torch.log_softmax(logits, -1).gather(-1, tgt[:, None])[:, 0].cpu()
        row_of = torch.arange(len(rows))[:, None].expand_as(sel[:, 1:])[sel[:, 1:]]
        wrong = torch.zeros(len(rows)).index_add_(0, row_of, (~ok).float())
        return (wrong == 0).numpy(), torch.zeros(len(rows)).index_add_(0, row_of, lp).numpy()

    def _one_pass(self, task: Any, iv: Any, start: int, noise: tuple[int, float] | None, seed: int) -> Any:
        """Per-item correctness (1.0 / 0.0) of one draw."""
        import torch

        from trustlab.core.seeding import torch_generator
        from trustlab.llm import trace

        fwd = self.forward(task, start)
        seqs = fwd.sequences
        box: dict[str, Any] = {}
        edit = None if noise is None else {f"blocks.{noise[0]}.resid_pre": _noise_fn(box, noise[1],
                                                                                     torch_generator(seed))}
        exact, lps = [], []
        with torch.no_grad(), trace(self.model, (), edit=edit):
            for s in range(0, len(seqs), self.batch_size):
                rows = np.arange(s, min(s + self.batch_size, len(seqs)))
                w = fwd.batch(rows)[0].shape[1]
                box["mask"] = prompt_mask(seqs, rows, w)
                if iv is None:
                    e, lp = self._row_scores(fwd, rows)
                else:
                    with iv.prompt_positions(box["mask"]):
                        e, lp = self._row_scores(fwd, rows)
                exact.append(e), lps.append(lp)
        if task.options is None:
            return np.concatenate(exact).astype(float)
        lp = np.concatenate(lps).reshape(len(task), -1)
        gold = np.asarray([o.index(a) for a, o in zip(task.answers, task.options, strict=True)])
        return (lp.argmax(1) == gold).astype(float)

    @validate_args(**_DRAW_ARGS)
    def accuracy(self, task: Any, intervention: Any = None, *, noise_layer: int | None = None,
                 noise_level: float = 0.0, weight_noise: float = 0.0, inference: str | None = None,
                 n_draws: int = 1, random_state: Any = 0) -> tuple[float, float]:
        """(mean, sd) accuracy over ``n_draws`` draws (noise and D-ReFT sampling re-seeded per draw)."""
        draws = self._draws(task, intervention, noise_layer, noise_level, weight_noise, inference, n_draws,
                            random_state)
        accs = draws.mean(axis=1)
        return float(np.mean(accs)), float(np.std(accs))

    @validate_args(**_DRAW_ARGS)
    def item_scores(self, task: Any, intervention: Any = None, *, noise_layer: int | None = None,
                    noise_level: float = 0.0, weight_noise: float = 0.0, inference: str | None = None,
                    n_draws: int = 1, random_state: Any = 0) -> Any:
        """Per-item correctness averaged over ``n_draws`` draws (array of ``len(task)`` values in [0, 1]); its
        mean is :meth:`accuracy`'s mean. For paired confidence intervals between interventions on one task."""
        return self._draws(task, intervention, noise_layer, noise_level, weight_noise, inference, n_draws,
                           random_state).mean(axis=0)

    def _draws(self, task: Any, intervention: Any, noise_layer: int | None, noise_level: float,
               weight_noise: float, inference: str | None, n_draws: int, random_state: Any) -> Any:
        """(n_draws, len(task)) per-item correctness."""
        from trustlab.core.seeding import as_seed
        from trustlab.llm import dims

        random_state = as_seed(random_state)  # an int is kept: the draws' seeds are int(random_state) * 1000 + d

        n_layers = dims(self.model).n_layers
        noise = None if noise_level == 0 or noise_layer is None else (int(noise_layer), float(noise_level))
        iv = intervention
        if iv is not None and weight_noise > 0:
            iv = perturbed_weights(iv, weight_noise, random_state)
        start = min([n_layers - 1] + ([iv.layer] if iv is not None else []) + ([noise[0]] if noise else []))
        handle = iv.apply(self.model) if iv is not None else None
        accs = []
        try:
            for d in range(n_draws):
                seed = int(random_state) * 1000 + d
                if iv is not None:
                    iv.reset_noise(seed)
                ctx = iv.inference_mode(inference) if (iv is not None and inference and hasattr(iv, "inference_mode")) \
                    else _null()
                with ctx:
                    accs.append(self._one_pass(task, iv, start, noise, seed))
        finally:
            if handle is not None:
                handle.restore()
        return np.stack(accs)


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: Any) -> None:
        return None


class _AddNoise:
    """A parametrization adding a fixed tensor (stacked on R's orthogonal parametrization)."""

    def __new__(cls, noise: Any) -> Any:
        import torch

        class AddNoise(torch.nn.Module):
            def __init__(self, n: Any) -> None:
                super().__init__()
                self.register_buffer("noise", n)

            def forward(self, x: Any) -> Any:
                return x + self.noise

        return AddNoise(noise)


def perturbed_weights(intervention: Any, scale: float, random_state: int = 0) -> Any:
    """A copy of ``intervention`` with Gaussian noise (``scale`` x each matrix's RMS) on R and W."""
    import torch
    from torch.nn.utils import parametrize

    from trustlab.core.seeding import torch_generator

    out = copy.deepcopy(intervention)
    gen = torch_generator(random_state)
    with torch.no_grad():
        for m in out.module_:
            r = m.rotate.weight
            noise = scale * r.pow(2).mean().sqrt() * torch.randn(r.shape, generator=gen).to(r.device)
            parametrize.register_parametrization(m.rotate, "weight", _AddNoise(noise))
            w = m.source.weight
            w.add_(scale * w.pow(2).mean().sqrt() * torch.randn(w.shape, generator=gen).to(w.device))
    return out


_LEVELS = SequenceOf(Interval("real", 0, None))


@validate_args(model=[MODEL], intervention=[INTERVENTION, None], clean=[TASK], tokenizer=[None, TOKENIZER],
               shifts=[Satisfies(lambda v: isinstance(v, dict), "a dict name -> TaskData", [3]), None],
               noise_levels=[_LEVELS], noise_layers=[SequenceOf(Interval(int, 0, None)), None],
               weight_noise=[Interval(float, 0, None)], n_draws=[Interval(int, 1, None)],
               inference=[SequenceOf(Options(("sample", "mean")))], batch_size=[Interval(int, 1, None)],
               random_state=["random_state"], evaluator=[None, InstanceOf(InterventionEvaluator)])
def robustness_report(
    model: Any, intervention: Any, clean: Any, tokenizer: Any = None, *, shifts: dict[str, Any] | None = None,
    noise_levels: Any = (0.0, 0.1, 0.2, 0.4), noise_layers: Any = None, weight_noise: float = 0.05,
    n_draws: int = 5, inference: Any = ("sample", "mean"), batch_size: int = 32, random_state: Any = 0,
    evaluator: InterventionEvaluator | None = None,
) -> RobustnessReport:
    """The robustness protocol in one call: accuracy per activation-noise level (at the intervened block's
    input and at a middle block by default), under intervention-weight noise and under each input shift,
    with the normalised AUC per noise site. D-ReFT is reported under each ``inference`` mode (``sample``
    with ``n_draws`` seeded draws); LoReFT and ``intervention=None`` (the base model) are deterministic.
    """
    from trustlab.core.seeding import as_seed
    from trustlab.llm import dims

    random_state = as_seed(random_state)  # one int seeds every draw (int, Generator or None, as everywhere)
    ev = evaluator or InterventionEvaluator(model, tokenizer, batch_size=batch_size)
    task = _as_task(clean)
    n_layers = dims(ev.model).n_layers
    if noise_layers is None:
        own = intervention.layer if intervention is not None else 0
        noise_layers = sorted({own, n_layers // 2})
    if any(int(x) >= n_layers for x in noise_layers):
        raise InputError(f"The 'noise_layers' argument needs blocks in [0, {n_layers - 1}]. Got {list(noise_layers)}.")
    levels = sorted({0.0, *map(float, noise_levels)})
    modes = list(inference) if (intervention is not None and hasattr(intervention, "inference_mode")) else [None]
    rep = RobustnessReport()
    for mode in modes:
        draws = n_draws if mode == "sample" else 1
        name = mode or "deterministic"

        def acc(t: Any = task, draws: int = draws, mode: Any = mode, **kw: Any) -> tuple[float, float]:
            return ev.accuracy(t, intervention, inference=mode, n_draws=draws, random_state=random_state, **kw)

        clean_acc = acc()
        rep.rows.append(RobustnessRow("clean", 0.0, name, *clean_acc, draws))
        for layer in noise_layers:
            accs = [clean_acc[0]]
            for c in levels[1:]:
                m, s = acc(noise_layer=int(layer), noise_level=c)
                rep.rows.append(RobustnessRow(f"act_noise@{layer}", c, name, m, s, draws))
                accs.append(m)
            rep.nauc[f"act_noise@{layer}/{name}"] = normalised_auc(levels, accs)
        if intervention is not None and weight_noise > 0:
            rep.rows.append(RobustnessRow("weight_noise", weight_noise, name, *acc(weight_noise=weight_noise), draws))
        for sname, sdata in (shifts or {}).items():
            rep.rows.append(RobustnessRow(f"shift:{sname}", 0.0, name, *acc(t=_as_task(sdata)), draws))
    return rep
