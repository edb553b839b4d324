"""Run tracking (issue 29 item 5): ``--track mlflow`` logs config, metrics, claim outcomes, the result JSON and
the plots of each run to a local MLflow file store under the runs folder; the JSON stays the record."""

from __future__ import annotations

import json
import os
import sys

import pytest
from typer.testing import CliRunner

from trustlab.cli._app import app
from trustlab.core.exceptions import ConfigError, MissingDependencyError
from trustlab.experiments._tracking import make_tracker
from trustlab.results.result import ClaimOutcome, Result
from trustlab.results.tracking import default_tracking_uri, log_to_mlflow

mlflow = pytest.importorskip("mlflow")
runner = CliRunner()


def _client(runs, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # to read the store back
    return MlflowClient(tracking_uri=default_tracking_uri(runs))


def _result() -> Result:
    r = Result("toyexp", "quick", {"n": 50, "seeds": [0, 1], "nested": {"k": 3}})
    r.add(method="coin", dataset="d", seed=0, metric="mean", value=0.62)
    r.add(method="coin", dataset="d", seed=1, metric="mean", value=0.66)
    r.summary.update(mean=0.64, text="not a number", inner={"x": 2.5})
    r.claims = [ClaimOutcome("C1", "mean >= 0.6", True, 0.64, ">= 0.6"),
                ClaimOutcome("C3", "always fails", False, "n/a", "never", secondary=True)]
    r.provenance.update(wall_time_s=1.5, seeds=[0, 1])
    return r


def test_log_to_mlflow_writes_params_metrics_claims_json_and_plots(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    runs = tmp_path / "runs"
    path = _result().save(runs / "toyexp" / "quick" / "r.json")

    def plots(r):
        fig = Figure()
        fig.add_subplot().plot([0, 1], [r.summary["mean"]] * 2)
        return {"means": fig}

    before = {k: os.environ.get(k) for k in ("MLFLOW_ALLOW_FILE_STORE", "MLFLOW_DISABLE_TELEMETRY")}
    (rid,) = log_to_mlflow([Result.load(path)], runs, paths=[path], plotters={"toyexp": plots})
    assert {k: os.environ.get(k) for k in before} == before  # the environment is restored
    assert (runs / "mlruns").is_dir()  # the default store lives under the runs folder
    client = _client(runs, monkeypatch)
    run = client.get_run(rid)
    assert run.info.status == "FINISHED" and run.info.run_name == "toyexp [quick]"
    assert client.get_experiment(run.info.experiment_id).name == "trustlab/toyexp"
    d = run.data
    assert d.params["n"] == "50" and d.params["nested.k"] == "3" and d.params["mode"] == "quick"
    assert d.tags["trustlab.status"] == "PASS" and d.tags["trustlab.result_json"] == str(path.resolve())
    assert d.metrics["claim/C1/pass"] == 1.0 and d.metrics["claim/C1/observed"] == pytest.approx(0.64)
    assert d.metrics["claim/C3/pass"] == 0.0 and "claim/C3/observed" not in d.metrics
    assert d.metrics["summary/mean"] == pytest.approx(0.64) and d.metrics["summary/inner.x"] == 2.5
    assert "summary/text" not in d.metrics and d.metrics["wall_time_s"] == 1.5
    history = client.get_metric_history(rid, "coin/d/mean")
    assert sorted((m.step, m.value) for m in history) == [(0, 0.62), (1, 0.66)]  # step = the record's seed
    names = {f.path for f in client.list_artifacts(rid)} | {f.path for f in client.list_artifacts(rid, "plots")}
    assert {"r.json", "claims.json", "plots/claims.png", "plots/means.png"} <= names
    local = client.download_artifacts(rid, "claims.json", str(tmp_path))
    claims = json.loads(open(local, encoding="utf-8").read())
    assert claims["status"] == "PASS" and [c["id"] for c in claims["claims"]] == ["C1", "C3"]
    copy = client.download_artifacts(rid, "r.json", str(tmp_path / "copy"))
    assert json.loads(open(copy, encoding="utf-8").read()) == json.loads(path.read_text())  # the JSON, unchanged


def test_make_tracker_checks_its_options_before_a_run(monkeypatch):
    assert make_tracker("none")([_result()], "runs") == []
    with pytest.raises(ConfigError, match="'track' option of trustlab run/reproduce must be"):
        make_tracker("wandb")
    with pytest.raises(ConfigError, match="only applies with --track mlflow"):
        make_tracker("none", "sqlite:///x.db")
    monkeypatch.setitem(sys.modules, "mlflow", None)  # mlflow not installed
    with pytest.raises(MissingDependencyError, match=r"trustlab\[track\]"):
        make_tracker("mlflow")


def test_a_failing_tracker_leaves_the_results_alone(tmp_path, capsys):
    tracker = make_tracker("mlflow", "unknown-scheme://nowhere")
    assert tracker([_result()], tmp_path) == []
    assert "logging to unknown-scheme://nowhere failed" in capsys.readouterr().err


def test_cli_run_and_reproduce_track_to_mlflow(toy_experiment, tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    res = runner.invoke(app, ["run", "toyexp", "--quick", "--out", str(runs), "--no-progress", "--track", "mlflow"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["reproduce", "toyexp", "--quick", "--out", str(runs), "--no-progress", "--no-isolate",
                              "--track", "mlflow"])
    assert res.exit_code == 0, res.output
    client = _client(runs, monkeypatch)
    exp = client.get_experiment_by_name("trustlab/toyexp")
    found = client.search_runs([exp.experiment_id])
    assert len(found) == 2 and all(r.data.tags["trustlab.status"] == "PASS" for r in found)
    jsons = sorted(str(p.resolve()) for p in (runs / "toyexp" / "quick").glob("*.json"))
    assert sorted(r.data.tags["trustlab.result_json"] for r in found) == jsons
    plots = {f.path for f in client.list_artifacts(found[0].info.run_id, "plots")}
    assert {"plots/claims.png", "plots/means.png"} <= plots  # the experiment's PLOTS, as in the report
    from trustlab.results.report import scan_results

    found, skipped = scan_results(runs)  # the store under the runs folder is invisible to `trustlab report`
    assert not skipped and [r.experiment for _, r in found] == ["toyexp"]
    res = runner.invoke(app, ["run", "toyexp", "--quick", "--out", str(runs), "--track", "wandb"])
    assert res.exit_code != 0 and "'track' option" in res.output
