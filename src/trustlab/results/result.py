"""``Result``: tidy records + config + provenance + claim outcomes, with a JSON round-trip and atomic writes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from trustlab.core.arguments import PATH, AnyValue, validate_args
from trustlab.core.constraints import InstanceOf, Interval
from trustlab.core.exceptions import InputError
from trustlab.core.files import atomic_write, atomic_write_text, to_jsonable  # noqa: F401 - old import paths

__all__ = [ "ClaimOutcome", "Result"]

SCHEMA_VERSION = 1
_REQUIRED = ("experiment", "mode", "config")


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
    paper_value: Any = None
    #: "claim" or "premise"; the premises this claim rests on; those of them that did not PASS on this run
    kind: str = "claim"
    requires: list[str] = field(default_factory=list)
    voided_by: list[str] = field(default_factory=list)
    #: the observed value is (or depends on) a wall-clock measurement: left out of cross-executor comparisons
    timed: bool = False

    @property
    def status(self) -> str:
        """PASS / FAIL / SKIP (not checked), or VOID: checked, but a premise it rests on did not PASS."""
        if self.passed is None:
            return "SKIP"
        if self.voided_by:
            return "VOID"
        return "PASS" if self.passed else "FAIL"

    @classmethod
    @validate_args(data=[InstanceOf(Mapping)])
    def from_dict(cls, data: dict[str, Any]) -> ClaimOutcome:
        """Build from JSON; fields a later trustlab added (same schema version) are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


#: the JSON type each field of a result document must have (a document that looks like ours but is not)
_FIELD_TYPES = {"experiment": str, "mode": str, "config": dict, "records": list, "summary": dict, "claims": list,
                "provenance": dict, "notes": list}
_JSON_NAME = {str: "string", dict: "object", list: "array"}


def _check_layout(data: dict[str, Any]) -> None:
    """Refuse a document whose fields have the wrong JSON types, naming the first wrong field."""
    for name, kind in _FIELD_TYPES.items():
        if name in data and not isinstance(data[name], kind):
            raise InputError(f"Its '{name}' field must be a JSON {_JSON_NAME[kind]}. Got {type(data[name]).__name__} "
                             f"{data[name]!r:.60} instead.")
    for i, claim in enumerate(data.get("claims", [])):
        if not isinstance(claim, dict) or not isinstance(claim.get("id"), str):
            raise InputError(f"Its claims[{i}] must be an object with a string 'id'. Got {claim!r:.60} instead.")
    for i, rec in enumerate(data.get("records", [])):
        if not isinstance(rec, dict):
            raise InputError(f"Its records[{i}] must be an object. Got {rec!r:.60} instead.")
    if not all(isinstance(n, str) for n in data.get("notes", [])):
        raise InputError("Its 'notes' field must be an array of strings.")


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
        """True when no primary claim or premise is FAIL or VOID (SKIP and secondary lines do not fail a run)."""
        return self.error is None and all(c.status in ("PASS", "SKIP") for c in self.claims if not c.secondary)

    @property
    def counts(self) -> dict[str, int]:
        """Primary claims and premises by status (PASS, FAIL, VOID, SKIP), and ERROR: 1 if the run raised."""
        primary = [c for c in self.claims if not c.secondary]
        out = {s: sum(c.status == s for c in primary) for s in ("PASS", "FAIL", "VOID", "SKIP")}
        out["ERROR"] = int(self.error is not None)
        return out

    @property
    def error(self) -> dict[str, Any] | None:
        """``{"type", "message"[, "traceback"]}`` when the run raised instead of finishing, else None."""
        err = self.provenance.get("error")
        return err if isinstance(err, dict) else None

    # -- JSON -------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON document; ``counts`` (derived from the claims, ignored on reading) is written for readers."""
        return to_jsonable({**asdict(self), "counts": self.counts})

    @validate_args(indent=[Interval(int, 0, None), None])
    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    @validate_args(data=[AnyValue("parsed JSON: the body refuses a foreign document or a newer schema with an "
                                  "InputError naming what it lacks")])
    def from_dict(cls, data: dict[str, Any]) -> Result:
        """Build from parsed JSON; a foreign document or a newer schema raises :class:`InputError`."""
        if not isinstance(data, dict) or any(k not in data for k in _REQUIRED) or "schema_version" not in data:
            keys = sorted(data)[:6] if isinstance(data, dict) else type(data).__name__
            raise InputError(f"This is not a trustlab result (it lacks 'experiment', 'mode', 'config' or "
                             f"'schema_version'; found {keys}).")
        version = data["schema_version"]
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise InputError(f"Its schema_version {version!r} is newer than this trustlab reads ({SCHEMA_VERSION}); "
                             "upgrade trustlab to read it.")
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        _check_layout(data)
        data["claims"] = [ClaimOutcome.from_dict(c) for c in data.get("claims", [])]
        return cls(**data)

    @classmethod
    @validate_args(text=[InstanceOf(str, bytes, bytearray)])
    def from_json(cls, text: str) -> Result:
        return cls.from_dict(json.loads(text))

    @validate_args(path=[PATH])
    def save(self, path: str | Path) -> Path:
        """Write the JSON atomically (never a half-written file; permissions from the umask)."""
        return atomic_write_text(path, self.to_json())

    @classmethod
    @validate_args(path=[PATH])
    def load(cls, path: str | Path) -> Result:
        """Read a result file; an unreadable, corrupt or foreign file raises :class:`InputError` naming it."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"The result file {str(p)!r} cannot be read ({type(exc).__name__}: {exc}).") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"The result file {str(p)!r} is not valid JSON ({exc.msg} at line {exc.lineno}; "
                             "a partial copy?).") from None
        try:
            return cls.from_dict(data)
        except InputError as exc:
            raise InputError(f"The result file {str(p)!r} was skipped: {exc}") from None
        except (TypeError, ValueError, KeyError) as exc:
            raise InputError(f"The result file {str(p)!r} has an unexpected layout ({type(exc).__name__}: "
                             f"{exc}).") from None
