"""Files we write: atomic (temp file + rename), permissions from the umask, no orphaned temp files.

``atomic_write(path, write)`` lets ``write(tmp)`` fill a temp file in the target folder and renames it into
place, so a reader never sees a half-written file. The result gets the permissions any other tool would
give it (``0666 & ~umask``, usually 0644), not ``mkstemp``'s 0600. A process killed mid-write leaves a
``.<stem>.<random>.<ext>.trustlab-tmp`` behind (a name only this module produces); the next write into that
folder removes such leftovers of ours when they are older than the running process (so a concurrent
writer's temp file is never touched). Any other file, a user's own ``.backup.tmp`` included, is left alone.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import PATH, AnyValue, validate_args
from trustlab.core.constraints import Interval, Satisfies

__all__ = ["atomic_write", "atomic_write_text", "to_jsonable", "clean_orphans", "file_mode"]

#: temp files older than this (this module's import, i.e. at or after the process start) are orphans
_PROCESS_START = time.time()
#: the suffix of our temp files; no other tool's files end in it
TEMP_SUFFIX = ".trustlab-tmp"
#: ``.<stem>.<8 random chars from mkstemp>[.<ext>].trustlab-tmp``: the only names clean_orphans removes
_TEMP_NAME = re.compile(r"^\..*\.[a-z0-9_]{8}(\.[^./]*)?" + re.escape(TEMP_SUFFIX) + r"$")


def _umask() -> int:
    try:  # Linux: read it without changing it (os.umask is process-wide and not thread-safe)
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _write_nothing(tmp: str) -> None:
    return None


def file_mode() -> int:
    """The mode a new regular file gets from the umask (``0o666 & ~umask``; 0o644 for umask 022)."""
    return 0o666 & ~_umask()


@validate_args(folder=[PATH], older_than=[Interval(float, None, None), None])
def clean_orphans(folder: str | Path, *, older_than: float | None = None) -> list[Path]:
    """Remove our own leftover temp files (``.<stem>.<token>[.<ext>].trustlab-tmp``, as :func:`atomic_write`
    names them) in ``folder`` last modified before ``older_than`` (default: this process's start); returns
    the removed paths. Sub-folders and every other file (a user's ``.notes.tmp`` too) are left alone."""
    cutoff = _PROCESS_START if older_than is None else older_than
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not _TEMP_NAME.match(entry.name):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:  # gone meanwhile, or not ours to remove
            continue
    return removed


@validate_args(lambda: {"path": "unused.txt", "write": _write_nothing}, path=[PATH],
               write=[Satisfies(callable, "a callable write(tmp_path)", invalid=[None, "text"])])
def atomic_write(path: str | Path, write: Callable[[str], None]) -> Path:
    """Create ``path`` atomically: ``write(tmp)`` fills a temp file in the same folder, then a rename.

    On any error the temp file is removed and an existing ``path`` is left untouched. The file gets the
    umask's permissions, and orphaned temp files of killed writers in that folder are cleaned first.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_orphans(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=path.suffix + TEMP_SUFFIX)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


@validate_args(path=[PATH], text=[Satisfies(lambda v: isinstance(v, str), "a str", invalid=[None, b"bytes"],
                                             valid="")])
def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a synced temp file and an atomic rename."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    return atomic_write(path, write)


@validate_args(obj=[AnyValue("any object: what has no JSON form is returned as is")])
def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, tuples, sets and dataclasses to JSON-ready values (NaN -> None)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "__dataclass_fields__") and not isinstance(obj, type):
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
