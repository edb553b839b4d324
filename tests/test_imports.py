"""Import lightness, ``__all__`` consistency, layer contracts and lint."""

from __future__ import annotations

import importlib
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import trustlab

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "aeon", "shap", "flwr")


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_trustlab_is_light():
    out = _run(f"import sys, trustlab; print([m for m in {HEAVY!r} if m in sys.modules])")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"import trustlab pulled in {out.stdout.strip()}"


def test_listing_experiments_and_methods_is_light():
    code = ("import sys; from trustlab.experiments import experiment_ids, get_experiment; "
            "[get_experiment(i) for i in experiment_ids()]; from trustlab.methods import discover_methods; "
            "discover_methods(); print([m for m in ('torch', 'transformers') if m in sys.modules])")
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"listing experiments/methods imported {out.stdout.strip()}"


def _modules() -> list[str]:
    names = ["trustlab"]
    for info in pkgutil.walk_packages(trustlab.__path__, "trustlab.", onerror=lambda n: None):
        names.append(info.name)
    return names


@pytest.mark.parametrize("modname", _modules())
def test_all_names_resolve(modname):
    mod = importlib.import_module(modname)
    for name in getattr(mod, "__all__", []):
        assert hasattr(mod, name) or getattr(mod, name, None) is not None, f"{modname}.__all__ names missing {name!r}"


def test_top_level_lazy_names():
    for name in trustlab.__all__:
        assert getattr(trustlab, name) is not None
    with pytest.raises(AttributeError):
        trustlab.no_such_name  # noqa: B018


def _tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    return str(path) if path.exists() else (shutil.which(name) or "")


def test_layer_contracts_hold():
    exe = _tool("lint-imports")
    if not exe:
        pytest.skip("import-linter is not installed (pip install 'trustlab[dev]')")
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_clean():
    exe = _tool("ruff")
    if not exe:
        pytest.skip("ruff is not installed (pip install 'trustlab[dev]')")
    paths = [d for d in ("src", "tests", "benchmarks") if (ROOT / d).is_dir()]
    out = subprocess.run([exe, "check", *paths], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
