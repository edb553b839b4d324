"""Table rows as text, single-token verbalisers and class-balanced few-shot sampling.

A row is serialised TabLLM-style as ``"<column>: <value>; ...; <question> Answer:"``; the model's answer is
read from the logits of the verbaliser tokens (``" No"`` / ``" Yes"`` by default) at the last position.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Options
from trustlab.core.exceptions import InputError
from trustlab.core.seeding import check_random_state
from trustlab.llm.rules import Tokenizer

__all__ = ["serialize_rows", "verbalizer_ids", "balanced_shots"]

_BAD_CHARS = ("\n", "\r", ";")


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    try:
        return bool(isinstance(v, float | np.floating) and math.isnan(v))
    except TypeError:  # pragma: no cover - exotic scalars
        return False


def _fmt(v: Any) -> str:
    if isinstance(v, float | np.floating):
        return f"{float(v):.4g}" if not float(v).is_integer() else str(int(v))
    return str(v)


def _columns(X: Any, columns: Sequence[str] | None) -> tuple[list[list[Any]], list[str]]:
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):
        names = [str(c) for c in X.columns] if columns is None else list(columns)
        rows = X.to_numpy(dtype=object).tolist()
    else:
        arr = np.asarray(X, dtype=object)
        if arr.ndim != 2:
            raise InputError(f"The 'X' argument of serialize_rows must be a 2-d table. Got shape {arr.shape}.")
        names = [f"x{j}" for j in range(arr.shape[1])] if columns is None else list(columns)
        rows = arr.tolist()
    if rows and len(names) != len(rows[0]):
        raise InputError(f"The 'columns' argument of serialize_rows names {len(names)} columns but X has "
                         f"{len(rows[0])}.")
    return rows, names


@validate_args(X=[ArrayLike(ndim=2, dtype="any", finite=False, min_len=1)], columns=[None, SequenceOf(str)],
               question=[InstanceOf(str)], missing=[Options(("unknown", "raise"))],
               max_value_chars=[Interval(int, 1, None)])
def serialize_rows(X: Any, columns: Sequence[str] | None = None, *, question: str = "Positive?",
                   missing: str = "unknown", max_value_chars: int = 64) -> list[str]:
    """One prompt per row: ``"<column>: <value>; ...; <question> Answer:"``.

    Parameters
    ----------
    X : table (DataFrame or 2-d array; strings allowed)
    columns : list of str, optional
        Column names (default: the DataFrame's, else ``x0, x1, ...``).
    question : str
    missing : {"unknown", "raise"}
        Missing values (None/NaN) are written as ``unknown`` with a warning, or refused.
    max_value_chars : int
        A value longer than this (free text) is refused with the column named: the prompt would be
        dominated by it or exceed the context.

    Examples
    --------
    >>> serialize_rows([[67, "own"]], ["age", "housing"], question="Good credit risk?")
    ['age: 67; housing: own. Good credit risk? Answer:']
    """
    rows, names = _columns(X, columns)
    n_missing: dict[str, int] = {}
    out = []
    for i, row in enumerate(rows):
        parts = []
        for name, v in zip(names, row):
            if _is_missing(v):
                if missing == "raise":
                    raise InputError(f"serialize_rows: row {i}, column '{name}' is missing (missing='raise').")
                n_missing[name] = n_missing.get(name, 0) + 1
                text = "unknown"
            else:
                text = _fmt(v)
            if len(text) > max_value_chars:
                raise InputError(f"serialize_rows: column '{name}' holds free text of {len(text)} characters in row "
                                 f"{i} (max_value_chars={max_value_chars}); drop or summarise the column.")
            if any(c in text for c in _BAD_CHARS):
                raise InputError(f"serialize_rows: column '{name}' row {i} contains a newline or ';', which would "
                                 f"break the serialisation: {text[:40]!r}.")
            parts.append(f"{name}: {text}")
        out.append("; ".join(parts) + f". {question} Answer:")
    if n_missing:
        warnings.warn(f"serialize_rows: missing values written as 'unknown' in columns {n_missing}.", UserWarning,
                      stacklevel=2)
    return out


@validate_args(_example=lambda: {"tokenizer": _example_tokenizer()}, tokenizer=[Tokenizer()],
               words=[SequenceOf(str)])
def verbalizer_ids(tokenizer: Any, words: Sequence[str]) -> list[int]:
    """Token ids of the label words, each of which must be exactly one token (and all distinct).

    Examples
    --------
    >>> from trustlab.llm import load_tokenizer
    >>> verbalizer_ids(load_tokenizer(), [" No", " Yes"])  # doctest: +SKIP
    [2838, 9230]
    """
    words = list(words)
    if len(words) < 2:
        raise InputError(f"The 'words' argument of verbalizer_ids needs at least 2 label words. Got {words!r}.")
    ids = []
    for w in words:
        toks = tokenizer(w, add_special_tokens=False)["input_ids"]
        if len(toks) != 1:
            raise InputError(f"The verbaliser {w!r} is {len(toks)} tokens ({toks}) for this tokenizer; each label "
                             "word must be a single token (try a leading space, e.g. ' Yes').")
        ids.append(int(toks[0]))
    if len(set(ids)) != len(ids):
        raise InputError(f"The verbalisers {words!r} map to repeated token ids {ids}.")
    return ids


def _example_tokenizer() -> Any:
    from trustlab.llm import load_tokenizer

    return load_tokenizer()


@validate_args(y=[ArrayLike(ndim=1, dtype="any", min_len=2)], n_per_class=[Interval(int, 1, None)],
               random_state=["random_state"])
def balanced_shots(y: Any, n_per_class: int, random_state: Any = 0) -> np.ndarray:
    """Indices of ``n_per_class`` rows of each class (sorted), drawn without replacement.

    Refuses a single class and a class with fewer than ``n_per_class`` rows.

    Examples
    --------
    >>> balanced_shots([0, 0, 0, 1, 1, 1], 2, random_state=0).shape
    (4,)
    """
    y = np.asarray(y)
    classes = np.unique(y)
    if len(classes) < 2:
        raise InputError(f"balanced_shots: 'y' holds a single class ({classes.tolist()}); few-shot training needs "
                         "at least 2.")
    rng = check_random_state(random_state)
    picked = []
    for c in classes:
        idx = np.flatnonzero(y == c)
        if len(idx) < n_per_class:
            raise InputError(f"balanced_shots: class {c!r} has {len(idx)} rows, fewer than n_per_class="
                             f"{n_per_class}.")
        picked.append(rng.choice(idx, size=n_per_class, replace=False))
    return np.sort(np.concatenate(picked))
