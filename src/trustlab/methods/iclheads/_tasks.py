"""ICL task data: the shipped task files, validation, the Q:/A: prompt template and prompt sampling.

A task is a list of ``{"input": str, "output": str}`` pairs (the format of Todd et al., 2024). Prompts
follow the template of the official code: ``"Q: x1\\nA: y1\\n\\n ... Q: xq\\nA:"`` (a space before every
input and output); the target is the first token of ``" " + yq``. Tasks are split into *FV-scoring* tasks
(used to find function-vector heads) and *held-out evaluation* tasks (used for ablation and steering);
:func:`check_disjoint` guards against leakage between the two.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.exceptions import InputError, UnknownNameError, did_you_mean

__all__ = [
    "EVAL_TASKS",
    "FV_TASKS",
    "ICLTask",
    "Prompt",
    "available_tasks",
    "build_prompts",
    "check_disjoint",
    "format_prompt",
    "load_task",
    "make_task",
    "single_token_fraction",
    "target_token",
]

_DIR = Path(__file__).with_name("_tasks")

#: task -> kind (abstractive: answer not in the prompt; extractive: copied from the query)
_KINDS = {
    "antonym": "abstractive",
    "country_capital": "abstractive",
    "english_french": "abstractive",
    "present_past": "abstractive",
    "singular_plural": "abstractive",
    "capitalize": "programmatic",
    "first_letter": "programmatic",
    "next_item": "programmatic",
    "choose_first_of_3": "extractive",
    "choose_last_of_3": "extractive",
}
#: tasks whose mean head activations and causal indirect effects define the FV score
FV_TASKS: tuple[str, ...] = ("antonym", "country_capital", "english_french", "present_past", "singular_plural")
#: held-out tasks for ablation and steering (never used for FV scoring)
EVAL_TASKS: tuple[str, ...] = ("capitalize", "first_letter", "next_item", "choose_first_of_3", "choose_last_of_3")


@dataclass(frozen=True)
class ICLTask:
    """A validated ICL task.

    Attributes
    ----------
    name : str
    pairs : tuple of (input, output)
        Unique, non-empty inputs and non-empty outputs.
    kind : str
        ``abstractive``, ``programmatic``, ``extractive`` or ``custom``.
    """

    name: str
    pairs: tuple[tuple[str, str], ...]
    kind: str = "custom"

    def __len__(self) -> int:
        return len(self.pairs)

    def split(self, test_fraction: float = 0.4, seed: int = 0) -> tuple[ICLTask, ICLTask]:
        """Deterministic (train, test) split of the pairs; both parts are ICLTasks of the same kind."""
        if not 0.0 < test_fraction < 1.0:
            raise InputError(f"The 'test_fraction' of ICLTask.split must be in (0, 1). Got {test_fraction!r}.")
        order = np.random.default_rng(seed).permutation(len(self.pairs))
        n_test = max(1, int(round(test_fraction * len(self.pairs))))
        if n_test >= len(self.pairs):
            raise InputError(f"Task {self.name!r} has too few pairs ({len(self.pairs)}) to split.")
        test = tuple(self.pairs[i] for i in sorted(order[:n_test]))
        train = tuple(self.pairs[i] for i in sorted(order[n_test:]))
        return ICLTask(f"{self.name}", train, self.kind), ICLTask(f"{self.name}", test, self.kind)


@dataclass(frozen=True)
class Prompt:
    """One n-shot prompt: its text, the query pair and the demonstrations used."""

    text: str
    query: str
    answer: str
    demos: tuple[tuple[str, str], ...]


def make_task(name: str, pairs: Iterable[Any], kind: str = "custom") -> ICLTask:
    """Validate ``pairs`` (dicts with ``input``/``output`` or 2-tuples) into an :class:`ICLTask`.

    Numbers are cast with ``str()`` (as Todd et al.'s loader does); ``None``, empty strings and duplicate
    inputs raise :class:`InputError`.

    Example
    -------
    >>> make_task("toy", [{"input": "a", "output": "b"}, ("c", "d")]).pairs
    (('a', 'b'), ('c', 'd'))
    """
    out: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for i, p in enumerate(pairs):
        if isinstance(p, dict):
            if "input" not in p or "output" not in p:
                raise InputError(f"Pair {i} of task {name!r} must have 'input' and 'output' keys. Got {sorted(p)}.")
            x, y = p["input"], p["output"]
        elif isinstance(p, list | tuple) and len(p) == 2:
            x, y = p
        else:
            raise InputError(f"Pair {i} of task {name!r} must be a dict or an (input, output) pair. Got {p!r}.")
        for what, v in (("input", x), ("output", y)):
            if v is None or isinstance(v, bool) or not isinstance(v, str | int | float | np.integer):
                raise InputError(f"The {what} of pair {i} of task {name!r} must be a string. Got {v!r}.")
        x, y = str(x).strip(), str(y).strip()
        if not x or not y:
            raise InputError(f"Pair {i} of task {name!r} has an empty input or output. Remove it.")
        if x in seen:
            raise InputError(
                f"Task {name!r} has the duplicate input {x!r} (pairs {seen[x]} and {i}); inputs must be unique."
            )
        seen[x] = i
        out.append((x, y))
    if len(out) < 2:
        raise InputError(f"Task {name!r} needs at least 2 pairs. Got {len(out)}.")
    return ICLTask(name, tuple(out), kind)


def available_tasks() -> list[str]:
    """Names of the shipped tasks.

    Example
    -------
    >>> "antonym" in available_tasks()
    True
    """
    return sorted(p.stem for p in _DIR.glob("*.json"))


def load_task(name: str) -> ICLTask:
    """Load a shipped task by name (see :func:`available_tasks`).

    Example
    -------
    >>> len(load_task("antonym")) >= 40
    True
    """
    if isinstance(name, ICLTask):
        return name
    names = available_tasks()
    if name not in names:
        raise UnknownNameError(f"Unknown ICL task {name!r}.{did_you_mean(str(name), names)} Known: {names}.")
    data = json.loads((_DIR / f"{name}.json").read_text(encoding="utf-8"))
    return make_task(name, data, _KINDS.get(name, "custom"))


def _as_tasks(tasks: Any) -> list[ICLTask]:
    if isinstance(tasks, str | ICLTask):
        tasks = [tasks]
    out = [load_task(t) if isinstance(t, str) else t for t in tasks]
    for t in out:
        if not isinstance(t, ICLTask):
            raise InputError(f"Tasks must be task names or ICLTask objects. Got {type(t).__name__}.")
    if not out:
        raise InputError("At least one ICL task is needed. Got an empty list.")
    return out


def check_disjoint(fv_tasks: Any, eval_tasks: Any) -> None:
    """Raise :class:`InputError` when an FV-scoring task is also an evaluation task (by name or by pairs).

    Example
    -------
    >>> check_disjoint(["antonym"], ["capitalize"])
    """
    a, b = _as_tasks(fv_tasks), _as_tasks(eval_tasks)
    names = {t.name for t in a} & {t.name for t in b}
    same = [t.name for t in a if any(set(t.pairs) == set(u.pairs) for u in b)]
    if names or same:
        raise InputError(
            f"The evaluation tasks {sorted(names | set(same))} are also used for FV scoring: the head scores "
            "would leak the evaluation data. Score heads on other tasks (see FV_TASKS / EVAL_TASKS)."
        )


def format_prompt(demos: Sequence[tuple[str, str]], query: str) -> str:
    """The Q:/A: template of the official code.

    Example
    -------
    >>> format_prompt([("hot", "cold")], "big")
    'Q: hot\\nA: cold\\n\\nQ: big\\nA:'
    """
    return "".join(f"Q: {x}\nA: {y}\n\n" for x, y in demos) + f"Q: {query}\nA:"


def build_prompts(
    task: ICLTask,
    n_prompts: int,
    n_shots: int,
    *,
    random_state: int | np.random.Generator | None = 0,
    shuffle_labels: bool = False,
    queries: ICLTask | None = None,
) -> list[Prompt]:
    """Sample ``n_prompts`` n-shot prompts; demos come from ``task``, queries from ``queries`` (default task).

    Demonstrations are drawn without replacement and never contain the query's input. With
    ``shuffle_labels`` the demo outputs are permuted among the demos (the corrupted prompts of the FV
    score); the query is unchanged. Queries cycle through a permutation of the query pool.

    Raises
    ------
    InputError
        When ``n_shots`` exceeds the pairs available, or ``n_prompts < 1``.
    """
    if isinstance(n_prompts, bool) or not isinstance(n_prompts, int | np.integer) or n_prompts < 1:
        raise InputError(f"The 'n_prompts' argument must be an int >= 1. Got {n_prompts!r}.")
    if isinstance(n_shots, bool) or not isinstance(n_shots, int | np.integer) or n_shots < 0:
        raise InputError(f"The 'n_shots' argument must be an int >= 0. Got {n_shots!r}.")
    pool = queries if queries is not None else task
    shared = queries is None or bool(set(task.pairs) & set(pool.pairs))
    available = len(task.pairs) - (1 if shared else 0)
    if n_shots > available:
        raise InputError(
            f"Task {task.name!r} has {len(task.pairs)} pairs, so at most {available} demonstrations per prompt "
            f"(sampled without replacement, query excluded). Got n_shots={n_shots}."
        )
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    order: list[int] = []
    prompts = []
    for _ in range(int(n_prompts)):
        if not order:
            order = list(rng.permutation(len(pool.pairs)))
        qx, qy = pool.pairs[order.pop()]
        cand = [p for p in task.pairs if p[0] != qx]
        idx = rng.choice(len(cand), size=int(n_shots), replace=False) if n_shots else []
        demos = [cand[i] for i in idx]
        if shuffle_labels and len(demos) > 1:
            outs = [demos[i][1] for i in rng.permutation(len(demos))]
            demos = [(x, y) for (x, _), y in zip(demos, outs)]
        prompts.append(Prompt(format_prompt(demos, qx), qx, qy, tuple(demos)))
    return prompts


def target_token(tokenizer: Any, answer: str) -> int:
    """First token id of ``" " + answer`` (the official first-token target)."""
    ids = tokenizer(" " + answer, add_special_tokens=False)["input_ids"]
    if not ids:
        raise InputError(f"The answer {answer!r} tokenizes to no tokens.")
    return int(ids[0])


def single_token_fraction(tokenizer: Any, task: ICLTask) -> float:
    """Fraction of the task's answers that are one token after a leading space."""
    n = sum(len(tokenizer(" " + y, add_special_tokens=False)["input_ids"]) == 1 for _, y in task.pairs)
    return n / len(task.pairs)
