"""Generated tasks: ArithLite (templated word problems, exact-match integers) and CommonLite (two-choice
property questions scored by option log-prob), plus the three input shifts and users' own JSONL.

ArithLite has ten template families (one- and two-step, + and -, numbers 2-40); the last three are held
out of training as the *paraphrase shift*. ``distractor`` adds an irrelevant sentence with a number;
``number_words`` writes the numbers as words ("seven"). CommonLite asks which of two items is heavier,
colder, faster, can fly, or has a given colour, from a small lexicon in this file.
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Interval, Options, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.seeding import check_random_state

__all__ = ["TaskData", "arith_lite", "digit_sums", "common_lite", "load_task_jsonl", "HELD_OUT_FAMILIES"]

INSTRUCTION = "Answer with the number only."

# (template, answer) families; {a}, {b}, {c} are numbers and {n} a name
_ARITH = [
    ("{n} has {a} apples and buys {b} more. How many apples does {n} have now?", "a+b"),
    ("{n} had {a} coins and spent {b}. How many coins are left?", "a-b"),
    ("A shelf holds {a} books. {b} books are added. How many books are on the shelf?", "a+b"),
    ("There are {a} birds on a tree. {b} fly away. How many birds remain?", "a-b"),
    ("{n} walks {a} km on Monday and {b} km on Tuesday. How many km in total?", "a+b"),
    ("A box has {a} pens. {b} are added and then {c} are taken out. How many pens are in the box?", "a+b-c"),
    ("{n} scored {a} points, lost {b} and then won {c}. How many points does {n} have?", "a-b+c"),
    # held out (paraphrase shift)
    ("After receiving {b} stickers, {n}, who started with {a}, owns how many stickers?", "a+b"),
    ("Of {a} cookies baked, {b} were eaten. What number of cookies is still there?", "a-b"),
    ("Starting from {a} cars, a lot gains {b} cars and loses {c}. What is the final count of cars?", "a+b-c"),
]
ARITH_FAMILIES = tuple(range(len(_ARITH)))
HELD_OUT_FAMILIES = (7, 8, 9)
_NAMES = ("Tom", "Ana", "Li", "Sam", "Maya", "Omar", "Kim", "Ben")
_DISTRACTORS = ("{n}'s sister is {d} years old.", "The store opens at {d} o'clock.", "It rained on {d} days last month.")
_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen " \
        "seventeen eighteen nineteen".split()
_TENS = {2: "twenty", 3: "thirty", 4: "forty", 5: "fifty", 6: "sixty", 7: "seventy", 8: "eighty", 9: "ninety"}


def number_word(k: int) -> str:
    """0..99 as English words (``37 -> "thirty-seven"``)."""
    if k < 20:
        return _ONES[k]
    t, o = divmod(k, 10)
    return _TENS[t] + ("" if o == 0 else "-" + _ONES[o])


_ROWS = Satisfies(lambda v: not isinstance(v, str | bytes) and all(isinstance(i, numbers.Integral) for i in v),
                  "row indices (an iterable of ints)", [None, "rows", [0.5]], valid=[0])


@dataclass(frozen=True)
class TaskData:
    """Prompts with gold answers; ``options`` (two per prompt) for choice tasks scored by log-prob."""

    prompts: tuple[str, ...]
    answers: tuple[str, ...]
    options: tuple[tuple[str, ...], ...] | None = None
    family: tuple[int, ...] = field(default=())
    name: str = ""

    def __post_init__(self) -> None:
        if len(self.prompts) == 0 or len(self.prompts) != len(self.answers):
            raise InputError(f"TaskData needs as many answers as prompts (>= 1). Got {len(self.prompts)} prompts and "
                             f"{len(self.answers)} answers.")
        if self.options is not None and any(a not in o for a, o in zip(self.answers, self.options, strict=True)):
            raise InputError("Every TaskData answer must be one of its options.")

    def __len__(self) -> int:
        return len(self.prompts)

    @validate_args(rows=[_ROWS])
    def subset(self, rows: Any) -> TaskData:
        r = [int(i) for i in rows]
        return TaskData(tuple(self.prompts[i] for i in r), tuple(self.answers[i] for i in r),
                        None if self.options is None else tuple(self.options[i] for i in r),
                        tuple(self.family[i] for i in r) if self.family else (), self.name)


def _numbers(rng: np.random.Generator, expr: str) -> dict[str, int]:
    while True:
        a, b, c = (int(x) for x in rng.integers(2, 41, size=3))
        value = eval(expr, {}, {"a": a, "b": b, "c": c})  # noqa: S307 - our own fixed expressions
        if value >= 0:
            return {"a": a, "b": b, "c": c, "value": int(value)}


def _pose(template: str, name: str, values: dict[str, int], shift: str, distractor: tuple[str, int] | None) -> str:
    """One generated problem's prompt: numbers as digits or words (``shift="number_words"``), the drawn
    distractor sentence (its template and number) in front, the instruction after."""
    nums = {k: (number_word(v) if shift == "number_words" else str(v)) for k, v in values.items()}
    text = template.format(n=name, **nums)
    if distractor is not None:
        text = distractor[0].format(n=name, d=distractor[1]) + " " + text
    return f"{text} {INSTRUCTION}"


@validate_args(n=[Interval(int, 1, None)], split=[Options(("train", "test", "paraphrase"))],
               shift=[Options(("none", "distractor", "number_words"))], random_state=["random_state"])
def arith_lite(n: int, *, split: str = "train", shift: str = "none", random_state: Any = 0) -> TaskData:
    """``n`` ArithLite problems: ``train``/``test`` draw from the seven training families, ``paraphrase`` from
    the three held-out ones; ``shift`` adds a distractor sentence or writes numbers as words.

    Example
    -------
    >>> d = arith_lite(2, random_state=0)
    >>> len(d), d.answers[0].isdigit()
    (2, True)
    """
    rng = check_random_state(random_state, owner="arith_lite")
    fams = [f for f in ARITH_FAMILIES if (f in HELD_OUT_FAMILIES) == (split == "paraphrase")]
    prompts, answers, family = [], [], []
    for _ in range(n):
        f = int(rng.choice(fams))
        template, expr = _ARITH[f]
        v = _numbers(rng, expr)
        name = str(rng.choice(_NAMES))
        distractor = None
        if shift == "distractor":
            d = int(rng.integers(2, 41))
            distractor = (str(rng.choice(_DISTRACTORS)), d)
        prompts.append(_pose(template, name, {k: v[k] for k in "abc"}, shift, distractor))
        answers.append(str(v["value"]))
        family.append(f)
    return TaskData(tuple(prompts), tuple(answers), None, tuple(family), f"arith_lite:{split}:{shift}")


# single-digit sums: (template, held out as the paraphrase shift); {a} and {b} are 0..9
_SUMS = [("What is {a} + {b}?", False), ("Add {a} and {b}.", False), ("Compute {a} plus {b}.", False),
         ("{n} has {a} marbles and finds {b} more. How many marbles now?", False),
         ("What do you get when {b} is added to {a}?", True), ("The sum of {a} and {b} is what number?", True)]
#: the 30 (a, b) pairs of the test and paraphrase splits (a fixed draw, seed 0); training uses the other 70
SUM_TEST_PAIRS = frozenset(divmod(int(k), 10) for k in np.random.default_rng(0).permutation(100)[:30])


@validate_args(n=[Interval(int, 1, None)], split=[Options(("train", "test", "paraphrase"))],
               shift=[Options(("none", "distractor", "number_words"))], random_state=["random_state"])
def digit_sums(n: int, *, split: str = "train", shift: str = "none", random_state: Any = 0) -> TaskData:
    """``n`` single-digit sums (answers 0-18, exact match). ``train`` draws from 70 (a, b) pairs and four
    templates, ``test`` from the other 30 pairs (``SUM_TEST_PAIRS``, never trained on) and the same templates,
    ``paraphrase`` from those 30 pairs and two held-out templates; ``shift`` as :func:`arith_lite`.

    Example
    -------
    >>> d = digit_sums(3, split="test", random_state=0)
    >>> all(0 <= int(a) <= 18 for a in d.answers)
    True
    """
    rng = check_random_state(random_state, owner="digit_sums")
    pairs = sorted(p for p in ((a, b) for a in range(10) for b in range(10))
                   if (p in SUM_TEST_PAIRS) == (split != "train"))
    fams = [f for f, (_, held) in enumerate(_SUMS) if held == (split == "paraphrase")]
    prompts, answers, family = [], [], []
    for _ in range(n):
        f = int(rng.choice(fams))
        a, b = pairs[int(rng.integers(len(pairs)))]
        name = str(rng.choice(_NAMES))
        distractor = (str(rng.choice(_DISTRACTORS)), int(rng.integers(2, 10))) if shift == "distractor" else None
        prompts.append(_pose(_SUMS[f][0], name, {"a": a, "b": b}, shift, distractor))
        answers.append(str(a + b))
        family.append(f)
    return TaskData(tuple(prompts), tuple(answers), None, tuple(family), f"digit_sums:{split}:{shift}")


_LEXICON = {
    "heavier": ["feather", "leaf", "coin", "apple", "book", "chair", "bicycle", "horse", "car", "elephant", "truck"],
    "colder": ["lava", "fire", "sun", "oven", "coffee", "soup", "room", "river", "snow", "ice", "glacier"],
    "faster": ["snail", "turtle", "sloth", "walker", "cyclist", "horse", "cheetah", "car", "train", "jet", "rocket"],
}
_FLY = (["eagle", "sparrow", "bat", "pigeon", "owl", "crow", "bee", "parrot"],
        ["dog", "cat", "cow", "fish", "snake", "horse", "pig", "sheep"])
_COLOUR = [("banana", "yellow"), ("lemon", "yellow"), ("strawberry", "red"), ("cherry", "red"), ("lime", "green"),
           ("kiwi", "green"), ("blueberry", "blue"), ("orange", "orange"), ("plum", "purple"), ("grape", "purple")]


@validate_args(n=[Interval(int, 1, None)], random_state=["random_state"])
def common_lite(n: int, *, random_state: Any = 0) -> TaskData:
    """``n`` two-choice CommonLite questions (answer = one of two option words, scored by log-prob).

    Example
    -------
    >>> d = common_lite(3, random_state=0)
    >>> len(d.options[0]), d.answers[0] in d.options[0]
    (2, True)
    """
    rng = check_random_state(random_state, owner="common_lite")
    prompts, answers, options = [], [], []
    kinds = ["heavier", "colder", "faster", "fly", "colour"]
    for _ in range(n):
        kind = str(rng.choice(kinds))
        if kind in _LEXICON:
            i, j = sorted(rng.choice(len(_LEXICON[kind]), size=2, replace=False).tolist())
            lo, hi = _LEXICON[kind][i], _LEXICON[kind][j]
            right = hi
            q = f"Which is {kind}: a {lo} or a {hi}?"
            pair = [lo, hi]
        elif kind == "fly":
            right, wrong = str(rng.choice(_FLY[0])), str(rng.choice(_FLY[1]))
            pair = [right, wrong]
            q = "Which one can fly?"
        else:
            k = int(rng.integers(len(_COLOUR)))
            fruit, colour = _COLOUR[k]
            other = str(rng.choice([c for _, c in _COLOUR if c != colour]))
            right, pair = colour, [colour, other]
            q = f"What colour is a ripe {fruit}?"
        order = rng.permutation(2).tolist()
        pair = [pair[o] for o in order]
        prompts.append(f"{q} Options: {pair[0]} or {pair[1]}. Answer with one word.")
        answers.append(right)
        options.append(tuple(pair))
    return TaskData(tuple(prompts), tuple(answers), tuple(options), (), "common_lite")


@validate_args(path=[str, os.PathLike])
def load_task_jsonl(path: str | os.PathLike[str]) -> TaskData:
    """Read a user's task: one JSON object a line with ``prompt`` and ``answer`` (and optional ``options``,
    a list containing the answer, for choice tasks).
    """
    from trustlab.data import (
        read_jsonl,  # one JSONL reader: missing file, bad JSON, non-object rows, empty file
    )

    p = Path(path)
    prompts, answers, options = [], [], []
    rows = read_jsonl(p)
    for i, row in enumerate(rows):
        if not all(isinstance(row.get(k), str) and row[k] for k in ("prompt", "answer")):
            raise InputError(f"{p} line {rows.line_of(i)} needs non-empty string fields 'prompt' and 'answer'. "
                             f"Got {str(row)[:80]!r}.")
        if "options" in row and not (isinstance(row["options"], list) and row["answer"] in row["options"]):
            raise InputError(f"{p} line {rows.line_of(i)}: 'options' must be a list that contains the answer "
                             f"{row['answer']!r}. Got {str(row['options'])[:80]!r}.")
        prompts.append(row["prompt"])
        answers.append(row["answer"])
        options.append(tuple(row["options"]) if "options" in row else None)
    if any(o is None for o in options) and not all(o is None for o in options):
        raise InputError(f"{p}: either every row has 'options' or none has.")
    opts = None if options[0] is None else tuple(options)
    return TaskData(tuple(prompts), tuple(answers), opts, (), p.stem)
