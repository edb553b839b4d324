"""Files shipped with trustlab for the papers' experiments: one folder per paper, ``trustlab/data/_files/<id>/``.

All shipped data lives under ``trustlab.data`` (one convention, one ``package-data`` entry, read through
``importlib.resources`` so it works from a wheel as from a checkout); method packages read it through
these two functions instead of building paths themselves. The scripts that (re)build a folder live
outside the package (``scripts/``), next to the provenance file each folder carries.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Satisfies
from trustlab.core.exceptions import AssetNotFoundError, UnknownNameError, did_you_mean

__all__ = ["shipped_names", "read_shipped_json", "read_shipped_bytes"]


def _is_name(v: Any) -> bool:
    return isinstance(v, str) and bool(v) and "/" not in v and "\\" not in v and not v.startswith(".")


_NAME = Satisfies(_is_name, "a plain file or folder name (no path separators)", ["", "../x", 3], valid="deception")


def _folder(paper: str) -> Any:
    root = resources.files("trustlab.data") / "_files"
    folder = root / paper
    if not folder.is_dir():
        known = sorted(p.name for p in root.iterdir() if p.is_dir())
        raise UnknownNameError(f"No shipped data folder {paper!r}.{did_you_mean(paper, known)} Known: {known}.")
    return folder


@validate_args(paper=[_NAME], suffix=[str])
def shipped_names(paper: str, suffix: str = ".json") -> list[str]:
    """Names (without ``suffix``) of the files ending in ``suffix`` in the shipped folder ``paper``.

    Example
    -------
    >>> "antonym" in shipped_names("iclheads")
    True
    """
    return sorted(p.name[: len(p.name) - len(suffix)] for p in _folder(paper).iterdir()
                  if p.is_file() and p.name.endswith(suffix))


@validate_args(paper=[_NAME], name=[_NAME])
def read_shipped_json(paper: str, name: str) -> Any:
    """The parsed JSON file ``name`` of the shipped folder ``paper``; a missing file names its rebuild script.

    Example
    -------
    >>> len(read_shipped_json("deception", "roleplay.json")["scenarios"])
    40
    """
    return json.loads(_file(paper, name, None).read_text(encoding="utf-8"))


def _file(paper: str, name: str, rebuild: str | None) -> Any:
    path = _folder(paper) / name
    if not path.is_file():
        how = rebuild or f"scripts/build_{paper}_data.py in the source checkout"
        raise AssetNotFoundError(f"The shipped data file trustlab/data/_files/{paper}/{name} is missing; it is "
                                 f"rebuilt by {how}.")
    return path


@validate_args(paper=[_NAME], name=[_NAME], rebuild=[str, None])
def read_shipped_bytes(paper: str, name: str, rebuild: str | None = None) -> bytes:
    """The raw bytes of the shipped file ``name`` (e.g. model weights) of the folder ``paper``.

    ``rebuild`` names the command that rebuilds the file, quoted in the error when the file is missing
    (default: ``scripts/build_<paper>_data.py``).

    Example
    -------
    >>> read_shipped_bytes("deception", "facts.json")[:1]
    b'{'
    """
    return bytes(_file(paper, name, rebuild).read_bytes())
