"""Your own dialogues: read them from JSON / JSONL files, and split them into train / validation / test by group.

The file format is the usual chat format, one dialogue per JSONL line or a JSON list (or ``{"dialogues": [...]}``)::

    {"messages": [{"role": "system", "content": "..."}, {"role": "user", "content": "..."},
                  {"role": "assistant", "content": "...", "detect": true}],
     "label": "deceptive", "meta": {"pair": 3}}

See :meth:`Dialogue.from_dict` for the rules (``detect`` optional: the last assistant message by default;
a missing label is ``"skip"``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Satisfies
from trustlab.core.exceptions import AssetNotFoundError, InputError
from trustlab.methods.deception._dialogue import Dialogue

__all__ = ["load_dialogues", "split_dialogues"]


@validate_args(path=[InstanceOf(str, Path)])
def load_dialogues(path: str | Path) -> list[Dialogue]:
    """Dialogues from a ``.jsonl`` file (one dialogue a line) or a ``.json`` file (a list, or ``{"dialogues": [...]}``).

    Errors name the file and the line or item.

    Example
    -------
    >>> import tempfile, json, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "chats.jsonl"
    >>> _ = p.write_text(json.dumps({"messages": [{"role": "user", "content": "Hi"},
    ...                  {"role": "assistant", "content": "Hello."}], "label": "honest"}) + "\\n")
    >>> load_dialogues(p)[0].detected_text
    'Hello.'
    """
    p = Path(path)
    if not p.is_file():
        raise AssetNotFoundError(f"The 'path' argument of load_dialogues points to a missing file: {str(p)!r}.")
    if p.suffix == ".jsonl":
        from trustlab.data import (
            read_jsonl,  # names the file and line of bad JSON or bytes that are not UTF-8
        )

        found = read_jsonl(p)
        rows: list[tuple[str, Any]] = [(f"{p.name} line {found.line_of(i)}", d) for i, d in enumerate(found)]
    else:
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise InputError(f"{p.name} is not UTF-8 text (byte {exc.start}); save the file as UTF-8.") from None
        except json.JSONDecodeError as exc:
            raise InputError(f"{p.name} is not valid JSON (line {exc.lineno}: {exc.msg}). For one dialogue per "
                             "line, name the file .jsonl.") from exc
        items = doc.get("dialogues") if isinstance(doc, dict) else doc
        if not isinstance(items, list):
            raise InputError(f"{p.name} must hold a list of dialogues or {{'dialogues': [...]}}. "
                             f"Got {type(doc).__name__}.")
        rows = [(f"{p.name} item {i}", d) for i, d in enumerate(items)]
    if not rows:
        raise InputError(f"{p.name} holds no dialogues.")
    return [Dialogue.from_dict(d, where=where) for where, d in rows]


def _fractions_ok(f: Any) -> bool:
    return (isinstance(f, list | tuple) and len(f) >= 2 and all(isinstance(x, int | float) and not isinstance(x, bool)
                                                                 and x > 0 for x in f)
            and abs(sum(f) - 1.0) < 1e-9)


def _groups_of(items: Any, groups: Any) -> np.ndarray:
    n = len(items)
    if groups is None or isinstance(groups, str):
        key = "pair" if groups is None else groups
        metas = [d.meta for d in items] if isinstance(items, Sequence) else list(getattr(items, "meta", []))
        if len(metas) == n and n and all(isinstance(m, dict) and key in m for m in metas):
            return np.asarray([m[key] for m in metas], dtype=object)
        if groups is not None:
            raise InputError(f"The 'groups' argument of split_dialogues names the meta key {groups!r}, but not every "
                             "dialogue's meta has it.")
        return np.arange(n).astype(object)  # no pairing: every dialogue is its own group
    g = np.asarray(groups, dtype=object).reshape(-1)
    if len(g) != n:
        raise InputError(f"The 'groups' argument of split_dialogues has {len(g)} entries for {n} dialogues.")
    return g


@validate_args(items=[Satisfies(lambda v: hasattr(v, "__len__") and len(v) >= 2, "two or more dialogues",
                                [[], 3.5], valid=[0, 1])],
               fractions=[Satisfies(_fractions_ok, "two or more fractions > 0 that sum to 1", [(0.5,), (0.7, 0.7)],
                                     valid=(0.5, 0.5))],
               groups=[None, str, ArrayLike(ndim=1, dtype="any"), SequenceOf(object)],
               random_state=["random_state"])
def split_dialogues(items: Any, fractions: Sequence[float] = (0.6, 0.2, 0.2), *, groups: Any = None,
                    random_state: int | np.random.Generator | None = 0) -> tuple[np.ndarray, ...]:
    """Index arrays (sorted), one per fraction, that split dialogues by *group* (a group never straddles two parts).

    ``items`` is a list of :class:`Dialogue` or a :class:`DialogueActivations`. ``groups``: None uses each
    dialogue's ``meta["pair"]`` when all have one (the honest and deceptive members of a pair stay
    together) and makes every dialogue its own group otherwise; a string names another meta key; a
    sequence gives one group label per dialogue. Groups are permuted with ``random_state`` and cut at the
    rounded cumulative fractions of the number of groups (the experiment's 60/20/20 split by pair).

    Example
    -------
    >>> from trustlab.methods.deception import instructed_pairs
    >>> train, val, test = split_dialogues(instructed_pairs(10))
    >>> len(train), len(val), len(test)
    (12, 4, 4)
    """
    g = _groups_of(items, groups)
    uniq, inverse = np.unique(g.astype(str) if g.dtype == object and not _all_int(g) else g.astype(np.int64),
                              return_inverse=True)
    if len(uniq) < len(fractions):
        raise InputError(f"split_dialogues needs at least {len(fractions)} groups for {len(fractions)} parts. "
                         f"Got {len(uniq)}.")
    perm = np.random.default_rng(random_state).permutation(len(uniq))
    cuts = [int(round(c * len(uniq))) for c in np.cumsum(fractions)[:-1]] + [len(uniq)]
    out, lo = [], 0
    for hi in cuts:
        chosen = np.zeros(len(uniq), dtype=bool)
        chosen[perm[lo:hi]] = True
        out.append(np.nonzero(chosen[inverse])[0])
        lo = hi
    return tuple(out)


def _all_int(g: np.ndarray) -> bool:
    return all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in g)

