"""The shared benchmark harness (benchmarks/_harness.py, issue 45): alternation, medians, JSON and docs section."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def harness(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import _harness

    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n<!-- demo:start -->\nold\n<!-- demo:end -->\n\ntail\n", encoding="utf-8")
    monkeypatch.setattr(_harness, "DOC", doc)
    monkeypatch.setattr(_harness, "RESULTS", tmp_path / "files")
    yield _harness
    sys.modules.pop("_harness", None)


def test_compare_alternates_and_takes_medians(harness):
    calls: list[str] = []
    bench = harness.Bench("demo", argv=[])
    t = bench.compare({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeat=3, warmup=1)
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b"]  # warm-up, then ABBA
    assert set(t) == {"a", "b"} and len(t["a"]["walls"]) == 3
    assert t["a"]["wall"] == sorted(t["a"]["walls"])[1]
    with pytest.raises(ValueError, match="repeat"):
        bench.compare({"a": lambda: None}, repeat=0)


def test_rounds_collect_self_timed_samples(harness):
    bench = harness.Bench("demo", argv=[])
    seq = iter([[1.0, 3.0], 5.0, [2.0], 4.0])
    t = bench.rounds({"x": lambda: next(seq), "y": lambda: next(seq)}, rounds=2, key="k")
    # round 0: x then y; round 1: y then x
    assert t["x"]["walls"] == [1.0, 3.0, 4.0] and t["y"]["walls"] == [5.0, 2.0]
    assert t["x"]["wall"] == 3.0 and bench.result["timings"]["k"] is t


def test_finish_writes_json_and_replaces_the_section(harness):
    bench = harness.Bench("demo", argv=[])
    bench.put(speedup=2.5)

    def render(r):
        return f"## Demo\n\nspeed-up {r['values']['speedup']}x\n\n{harness.setting_line(r)}"

    bench.finish(render)
    data = json.loads((harness.RESULTS / "demo.json").read_text())
    assert data["values"]["speedup"] == 2.5 and "load_average" in data["setting_end"]
    doc = harness.DOC.read_text()
    assert "old" not in doc and "speed-up 2.5x" in doc and doc.endswith("tail\n")
    assert doc.count("<!-- demo:start -->") == 1
    # --render-only regenerates the section from the JSON alone
    harness.DOC.write_text(doc.replace("speed-up 2.5x", "edited by hand"))
    args = argparse.Namespace(json=None, no_docs=False, render_only=True)
    harness.main("demo", args, run=lambda b: pytest.fail("must not run"), render=render)
    assert "speed-up 2.5x" in harness.DOC.read_text()


def test_json_path_leaves_docs_alone(harness, tmp_path):
    bench = harness.Bench("demo", argv=[])
    bench.finish(lambda r: "## new", json_path=tmp_path / "out.json")
    assert (tmp_path / "out.json").is_file() and "old" in harness.DOC.read_text()
