"""Each quick experiment runs end to end within its budget and its Result round-trips JSON (marker: reproduce)."""

from __future__ import annotations

import pytest

from trustlab.experiments import experiment_ids, get_experiment, run_experiment
from trustlab.results import Result

IDS = experiment_ids()


@pytest.mark.reproduce
@pytest.mark.parametrize("exp_id", IDS or ["<none>"])
def test_quick_experiment_runs_and_round_trips(exp_id, tmp_path):
    if exp_id == "<none>":
        pytest.skip("no experiment registered yet")
    result, path = run_experiment(exp_id, "quick", out_dir=tmp_path, show_progress=False)
    assert Result.load(path).to_dict() == result.to_dict()
    assert len(result.claims) == len(get_experiment(exp_id).claims)
    assert all(c.status in ("PASS", "FAIL", "SKIP") for c in result.claims)
    assert result.records, "a quick run must record observations"
    budget = result.provenance["budget_s"]
    # the 60 s quick budget is for an idle 2-core machine; allow slack for a loaded CI box
    assert budget is None or result.provenance["wall_time_s"] <= 2 * budget, result.provenance["wall_time_s"]
