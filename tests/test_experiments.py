"""The experiment contract: configs, overrides, claims, the runner and provenance."""

from __future__ import annotations

import json

import pytest

from trustlab.core.exceptions import ConfigError, UnknownNameError
from trustlab.experiments import (
    apply_overrides,
    evaluate_claims,
    experiment_ids,
    get_experiment,
    run_experiment,
)
from trustlab.experiments.base import Claim, ExperimentConfig, RunContext
from trustlab.results import Result


def test_overrides_coerce_and_suggest(toy_experiment):
    Config = get_experiment(toy_experiment).config_cls
    cfg = apply_overrides(Config.quick(), ["n=7", "p=0.25", "seeds=1,2", "label=x"])
    assert (cfg.n, cfg.p, cfg.seeds, cfg.label) == (7, 0.25, (1, 2), "x")
    with pytest.raises(UnknownNameError, match="Did you mean 'seeds'"):
        apply_overrides(Config.quick(), ["seed=1"])
    with pytest.raises(ConfigError, match="'n' field"):
        apply_overrides(Config.quick(), ["n=abc"])
    with pytest.raises(ConfigError, match="key=value"):
        apply_overrides(Config.quick(), ["n"])
    with pytest.raises(ConfigError, match="'p' parameter"):
        apply_overrides(Config.quick(), ["p=2.0"])


def test_config_validation_and_modes():
    with pytest.raises(ConfigError, match="seeds"):
        ExperimentConfig(seeds=()).validate()
    with pytest.raises(ConfigError, match="mode"):
        ExperimentConfig.for_mode("fast")


def test_runner_writes_result_with_provenance(toy_experiment, tmp_path):
    assert toy_experiment in experiment_ids()
    result, path = run_experiment(toy_experiment, "quick", seeds=[0, 1], out_dir=tmp_path, show_progress=False)
    assert path.parent == tmp_path / "toyexp" / "quick" and path.suffix == ".json"
    assert not list(path.parent.glob(".*.tmp"))  # no half-written files left
    data = json.loads(path.read_text())
    assert data["provenance"]["seeds"] == [0, 1] and data["config"]["n"] == 50
    for key in ("versions", "git_sha", "threads", "wall_time_s", "python"):
        assert key in data["provenance"]
    statuses = {c.id: c.status for c in result.claims}
    assert statuses["C2"] == "SKIP" and statuses["C1"] in ("PASS", "FAIL")
    assert "toy note" in result.notes
    again = Result.load(path)
    assert again.to_dict() == result.to_dict()


def test_claim_check_reads_result_and_failure_is_recorded():
    res = Result("x", "quick", {"threshold": 0.9}, summary={"mean": 0.5})
    claims = [
        Claim("ok", "s", lambda r: (r.summary["mean"] > 0.1, r.summary["mean"], 0.1)),
        Claim("fail", "s", lambda r: (r.summary["mean"] > r.config["threshold"], r.summary["mean"], 0.9)),
        Claim("broken", "s", lambda r: (r.summary["missing"], 0, 0)),
    ]
    out = {c.id: c for c in evaluate_claims(res, claims)}
    assert out["ok"].status == "PASS" and out["fail"].status == "FAIL"
    assert out["broken"].status == "FAIL" and "KeyError" in out["broken"].detail


def test_unknown_experiment_suggests(toy_experiment):
    with pytest.raises(UnknownNameError, match="Did you mean 'toyexp'"):
        get_experiment("toyexpp")


def test_budget_check():
    ctx = RunContext(seeds=(0,), budget_s=0.0)
    with pytest.raises(TimeoutError, match="budget"):
        ctx.check_budget("step 1")
    assert list(RunContext(seeds=(0,), show_progress=False).progress([1, 2])) == [1, 2]
