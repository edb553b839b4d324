"""Small text sets shipped under ``trustlab/data/_files`` (JSONL + a provenance file) and user JSONL."""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf
from trustlab.core.exceptions import AssetNotFoundError, InputError, UnknownNameError, did_you_mean
from trustlab.data._base import Dataset

__all__ = [ "load_text", "read_jsonl"]


def _files() -> Any:
    return resources.files("trustlab.data") / "_files"


_PATH = [InstanceOf(str, os.PathLike)]


@validate_args()
def list_text_sets() -> list[str]:
    """Names of the JSONL sets shipped with trustlab."""
    return sorted(p.name[: -len(".jsonl")] for p in _files().iterdir() if p.name.endswith(".jsonl"))


@validate_args(path=_PATH)
def read_jsonl(path: str | Path) -> RowsWithLines:
    """Read a JSONL file (one JSON object a line); errors name the file and line.

    The rows come back as a list whose ``line_of(i)`` gives the file line of row ``i`` (blank lines are
    skipped but counted), so a caller checking fields can name the line too.
    """
    p = Path(path)
    if not p.exists():
        raise AssetNotFoundError(f"The 'path' argument of read_jsonl points to a missing file: {str(p)!r}.")
    rows, lines = [], []
    with p.open("rb") as fh:
        for i, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{p} line {i} is not UTF-8 text; save the file as UTF-8.") from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{p} line {i} is not valid JSON: {exc.msg}.") from exc
            if not isinstance(obj, dict):
                raise InputError(f"{p} line {i} must be a JSON object. Got {type(obj).__name__}.")
            rows.append(obj)
            lines.append(i)
    if not rows:
        raise InputError(f"{p} holds no rows.")
    return RowsWithLines(rows, lines)


class RowsWithLines(list):
    """The rows of a JSONL file; ``line_of(i)`` is the file line row ``i`` (0-based) came from."""

    def __init__(self, rows: list[dict[str, Any]], lines: list[int]) -> None:
        super().__init__(rows)
        self.lines = list(lines)

    def line_of(self, i: int) -> int:
        return self.lines[i]



def _line_of_byte(path: Path, offset: int) -> int:
    with path.open("rb") as fh:
        return fh.read(offset).count(b"\n") + 1


@validate_args(path=_PATH)
def read_csv(path: str | Path) -> Any:
    """Read a CSV file with pandas; an unreadable one raises :class:`InputError` naming the file and the line.

    A missing file raises :class:`AssetNotFoundError`; a malformed row, an empty file or bytes that are not
    UTF-8 name ``<file> line <n>`` (pandas' own message is kept after it).
    """
    import re

    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise AssetNotFoundError(f"The 'path' argument of read_csv points to a missing file: {str(p)!r}.")
    try:
        return pd.read_csv(p)
    except UnicodeDecodeError as exc:
        raise InputError(f"{p} line {_line_of_byte(p, exc.start)} is not UTF-8 text (byte {exc.object[exc.start]:#x}"
                         "); save the file as UTF-8.") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{p} is empty: a CSV needs a header line and rows.") from None
    except pd.errors.ParserError as exc:
        m = re.search(r"line (\d+)", str(exc))
        where = f"{p} line {m.group(1)}" if m else str(p)
        raise InputError(f"{where} cannot be parsed as CSV ({str(exc).strip()}).") from None


@validate_args(name_or_path=_PATH, text_field=[InstanceOf(str)], label_field=[InstanceOf(str), None])
def load_text(name_or_path: str | Path, *, text_field: str = "text", label_field: str | None = "label") -> Dataset:
    """Load a shipped text set by name (see :func:`list_text_sets`) or the user's JSONL file.

    ``X`` is an object array of strings; ``y`` the labels (or None); every other field is kept in
    ``provenance["rows"]``.

    Examples
    --------
    >>> ds = load_text("capital_facts")
    >>> ds.X[0]
    'The capital of France is Paris.'
    """
    name = str(name_or_path)
    shipped = list_text_sets()
    if name in shipped:
        path = Path(str(_files() / f"{name}.jsonl"))
        prov_file = Path(str(_files() / f"{name}.provenance.json"))
        provenance = json.loads(prov_file.read_text()) if prov_file.exists() else {}
        provenance = {"source": f"trustlab/data/_files/{name}.jsonl", **provenance}
    elif name.endswith(".jsonl") or Path(name).exists():
        path, provenance = Path(name), {"source": str(Path(name).resolve())}
        name = path.stem
    else:
        raise UnknownNameError(
            f"Unknown text set '{name}'.{did_you_mean(name, shipped)} Shipped: {', '.join(shipped)}; "
            "or pass a path to your own .jsonl file."
        )
    rows = read_jsonl(path)
    missing = [i for i, r in enumerate(rows) if text_field not in r]
    if missing:
        raise InputError(f"{path.name}: rows {missing[:5]} lack the text field '{text_field}'.")
    y = None
    if label_field is not None and all(label_field in r for r in rows):
        y = np.asarray([r[label_field] for r in rows])
    return Dataset(
        X=np.asarray([r[text_field] for r in rows], dtype=object), y=y, name=name,
        description=str(provenance.get("how_made", f"text rows from {path.name}")),
        provenance={**provenance, "n_rows": len(rows), "fields": sorted(rows[0])},
    )
