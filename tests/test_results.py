"""Result JSON round-trip, atomic writes, plots drawn from results, and the report."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from trustlab.core.exceptions import InputError
from trustlab.core.files import atomic_write_text, clean_orphans, file_mode, to_jsonable
from trustlab.results import ClaimOutcome, Result, bar_plot, build_report, claims_plot, line_plot
from trustlab.results._table import claim_rows, fmt_value
from trustlab.results.plots import parse_threshold
from trustlab.results.report import latest_results


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
    assert "| C1 | ours beats baseline | 0.1 | 0.8 | 0.05 | - | PASS | - | small scale |" in text
    assert "FAIL" not in text
    pngs = sorted(p.name for p in (tmp_path / "report_files").iterdir())
    assert pngs == ["demo-quick-acc.png", "demo-quick-claims.png"]
    assert "<table class='claims'>" in (tmp_path / "report.html").read_text()


def test_report_with_no_results(tmp_path):
    out = build_report(tmp_path, tmp_path / "r.md", html_out=False)
    assert "No readable results found" in out.read_text()


def test_result_files_respect_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        p = _result().save(tmp_path / "r.json")
        assert p.stat().st_mode & 0o777 == 0o644 == file_mode()
        os.umask(0o077)
        assert atomic_write_text(tmp_path / "private.txt", "x").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_orphaned_temp_files_are_cleaned_on_the_next_write(tmp_path):
    orphan = tmp_path / ".r.abc12345.json.trustlab-tmp"  # ours, left by a killed writer
    orphan.write_text("half")
    fresh = tmp_path / ".other.xyz98765.json.trustlab-tmp"  # a concurrent writer's file: recent, must stay
    fresh.write_text("in progress")
    keep = tmp_path / "notes.tmp"  # not a hidden temp file
    keep.write_text("mine")
    users = [tmp_path / ".my-editor-backup.tmp", tmp_path / ".r.abc12345.json.tmp",  # a user's own, not ours
             tmp_path / ".x.trustlab-tmp"]  # our suffix but not our name pattern (no random token)
    for p in users:
        p.write_text("a user's file")
    for p in (orphan, *users):
        os.utime(p, (1_000_000, 1_000_000))  # written long before this process started
    atomic_write_text(tmp_path / "r.json", "{}")
    assert not orphan.exists() and fresh.exists() and keep.exists()
    assert all(p.exists() for p in users), [p.name for p in users if not p.exists()]
    assert clean_orphans(tmp_path / "missing") == []


def test_atomic_write_names_its_temp_file_with_our_pattern(tmp_path):
    from trustlab.core.files import _TEMP_NAME, atomic_write

    seen = []
    atomic_write(tmp_path / "report.md", lambda tmp: (seen.append(Path(tmp).name), Path(tmp).write_text("x")))
    assert _TEMP_NAME.match(seen[0]) and seen[0].startswith(".report.") and seen[0].endswith(".md.trustlab-tmp")
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_load_names_the_file_and_the_reason(tmp_path):
    bad = tmp_path / "bad.json"
    for text, why in (('{"experiment": ', "not valid JSON"), ('{"a": 1}', "not a trustlab result"),
                      ("[1, 2]", "not a trustlab result")):
        bad.write_text(text)
        with pytest.raises(InputError, match=why) as info:
            Result.load(bad)
        assert "bad.json" in str(info.value)
    d = _result().to_dict() | {"schema_version": 2}
    bad.write_text(__import__("json").dumps(d))
    with pytest.raises(InputError, match="schema_version 2 is newer"):
        Result.load(bad)


def test_unknown_claim_fields_of_the_same_schema_are_ignored():
    d = _result().to_dict()
    d["claims"][0]["added_later"] = 1
    assert Result.from_dict(d).claims[0].id == "C1"


def test_latest_results_skips_a_corrupt_newest_file(tmp_path):
    runs = tmp_path / "runs"
    _result().save(runs / "demo" / "quick" / "20250101T000000000000Z.json")
    (runs / "demo" / "quick" / "20260101T000000000000Z.json").write_text("{trunc")
    with pytest.warns(UserWarning, match="20260101T000000000000Z.json.*not valid JSON"):
        found = latest_results(runs)
    assert [p.name for p, _ in found] == ["20250101T000000000000Z.json"]


def test_table_cells_are_formatted_numbers_with_units():
    assert fmt_value(0.00044462835123456) == "0.0004446"
    assert fmt_value(0.123456789, "points") == "0.1235 points"
    assert fmt_value(0.46, "x") == "0.46x"
    assert fmt_value(">= 0.123456789", "points") == ">= 0.1235 points"
    assert fmt_value({"median_abs_cie": 0.00044462835123456, "n": 3}) == "median_abs_cie=0.0004446, n=3"
    assert fmt_value([0.1234567, 2]) == "[0.1235, 2]"
    assert fmt_value(None) == "-" and fmt_value(float("nan")) == "nan" and fmt_value(True) == "yes"
    r = _result()
    r.claims = [ClaimOutcome("C1", "s", True, {"a": 0.123456789, "b": 1.0, "c": 2.0, "d": 3.0, "e": 4.123456789},
                             0.5, {"base": 0.333333333}, unit="AUROC", secondary=True)]
    (row,) = claim_rows(r)
    assert row.claim == "C1 (secondary)" and "0.1235" in row.detail and len(row.observed) <= 40
    assert "0.333333333" not in row.baseline and row.baseline == "base=0.3333 AUROC"


def test_budget_and_error_rows():
    r = _result()
    r.provenance.update(within_budget=False, budget_s=60.0, timed_s=75.2, untimed_s={"load SmolLM2": 6.1})
    rows = claim_rows(r)
    assert rows[-1].status == "WARN" and rows[-1].observed == "75.2 s" and rows[-1].threshold == "<= 60 s"
    assert "load SmolLM2: 6.1 s" in rows[-1].detail
    err = Result("boom", "quick", {})
    err.provenance["error"] = {"type": "RuntimeError", "message": "went wrong", "traceback": "Traceback..."}
    (row,) = claim_rows(err)
    assert row.status == "ERROR" and "RuntimeError: went wrong" in row.observed and not err.passed


def test_claims_plot_handles_numbers_text_and_missing_values(tmp_path):
    r = _result()
    r.claims = [
        ClaimOutcome("C1", "s", True, 0.8, ">= 0.6", 0.5, paper_value=0.9, unit="AUROC"),
        ClaimOutcome("C2", "s", False, 0.46, "<= 0.3x"),
        ClaimOutcome("C3", "s", True, "3 of 4 seeds", ">= 3 of 4"),
        ClaimOutcome("C4", "s", None, None, None, detail="not checked in mode 'quick'"),
        ClaimOutcome("C5", "s", False, {"a": 1.0}, 0.5),
        ClaimOutcome("C6", "s", True, float("nan"), 0.5),
    ]
    fig = claims_plot(r)
    fig.savefig(tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 1000
    assert parse_threshold(">= 0.6") == (">=", 0.6) and parse_threshold("<= 0.3x") == ("<=", 0.3)
    assert parse_threshold(0.5) == ("?", 0.5) and parse_threshold("> baseline") is None
    assert parse_threshold("0.5 +- 0.1") == ("+-", 0.5) and parse_threshold(">= 0.75 and > text") == (">=", 0.75)
