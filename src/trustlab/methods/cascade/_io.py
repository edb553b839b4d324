"""Reading and writing SelectionTables: our long JSONL/CSV, wide tables and the RouterBench schema.

*Long* format (CSV or JSONL), one row per (query, model): columns ``query``, ``model``, ``quality``, ``cost``
(either may be absent for new queries that are only routed), optionally ``answer`` (text, a JSON list of class probabilities, or an object with ``answer`` / ``text`` /
``logprobs``), ``logprobs`` (a JSON list of the answer's token log-probs) and ``feature_<name>`` columns
(per-query numbers). *Wide* format (the RouterBench schema), one row per query: a quality column named
after each model ``m`` with ``m|total_cost`` beside it, optionally ``m|model_response``, a ``prompt`` (or
``query``) column and an ``eval_name`` column (one-hot query features). Nothing is ever downloaded: the
RouterBench pickle/CSV is read from the path the user gives.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Options
from trustlab.core.exceptions import AssetNotFoundError, InputError
from trustlab.methods.cascade._table import SelectionTable

__all__ = ["load_selection_table", "load_routerbench", "save_selection_table"]

_PATH = [InstanceOf(str, Path)]
_MISSING = [Options(["raise", "drop", "zero"])]


def _read_frame(path: Path) -> Any:
    import pandas as pd

    if not path.is_file():
        raise AssetNotFoundError(f"The table file {str(path)!r} does not exist.")
    suffix = "".join(path.suffixes[-2:]).lower()
    if suffix.endswith((".jsonl", ".ndjson")):
        from trustlab.data import read_jsonl

        return pd.DataFrame(read_jsonl(path))
    if suffix.endswith(".csv"):
        from trustlab.data import read_csv

        return read_csv(path)
    if suffix.endswith((".pkl", ".pickle")):
        return pd.read_pickle(path)  # the user's own file (RouterBench ships pickles)
    raise InputError(f"Unknown table format {path.suffix!r} for {str(path)!r}; use .jsonl, .csv or .pkl.")


def _parse_answer(value: Any, logprobs: Any = None) -> Any:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, str) and value[:1] in "[{":
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass
    if isinstance(value, list) and value and all(isinstance(v, int | float) for v in value):
        value = np.asarray(value, dtype=np.float64)
    if logprobs is not None and not (isinstance(logprobs, float) and np.isnan(logprobs)):
        lp = json.loads(logprobs) if isinstance(logprobs, str) else list(logprobs)
        value = {"answer": value, "logprobs": [float(x) for x in lp]}
    return value


def _finish(quality: np.ndarray, cost: np.ndarray, answers: np.ndarray | None, on_missing: str, *,
            models: list[str], queries: Any, features: np.ndarray | None, name: str) -> SelectionTable:
    if on_missing != "raise":
        if on_missing == "zero":  # a missing quality counts as a failed answer
            quality = np.where(np.isnan(quality), 0.0, quality)
        keep = np.isfinite(quality).all(1) & np.isfinite(cost).all(1)
        if answers is not None and on_missing == "drop":
            keep &= np.array([all(a is not None for a in row) for row in answers])
        if not keep.any():
            raise InputError(f"Every row of the table has a missing entry; nothing is left (on_missing={on_missing!r}).")
        quality, cost = quality[keep], cost[keep]
        answers = None if answers is None else answers[keep]
        queries = None if queries is None else np.asarray(queries, dtype=object)[keep]
        features = None if features is None else features[keep]
    return SelectionTable(quality=quality, cost=cost, answers=answers, models=models, queries=queries,
                          features=features, name=name)


def _long(df: Any, models: Sequence[str] | None, on_missing: str, name: str) -> SelectionTable:
    need = [c for c in ("query", "model") if c not in df.columns]
    if need or not ({"quality", "cost", "answer"} & set(df.columns)):
        raise InputError(f"A long-format table needs the columns query, model and at least one of quality, cost, "
                         f"answer; {need or ['quality/cost/answer']} are missing (columns: {list(df.columns)}).")
    qs = list(dict.fromkeys(df["query"].tolist()))
    ms = list(dict.fromkeys(df["model"].astype(str).tolist())) if models is None else [str(m) for m in models]
    qi, mi = {q: i for i, q in enumerate(qs)}, {m: j for j, m in enumerate(ms)}
    has = {c: c in df.columns for c in ("quality", "cost", "answer")}
    quality, cost = np.full((len(qs), len(ms)), np.nan), np.full((len(qs), len(ms)), np.nan)
    answers = np.full((len(qs), len(ms)), None, dtype=object) if has["answer"] else None
    fcols = [c for c in df.columns if str(c).startswith("feature_")]
    feats = np.zeros((len(qs), len(fcols))) if fcols else None
    for row in df.to_dict("records"):
        m = str(row["model"])
        if m not in mi:
            continue
        i, j = qi[row["query"]], mi[m]
        if has["quality"]:
            quality[i, j] = float(row["quality"])
        if has["cost"]:
            cost[i, j] = float(row["cost"])
        if has["answer"]:
            answers[i, j] = _parse_answer(row.get("answer"), row.get("logprobs"))
        if fcols:
            feats[i] = [float(row[c]) for c in fcols]
    unknown = [m for m in ms if m not in set(df["model"].astype(str))]
    if unknown:
        raise InputError(f"Model(s) {unknown} do not occur in the table's 'model' column.")
    if not has["quality"] or not has["cost"]:  # unlabelled queries to route: nothing to drop or zero
        return SelectionTable(quality=quality if has["quality"] else None, cost=cost if has["cost"] else None,
                              answers=answers, models=ms, queries=qs, features=feats, name=name)
    return _finish(quality, cost, answers, on_missing, models=ms, queries=qs, features=feats, name=name)


def _wide(df: Any, models: Sequence[str] | None, on_missing: str, name: str, *, need_responses: bool
          ) -> SelectionTable:
    listed = [c[: -len("|total_cost")] for c in df.columns if str(c).endswith("|total_cost")]
    ms = listed if models is None else [str(m) for m in models]
    missing = [c for m in ms for c in (m, f"{m}|total_cost", *([f"{m}|model_response"] if need_responses else []))
               if c not in df.columns]
    if not ms or missing:
        raise InputError(f"The table does not follow the RouterBench schema (a quality column per model with "
                         f"'<model>|total_cost'{' and <model>|model_response' if need_responses else ''} beside "
                         f"it): missing {missing or ['any <model>|total_cost column']}.")
    quality = df[ms].to_numpy(dtype=np.float64)
    cost = df[[f"{m}|total_cost" for m in ms]].to_numpy(dtype=np.float64)
    answers = None
    if all(f"{m}|model_response" in df.columns for m in ms):
        answers = np.array([[_parse_answer(v) for v in row] for row in
                            df[[f"{m}|model_response" for m in ms]].itertuples(index=False)], dtype=object)
        answers = answers.reshape(len(df), len(ms))
    qcol = next((c for c in ("prompt", "query", "sample_id") if c in df.columns), None)
    queries = df[qcol].astype(str).tolist() if qcol else None
    feats = None
    if "eval_name" in df.columns:
        names = sorted(df["eval_name"].astype(str).unique())
        feats = (df["eval_name"].astype(str).to_numpy()[:, None] == np.array(names)[None, :]).astype(float)
    return _finish(quality, cost, answers, on_missing, models=ms, queries=queries, features=feats, name=name)


@validate_args(path=_PATH, models=[None, SequenceOf(InstanceOf(str), unique=True)], on_missing=_MISSING)
def load_selection_table(path: str | Path, *, models: Sequence[str] | None = None,
                         on_missing: str = "raise") -> SelectionTable:
    """Read a SelectionTable from the user's CSV / JSONL (long or wide format, see the module docstring).

    ``models`` picks and orders models (default: every model, in order of appearance). ``on_missing``:
    ``"raise"`` (a clear error naming the missing entries), ``"drop"`` (drop incomplete rows) or ``"zero"``
    (missing quality counts as 0, as the official RouterBench 5-shot script does; incomplete costs drop).
    """
    p = Path(path)
    df = _read_frame(p)
    if "model" in df.columns and "query" in df.columns:
        return _long(df, models, on_missing, p.stem)
    return _wide(df, models, on_missing, p.stem, need_responses=False)


@validate_args(path=_PATH, models=[None, SequenceOf(InstanceOf(str), unique=True)], on_missing=_MISSING)
def load_routerbench(path: str | Path, *, models: Sequence[str] | None = None,
                     on_missing: str = "raise") -> SelectionTable:
    """Read the RouterBench schema (``routerbench_0shot.pkl`` / ``.csv``) from the user's path.

    Every chosen model needs its quality column, ``<model>|total_cost`` and ``<model>|model_response``;
    ``eval_name`` becomes one-hot query features. Never downloads anything.
    """
    p = Path(path)
    return _wide(_read_frame(p), models, on_missing, p.stem, need_responses=True)


def _jsonable(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return a.tolist()
    if isinstance(a, dict):
        return {k: _jsonable(v) for k, v in a.items()}
    if isinstance(a, np.generic):
        return a.item()
    return a


@validate_args(table=[InstanceOf(SelectionTable)], path=_PATH,
               _example=lambda: {"table": SelectionTable(quality=[[0.0, 1.0]], cost=[[1.0, 2.0]])})
def save_selection_table(table: SelectionTable, path: str | Path) -> Path:
    """Write ``table`` in the long format (``.jsonl`` or ``.csv``, by suffix), atomically."""
    import pandas as pd

    from trustlab.results import atomic_write_text

    table.require("quality", "cost")
    p = Path(path)
    rows = []
    for i in range(table.n_queries):
        for j, m in enumerate(table.models):
            r: dict[str, Any] = {"query": _jsonable(table.queries[i]), "model": m,
                                 "quality": float(table.quality[i, j]), "cost": float(table.cost[i, j])}
            if table.answers is not None:
                r["answer"] = _jsonable(table.answers[i, j])
            if table.features is not None:
                r.update({f"feature_{c}": float(v) for c, v in enumerate(table.features[i])})
            rows.append(r)
    if p.suffix.lower() in (".jsonl", ".ndjson"):
        text = "".join(json.dumps(r) + "\n" for r in rows)
    elif p.suffix.lower() == ".csv":
        for r in rows:
            if "answer" in r and not isinstance(r["answer"], str | type(None)):
                r["answer"] = json.dumps(r["answer"])
        text = pd.DataFrame(rows).to_csv(index=False)
    else:
        raise InputError(f"The 'path' argument of save_selection_table must end in .jsonl or .csv. Got {str(p)!r}.")
    return atomic_write_text(p, text)
