"""``Result``: tidy records + config + provenance + claim outcomes, with a JSON round-trip and atomic writes."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SCHEMA_VERSION", "ClaimOutcome", "Result", "atomic_write", "atomic_write_text", "to_jsonable"]

SCHEMA_VERSION = 1


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, tuples, sets and dataclasses to JSON-ready values (NaN -> None)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "__dataclass_fields__"):
        return to_jsonable(asdict(obj))
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, Path):
        return str(obj)
    return obj


def atomic_write(path: str | Path, write: Callable[[str], None]) -> Path:
    """Create ``path`` atomically: ``write(tmp)`` fills a temp file in the same folder, then a rename.

    On any error the temp file is removed and an existing ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix + ".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a synced temp file and an atomic rename."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    return atomic_write(path, write)


@dataclass
class ClaimOutcome:
    """One claim checked against one run: observed value, the baseline it is compared with, threshold."""

    id: str
    statement: str
    passed: bool | None
    observed: Any
    threshold: Any
    baseline: Any = None
    scale_note: str = ""
    detail: str = ""
    unit: str = ""
    secondary: bool = False

    @property
    def status(self) -> str:
        return "SKIP" if self.passed is None else ("PASS" if self.passed else "FAIL")


@dataclass
class Result:
    """The outcome of one experiment run.

    ``records`` is a tidy table (one dict per observation: method, dataset, seed, metric, value...);
    ``summary`` holds derived numbers the claims read; ``config`` the exact config; ``provenance``
    versions, git SHA, seeds, wall time and threads.
    """

    experiment: str
    mode: str
    config: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    claims: list[ClaimOutcome] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    # -- table access -----------------------------------------------------------------------------
    def add(self, **record: Any) -> None:
        """Append one tidy record."""
        self.records.append(record)

    def to_frame(self) -> Any:
        """The records as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame.from_records(self.records)

    @property
    def passed(self) -> bool:
        """True when no claim failed (skipped claims do not fail a run)."""
        return all(c.passed is not False for c in self.claims)

    # -- JSON -------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(asdict(self))

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        version = data.get("schema_version", 0)
        if version > SCHEMA_VERSION:
            raise ValueError(f"Result schema version {version} is newer than this trustlab ({SCHEMA_VERSION}).")
        data = dict(data)
        data["claims"] = [ClaimOutcome(**c) for c in data.get("claims", [])]
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> Result:
        return cls.from_dict(json.loads(text))

    def save(self, path: str | Path) -> Path:
        """Write the JSON atomically (never a half-written file)."""
        return atomic_write_text(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> Result:
        return cls.from_json(Path(path).read_text(encoding="utf-8"))
