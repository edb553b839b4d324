"""Result JSON round-trip, atomic writes, plots drawn from results, and the report."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from trustlab.results import (
    ClaimOutcome,
    Result,
    atomic_write_text,
    bar_plot,
    build_report,
    claims_plot,
    line_plot,
)
from trustlab.results.result import to_jsonable


def _result() -> Result:
    r = Result("demo", "quick", {"a": 1, "seeds": (0, 1)})
    for seed in (0, 1):
        for m in ("ours", "baseline"):
            r.add(method=m, seed=seed, step=seed, metric="acc", value=0.9 if m == "ours" else 0.8)
    r.summary["gap"] = np.float64(0.1)
    r.claims = [ClaimOutcome("C1", "ours beats baseline", True, 0.1, 0.05, 0.8, "small scale")]
    return r


def test_json_round_trip_and_frame(tmp_path):
    r = _result()
    p = r.save(tmp_path / "sub" / "r.json")
    back = Result.load(p)
    assert back.to_dict() == r.to_dict()
    assert back.claims[0].status == "PASS" and back.passed
    assert set(back.to_frame().columns) >= {"method", "seed", "value"}


def test_to_jsonable_handles_numpy_and_nonfinite():
    out = to_jsonable({"a": np.arange(3), "b": np.float32(1.5), "c": float("nan"), "d": math.inf, "e": (1, 2)})
    assert out == {"a": [0, 1, 2], "b": 1.5, "c": None, "d": "inf", "e": [1, 2]}


def test_newer_schema_refused():
    d = _result().to_dict()
    d["schema_version"] = 999
    with pytest.raises(ValueError, match="newer"):
        Result.from_dict(d)


def test_atomic_write_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "x.json"
    atomic_write_text(target, "old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_plots_draw_from_result(tmp_path):
    r = _result()
    for fig in (bar_plot(r, x="method", hue="seed"), line_plot(r, x="step", hue="method"), claims_plot(r),
                bar_plot(Result("e", "quick", {}), x="method")):
        fig.savefig(tmp_path / "f.png")
        assert (tmp_path / "f.png").stat().st_size > 1000


def test_report_builds_markdown_html_and_plots(tmp_path):
    runs = tmp_path / "runs"
    r = _result()
    r.save(runs / "demo" / "quick" / "20260101T000000000000Z.json")
    old = _result()
    old.claims[0].passed = False
    old.save(runs / "demo" / "quick" / "20250101T000000000000Z.json")  # older: must not be reported
    out = build_report(runs, tmp_path / "report.md", plotters={"demo": lambda res: {"acc": bar_plot(res, x="method")}})
    text = out.read_text()
    assert "| C1 | ours beats baseline | 0.1 | 0.8 | 0.05 | PASS | small scale |" in text
    assert "FAIL" not in text
    pngs = sorted(p.name for p in (tmp_path / "report_files").iterdir())
    assert pngs == ["demo-quick-acc.png", "demo-quick-claims.png"]
    assert "<table>" in (tmp_path / "report.html").read_text()


def test_report_with_no_results(tmp_path):
    out = build_report(tmp_path, tmp_path / "r.md", html_out=False)
    assert "No results found" in out.read_text()
