"""A small fine-tuning loop: AdamW, warm-up, clipping, accumulation, evaluation, early stopping.

:func:`train` optimises the parameters of ``model`` that require grad against an *objective*: any
object with ``n_items`` and ``__call__(rows) -> StepOutput`` (or a scalar loss tensor), where ``rows``
are item indices (see :mod:`trustlab.llm.objectives` for the two that ship). A paper with its own loss
writes an objective of a few lines.

The loop is seeded (item order from ``random_state``; LoRA dropout and any other global-RNG draw run in
:func:`trustlab.core.seeding.isolated_global_rng`, so the caller's RNG state is unchanged), thread
settings are restored on exit, the model's train/eval mode is restored, and it runs on whatever device
``device`` names (``"auto"``: CUDA when available).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, CallableRule, Interval, Options, Satisfies
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.optional import require
from trustlab.core.seeding import check_random_state, isolated_global_rng, spawn_seed, thread_settings
from trustlab.core.threads import limit_threads, preserve_torch_threads
from trustlab.llm._argrules import BETAS
from trustlab.llm.loading import resolve_device as _resolve_device
from trustlab.llm.objectives import SFTObjective, StepOutput
from trustlab.llm.sites import model_device, unwrap

torch = require("torch", purpose="trustlab.llm training")

__all__ = ["FitHistory", "resolve_device", "train"]


@dataclass
class FitHistory:
    """What :func:`train` did, one entry per optimizer step (``evals``: one dict per evaluation).

    ``peak_rss_mb`` is the process's peak resident memory at the end (it includes everything the process
    did before); measure a clean figure with :func:`trustlab.llm.measure_peak_rss`.
    """

    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    step_time: list[float] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    evals: list[dict[str, float]] = field(default_factory=list)
    best_step: int | None = None
    best_value: float | None = None
    stopped_early: bool = False
    restored_best: bool = False
    n_trainable: int = 0
    peak_rss_mb: float = 0.0
    peak_device_mb: float | None = None
    wall_time_s: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def n_steps(self) -> int:
        return len(self.loss)

    @validate_args(warmup=[Interval(int, 0, None)])
    def median_step_time(self, warmup: int = 2) -> float:
        """Median seconds per optimizer step after the first ``warmup`` steps."""
        from trustlab.llm.resources import median_step_time

        return median_step_time(self.step_time, warmup=warmup)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@validate_args(device=[str])
def resolve_device(device: str) -> str:
    """``"auto"`` -> ``"cuda"`` when available, else ``"cpu"``; a CUDA device without CUDA is a ConfigError."""
    return _resolve_device(device, owner="train")


def _lr_factor(step: int, warmup: int, total: int, schedule: str) -> float:
    if warmup and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return 1.0 - progress if schedule == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))


def _objective_ok(o: Any) -> bool:
    return callable(o) and isinstance(getattr(o, "n_items", None), int | np.integer) and o.n_items >= 1


class _Stopper:
    def __init__(self, monitor: str | None, mode: str, patience: int | None) -> None:
        self.monitor, self.mode, self.patience = monitor, mode, patience
        self.best: float | None = None
        self.best_step: int | None = None
        self.bad = 0

    def update(self, step: int, ev: dict[str, float]) -> tuple[bool, bool]:
        """(improved, stop)"""
        if self.monitor is None:
            return False, False
        if self.monitor not in ev:
            raise InputError(f"The evaluation returned no {self.monitor!r} to monitor. Got keys {sorted(ev)}.")
        v = float(ev[self.monitor])
        better = self.best is None or (v > self.best if self.mode == "max" else v < self.best)
        if better:
            self.best, self.best_step, self.bad = v, step, 0
        else:
            self.bad += 1
        return better, self.patience is not None and self.bad >= self.patience


def _as_output(out: Any) -> StepOutput:
    if isinstance(out, StepOutput):
        return out
    if isinstance(out, torch.Tensor) and out.ndim == 0:
        return StepOutput(out)
    raise ConfigError(f"An objective must return a StepOutput or a scalar loss tensor. Got {type(out).__name__}.")


def _item_stream(n: int, rng: np.random.Generator) -> Any:
    while True:
        yield from rng.permutation(n)


@validate_args(
    model=[Satisfies(lambda m: isinstance(m, torch.nn.Module), "a torch model", invalid=["not-a-model"])],
    objective=[Satisfies(_objective_ok, "an objective (callable with an int n_items >= 1)", invalid=["loss", 3])],
    steps=[Interval(int, 1, None), None], epochs=[Interval(float, 0, None, closed="neither")],
    batch_size=[Interval(int, 1, None)], lr=[Interval(float, 0, None, closed="neither")],
    weight_decay=[Interval(float, 0, None)], betas=[BETAS], warmup_steps=[Interval(int, 0, None)],
    schedule=[Options(("constant", "linear", "cosine"))], grad_accum=[Interval(int, 1, None)],
    max_grad_norm=[Interval(float, 0, None, closed="neither"), None], eval_every=[Interval(int, 1, None), None],
    evaluate=[CallableRule(), None], eval_at_start=[Boolean()], monitor=[str, None], mode=[Options(("max", "min"))],
    patience=[Interval(int, 1, None), None], restore_best=[Boolean()], progress=[Boolean()],
    random_state=["random_state"], device=[str], threads=[Interval(int, 1, None), None],
    _example=lambda: _train_example(),
)
def train(
    model: Any, objective: Any, *, steps: int | None = None, epochs: float = 1.0, batch_size: int = 8,
    lr: float = 1e-4, weight_decay: float = 0.0, betas: tuple[float, float] = (0.9, 0.999), warmup_steps: int = 0,
    schedule: str = "constant", grad_accum: int = 1, max_grad_norm: float | None = 1.0,
    eval_every: int | None = None, evaluate: Callable[[], dict[str, float]] | None = None,
    eval_at_start: bool = False, monitor: str | None = None, mode: str = "max", patience: int | None = None,
    restore_best: bool = True, progress: bool = False, random_state: Any = 0, device: str = "auto",
    threads: int | None = None,
) -> FitHistory:
    """Optimise the trainable parameters of ``model`` on ``objective``; returns a :class:`FitHistory`.

    Parameters
    ----------
    model : torch model
        Its parameters with ``requires_grad`` are optimised (e.g. the LoRA weights of a peft model).
    objective : SFTObjective, PreferenceObjective or any object with ``n_items`` and ``__call__(rows)``
        ``rows`` is an int array of item indices; it returns a :class:`StepOutput` or a scalar loss. An
        optional ``prepare()`` runs once before the first step (the shipped objectives check that their
        replay cache is not stale).
    steps : int, optional
        Optimizer steps; default ``ceil(epochs * n_items / (batch_size * grad_accum))``. Items are drawn
        as a stream of seeded permutations, so an epoch boundary may fall inside a step.
    epochs : float, default=1
    batch_size : int, default=8
        Items per micro-batch; a step averages ``grad_accum`` micro-batches (item-weighted).
    lr, weight_decay, betas : AdamW settings
    warmup_steps : int, default=0
        Linear warm-up: step ``s < warmup_steps`` uses ``lr * (s + 1) / warmup_steps``.
    schedule : {"constant", "linear", "cosine"}, default="constant"
        After warm-up.
    max_grad_norm : float or None, default=1.0
        Clip the global gradient norm (the norm before clipping is recorded).
    eval_every : int, optional
        Call ``evaluate()`` (under ``no_grad``, model in eval mode) every N steps and after the last.
    evaluate : callable, optional
        Returns a dict of floats.
    eval_at_start : bool, default=False
        Also evaluate before the first step (recorded as step 0).
    monitor, mode, patience : early stopping
        Stop when ``evaluate()[monitor]`` has not improved (``mode`` "max"/"min") for ``patience``
        evaluations; with ``restore_best`` the trainable parameters of the best evaluation are restored.
    progress : bool, default=False
        tqdm progress bar.
    random_state : int, Generator or None, default=0
        Seeds the item order and every global-RNG draw inside the call (e.g. LoRA dropout); the global
        RNG states are restored on exit.
    device : str, default="auto"
        Moves the model there first (``"auto"``: CUDA when available, else CPU).
    threads : int, optional
        Torch/BLAS threads inside the call (restored on exit).

    Returns
    -------
    FitHistory

    Examples
    --------
    >>> from trustlab.llm import tiny_random_llama, add_lora, tokenize_pairs, SFTObjective
    >>> model, tok = tiny_random_llama(n_layers=4)
    >>> peft_model = add_lora(model, layers="top2", r=2)
    >>> obj = SFTObjective(peft_model, tokenize_pairs(tok, ["2 + 2?", "3 + 3?"], ["4", "6"]))
    >>> h = train(peft_model, obj, steps=3, batch_size=2, lr=1e-2)
    >>> h.n_steps
    3
    """
    params, eval_every = _check_setup(model, evaluate, monitor, eval_every, eval_at_start)
    dev = _move_to(model, device)
    rng = check_random_state(random_state, owner="train")
    seed = int(random_state) if isinstance(random_state, int | np.integer) else spawn_seed(rng)
    hist = _new_history(params, objective, steps, epochs, dict(
        batch_size=batch_size, grad_accum=grad_accum, lr=lr, weight_decay=weight_decay, betas=tuple(betas),
        warmup_steps=warmup_steps, schedule=schedule, max_grad_norm=max_grad_norm, seed=seed, device=dev,
        threads=threads))
    t_start = time.perf_counter()
    with isolated_global_rng(seed), (limit_threads(threads) if threads is not None else preserve_torch_threads()):
        hist.settings["thread_settings"] = thread_settings()
        _loop(model, objective, params, hist, rng, eval_every, evaluate, eval_at_start,
              _Stopper(monitor, mode, patience), restore_best, progress)
    _record_resources(hist, dev, t_start)
    return hist


def _check_setup(model: Any, evaluate: Any, monitor: Any, eval_every: Any, eval_at_start: bool) -> tuple[list, Any]:
    """The trainable parameters, and ``eval_every`` (evaluate after the last step when only a callable is given)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ConfigError("train found no parameter that requires grad in the model (add adapters with add_lora).")
    if monitor is not None and evaluate is None:
        raise ConfigError("train(monitor=...) needs an evaluate callable.")
    if evaluate is not None and eval_every is None and not eval_at_start:
        eval_every = 10**12  # only after the last step
    return params, eval_every


def _move_to(model: Any, device: str) -> str:
    dev = resolve_device(device)
    if str(model_device(model)) != str(torch.device(dev)):
        model.to(dev)
    return dev


def _new_history(params: list[Any], objective: Any, steps: int | None, epochs: float,
                 opts: dict[str, Any]) -> FitHistory:
    """An empty history whose settings record the step count and every option (the loop reads them)."""
    n = int(objective.n_items)
    per_step = opts["batch_size"] * opts["grad_accum"]
    total = int(steps) if steps is not None else max(1, math.ceil(epochs * n / per_step))
    settings = {"steps": total, **opts, "n_items": n}
    return FitHistory(n_trainable=int(sum(p.numel() for p in params)), settings=settings)


def _record_resources(hist: FitHistory, dev: str, t_start: float) -> None:
    hist.wall_time_s = time.perf_counter() - t_start
    from trustlab.llm.resources import peak_rss_mb

    hist.peak_rss_mb = peak_rss_mb()[0]
    if dev.startswith("cuda"):
        hist.peak_device_mb = torch.cuda.max_memory_allocated() / 1024**2


def _loop(model: Any, objective: Any, params: list[Any], hist: FitHistory, rng: np.random.Generator,
          eval_every: int | None, evaluate: Any, eval_at_start: bool, stopper: _Stopper, restore_best: bool,
          progress: bool) -> None:
    st = hist.settings
    total, batch_size, max_grad_norm = st["steps"], st["batch_size"], st["max_grad_norm"]
    per_step = batch_size * st["grad_accum"]
    from tqdm.auto import tqdm

    opt = torch.optim.AdamW(params, lr=st["lr"], betas=tuple(st["betas"]), weight_decay=st["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: _lr_factor(s, st["warmup_steps"], total, st["schedule"]))
    stream = _item_stream(int(objective.n_items), rng)
    best_state: list[Any] | None = None
    was_training = unwrap(model).training

    def run_eval(step: int) -> bool:
        nonlocal best_state
        model.eval()
        try:
            with torch.no_grad():
                ev = {k: float(v) for k, v in dict(evaluate()).items()}
        finally:
            model.train()
        hist.evals.append({"step": step, **ev})
        improved, stop = stopper.update(step, ev)
        if improved and restore_best:
            best_state = [p.detach().clone() for p in params]
        return stop

    bar = tqdm(total=total, desc="train", disable=not progress, leave=False)
    completed = False
    try:
        if hasattr(objective, "prepare"):
            objective.prepare()
        model.train()
        if evaluate is not None and eval_at_start and run_eval(0):
            hist.stopped_early = True
            return
        for step in range(total):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            items = np.fromiter((next(stream) for _ in range(per_step)), dtype=np.int64, count=per_step)
            step_loss, sums = 0.0, {}
            for s in range(0, per_step, batch_size):
                mb = items[s : s + batch_size]
                out = _as_output(objective(mb))
                w = len(mb) / per_step
                (out.loss * w).backward()
                step_loss += float(out.loss.detach()) * w
                for k, v in out.metrics.items():
                    sums[k] = sums.get(k, 0.0) + float(v) * w
            gn = torch.nn.utils.clip_grad_norm_(params, max_grad_norm if max_grad_norm else float("inf"))
            hist.lr.append(float(opt.param_groups[0]["lr"]))
            opt.step()
            sched.step()
            hist.loss.append(step_loss)
            hist.grad_norm.append(float(gn))
            for k, v in sums.items():
                hist.metrics.setdefault(k, []).append(v)
            if not math.isfinite(step_loss):
                raise InputError(f"The training loss became {step_loss} at step {step + 1}; lower lr.")
            hist.step_time.append(time.perf_counter() - t0)
            bar.update(1)
            bar.set_postfix(loss=f"{step_loss:.4f}")
            last = step + 1 == total
            if evaluate is not None and eval_every is not None and ((step + 1) % eval_every == 0 or last):
                if run_eval(step + 1) and not last:
                    hist.stopped_early = True
                    break
        completed = True
    finally:
        bar.close()
        hist.best_step, hist.best_value = stopper.best_step, stopper.best
        if completed and best_state is not None and hist.evals and hist.evals[-1]["step"] != stopper.best_step:
            with torch.no_grad():
                for p, b in zip(params, best_state):
                    p.copy_(b)
            hist.restored_best = True
        opt.zero_grad(set_to_none=True)
        model.train(was_training)


def _train_example() -> dict[str, Any]:
    from trustlab.llm._small import tiny_random_llama
    from trustlab.llm._tokenize_pairs import tokenize_pairs
    from trustlab.llm.adapters import add_lora

    model, tok = tiny_random_llama()
    pm = add_lora(model, layers="all", r=2)
    return {"model": pm, "objective": SFTObjective(pm, tokenize_pairs(tok, ["Hi"], ["Hello"]))}
