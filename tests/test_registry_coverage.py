"""Every paper is complete: method objects with test params, an experiment with claims, docs and tests.

This file enforces the "add a paper" checklist of docs/design.md.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import pytest

from trustlab.core.base import Method, PaperInfo
from trustlab.experiments import experiment_ids, get_experiment
from trustlab.experiments.base import MODES
from trustlab.methods import METHODS, discover_methods

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = discover_methods()


def test_registered_methods_follow_the_contract():
    for name in METHODS.names():
        cls = METHODS.get(name)
        meta = METHODS.entry(name).meta
        assert isinstance(cls, type) and issubclass(cls, Method), f"{name} is not a trustlab Method"
        assert meta.get("paper") in PACKAGES, f"{name} must be registered with paper=<its package id>"
        assert isinstance(cls.paper, PaperInfo), f"{name}.paper must be a PaperInfo"
        assert cls.get_tags().get("role"), f"{name} has no role tag"
        params = cls._get_test_params()
        assert params and all(isinstance(p, dict) for p in params), f"{name}._get_test_params() is empty"


@pytest.mark.parametrize("pkg", PACKAGES or ["<none>"])
def test_each_method_package_is_complete(pkg):
    if pkg == "<none>":
        pytest.skip("no method package yet")
    assert any(METHODS.entry(n).meta.get("paper") == pkg for n in METHODS.names()), f"{pkg} registers nothing"
    assert pkg in experiment_ids(), f"method package {pkg} has no experiment module"
    assert (ROOT / "docs" / "papers" / f"{pkg}.md").is_file(), f"docs/papers/{pkg}.md is missing"
    assert (ROOT / "tests" / "methods" / f"test_{pkg}.py").is_file(), f"tests/methods/test_{pkg}.py is missing"


@pytest.mark.parametrize("exp_id", experiment_ids() or ["<none>"])
def test_each_experiment_follows_the_contract(exp_id):
    if exp_id == "<none>":
        pytest.skip("no experiment yet")
    exp = get_experiment(exp_id)
    assert exp.claims, f"{exp_id} has no CLAIMS"
    assert len({c.id for c in exp.claims}) == len(exp.claims), f"{exp_id} has duplicate claim ids"
    for mode in MODES:
        cfg = exp.config_cls.for_mode(mode)
        cfg.validate()
        with pytest.raises(dataclasses.FrozenInstanceError):
            cfg.seeds = (99,)  # type: ignore[misc]
    assert (ROOT / "docs" / "papers" / f"{exp_id}.md").is_file(), f"docs/papers/{exp_id}.md is missing"


@pytest.mark.parametrize("exp_id", experiment_ids() or ["<none>"])
def test_each_experiment_declares_its_quick_expectations(exp_id):
    """QUICK_EXPECTED_PASS: a tuple of claim ids checked in quick mode (tests/test_reproduce.py asserts they PASS)."""
    if exp_id == "<none>":
        pytest.skip("no experiment yet")
    exp = get_experiment(exp_id)
    expected = getattr(exp.module, "QUICK_EXPECTED_PASS", None)
    assert isinstance(expected, tuple) and all(isinstance(i, str) for i in expected), (
        f"trustlab.experiments.{exp_id} must define QUICK_EXPECTED_PASS = (claim ids expected to PASS in quick "
        "mode, ...); use () when none is expected to")
    claims = {c.id: c for c in exp.claims}
    unknown = [i for i in expected if i not in claims]
    assert not unknown, f"{exp_id}: QUICK_EXPECTED_PASS names unknown claims {unknown}"
    unchecked = [i for i in expected if "quick" not in claims[i].modes]
    assert not unchecked, f"{exp_id}: QUICK_EXPECTED_PASS names claims not checked in quick mode: {unchecked}"
    assert len(set(expected)) == len(expected), f"{exp_id}: duplicate ids in QUICK_EXPECTED_PASS"


@pytest.mark.parametrize("pkg", PACKAGES or ["<none>"])
def test_paper_info_has_one_source(pkg):
    if pkg == "<none>":
        pytest.skip("no method package yet")
    module = importlib.import_module(f"trustlab.methods.{pkg}")
    shared = "PAPER" in getattr(module, "__all__", ()) and get_experiment(pkg).paper is getattr(module, "PAPER", None)
    assert shared, (f"trustlab.methods.{pkg} must export PAPER (a PaperInfo) and trustlab.experiments.{pkg} must "
                    f"import it (from trustlab.methods.{pkg} import PAPER), not define its own")


def test_registered_paths_match_the_package_exports():
    """One source for class paths: METHODS.get(name) is the object the package exports under that name."""
    for name in METHODS.names():
        pkg = importlib.import_module(f"trustlab.methods.{METHODS.entry(name).meta['paper']}")
        assert name in getattr(pkg, "__all__", ()), f"{name} is registered but not in its package's __all__"
        assert getattr(pkg, name) is METHODS.get(name), (
            f"{name}: the registry path and the package export point at different objects; register with "
            "METHODS.register_exports(__name__, _LAZY, [...]) so both come from one map")


#: sections every docs/papers/<id>.md has (matched by heading text), and why a reader needs them
DOC_SECTIONS = {
    "what is implemented (the library objects)": r"^## .*(What (it is|is implemented)|API)",
    "the claims and measured results": r"^## .*(Results|[Cc]laims|Reproduction|Experiment)",
    "deviations from the paper and limits": r"^## .*(Deviations|deviations|Limits|Differences|Scale notes|Left out)",
}


@pytest.mark.parametrize("exp_id", experiment_ids() or ["<none>"])
def test_each_docs_page_has_the_checklist_sections(exp_id):
    if exp_id == "<none>":
        pytest.skip("no experiment yet")
    text = (ROOT / "docs" / "papers" / f"{exp_id}.md").read_text(encoding="utf-8")
    missing = [what for what, pattern in DOC_SECTIONS.items() if not re.search(pattern, text, re.M)]
    assert not missing, f"docs/papers/{exp_id}.md lacks a '## ...' section for: {missing} (see docs/design.md)"
    unmentioned = [c.id for c in get_experiment(exp_id).claims if c.id not in text]
    assert not unmentioned, f"docs/papers/{exp_id}.md does not state the claims {unmentioned} (pre-register them)"
    assert re.search(rf"trustlab (run|reproduce)[^\n]*\b{re.escape(exp_id)}\b", text), (
        f"docs/papers/{exp_id}.md gives no 'trustlab run {exp_id}' command")
