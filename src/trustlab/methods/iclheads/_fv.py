"""Function-vector (FV) scores: the causal indirect effect (CIE) of every head at the last position.

For each FV-scoring task ``t``: the mean head activation ``a_bar^t_{l,h}`` (the head's slice of the
``o_proj`` input at the last token) over ``n_mean`` clean n-shot prompts; then ``n_trials`` corrupted
prompts ``p~`` (demo labels shuffled, query unchanged), and for every head

    CIE_{l,h}(p~) = P(y | p~, z_{l,h,last} := a_bar^t_{l,h}) - P(y | p~),

with ``y`` the first token of the true answer. The FV score is the mean over trials, then over tasks.
All 270 heads of SmolLM2 are patched from one shared KV cache (:func:`trustlab.llm.patch_all_heads`,
which also self-checks that the patches are not silent no-ops). ``method="attribution"`` approximates
the CIE by a first-order expansion, ``dP/dz . (a_bar - z)``, from one forward and backward per trial.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Interval, Options, Satisfies
from trustlab.core.exceptions import ConfigError, TrustlabError
from trustlab.core.seeding import as_seed
from trustlab.llm.rules import LanguageModel, Tokenizer
from trustlab.methods.iclheads._tasks import (
    _TASKS,
    EVAL_TASKS,
    ICLTask,
    _as_tasks,
    _is_task,
    build_prompts,
    check_disjoint,
    target_token,
)

__all__ = ["FVScores", "fv_scores", "mean_head_activations"]



@dataclass
class FVScores:
    """Result of :func:`fv_scores`.

    Attributes
    ----------
    scores : ndarray [n_layers, n_heads]
        FV score (mean CIE over trials and tasks).
    per_task : dict task -> ndarray [n_layers, n_heads]
    task_means : dict task -> ndarray [n_layers, n_heads, d_head]
        Mean last-position head activations on clean prompts of each task.
    mean_activations : ndarray [n_layers, n_heads, d_head]
        Task-averaged means (used for mean ablation, as in the official code).
    method : str
    corrupt_prob : dict task -> float
        Mean probability of the true first token on the corrupted prompts.
    n_changed : dict task -> int
        Fewest heads whose patch changed the target logits in any trial (0 would mean a no-op patch).
    """

    scores: np.ndarray
    per_task: dict[str, np.ndarray]
    task_means: dict[str, np.ndarray]
    mean_activations: np.ndarray
    method: str
    corrupt_prob: dict[str, float] = field(default_factory=dict)
    n_changed: dict[str, int] = field(default_factory=dict)


def _tok(model: Any, tokenizer: Any) -> Any:
    from trustlab.llm.sites import unwrap

    tok = tokenizer if tokenizer is not None else getattr(unwrap(model), "trustlab_tokenizer", None)
    if tok is None:
        raise ConfigError("A tokenizer is needed (pass tokenizer=... or use trustlab.llm.load_model).")
    return tok


_TASK = Satisfies(_is_task, "a task name, a JSON file path or an ICLTask", [3.5, None], valid="antonym")


@validate_args(model=[LanguageModel()], task=[_TASK], n_mean=[Interval(int, 1, None)], n_shots=[Interval(int, 0, None)],
               random_state=["random_state"], tokenizer=[None, Tokenizer()], batch_size=[Interval(int, 1, None)])
def mean_head_activations(
    model: Any,
    task: ICLTask | str,
    *,
    n_mean: int = 20,
    n_shots: int = 5,
    random_state: int | np.random.Generator | None = 0,
    tokenizer: Any = None,
    batch_size: int = 16,
) -> np.ndarray:
    """Mean last-position head activations ``[n_layers, n_heads, d_head]`` over clean n-shot prompts.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> mean_head_activations(model, "antonym", n_mean=2, n_shots=1).shape
    (2, 9, 8)
    """
    from trustlab.llm import collect, dims

    (task,) = _as_tasks(task)
    tok = _tok(model, tokenizer)
    n_layers = dims(model).n_layers
    prompts = build_prompts(task, n_mean, n_shots, random_state=random_state)
    sites = [f"blocks.{layer}.head_out" for layer in range(n_layers)]
    acts = collect(model, [p.text for p in prompts], sites, positions="last", batch_size=batch_size,
                   tokenizer=tok, progress=False)
    return np.stack([acts[s].mean(0) for s in sites]).astype(np.float32)


def _exact_cie(model: Any, ids: list[int], mean: Any, target: int, check: bool, batch_size: int) -> tuple[Any, ...]:
    import torch

    from trustlab.llm import dims, patch_all_heads

    vocab = dims(model).vocab
    res = patch_all_heads(model, ids, torch.as_tensor(mean), list(range(vocab)), batch_size=batch_size, check=check)
    patched = torch.softmax(torch.as_tensor(res.logits), -1)[..., target].numpy()
    base = float(torch.softmax(torch.as_tensor(res.baseline), -1)[target])
    return patched - base, base, res.n_changed


def _attribution_cie(model: Any, ids: list[int], mean: Any, target: int) -> tuple[Any, ...]:
    """First-order CIE: dP(y)/dz_{l,h,last} . (a_bar_{l,h} - z_{l,h,last}) from one forward + backward."""
    import torch

    from trustlab.llm import Edit, dims, trace

    d = dims(model)
    deltas = [torch.zeros(d.n_heads, d.d_head, requires_grad=True) for _ in range(d.n_layers)]
    sites = [f"blocks.{layer}.head_out" for layer in range(d.n_layers)]
    edits = [Edit(s, deltas[i], "add", positions=-1) for i, s in enumerate(sites)]
    x = torch.as_tensor([ids])
    with torch.enable_grad(), trace(model, sites, edit=edits) as tr:
        out = tr.run(x, use_cache=False, logits_to_keep=1)
        prob = torch.softmax(out.logits[0, -1].float(), -1)[target]
        prob.backward()
    z = torch.stack([tr[s][0, -1] for s in sites]).float()
    grads = torch.stack([dl.grad for dl in deltas])
    cie = (grads * (torch.as_tensor(mean).float() - z)).sum(-1)
    model.zero_grad(set_to_none=True)
    return cie.numpy(), float(prob.detach()), d.n_layers * d.n_heads


@validate_args(model=[LanguageModel()], tasks=[None, _TASKS], n_mean=[Interval(int, 1, None)],
               n_trials=[Interval(int, 1, None)], n_shots=[Interval(int, 1, None)],
               method=[Options(["exact", "attribution"])],
               held_out=[None, Satisfies(lambda v: isinstance(v, list | tuple) and (not v or _TASKS.is_satisfied_by(v)),
                                         "a list of tasks (empty: no leakage check)", [3.5, "x"], valid=())],
               task_means=[None, Satisfies(lambda v: isinstance(v, dict), "a dict task name -> mean activations "
                                           "(FVScores.task_means)", [3, "means"])],
               tokenizer=[None, Tokenizer()], random_state=["random_state"], batch_size=[Interval(int, 2, None)],
               progress=[None, "callable"])
def fv_scores(
    model: Any,
    tasks: Sequence[ICLTask | str] | None = None,
    *,
    n_mean: int = 20,
    n_trials: int = 10,
    n_shots: int = 5,
    method: str = "exact",
    held_out: Sequence[ICLTask | str] | None = EVAL_TASKS,
    task_means: dict[str, np.ndarray] | None = None,
    tokenizer: Any = None,
    random_state: int | np.random.Generator | None = 0,
    batch_size: int = 136,
    progress: Any = None,
) -> FVScores:
    """Function-vector score (causal indirect effect) of every head.

    Parameters
    ----------
    model : causal LM
    tasks : sequence of task names or ICLTask, default ``FV_TASKS``
    n_mean : int, default=20
        Clean prompts per task for the mean activations ``a_bar`` (official: 100).
    n_trials : int, default=10
        Corrupted (label-shuffled) prompts per task (official: 100).
    n_shots : int, default=5
        Demonstrations per prompt (official: 10; SmolLM2 already does ICL at 5 shots).
    method : {"exact", "attribution"}, default="exact"
        ``"exact"``: all-heads patching on a shared KV cache; ``"attribution"``: gradient approximation.
    held_out : sequence of tasks, default ``EVAL_TASKS``
        Evaluation tasks; using any of them for scoring raises :class:`InputError` (leakage). Pass ``()``
        to disable the check.
    task_means : dict task -> array, optional
        Precomputed mean activations (e.g. ``FVScores.task_means`` of an earlier call) to reuse.
    batch_size : int, default=136
        Rows per chunk of the all-heads patching.
    progress : callable, optional
        Wraps the task iterator (e.g. ``RunContext.progress``).

    Returns
    -------
    FVScores

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> fv = fv_scores(model, ["antonym"], n_mean=2, n_trials=1, n_shots=2)
    >>> fv.scores.shape
    (2, 9)

    References
    ----------
    Todd et al., "Function Vectors in Large Language Models", ICLR 2024; Yin & Steinhardt, ICML 2025
    (https://github.com/kayoyin/icl-heads, ``src/find_fv_heads.py``).
    """
    from trustlab.methods.iclheads._tasks import FV_TASKS

    task_list = _as_tasks(FV_TASKS if tasks is None else tasks)
    if held_out:
        check_disjoint(task_list, held_out)
    tok = _tok(model, tokenizer)
    per_task, means, probs, changed = {}, {}, {}, {}
    wrap = progress if progress is not None else (lambda it, **k: it)
    seed = as_seed(random_state)  # an int is used as is; a Generator is drawn from once
    for t_idx, task in enumerate(wrap(task_list, desc=f"FV scores ({method})")):
        # separate streams: reusing precomputed means must not change the corrupted prompts
        rng_mean = np.random.default_rng([seed, t_idx, 0])
        rng_corrupt = np.random.default_rng([seed, t_idx, 1])
        means[task.name] = mean = _task_mean(model, tok, task, task_means, n_mean, n_shots, rng_mean)
        corrupt = build_prompts(task, n_trials, n_shots, random_state=rng_corrupt, shuffle_labels=True)
        per_task[task.name], probs[task.name], changed[task.name] = _task_cie(model, tok, task, corrupt, mean, method,
                                                                              batch_size)
    scores = np.mean(np.stack(list(per_task.values())), axis=0)
    mean_all = np.mean(np.stack(list(means.values())), axis=0)
    return FVScores(scores, per_task, means, mean_all, method, probs, changed)


def _task_mean(model: Any, tok: Any, task: ICLTask, task_means: dict[str, np.ndarray] | None, n_mean: int,
               n_shots: int, rng: np.random.Generator) -> np.ndarray:
    """The task's mean head activations: the precomputed ones when given, else from ``n_mean`` clean prompts."""
    if task_means is not None and task.name in task_means:
        return np.asarray(task_means[task.name], dtype=np.float32)
    return mean_head_activations(model, task, n_mean=n_mean, n_shots=n_shots, random_state=rng, tokenizer=tok)


def _task_cie(model: Any, tok: Any, task: ICLTask, corrupt: list[Any], mean: np.ndarray, method: str,
              batch_size: int) -> tuple[np.ndarray, float, int]:
    """Mean CIE over the corrupted prompts of one task, the mean corrupted probability, the fewest heads changed."""
    from trustlab.llm import dims

    d = dims(model)
    cie = np.zeros((len(corrupt), d.n_layers, d.n_heads))
    base, n_ch = [], []
    for i, p in enumerate(corrupt):
        ids = tok(p.text)["input_ids"]
        y = target_token(tok, p.answer)
        if method == "exact":
            cie[i], b, n = _exact_cie(model, ids, mean, y, check=i == 0, batch_size=batch_size)
        else:
            cie[i], b, n = _attribution_cie(model, ids, mean, y)
        base.append(b)
        n_ch.append(n)
    if method == "exact" and min(n_ch) == 0:
        raise TrustlabError(
            f"fv_scores: no head patch changed the logits on task {task.name!r}; the intervention was not "
            "applied (the silent failure that gives all-zero CIE)."
        )
    return cie.mean(0), float(np.mean(base)), int(min(n_ch))
