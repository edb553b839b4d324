"""The command line: list, run, reproduce, report, doctor; clear errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from trustlab.cli._app import app

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


def _reproduce(tmp_path, *args):
    return runner.invoke(app, ["reproduce", *args, "--quick", "--out", str(tmp_path / "runs"),
                               "--report", str(tmp_path / "r.md"), "--no-progress"])


@pytest.mark.parametrize(("ids", "code"), [(["toyexp"], 0), (["toyexp", "toyfail"], 1)])
def test_reproduce_exit_code_follows_primary_claims(toy_experiment, tmp_path, ids, code):
    res = _reproduce(tmp_path, *ids)
    assert res.exit_code == code, res.output
    assert ("F1" in res.output and "FAIL" in res.output) == (code == 1)
    # toyexp's secondary claim C3 always fails: shown as secondary, never changes the exit code
    assert "C3 (secondary)" in res.output
    assert (tmp_path / "r.md").exists() and (tmp_path / "r.html").exists()


def test_reproduce_goes_on_after_an_error(toy_experiment, tmp_path):
    res = _reproduce(tmp_path, "toyboom", "toyexp", "toyfail")
    assert res.exit_code == 2, res.output
    assert "ERROR" in res.output and "toyboom went wrong on purpose" in res.output
    assert "Traceback" not in res.output and "--debug" in res.output
    for exp_id in ("toyboom", "toyexp", "toyfail"):
        assert list((tmp_path / "runs" / exp_id / "quick").glob("*.json")), exp_id
    text = (tmp_path / "r.md").read_text()
    assert "| ERROR |" in text and "toyboom went wrong on purpose" in text and "| F1 |" in text
    assert "<summary>traceback</summary>" in (tmp_path / "r.html").read_text()
    res = runner.invoke(app, ["reproduce", "toyboom", "--quick", "--out", str(tmp_path / "runs"), "--no-progress",
                              "--debug"])
    assert res.exit_code == 2 and "Traceback" in res.output and "RuntimeError" in res.output


def test_budget_is_a_target_unless_strict(toy_experiment, tmp_path):
    res = _reproduce(tmp_path, "toyslow")
    assert res.exit_code == 0, res.output
    assert "WARN" in res.output and "budget" in res.output
    text = (tmp_path / "r.md").read_text()
    assert "| budget |" in text and "WARN" in text and "prepare toy model" in text
    res = _reproduce(tmp_path, "toyslow", "--strict-budget")
    assert res.exit_code == 2 and "BudgetExceededError" in res.output, res.output
    res = _reproduce(tmp_path, "toyslow", "--budget", "60")
    assert res.exit_code == 0 and "WARN" not in res.output, res.output


def test_reproduce_isolates_global_state(toy_experiment, tmp_path):
    alone = _reproduce(tmp_path / "a", "toystate")
    after = _reproduce(tmp_path / "b", "toyleak", "toystate")
    assert alone.exit_code == 0 and after.exit_code == 0, alone.output + after.output

    def state(folder):
        from trustlab.results.report import latest_results

        (res,) = [r for _, r in latest_results(folder / "runs") if r.experiment == "toystate"]
        return res.summary

    first, second = state(tmp_path / "a"), state(tmp_path / "b")
    assert first == second
    assert first["torch_threads"] == res_threads_in_fresh_process()


def res_threads_in_fresh_process() -> int:
    code = "import torch; print(torch.get_num_threads())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return int(out.stdout.strip())


def test_reproduce_unknown_id_fails_before_running(toy_experiment, tmp_path):
    res = _reproduce(tmp_path, "toyexp", "toyexpp")
    assert res.exit_code == 2 and "Unknown experiment 'toyexpp'" in res.output
    assert not (tmp_path / "runs").exists()


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
    assert "--warm" in runner.invoke(app, ["doctor", "--help"]).output


def test_report_missing_folder(tmp_path):
    res = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_report_skips_unreadable_files_with_a_note(toy_experiment, tmp_path):
    runs = tmp_path / "runs"
    res = runner.invoke(app, ["run", "toyexp", "--quick", "--out", str(runs), "--no-progress"])
    assert res.exit_code == 0, res.output
    folder = runs / "toyexp" / "quick"
    (folder / "29990101T000000000000Z.json").write_text('{"experiment": "toyexp", "mo')  # corrupt, newest
    (folder / "29980101T000000000000Z.json").write_text('{"name": "someone else"}')  # foreign
    real = next(p for p in folder.glob("2*.json") if not p.name.startswith("299"))  # the run's own file
    future = json.loads(real.read_text()) | {"schema_version": 99}
    (folder / "29970101T000000000000Z.json").write_text(json.dumps(future))
    res = runner.invoke(app, ["report", str(runs), "-o", str(tmp_path / "rep.md")])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    for name, why in (("29990101", "not valid JSON"), ("29980101", "not a trustlab result"),
                      ("29970101", "newer than this trustlab")):
        assert name in out and why in out, (name, out)
    assert "| C1 |" in (tmp_path / "rep.md").read_text()  # the valid older file is reported
    for p in folder.glob("2*.json"):
        if not p.name.startswith("299"):
            p.unlink()
    res = runner.invoke(app, ["report", str(runs), "-o", str(tmp_path / "rep.md")])
    assert res.exit_code == 2 and "No readable result" in res.output


@pytest.mark.parametrize("change", [{"claims": ["oops"]}, {"provenance": "str"}, {"records": [1]},
                                    {"provenance": {"wall_time_s": "abc"}}])  # loads, but cannot be rendered
def test_report_skips_a_malformed_result_and_reports_the_rest(toy_experiment, tmp_path, change):
    """A file that looks like ours but is malformed never crashes `report` or `reproduce --report`."""
    runs = tmp_path / "runs"
    for exp_id in ("toyexp", "toyfail"):
        res = runner.invoke(app, ["run", exp_id, "--quick", "--out", str(runs), "--no-progress"])
        assert res.exit_code in (0, 1), res.output
    (real,) = (runs / "toyexp" / "quick").glob("*.json")
    bad = json.loads(real.read_text()) | change
    real.write_text(json.dumps(bad))
    res = runner.invoke(app, ["report", str(runs), "-o", str(tmp_path / "rep.md")])
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    text = (tmp_path / "rep.md").read_text()
    assert "skipped" in text and real.name in text and "| F1 |" in text  # toyfail is still reported
    assert (tmp_path / "rep.html").exists()


def test_run_exit_codes(toy_experiment, tmp_path):
    """0 all primary claims PASS, 1 a primary claim FAILed, 2 bad input or the experiment raised."""
    out = ["--quick", "--out", str(tmp_path), "--no-progress"]
    assert runner.invoke(app, ["run", "toyexp", *out]).exit_code == 0
    assert runner.invoke(app, ["run", "toyfail", *out]).exit_code == 1
    assert runner.invoke(app, ["run", "toyexp", "--mode", "nosuch", *out]).exit_code == 2
    res = runner.invoke(app, ["run", "toyboom", *out])
    assert res.exit_code == 2 and "went wrong on purpose" in res.output and "--debug" in res.output
    res = runner.invoke(app, ["run", "toyboom", "--debug", *out])
    assert res.exit_code == 2 and "Traceback" in res.output
    assert runner.invoke(app, ["run", *out]).exit_code == 2  # usage: no ID


def test_an_internal_crash_exits_3_with_a_log_file(monkeypatch, capsys):
    """A bug of ours (any exception that is not a TrustlabError) exits 3, never 1 ("a claim FAILed"), and says
    where the traceback was written."""
    import re

    from trustlab.cli import _app

    def broken():
        raise AttributeError("'str' object has no attribute 'get'")

    monkeypatch.setattr(_app, "app", broken)
    with pytest.raises(SystemExit) as info:
        _app.main()
    assert info.value.code == 3
    text = " ".join(capsys.readouterr().err.split())
    assert "internal error" in text and "please report" in text and "AttributeError" in text
    log = re.search(r"(\S+trustlab-crash-\S+\.log)", text).group(1)
    with open(log, encoding="utf-8") as fh:
        assert "Traceback" in fh.read()
    import os

    os.unlink(log)


def test_bad_input_exits_2_in_a_real_process(tmp_path):
    out = subprocess.run([sys.executable, "-m", "trustlab", "report", str(tmp_path / "nope")], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and "does not exist" in out.stderr and "Traceback" not in out.stderr
