"""The default-mode results committed to the repository: ``docs/papers/<id>_files/default.json``.

Each experiment's latest default-mode result (and its plots) is committed beside its docs page, with the
commit it ran on in its provenance. The README's and the pages' results tables are generated from these
files (``scripts/paper_tables.py``), and a quick run's report shows each claim's default-mode status
from them ("quick PASS, default FAIL"). An installed package has no docs folder: nothing is found there.
"""

from __future__ import annotations

import os
from pathlib import Path

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf
from trustlab.core.exceptions import InputError
from trustlab.results.result import Result

__all__ = ["checkout_papers_dir", "committed_path", "committed_default", "committed_defaults"]

_PATH = [InstanceOf(str, os.PathLike)]
_PATH_OR_NONE = [InstanceOf(str, os.PathLike), None]


@validate_args()
def checkout_papers_dir() -> Path | None:
    """``docs/papers`` of the source checkout trustlab runs from, or None (an installed wheel)."""
    root = Path(__file__).resolve().parents[3]
    papers = root / "docs" / "papers"
    return papers if (root / "pyproject.toml").is_file() and papers.is_dir() else None


@validate_args(exp_id=[InstanceOf(str)], papers_dir=_PATH_OR_NONE)
def committed_path(exp_id: str, papers_dir: str | os.PathLike | None = None) -> Path | None:
    """Where ``exp_id``'s committed default-mode result lives (None without a docs folder)."""
    base = Path(papers_dir) if papers_dir is not None else checkout_papers_dir()
    return None if base is None else base / f"{exp_id}_files" / "default.json"


@validate_args(exp_id=[InstanceOf(str)], papers_dir=_PATH_OR_NONE)
def committed_default(exp_id: str, papers_dir: str | os.PathLike | None = None) -> Result | None:
    """``exp_id``'s committed default-mode Result, or None when none is committed.

    A committed file that is not a default-mode result of ``exp_id`` raises :class:`InputError`.
    """
    path = committed_path(exp_id, papers_dir)
    if path is None or not path.is_file():
        return None
    res = Result.load(path)
    if res.experiment != exp_id or res.mode != "default" or res.provenance.get("knockout"):
        raise InputError(f"The committed result {str(path)!r} must be a default-mode run of '{exp_id}' without a "
                         f"knockout. Got experiment {res.experiment!r}, mode {res.mode!r}.")
    return res


@validate_args(papers_dir=_PATH_OR_NONE)
def committed_defaults(papers_dir: str | os.PathLike | None = None) -> dict[str, Result]:
    """Every committed default-mode result, by experiment id (an unreadable one is left out)."""
    base = Path(papers_dir) if papers_dir is not None else checkout_papers_dir()
    out: dict[str, Result] = {}
    if base is None:
        return out
    for path in sorted(base.glob("*_files/default.json")):
        exp_id = path.parent.name[: -len("_files")]
        try:
            res = committed_default(exp_id, base)
        except InputError:
            continue
        if res is not None:
            out[exp_id] = res
    return out
