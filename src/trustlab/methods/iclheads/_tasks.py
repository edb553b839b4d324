"""ICL task data: the shipped task files, validation, the Q:/A: prompt template and prompt sampling.

A task is a list of ``{"input": str, "output": str}`` pairs (the format of Todd et al., 2024). Prompts
follow the template of the official code: ``"Q: x1\\nA: y1\\n\\n ... Q: xq\\nA:"`` (a space before every
input and output); the target is the first token of ``" " + yq``. Tasks are split into *FV-scoring* tasks
(used to find function-vector heads) and *held-out evaluation* tasks (used for ablation and steering);
:func:`check_disjoint` guards against leakage between the two.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf, Interval, Satisfies
from trustlab.core.exceptions import AssetNotFoundError, InputError, UnknownNameError, did_you_mean
from trustlab.core.seeding import check_random_state, seed_alias
from trustlab.llm.rules import Tokenizer

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

    @seed_alias
    @validate_args(test_fraction=[Interval("real", 0, 1, closed="neither")], random_state=["random_state"])
    def split(self, test_fraction: float = 0.4, random_state: Any = 0) -> tuple[ICLTask, ICLTask]:
        """Deterministic (train, test) split of the pairs (for an int or Generator ``random_state``); both parts
        are ICLTasks of the same kind."""
        if not 0.0 < test_fraction < 1.0:
            raise InputError(f"The 'test_fraction' of ICLTask.split must be in (0, 1). Got {test_fraction!r}.")
        order = check_random_state(random_state).permutation(len(self.pairs))
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


def _is_task(v: Any) -> bool:
    return isinstance(v, str | ICLTask | os.PathLike)


def _is_tasks(v: Any) -> bool:
    return _is_task(v) or (isinstance(v, list | tuple) and len(v) > 0 and all(_is_task(t) for t in v))


_TASKS = Satisfies(_is_tasks, "a task name, a JSON file, an ICLTask or a non-empty list of them", [3.5, [], [3]],
                   valid="antonym")


def _read_pairs_file(path: Path) -> Any:
    if not path.is_file():
        raise AssetNotFoundError(f"The task file {str(path)!r} does not exist.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"The task file {path.name} is not valid JSON (line {exc.lineno}: {exc.msg}).") from exc
    if isinstance(data, dict) and "pairs" in data:
        data = data["pairs"]
    if not isinstance(data, list):
        raise InputError(f"The task file {path.name} must hold a list of {{'input', 'output'}} pairs (or "
                         f"{{'pairs': [...]}}). Got {type(data).__name__}.")
    return data


def _is_pairs_source(v: Any) -> bool:
    return isinstance(v, str | os.PathLike) or (isinstance(v, Iterable) and not isinstance(v, dict | bytes))


@validate_args(name=[str], pairs=[Satisfies(_is_pairs_source, "a list of (input, output) pairs or {'input', 'output'} "
                                            "dicts, or the path of a JSON file of them", [None, 3, {"a": "b"}])],
               kind=[str], _example=lambda: {"name": "toy", "pairs": [("a", "b"), ("c", "d")]})
def make_task(name: str, pairs: Iterable[Any] | str | os.PathLike[str], kind: str = "custom") -> ICLTask:
    """Your own task: validate ``pairs`` into an :class:`ICLTask`.

    ``pairs`` is a list of dicts with ``input``/``output`` keys or of 2-tuples, or the path of a JSON file
    holding such a list (Todd et al.'s format, or ``{"pairs": [...]}``). Numbers are cast with ``str()``
    (as Todd et al.'s loader does); ``None``, empty strings and duplicate inputs raise :class:`InputError`.
    Check a new task against the FV-scoring tasks with :func:`check_disjoint` before evaluating on it.

    Example
    -------
    >>> make_task("toy", [{"input": "a", "output": "b"}, ("c", "d")]).pairs
    (('a', 'b'), ('c', 'd'))
    """
    if isinstance(pairs, str | os.PathLike):
        pairs = _read_pairs_file(Path(pairs))
    if isinstance(pairs, dict) or not isinstance(pairs, Iterable):
        raise InputError(f"The 'pairs' argument of make_task must be a list of (input, output) pairs or a JSON file "
                         f"path. Got {type(pairs).__name__} instead.")
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


@validate_args()
def available_tasks() -> list[str]:
    """Names of the shipped tasks (``trustlab/data/_files/iclheads/``).

    Example
    -------
    >>> "antonym" in available_tasks()
    True
    """
    from trustlab.data import shipped_names

    return shipped_names("iclheads", ".json")


@validate_args(name=[Satisfies(_is_task, "a task name, a JSON file path or an ICLTask", [3.5, None],
                               valid="antonym")])
def load_task(name: str | os.PathLike[str] | ICLTask) -> ICLTask:
    """A shipped task by name (see :func:`available_tasks`), or your own task from a JSON file path.

    Example
    -------
    >>> len(load_task("antonym")) >= 40
    True
    """
    if isinstance(name, ICLTask):
        return name
    names = available_tasks()
    if isinstance(name, str) and name in names:
        from trustlab.data import read_shipped_json

        return make_task(name, read_shipped_json("iclheads", f"{name}.json"), _KINDS.get(name, "custom"))
    if isinstance(name, os.PathLike) or str(name).endswith(".json"):
        return make_task(Path(name).stem, Path(name))
    raise UnknownNameError(f"Unknown ICL task {name!r}.{did_you_mean(str(name), names)} Known: {names}; or pass "
                           "the path of your own .json task file.")


def _as_tasks(tasks: Any) -> list[ICLTask]:
    if isinstance(tasks, str | ICLTask | os.PathLike):
        tasks = [tasks]
    out = [t if isinstance(t, ICLTask) else load_task(t) if _is_task(t) else t for t in tasks]
    for t in out:
        if not isinstance(t, ICLTask):
            raise InputError(f"Tasks must be task names or ICLTask objects. Got {type(t).__name__}.")
    if not out:
        raise InputError("At least one ICL task is needed. Got an empty list.")
    return out


def _norm(v: str) -> str:
    return " ".join(v.casefold().split())


def _overlap(a: ICLTask, b: ICLTask) -> dict[str, Any]:
    """Shared identical pairs, and shared inputs / outputs (case-folded) as fractions of the smaller task."""
    ia, ib = {_norm(x) for x, _ in a.pairs}, {_norm(x) for x, _ in b.pairs}
    oa, ob = {_norm(y) for _, y in a.pairs}, {_norm(y) for _, y in b.pairs}
    return {"pairs": sorted(set(a.pairs) & set(b.pairs)), "inputs": sorted(ia & ib), "outputs": sorted(oa & ob),
            "input_share": len(ia & ib) / max(1, min(len(ia), len(ib))),
            "output_share": len(oa & ob) / max(1, min(len(oa), len(ob)))}


@validate_args(fv_tasks=[_TASKS], eval_tasks=[_TASKS], max_shared=[Interval(float, 0, 1, closed="right")])
def check_disjoint(fv_tasks: Any, eval_tasks: Any, *, max_shared: float = 0.25) -> None:
    """Raise :class:`InputError` when an evaluation task leaks into the FV-scoring tasks.

    A pair of tasks leaks when they have the same name, share any identical (input, output) pair, or share
    ``max_shared`` or more of their inputs or of their outputs (case-folded; as a fraction of the smaller
    task's distinct values): e.g. country -> capital and country -> language share every input. Incidental
    word reuse between unrelated tasks (the shipped tasks share at most 14 % of their inputs) passes.

    Example
    -------
    >>> check_disjoint(["antonym"], ["capitalize"])
    >>> capitals = make_task("cap", [("France", "Paris"), ("Japan", "Tokyo"), ("Peru", "Lima")])
    >>> languages = make_task("lang", [("France", "French"), ("Japan", "Japanese"), ("Kenya", "Swahili")])
    >>> check_disjoint([capitals], [languages])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    trustlab.core.exceptions.InputError: The evaluation task 'lang' leaks into the FV-scoring task 'cap': ...
    """
    problems = []
    for u in _as_tasks(eval_tasks):
        for t in _as_tasks(fv_tasks):
            o = _overlap(t, u)
            why = []
            if t.name == u.name:
                why.append("the same name")
            if o["pairs"]:
                why.append(f"{len(o['pairs'])} identical pair(s), e.g. {o['pairs'][0]}")
            if o["input_share"] >= max_shared:
                why.append(f"{o['input_share']:.0%} shared inputs, e.g. {o['inputs'][:3]}")
            if o["output_share"] >= max_shared:
                why.append(f"{o['output_share']:.0%} shared outputs, e.g. {o['outputs'][:3]}")
            if why:
                problems.append(f"The evaluation task {u.name!r} leaks into the FV-scoring task {t.name!r}: "
                                + "; ".join(why))
    if problems:
        raise InputError(" ".join(problems) + f". Head scores would leak the evaluation data (the limit is "
                         f"max_shared={max_shared:g}); score heads on other tasks (see FV_TASKS / EVAL_TASKS).")


def _is_demos(v: Any) -> bool:
    return isinstance(v, list | tuple) and all(isinstance(p, list | tuple) and len(p) == 2 for p in v)


@validate_args(demos=[Satisfies(_is_demos, "a list of (input, output) pairs", ["ab", [("a",)]], valid=[])],
               query=[str])
def format_prompt(demos: Sequence[tuple[str, str]], query: str) -> str:
    """The Q:/A: template of the official code.

    Example
    -------
    >>> format_prompt([("hot", "cold")], "big")
    'Q: hot\\nA: cold\\n\\nQ: big\\nA:'
    """
    return "".join(f"Q: {x}\nA: {y}\n\n" for x, y in demos) + f"Q: {query}\nA:"


def _toy() -> dict[str, Any]:
    return {"task": make_task("toy", [("a", "b"), ("c", "d"), ("e", "f")])}


@validate_args(_example=_toy, task=[InstanceOf(ICLTask)], n_prompts=[Interval(int, 1, None)], n_shots=[Interval(int, 0, None)],
               random_state=["random_state"], shuffle_labels=["boolean"], queries=[None, InstanceOf(ICLTask)])
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


@validate_args(tokenizer=[Tokenizer()], answer=[str])
def target_token(tokenizer: Any, answer: str) -> int:
    """First token id of ``" " + answer`` (the official first-token target)."""
    ids = tokenizer(" " + answer, add_special_tokens=False)["input_ids"]
    if not ids:
        raise InputError(f"The answer {answer!r} tokenizes to no tokens.")
    return int(ids[0])


@validate_args(_example=_toy, tokenizer=[Tokenizer()], task=[InstanceOf(ICLTask)])
def single_token_fraction(tokenizer: Any, task: ICLTask) -> float:
    """Fraction of the task's answers that are one token after a leading space."""
    n = sum(len(tokenizer(" " + y, add_special_tokens=False)["input_ids"]) == 1 for _, y in task.pairs)
    return n / len(task.pairs)
