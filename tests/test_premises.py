"""Premises, VOID and knockouts (issue 39): a claim resting on a failed premise is VOID, never PASS."""

from __future__ import annotations

import json
import sys

import pytest

from trustlab.core.exceptions import ConfigError, InputError
from trustlab.experiments import get_experiment, run_experiment
from trustlab.experiments.base import CheckResult, Claim, Premise, evaluate_claims
from trustlab.experiments.runner import exit_status
from trustlab.results import Result
from trustlab.results._table import claim_rows, status_counts
from trustlab.results.committed import committed_default, committed_defaults
from trustlab.results.report import build_report


@pytest.fixture
def toypremise(toy_experiment):
    yield "toypremise"
    sys.modules.pop("trustlab.experiments.toypremise", None)


def _fixed(passed, observed=1.0):
    return lambda result: CheckResult(passed, observed, ">= 1")


def test_a_claim_on_a_failed_premise_is_void_and_fails_the_run():
    claims = [Claim("C1", "rests on the premise", _fixed(True), requires=("pre-a",)),
              Premise("pre-a", "the mechanism ran", _fixed(False, 0.2)),
              Claim("C2", "rests on nothing", _fixed(True))]
    res = Result("x", "quick", {})
    res.claims = evaluate_claims(res, claims)
    by_id = {c.id: c for c in res.claims}
    assert [c.id for c in res.claims] == ["C1", "pre-a", "C2"]  # declared order kept
    assert by_id["C1"].status == "VOID" and by_id["C1"].voided_by == ["pre-a"]
    assert "premise pre-a FAIL: observed 0.2" in by_id["C1"].detail
    assert by_id["pre-a"].status == "FAIL" and by_id["pre-a"].kind == "premise"
    assert by_id["C2"].status == "PASS"
    assert res.counts == {"PASS": 1, "FAIL": 1, "VOID": 1, "SKIP": 0, "ERROR": 0}
    assert not res.passed and exit_status([res]) == 1
    back = Result.from_json(res.to_json())
    assert back.claims[0].status == "VOID" and json.loads(res.to_json())["counts"]["VOID"] == 1
    assert [r.status for r in claim_rows(res)] == ["VOID", "FAIL", "PASS"]
    assert claim_rows(res)[1].claim == "pre-a (premise)"


def test_void_alone_fails_the_run_and_a_skipped_premise_voids_too():
    claims = [Premise("pre-a", "only in paper mode", _fixed(True), modes=("paper",)),
              Claim("C1", "rests on it", _fixed(True), requires=("pre-a",))]
    res = Result("x", "quick", {})
    res.claims = evaluate_claims(res, claims)
    assert [c.status for c in res.claims] == ["SKIP", "VOID"]
    assert "premise pre-a SKIP" in res.claims[1].detail
    assert exit_status([res]) == 1 and status_counts(res)["VOID"] == 1


def test_claim_and_premise_arguments_are_checked():
    with pytest.raises(ConfigError, match="'kind'"):
        Claim("C1", "s", _fixed(True), kind="assumption")
    with pytest.raises(ConfigError, match="'requires'"):
        Claim("C1", "s", _fixed(True), requires="pre-a")
    with pytest.raises(ConfigError, match="must be primary"):
        Claim("pre-a", "s", _fixed(True), kind="premise", secondary=True)


def test_unknown_premise_or_gate_id_is_refused(toypremise, monkeypatch):
    import trustlab.experiments.toypremise as mod

    monkeypatch.setattr(mod, "CLAIMS", [*mod.CLAIMS, Claim("C9", "s", _fixed(True), requires=("pre-nope",))])
    with pytest.raises(TypeError, match="requires \\['pre-nope'\\]"):
        get_experiment(toypremise)
    monkeypatch.setattr(mod, "CLAIMS", mod.CLAIMS[:3])
    monkeypatch.setattr(mod, "QUICK_EXPECTED_PASS", ("C7",))
    with pytest.raises(TypeError, match="QUICK_EXPECTED_PASS names \\['C7'\\]"):
        get_experiment(toypremise)


def test_knockout_switches_the_mechanism_off_and_is_saved_apart(toypremise, tmp_path):
    res, path = run_experiment(toypremise, "quick", out_dir=tmp_path, show_progress=False)
    assert [c.status for c in res.claims] == ["PASS", "PASS", "PASS"]
    ko, ko_path = run_experiment(toypremise, "quick", out_dir=tmp_path, show_progress=False, knockout=True)
    assert ko.config["p"] == 0.5 and ko.provenance["knockout"] == ["p=0.5"]
    assert ko_path.parent.name == "quick-knockout" and path.parent.name == "quick"
    status = {c.id: c.status for c in ko.claims}
    assert status == {"pre-biased": "FAIL", "C1": "VOID", "C2": "PASS"}  # C2 holds by construction: never gated
    # the user's own --set wins over the knockout's
    ko2, _ = run_experiment(toypremise, "quick", out_dir=None, show_progress=False, knockout=True,
                            overrides=["p=0.9"])
    assert ko2.config["p"] == 0.9


def test_knockout_without_a_declared_one_is_refused(toy_experiment):
    with pytest.raises(ConfigError, match="declares no KNOCKOUT"):
        run_experiment(toy_experiment, "quick", out_dir=None, show_progress=False, knockout=True)


def test_report_shows_void_premise_and_the_committed_default_status(toypremise, tmp_path):
    runs = tmp_path / "runs"
    ko, _ = run_experiment(toypremise, "quick", out_dir=runs, show_progress=False, knockout=True)
    papers = tmp_path / "papers"
    default, _ = run_experiment(toypremise, "default", out_dir=None, show_progress=False)
    default.claims[1].passed = False  # the default run's C1 FAILs: the quick table must say so
    default.save(papers / "toypremise_files" / "default.json")
    assert committed_default("toypremise", papers).claims[1].status == "FAIL"
    out = build_report(runs, tmp_path / "report.md", defaults=committed_defaults(papers))
    text = out.read_text()
    assert "[quick (knockout)]" in text
    assert "| C1 | heads come up at least 45 % of the time |" in text
    row = next(line for line in text.splitlines() if line.startswith("| C1 |"))
    assert "| VOID | FAIL |" in row and "premise pre-biased FAIL" in row
    assert 'class="void"' in out.with_suffix(".html").read_text()


def test_committed_result_of_another_mode_is_refused(toypremise, tmp_path):
    quick, _ = run_experiment(toypremise, "quick", out_dir=None, show_progress=False)
    quick.save(tmp_path / "toypremise_files" / "default.json")
    with pytest.raises(InputError, match="must be a default-mode run"):
        committed_default("toypremise", tmp_path)
    assert committed_defaults(tmp_path) == {}
    assert committed_default("toypremise", tmp_path / "nowhere") is None


def test_plain_claims_table_keeps_columns_readable(toypremise):
    from trustlab.cli._output import plain_claims_table

    ko, _ = run_experiment(toypremise, "quick", out_dir=None, show_progress=False, knockout=True)
    text = plain_claims_table([ko])
    lines = text.splitlines()
    assert lines[1].split() == ["experiment", "claim", "status", "observed", "baseline", "threshold", "paper",
                                "default"]
    assert any("pre-biased (premise)" in line and "FAIL" in line for line in lines)
    assert max(len(line) for line in lines) <= 140
