"""The command line: list, run, reproduce, report, doctor; clear errors without tracebacks."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from trustlab.cli import app

runner = CliRunner()


def test_help_and_python_dash_m():
    out = subprocess.run([sys.executable, "-m", "trustlab", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "reproduce" in out.stdout


def test_run_unknown_experiment_exits_nonzero_without_traceback(toy_experiment):
    res = runner.invoke(app, ["run", "toyexpp"])
    assert res.exit_code == 2
    assert "Unknown experiment 'toyexpp'" in res.output and "Did you mean 'toyexp'" in res.output
    assert "Traceback" not in res.output


def test_run_unknown_subprocess_no_traceback():
    out = subprocess.run([sys.executable, "-m", "trustlab", "run", "nosuch"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0 and "Unknown experiment 'nosuch'" in out.stderr and "Traceback" not in out.stderr


def test_run_bad_set_key(toy_experiment, tmp_path):
    res = runner.invoke(app, ["run", "toyexp", "--quick", "--out", str(tmp_path), "--set", "nn=3"])
    assert res.exit_code == 2 and "Unknown config key 'nn'" in res.output and "Did you mean 'n'" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(app, ["run", "toyexp", "--quick", "--out", str(tmp_path), "--set", "n=-3"])
    assert res.exit_code == 2 and "'n' parameter" in res.output


def test_run_and_report(toy_experiment, tmp_path):
    res = runner.invoke(app, ["run", "toyexp", "--quick", "--out", str(tmp_path / "runs"), "--seeds", "3",
                              "--no-progress", "--set", "threshold=0.0"])
    assert res.exit_code == 0, res.output
    assert "PASS" in res.output and list((tmp_path / "runs" / "toyexp" / "quick").glob("*.json"))
    res = runner.invoke(app, ["report", str(tmp_path / "runs"), "-o", str(tmp_path / "rep.md")])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "rep.md").read_text()
    assert "Toy: coin means" in text and "toyexp-quick-means.png" in text


@pytest.mark.parametrize(("threshold", "code"), [("0.0", 0), ("1.1", 1)])
def test_reproduce_exit_code_follows_claims(toy_experiment, tmp_path, threshold, code, monkeypatch):
    from trustlab.experiments import runner as exp_runner

    monkeypatch.setattr(exp_runner, "experiment_ids", lambda: ["toyexp"])
    original = exp_runner.run_experiment

    def with_threshold(*a, **k):
        return original(*a, overrides=[f"threshold={threshold}"], **k)

    monkeypatch.setattr(exp_runner, "run_experiment", with_threshold)
    res = runner.invoke(app, ["reproduce", "--all", "--quick", "--out", str(tmp_path / "runs"),
                              "--report", str(tmp_path / "r.md"), "--no-progress"])
    assert res.exit_code == code, res.output
    assert ("FAIL" in res.output) == (code == 1)
    assert (tmp_path / "r.md").exists()


def test_reproduce_with_nothing_registered(monkeypatch, tmp_path):
    from trustlab.experiments import runner as exp_runner

    monkeypatch.setattr(exp_runner, "experiment_ids", lambda: [])
    res = runner.invoke(app, ["reproduce", "--all", "--quick", "--out", str(tmp_path)])
    assert res.exit_code == 0 and "No experiments are registered yet" in res.output


def test_list_and_doctor(toy_experiment):
    res = runner.invoke(app, ["list"])
    assert res.exit_code == 0 and "toyexp" in res.output
    res = runner.invoke(app, ["doctor"])
    assert res.exit_code == 0 and "model files" in res.output and "OMP_WAIT_POLICY" in res.output


def test_report_missing_folder(tmp_path):
    res = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "does not exist" in res.output
