"""The trustlab cache: a folder of atomically written, manifest-verified entries, and remembered hashes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Satisfies
from trustlab.core.files import atomic_write_text

__all__ = [
    "MANIFEST",
    "cache_root",
    "cached_build",
    "file_sha256",
    "remove_tree",
    "sha256_path",
    "verify_entry",
]

MANIFEST = "trustlab-manifest.json"
_FORMAT = 1


def _is_path(v: Any) -> bool:
    return isinstance(v, str | os.PathLike) and str(v) != ""


_PATH = Satisfies(_is_path, "a file or folder path (str or os.PathLike)", [3.5, "", b"x"])


@validate_args(cache_dir=[_PATH, None])
def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The trustlab cache folder: ``cache_dir``, else ``$TRUSTLAB_CACHE``, else ``~/.cache/trustlab``.

    Example
    -------
    >>> cache_root("/tmp/x").as_posix()
    '/tmp/x'
    """
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("TRUSTLAB_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "trustlab"


def sha256_path(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


@validate_args(_example=lambda: {"path": __file__}, path=[_PATH], cache_dir=[_PATH, None])
def file_sha256(path: str | os.PathLike[str], cache_dir: str | os.PathLike[str] | None = None) -> str:
    """sha256 of a file, remembered per (path, size, mtime) in ``<cache>/hashes.json``.

    Hashing the 98 MB SmolLM2 GGUF takes about 0.1 s; the remembered value makes it free.

    Example
    -------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "f.bin"; _ = p.write_bytes(b"abc")
    >>> file_sha256(p, p.parent)[:12]
    'ba7816bf8f01'
    """
    path = Path(path).resolve()
    st = path.stat()
    root = cache_root(cache_dir)
    book = root / "hashes.json"
    key = str(path)
    try:
        table = json.loads(book.read_text())
    except (OSError, ValueError):
        table = {}
    hit = table.get(key)
    if isinstance(hit, dict) and hit.get("size") == st.st_size and hit.get("mtime_ns") == st.st_mtime_ns:
        return str(hit["sha256"])
    digest = sha256_path(path)
    table[key] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
    try:
        root.mkdir(parents=True, exist_ok=True)
        atomic_write_text(book, json.dumps(table, indent=1, sort_keys=True))
    except OSError:  # a read-only cache only costs the remembered hash
        pass
    return digest


def _write_manifest(folder: Path, meta: dict[str, Any]) -> None:
    files = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.name != MANIFEST:
            files[p.relative_to(folder).as_posix()] = {"size": p.stat().st_size, "sha256": sha256_path(p)}
    doc = {"format": _FORMAT, "files": files, **meta}
    (folder / MANIFEST).write_text(json.dumps(doc, indent=1, sort_keys=True))


def verify_entry(folder: Path, *, full: bool = True, only: Callable[[str], bool] | None = None) -> str | None:
    """Check a cache entry against its manifest; return None when valid, else the reason.

    ``full=True`` compares every file's sha256 (streamed, so memory stays flat); ``full=False`` checks
    presence and sizes only (catches truncation, not same-size corruption). ``only(relative_name)``
    restricts the check to some files (e.g. a tokenizer's files inside a model entry).
    """
    try:
        doc = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        return "its manifest is missing (an interrupted write?)"
    except (OSError, ValueError) as exc:
        return f"its manifest is unreadable ({exc})"
    if doc.get("format") != _FORMAT or not isinstance(doc.get("files"), dict) or not doc["files"]:
        return "its manifest has an unknown format"
    for rel, info in doc["files"].items():
        if only is not None and not only(rel):
            continue
        p = folder / rel
        if not p.is_file():
            return f"{rel} is missing"
        size = p.stat().st_size
        if size != info.get("size"):
            return f"{rel} has {size} bytes, the manifest says {info.get('size')} (truncated?)"
        if full and sha256_path(p) != info.get("sha256"):
            return f"{rel} does not match its sha256 in the manifest (corrupt)"
    return None


def cached_build(
    folder: Path,
    build: Callable[[Path], dict[str, Any]],
    *,
    full_verify: bool = True,
) -> tuple[bool, bool]:
    """Make sure ``folder`` holds a verified cache entry, building it with ``build(tmp_dir)`` if needed.

    ``build`` writes the files into a temporary sibling folder and returns extra manifest fields; the
    folder is renamed into place only once complete. A present but invalid entry triggers a
    ``UserWarning`` and is rebuilt. Returns ``(hit, rebuilt)``.
    """
    rebuilt = False
    if folder.exists():
        reason = verify_entry(folder, full=full_verify)
        if reason is None:
            return True, False
        warnings.warn(
            f"The trustlab cache entry {folder} failed verification: {reason}. Rebuilding it.",
            UserWarning,
            stacklevel=3,
        )
        remove_tree(folder)
        rebuilt = True
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        meta = build(tmp)
        _write_manifest(tmp, {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **meta})
        try:
            os.rename(tmp, folder)
        except OSError:
            # another process finished first: keep theirs if it verifies, else replace it with ours
            if verify_entry(folder, full=full_verify) is not None:
                remove_tree(folder)
                os.rename(tmp, folder)
    finally:
        if tmp.exists():
            remove_tree(tmp)
    return False, rebuilt


def remove_tree(folder: Path) -> None:
    trash = folder.with_name(f".trash-{folder.name}-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(folder, trash)
    except OSError:
        trash = folder
    shutil.rmtree(trash, ignore_errors=True)
