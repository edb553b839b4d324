"""Size limits and the public surface stay where issue 14 put them.

* No function in ``src/`` is over 80 lines (``def`` line to last line, docstring included) and no file is
  over 500 lines. There is no allow-list: everything over the limits was split.
* No package's ``__all__`` grows past its size recorded in ``tests/public_surface.json`` unless every name
  that is not in the record is documented (named in ``README.md`` or ``docs/**/*.md``, or in a ``>>>``
  example of a docstring) or used as API by code in ``src/`` outside its own package (an experiment, another
  layer, the CLI). A package the record does not know starts at 0. Names removed from the surface never fail.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
from pathlib import Path

import pytest

import trustlab

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "trustlab"
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 500
RECORD = json.loads((Path(__file__).parent / "public_surface.json").read_text())


def _sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``"file:line name (n lines)"`` for every function or method of ``path`` over ``limit`` lines."""
    tree = ast.parse(path.read_text())
    label = path.relative_to(ROOT) if ROOT in path.parents else path.name
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            n = node.end_lineno - node.lineno + 1
            if n > limit:
                out.append(f"{label}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_function_over_80_lines():
    found = [f for p in _sources() for f in long_functions(p)]
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines (split them into named steps): {found}"


def test_no_file_over_500_lines():
    found = [f"{p.relative_to(ROOT)} ({n})" for p in _sources()
             if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES]
    assert not found, f"files over {MAX_FILE_LINES} lines (split them by concern): {found}"


def test_the_length_check_catches_a_long_function(tmp_path):
    src = tmp_path / "long.py"
    src.write_text("def f():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 2) + "    return x\n"
                   "\n\nclass C:\n    def g(self):\n" + "        x = 1\n" * MAX_FUNCTION_LINES + "        return x\n")
    assert long_functions(src) == [f"long.py:{MAX_FUNCTION_LINES + 4} g ({MAX_FUNCTION_LINES + 2} lines)"]


# ------------------------------------------------------------------------------------------ public surface
def public_packages() -> list[str]:
    names = ["trustlab"]
    for info in pkgutil.walk_packages(trustlab.__path__, "trustlab."):
        if info.ispkg and not any(p.startswith("_") for p in info.name.split(".")[1:]):
            names.append(info.name)
    return names


def _documents() -> str:
    """The text of the user-facing docs plus the ``>>>`` lines of every docstring under ``src/``."""
    parts = [(ROOT / "README.md").read_text()] + [p.read_text() for p in sorted((ROOT / "docs").rglob("*.md"))]
    for p in _sources():
        parts += [line.strip()[4:] for line in p.read_text().splitlines() if line.strip().startswith(">>> ")]
    return "\n".join(parts)


def _imports_outside(package: str) -> set[str]:
    """Names that ``src/`` code outside ``package`` imports from it (or from its submodules) or reads as
    attributes of it."""
    own = SRC.joinpath(*package.split(".")[1:])
    found: set[str] = set()
    for p in _sources():
        if package != "trustlab" and own in p.parents:
            continue
        tree = ast.parse(p.read_text())
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module == package or node.module.startswith(package + ".")):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.Import):
                aliases.update({a.asname: a.name for a in node.names if a.asname and a.name == package})
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                found.add(node.attr)
    return found


def undocumented_new_names(package: str, exported: list[str], record: dict[str, list[str]],
                           docs: str) -> list[str]:
    """Names of ``exported`` beyond the record that are neither documented nor used outside ``package``
    (empty while the package does not grow past its recorded size)."""
    known = set(record.get(package, []))
    if len(exported) <= len(known):
        return []
    used = None
    bad = []
    for name in sorted(set(exported) - known):
        if re.search(r"(?<![\w])" + re.escape(name) + r"\b", docs):
            continue
        used = _imports_outside(package) if used is None else used
        if name not in used:
            bad.append(name)
    return bad


@pytest.mark.parametrize("package", public_packages())
def test_public_surface_does_not_grow_undocumented(package):
    exported = list(importlib.import_module(package).__all__)
    bad = undocumented_new_names(package, exported, RECORD, _documents())
    assert not bad, (
        f"{package}.__all__ has {len(exported)} names, more than the {len(RECORD.get(package, []))} recorded in "
        f"tests/public_surface.json, and {bad} are neither documented (README.md, docs/, a docstring example) "
        "nor used by code outside the package. Keep them private (drop them from __all__ and the lazy map) "
        "or document them."
    )


def test_surface_check_catches_an_undocumented_name():
    record = {"pkg": ["a", "b"]}
    assert undocumented_new_names("pkg", ["a", "b"], record, "") == []
    assert undocumented_new_names("pkg", ["a"], record, "") == []  # shrinking never fails
    assert undocumented_new_names("trustlab.nopkg", ["zz_plumbing_helper"], {}, "") == ["zz_plumbing_helper"]
    assert undocumented_new_names("trustlab.nopkg", ["zz_plumbing_helper"], {}, "use `zz_plumbing_helper`") == []


def test_one_export_style():
    """Every package exports through one lazy map: ``_LAZY``, ``__all__ = sorted(_LAZY)`` and
    ``lazy_exports`` (the command line, whose only export is ``main``, is the exception)."""
    wrong = []
    for package in public_packages():
        if package == "trustlab.cli":
            continue
        mod = importlib.import_module(package)
        lazy = getattr(mod, "_LAZY", None)
        extra = {"__version__"} if package == "trustlab" else set()
        if not isinstance(lazy, dict) or set(mod.__all__) != set(lazy) | extra:
            wrong.append(package)
    assert not wrong, f"packages not exporting through _LAZY + lazy_exports: {wrong}"


def test_docs_name_no_machine_specific_paths():
    """Issue 43: commands in docs, benchmarks and scripts are ones anyone can run (no path of one machine)."""
    import re
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    files = subprocess.run(["git", "ls-files", "*.md", "*.py", "Makefile"], cwd=root, capture_output=True,
                           text=True).stdout.split()
    pattern = re.compile(r"/work/|/home/\w|/root/|/Users/\w|flock /tmp/")  # flock: our machines' CPU lock
    bad = [f"{f}:{i}" for f in files if not f.startswith("tests/") and (root / f).is_file()
           for i, line in enumerate((root / f).read_text(encoding="utf-8", errors="replace").splitlines(), 1)
           if pattern.search(line)]
    assert not bad, f"machine-specific paths in: {bad}"


def test_generated_claims_tables_are_fresh():
    """README's and the paper pages' claims tables are generated from the committed default-mode results
    (scripts/paper_tables.py); a stale one means a result or a claim changed without regenerating them."""
    import runpy

    ns = runpy.run_path(str(ROOT / "scripts" / "paper_tables.py"), run_name="paper_tables")
    stale = [str(p.relative_to(ROOT)) for p in ns["stale"]()]
    assert not stale, f"stale generated tables (run python scripts/paper_tables.py): {stale}"
