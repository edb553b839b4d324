"""The experiment contract: configs, overrides, claims, the runner and provenance."""

from __future__ import annotations

import json
import time

import pytest

from trustlab.core.exceptions import ConfigError, UnknownNameError
from trustlab.experiments import exit_status, experiment_ids, get_experiment, run_experiment
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, RunContext, evaluate_claims
from trustlab.experiments.runner import apply_overrides
from trustlab.results import ClaimOutcome, Result


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
    assert not list(path.parent.glob(".*.trustlab-tmp"))  # no half-written files left
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
        Claim("ok", "s", lambda r: CheckResult(r.summary["mean"] > 0.1, r.summary["mean"], 0.1)),
        Claim("fail", "s", lambda r: CheckResult(r.summary["mean"] > r.config["threshold"], r.summary["mean"], 0.9)),
        Claim("broken", "s", lambda r: CheckResult(r.summary["missing"], 0, 0)),
        Claim("tuple", "s", lambda r: (True, r.summary["mean"], 0.1)),  # the old tuple form is no longer read
    ]
    out = {c.id: c for c in evaluate_claims(res, claims)}
    assert out["ok"].status == "PASS" and out["fail"].status == "FAIL"
    assert out["broken"].status == "FAIL" and "KeyError" in out["broken"].detail
    assert out["tuple"].status == "FAIL" and "must return a CheckResult" in out["tuple"].detail


def test_unknown_experiment_suggests(toy_experiment):
    with pytest.raises(UnknownNameError, match="Did you mean 'toyexp'"):
        get_experiment("toyexpp")


def test_budget_is_a_target_unless_strict():
    ctx = RunContext(seeds=(0,), budget_s=0.0)
    ctx.check_budget("step 1")  # a target: recorded, the run goes on
    ctx.check_budget("step 2")
    assert ctx.overrun_at == "step 1" and len([m for m in ctx.log if m.startswith("budget:")]) == 1
    strict = RunContext(seeds=(0,), budget_s=0.0, strict_budget=True)
    with pytest.raises(TimeoutError, match="strict budget"):
        strict.check_budget("step 1")
    assert list(RunContext(seeds=(0,), show_progress=False).progress([1, 2])) == [1, 2]


def test_untimed_blocks_are_kept_out_of_the_measured_time():
    # the sleep is longer than the strict budget, which leaves 0.25 s for a busy machine's scheduling jitter
    ctx = RunContext(seeds=(0,), budget_s=0.25, strict_budget=True)
    with ctx.untimed("load model"):
        with ctx.untimed("inner"):  # nested blocks count once, under the outer label
            time.sleep(0.3)
    ctx.check_budget("after loading")  # the 0.3 s are not measured
    assert ctx.elapsed < 0.25 and set(ctx.untimed_s) == {"load model"} and ctx.untimed_s["load model"] >= 0.3
    with pytest.raises(ConfigError, match="label"):
        with ctx.untimed(""):
            pass


def test_runner_records_budget_and_untimed_time(toy_experiment, tmp_path):
    result, _ = run_experiment("toyslow", "quick", out_dir=None, show_progress=False)
    prov = result.provenance
    assert prov["within_budget"] is False and prov["overrun_at"] == "toy work" and prov["strict_budget"] is False
    assert prov["untimed_s"]["prepare toy model"] >= 0.3 and prov["timed_s"] < prov["wall_time_s"] - 0.25
    with pytest.raises(TimeoutError, match="strict budget"):
        run_experiment("toyslow", "quick", out_dir=None, show_progress=False, strict_budget=True)
    with pytest.raises(TimeoutError):
        run_experiment("toyslow", "quick", out_dir=None, show_progress=False, budget_s=0.05)  # explicit: strict
    result, _ = run_experiment("toyslow", "quick", out_dir=None, show_progress=False, budget_s=60)
    assert result.provenance["within_budget"] is True


def test_run_experiment_restores_the_callers_global_state(toy_experiment):
    import random
    import warnings

    import matplotlib
    import numpy as np
    import torch

    from trustlab.core.seeding import global_rng_state, same_global_rng_state

    threads, filters, lw = torch.get_num_threads(), list(warnings.filters), matplotlib.rcParams["lines.linewidth"]
    before = global_rng_state()
    run_experiment("toyleak", "quick", out_dir=None, show_progress=False)
    assert torch.get_num_threads() == threads and warnings.filters == filters
    assert matplotlib.rcParams["lines.linewidth"] == lw and same_global_rng_state(before, global_rng_state())
    random.random(), np.random.random()  # noqa: B018 - the caller's streams still work
    a, _ = run_experiment("toystate", "quick", out_dir=None, show_progress=False)
    torch.manual_seed(999)
    random.seed(5)
    b, _ = run_experiment("toystate", "quick", out_dir=None, show_progress=False)
    assert a.summary == b.summary  # every run starts from the same seeded state


def test_exit_status():
    ok = Result("a", "quick", {})
    failing = Result("b", "quick", {})
    failing.claims = [ClaimOutcome("X", "s", False, 0, 1)]
    secondary = Result("c", "quick", {})
    secondary.claims = [ClaimOutcome("Y", "s", False, 0, 1, secondary=True)]
    broken = Result("d", "quick", {}, provenance={"error": {"type": "E", "message": "m"}})
    assert exit_status([ok, secondary]) == 0 and exit_status([ok, failing]) == 1
    assert exit_status([failing, broken]) == 2 and exit_status([]) == 0


def test_provenance_reads_git_without_taking_the_index_lock(monkeypatch):
    import subprocess

    from trustlab.experiments import runner as exp_runner

    calls = []
    real = subprocess.run

    def spy(cmd, *a, **k):
        calls.append(list(cmd))
        return real(cmd, *a, **k)

    monkeypatch.setattr(exp_runner.subprocess, "run", spy)
    sha = exp_runner._git_sha()
    assert calls and all(c[:2] == ["git", "--no-optional-locks"] for c in calls), calls
    assert sha  # a SHA in a checkout, "unknown (installed package, ...)" elsewhere


def test_provenance_outside_a_checkout_says_so(monkeypatch):
    from trustlab.experiments import runner as exp_runner

    monkeypatch.setattr(exp_runner, "_git", lambda args, cwd: None)
    assert exp_runner._git_sha().startswith("unknown (installed package")


def test_provenance_records_the_commit_the_run_started_from(monkeypatch, toy_experiment):
    # a commit made while a long run is going must not be recorded as the code that ran
    import contextlib

    from trustlab.experiments import runner as exp_runner

    ran = []
    real_state = exp_runner._restored_global_state

    @contextlib.contextmanager
    def state_then_commit(seed):
        with real_state(seed):
            yield
        ran.append(True)  # the "commit" happens once the experiment has run

    monkeypatch.setattr(exp_runner, "_restored_global_state", state_then_commit)
    monkeypatch.setattr(exp_runner, "_git_sha", lambda: "b" * 40 if ran else "a" * 40)
    result, _ = run_experiment(toy_experiment, "quick", seeds=[0], out_dir=None, show_progress=False)
    assert result.provenance["git_sha"] == "a" * 40
