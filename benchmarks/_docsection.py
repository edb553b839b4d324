"""Shared by the benchmark scripts: replace (or append) one marked section of ``docs/benchmarks.md``, atomically."""

from __future__ import annotations

from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def write_section(start: str, end: str, block: str, heading: str = "") -> None:
    """Put ``block`` (which begins with ``start`` and ends with ``end``) in place of the marked section, or append
    ``heading`` + ``block`` when the markers are not there yet."""
    from trustlab.results.result import atomic_write

    if not (block.startswith(start) and block.rstrip().endswith(end)):
        raise ValueError(f"the block must begin with {start!r} and end with {end!r}")
    doc = DOC.read_text(encoding="utf-8")
    if start in doc and end in doc:
        doc = doc[: doc.index(start)] + block.rstrip() + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + heading + block.rstrip() + "\n"
    atomic_write(DOC, lambda tmp: Path(tmp).write_text(doc, encoding="utf-8"))
