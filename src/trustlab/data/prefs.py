"""Generated preference data with a verifiable reward, and the user's own preference pairs from JSONL.

:func:`make_preferences` builds (prompt, chosen, rejected) triples from four templated tasks whose
answers can be checked by parsing: ``arithmetic`` ("What is 17 + 25?"), ``capitals`` (the 40 countries of
the shipped ``capital_facts`` table), ``units`` (unit conversions) and ``one_word`` ("Answer in one word:
..."). ``chosen`` is correct and concise; ``rejected`` is either wrong (an off-by-k number, another
capital, another word) or correct but rambling (the length trap). The reward :func:`verify_response`
scores any response: 1.0 correct and concise, 0.5 correct but longer than ``max_words``, 0.0 wrong.
Everything is deterministic given ``random_state``; :meth:`PreferenceData.split` keeps every underlying
fact (a sum, a country, a conversion, a question) on one side.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import PATH, ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import Interval, Options, Satisfies
from trustlab.core.exceptions import AssetNotFoundError, ConfigError, InputError
from trustlab.core.seeding import check_random_state

__all__ = [
    "PREFERENCE_TASKS",
    "PreferenceData",
    "exact_match",
    "first_integer",
    "load_preferences",
    "make_preferences",
    "verify_response",
]

#: the generated tasks
PREFERENCE_TASKS = ("arithmetic", "capitals", "units", "one_word")
_REJECT_KINDS = ("wrong", "rambling")

_ONE_WORD = [  # (question, answer) - common knowledge, written for trustlab (CC0)
    ("what color is a ripe banana?", "yellow"), ("what color is the sky on a clear day?", "blue"),
    ("what color is fresh grass?", "green"), ("what color is snow?", "white"), ("what color is coal?", "black"),
    ("what animal says moo?", "cow"), ("what animal barks?", "dog"), ("what animal meows?", "cat"),
    ("what is frozen water called?", "ice"), ("what do bees make?", "honey"), ("what star lights our day?", "sun"),
    ("what do we breathe to live?", "air"), ("what is the opposite of hot?", "cold"),
    ("what is the opposite of up?", "down"), ("what is the opposite of day?", "night"),
    ("what is the opposite of big?", "small"), ("how many legs does a spider have?", "eight"),
    ("how many days are in a week?", "seven"), ("how many wheels does a bicycle have?", "two"),
    ("what season comes after winter?", "spring"), ("what season comes after summer?", "autumn"),
    ("what month comes after January?", "February"), ("what day comes after Monday?", "Tuesday"),
    ("what fruit is used to make wine?", "grapes"), ("what organ pumps blood?", "heart"),
    ("what do cows drink?", "water"), ("what falls from clouds when it rains?", "water"),
    ("what metal is a wedding ring often made of?", "gold"), ("what planet do we live on?", "Earth"),
    ("what is the largest ocean?", "Pacific"), ("what gas do plants absorb?", "CO2"),
    ("what language is spoken in France?", "French"), ("what language is spoken in Germany?", "German"),
    ("what is a baby dog called?", "puppy"), ("what is a baby cat called?", "kitten"),
    ("what shape has three sides?", "triangle"), ("what shape has four equal sides?", "square"),
    ("what do you use to write on a blackboard?", "chalk"), ("what insect makes a web?", "spider"),
    ("what is the color of a stop sign?", "red"),
]
_ONE_WORD_TEMPLATES = ("Answer in one word: {q}", "In one word, {q}", "Reply with a single word: {q}")
_UNITS = [  # (small unit, big unit, factor)
    ("centimeters", "meters", 100), ("grams", "kilograms", 1000), ("minutes", "hours", 60),
    ("seconds", "minutes", 60), ("millimeters", "centimeters", 10), ("inches", "feet", 12),
    ("days", "weeks", 7), ("months", "years", 12), ("meters", "kilometers", 1000), ("hours", "days", 24),
]
_UNIT_TEMPLATES = ("How many {small} are in {n} {big}?", "Convert {n} {big} to {small}.")
_CAPITAL_TEMPLATES = ("What is the capital of {c}?", "Name the capital city of {c}.",
                      "Which city is the capital of {c}?")
_ARITH_OPS = (("+", "plus"), ("-", "minus"), ("*", "times"))
_RAMBLE = {
    "arithmetic": "Let me work through this carefully. I take the first number, combine it with the second one "
                  "as the question asks, double-check the result, and the answer is {a}.",
    "capitals": "That is a nice geography question. {c} is a country with a long and rich history, and the city "
                "where its government sits, its capital, is {a}.",
    "units": "To convert, I multiply by the number of {small} in one of the {big}, check the arithmetic once more, "
             "and find that the answer is {a}.",
    "one_word": "Well, if I think about it for a moment, most people would agree that the answer is {a}, which "
                "is what I would say too.",
}


def _capitals() -> list[tuple[str, str]]:
    path = resources.files("trustlab.data") / "_files" / "capital_facts.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(r["country"], r["capital"]) for r in rows if r.get("label") == 1]


# ---------------------------------------------------------------------------------------------- rewards
_INT = re.compile(r"-?\d[\d,]*")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s-]", " ", str(text).lower()).split())


@validate_args(text=[str])
def first_integer(text: str) -> int | None:
    """The first integer written in ``text`` (digits, optional sign, thousands commas), or None.

    Examples
    --------
    >>> first_integer("The answer is 1,200 grams.")
    1200
    """
    m = _INT.search(text)
    return int(m.group(0).replace(",", "")) if m else None


@validate_args(response=[str], target=[str])
def exact_match(response: str, target: str) -> bool:
    """Whether ``response`` equals ``target`` up to case, punctuation and whitespace.

    Examples
    --------
    >>> exact_match(" Paris. ", "paris")
    True
    """
    return _norm(response) == _norm(target)


def _n_words(text: str) -> int:
    return len(_WORD.findall(text))


def _correct(task: str, answer: str, response: str) -> bool:
    if task in ("arithmetic", "units"):
        return first_integer(response) == int(answer)
    if task == "capitals":
        text = _norm(response)
        hits = [(m.start(), cap) for _, cap in _capitals() if (m := re.search(rf"\b{re.escape(_norm(cap))}\b", text))]
        return bool(hits) and _norm(min(hits)[1]) == _norm(answer)
    if task == "one_word":
        words = _norm(response).split()
        return _norm(answer) in words
    return exact_match(response, answer)


@validate_args(task=[str], answer=[str], response=[str], max_words=[Interval(int, 1, None)])
def verify_response(task: str, answer: str, response: str, *, max_words: int = 4) -> float:
    """Verifiable reward of ``response``: 1.0 correct and concise, 0.5 correct but wordy, 0.0 wrong.

    Correctness is parsed per task: the first integer (``arithmetic``, ``units``), the first capital of the
    shipped table that is named (``capitals``), the answer word among the words (``one_word``); any other
    task name is scored by :func:`exact_match`. Concise means at most ``max_words`` words (``one_word``:
    exactly one).

    Examples
    --------
    >>> verify_response("arithmetic", "42", "42"), verify_response("arithmetic", "42", "41")
    (1.0, 0.0)
    """
    if not _correct(task, answer, response):
        return 0.0
    limit = 1 if task == "one_word" else max_words
    return 1.0 if _n_words(response) <= limit else 0.5


# ------------------------------------------------------------------------------------------------- data
@dataclass
class PreferenceData:
    """Preference triples with the facts that make their reward checkable.

    Attributes
    ----------
    prompts, chosen, rejected : list of str
    tasks : list of str
        Task of each row (``"custom"`` for user data without one).
    answers : list of str
        The reference answer ("" when unknown).
    kinds : list of str
        How the rejected response was made: ``"wrong"``, ``"rambling"`` or ``"user"``.
    keys : list of str
        The underlying fact; :meth:`split` never puts one key on both sides.
    provenance : dict
    """

    prompts: list[str]
    chosen: list[str]
    rejected: list[str]
    tasks: list[str]
    answers: list[str]
    kinds: list[str]
    keys: list[str]
    provenance: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.prompts)

    @validate_args(rows=[ArrayLike(ndim=1, dtype="integer", min_len=0)])
    def subset(self, rows: Sequence[int]) -> PreferenceData:
        idx = [int(i) for i in rows]
        pick = lambda xs: [xs[i] for i in idx]  # noqa: E731
        return PreferenceData(pick(self.prompts), pick(self.chosen), pick(self.rejected), pick(self.tasks),
                              pick(self.answers), pick(self.kinds), pick(self.keys), dict(self.provenance))

    @validate_args(test_size=[Interval(int, 1, None), Interval(float, 0, 1, closed="neither")],
                   random_state=["random_state"])
    def split(self, test_size: int | float = 0.2, *, random_state: Any = 0) -> tuple[PreferenceData, PreferenceData]:
        """(train, test) with disjoint fact keys; ``test_size`` is a count or a fraction of the rows."""
        n = len(self)
        want = int(round(test_size * n)) if isinstance(test_size, float) else int(test_size)
        if not 1 <= want < n:
            raise ConfigError(f"The 'test_size' of PreferenceData.split must leave both sides non-empty. Got "
                              f"{test_size!r} for {n} rows.")
        rng = check_random_state(random_state, owner="PreferenceData.split")
        groups: dict[str, list[int]] = {}
        for i, k in enumerate(self.keys):
            groups.setdefault(k, []).append(i)
        names = list(groups)
        test: list[int] = []
        for j in rng.permutation(len(names)):
            if len(test) >= want:
                break
            test += groups[names[j]]
        test_set = set(test)
        train = [i for i in range(n) if i not in test_set]
        if not train:
            raise ConfigError("PreferenceData.split left no training rows; lower test_size.")
        return self.subset(train), self.subset(sorted(test))

    @validate_args(responses=[Satisfies(lambda v: not isinstance(v, str) and hasattr(v, "__len__")
                                        and all(isinstance(r, str) for r in v),
                                        "a sequence of response strings (one per row)", invalid=["text", [3]])],
                   max_words=[Interval(int, 1, None)])
    def reward(self, responses: Sequence[str], *, max_words: int = 4) -> np.ndarray:
        """:func:`verify_response` of ``responses[i]`` against row ``i`` (one response per row)."""
        if len(responses) != len(self):
            raise InputError(f"PreferenceData.reward needs one response per row ({len(self)}). Got {len(responses)}.")
        return np.asarray([verify_response(t, a, r, max_words=max_words) if t != "custom" or a else np.nan
                           for t, a, r in zip(self.tasks, self.answers, responses)], dtype=np.float64)

    @validate_args(path=[PATH])
    def to_jsonl(self, path: str | Path) -> Path:
        """Write one JSON object per row (``prompt``, ``chosen``, ``rejected``, ``task``, ``answer``, ``kind``,
        ``key``), atomically; :func:`load_preferences` reads it back."""
        from trustlab.results.result import atomic_write_text

        lines = [json.dumps({"prompt": p, "chosen": c, "rejected": r, "task": t, "answer": a, "kind": k, "key": key})
                 for p, c, r, t, a, k, key in zip(self.prompts, self.chosen, self.rejected, self.tasks, self.answers,
                                                  self.kinds, self.keys)]
        return atomic_write_text(path, "\n".join(lines) + "\n")


def _arith(rng: np.random.Generator, n: int) -> list[tuple[str, str, str, dict[str, str]]]:
    out, seen = [], set()
    while len(out) < n:
        a, b = int(rng.integers(2, 60)), int(rng.integers(2, 60))
        sym, word = _ARITH_OPS[int(rng.integers(0, 3))]
        if sym == "*":
            a, b = a % 13 + 2, b % 13 + 2
        if sym == "-" and b > a:
            a, b = b, a
        key = f"arith:{a}{sym}{b}"
        if key in seen:
            continue
        seen.add(key)
        ans = a + b if sym == "+" else a - b if sym == "-" else a * b
        prompt = f"What is {a} {sym if rng.random() < 0.5 else word} {b}?"
        out.append((prompt, str(ans), key, {}))
    return out


def _pool(rng: np.random.Generator, n: int, items: list[tuple[str, str, str, dict[str, str]]],
          task: str) -> list[tuple[str, str, str, dict[str, str]]]:
    if n > len(items):
        raise ConfigError(f"make_preferences can make at most {len(items)} distinct {task!r} prompts; "
                          f"{n} were asked for. Lower n or this task's weight.")
    return [items[i] for i in rng.permutation(len(items))[:n]]


def _items(task: str, rng: np.random.Generator, n: int) -> list[tuple[str, str, str, dict[str, str]]]:
    if task == "arithmetic":
        return _arith(rng, n)
    if task == "capitals":
        items = [(t.format(c=c), cap, f"capital:{c}", {"c": c}) for c, cap in _capitals() for t in _CAPITAL_TEMPLATES]
    elif task == "units":
        items = [(t.format(small=s, big=b, n=k), str(k * f), f"units:{s}/{b}:{k}", {"small": s, "big": b})
                 for s, b, f in _UNITS for k in range(2, 13) for t in _UNIT_TEMPLATES]
    else:
        items = [(t.format(q=q), a.capitalize() if a.islower() else a, f"word:{q}", {})
                 for q, a in _ONE_WORD for t in _ONE_WORD_TEMPLATES]
    return _pool(rng, n, items, task)


_OFFSETS = (-10, -3, -2, -1, 1, 2, 3, 10)


def _wrong(task: str, answer: str, rng: np.random.Generator, match_length: bool = False) -> str:
    """A wrong answer; with ``match_length`` one of exactly the answer's character count (numbers: the same
    digits count and sign; words: the same length when another answer has it, else the nearest length)."""
    if task in ("arithmetic", "units"):
        a = int(answer)
        offs = [o for o in _OFFSETS if not match_length or (len(str(a + o)) == len(answer) and (a + o < 0) == (a < 0))]
        return str(a + int(rng.choice(offs)))
    pool = [cap for _, cap in _capitals()] if task == "capitals" else sorted({a for _, a in _ONE_WORD})
    others = [p for p in pool if _norm(p) != _norm(answer)]
    if match_length:
        gap = min(abs(len(p) - len(answer)) for p in others)
        others = [p for p in others if abs(len(p) - len(answer)) == gap]
    w = others[int(rng.integers(0, len(others)))]
    return w.capitalize() if task == "one_word" and w.islower() else w


@validate_args(
    n=[Interval(int, 1, None)],
    tasks=[SequenceOf(Options(PREFERENCE_TASKS), unique=True)],
    weights=[Satisfies(lambda w: len(w) > 0 and all(float(x) > 0 for x in w), "a list of positive weights",
                       invalid=[[0.0], [-1.0], "w"]), None],
    rambling_fraction=[Interval(float, 0, 1)],
    match_length=[bool],
    random_state=["random_state"],
)
def make_preferences(n: int = 500, *, tasks: Sequence[str] = PREFERENCE_TASKS, weights: Sequence[float] | None = None,
                     rambling_fraction: float = 0.4, match_length: bool = False,
                     random_state: Any = 0) -> PreferenceData:
    """Generate ``n`` preference triples with verifiable answers (see the module docstring).

    Parameters
    ----------
    n : int, default=500
    tasks : list of {"arithmetic", "capitals", "units", "one_word"}
    weights : list of float, optional
        Relative share of each task (default: arithmetic counts twice, e.g. 0.4 / 0.2 / 0.2 / 0.2).
    rambling_fraction : float in [0, 1], default=0.4
        Share of rejected responses that are correct but rambling (the rest are wrong and concise).
    match_length : bool, default=False
        Pairs without a length shortcut: every rejected response is a wrong answer of the chosen answer's
        character count (no rambling rejects, so ``rambling_fraction`` must be 0), so only correctness
        separates chosen from rejected (issue 47: with rambling rejects, length alone ranks most pairs).
    random_state : int, Generator or None, default=0

    Returns
    -------
    PreferenceData
        Rows in a seeded random order; every prompt distinct.

    Examples
    --------
    >>> d = make_preferences(8, random_state=0)
    >>> len(d), bool((d.reward(d.chosen) == 1.0).all()), bool((d.reward(d.rejected) < 1.0).all())
    (8, True, True)
    """
    tasks = list(tasks)
    if weights is None:
        weights = [2.0 if t == "arithmetic" else 1.0 for t in tasks]
    if len(weights) != len(tasks):
        raise ConfigError(f"make_preferences needs one weight per task. Got {len(weights)} for {len(tasks)} tasks.")
    if match_length and rambling_fraction > 0:
        raise ConfigError(f"make_preferences with match_length=True makes no rambling rejects, so "
                          f"'rambling_fraction' must be 0. Got {rambling_fraction!r}.")
    rng = check_random_state(random_state, owner="make_preferences")
    w = np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
    counts = np.floor(w * n).astype(int)
    counts[np.argsort(-(w * n - counts), kind="stable")[: n - counts.sum()]] += 1
    rows = []
    for task, k in zip(tasks, counts):
        for prompt, ans, key, ctx in _items(task, rng, int(k)):
            ramble = rng.random() < rambling_fraction
            rej = _RAMBLE[task].format(a=ans, **ctx) if ramble else _wrong(task, ans, rng, match_length)
            rows.append((prompt, ans, rej, task, ans, "rambling" if ramble else "wrong", key))
    order = rng.permutation(len(rows))
    cols = list(zip(*[rows[i] for i in order]))
    data = PreferenceData(*[list(c) for c in cols], provenance={
        "generator": "trustlab.data.prefs.make_preferences", "n": n, "tasks": tasks, "weights": list(map(float, w)),
        "rambling_fraction": rambling_fraction, "match_length": match_length, "random_state": repr(random_state),
        "capitals": "trustlab/data/_files/capital_facts.jsonl"})
    return data


_FIELDS = ("prompt", "chosen", "rejected")


@validate_args(path=[str, Path], min_rows=[Interval(int, 1, None)])
def load_preferences(path: str | Path, *, min_rows: int = 1) -> PreferenceData:
    """Read the user's preference pairs from JSONL: one object per line with ``prompt``, ``chosen`` and
    ``rejected`` (non-empty strings) and optional ``task``, ``answer``, ``key``.

    A row whose chosen and rejected responses are identical carries no preference: it is skipped with a
    warning. Errors name the file, the line and the field.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "prefs.jsonl"
    >>> _ = make_preferences(4).to_jsonl(p)
    >>> len(load_preferences(p))
    4
    """
    from trustlab.data.text import read_jsonl

    p = Path(path)
    if not p.exists():
        raise AssetNotFoundError(f"The 'path' argument of load_preferences points to a missing file: {str(p)!r}.")
    rows = read_jsonl(p)
    cols: dict[str, list[str]] = {k: [] for k in ("prompts", "chosen", "rejected", "tasks", "answers", "kinds", "keys")}
    skipped = []
    for line, row in enumerate(rows, 1):
        for f in _FIELDS:
            v = row.get(f)
            if not isinstance(v, str) or not v.strip():
                got = "missing" if f not in row else f"{type(v).__name__} {v!r}"[:80]
                raise InputError(f"{p.name} row {line}: the field {f!r} must be a non-empty string. Got {got}.")
        for f in ("task", "answer", "key", "kind"):
            if f in row and not isinstance(row[f], str):
                raise InputError(f"{p.name} row {line}: the optional field {f!r} must be a string.")
        if row["chosen"] == row["rejected"]:
            skipped.append(line)
            continue
        cols["prompts"].append(row["prompt"])
        cols["chosen"].append(row["chosen"])
        cols["rejected"].append(row["rejected"])
        cols["tasks"].append(row.get("task", "custom"))
        cols["answers"].append(row.get("answer", ""))
        cols["kinds"].append(row.get("kind", "user"))
        cols["keys"].append(row.get("key", row["prompt"]))
    if skipped:
        warnings.warn(f"load_preferences skipped {len(skipped)} row(s) of {p.name} whose chosen and rejected "
                      f"responses are identical (rows {skipped[:10]}).", UserWarning, stacklevel=2)
    if len(cols["prompts"]) < min_rows:
        raise InputError(f"{p.name} holds {len(cols['prompts'])} usable preference row(s); at least {min_rows} needed.")
    return PreferenceData(**cols, provenance={"source": str(p.resolve())})
