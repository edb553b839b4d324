"""Ray for real on loopback (marker ``dist``, run by .ci/run): a local runtime the executor starts and stops,
and a ``ray start --head`` cluster on 127.0.0.1 that ``trustlab reproduce --executor ray --address`` uses.
Results equal the local executor's for the same seeds; every runtime is stopped even when a test fails."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.core.executor import LocalExecutor, RayExecutor, TaskError
from trustlab.results.runs import compare_runs, reproduce_quick
from trustlab.testing import tasks

pytestmark = [pytest.mark.dist]
ray = pytest.importorskip("ray")


def test_local_ray_runtime_matches_the_local_executor_and_is_stopped(tmp_path):
    pytest.importorskip("torch")
    from trustlab.methods.amun import SGDSpec, fit_reference_models
    from trustlab.models import MLP

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 5)).astype(np.float32), rng.integers(0, 3, 60)
    spec = SGDSpec(epochs=2, lr=0.05, momentum=0.9, batch_size=16)

    def make():
        return MLP(5, 3, hidden=(8,))

    local = LocalExecutor()
    with RayExecutor(workers=2) as ex:
        assert ex.map(tasks.global_draws, range(6), seed=2) == local.map(tasks.global_draws, range(6), seed=2)
        assert len({pid for _, pid in ex.map(tasks.pid_of, range(6))}) >= 1
        assert ex.map(tasks.fail_first, [str(tmp_path / "a"), str(tmp_path / "b")]) == ["a", "b"]  # retried once
        with pytest.raises(TaskError, match="bad item 3") as info:
            ex.map(tasks.always_fail, [3])
        assert "always_fail" in info.value.traceback
        r_ray = fit_reference_models(make, X, y, 4, spec=spec, random_state=1, executor=ex)
        assert ray.is_initialized()
    r_loc = fit_reference_models(make, X, y, 4, spec=spec, random_state=1, executor=local)
    np.testing.assert_array_equal(r_ray.logits, r_loc.logits)
    np.testing.assert_array_equal(r_ray.in_mask, r_loc.in_mask)
    assert not ray.is_initialized()  # the runtime the executor started is gone


@pytest.fixture
def ray_head():
    """``ray start --head --block`` registered on 127.0.0.1 in its own process group, stopped afterwards."""
    from trustlab.testing.raycluster import RayNode

    with RayNode(head=True, num_cpus=2) as head:
        yield head.address


@pytest.mark.timeout(6000)
def test_reproduce_all_on_a_loopback_ray_cluster_equals_the_local_run(ray_head, tmp_path):
    """Every experiment's quick run (issue 46): what must not depend on the executor
    (:func:`trustlab.results.compare.comparable`) is identical locally and as a task on the Ray cluster, at the
    same threads (1 per experiment). With the local default (all cores) torch reductions can round otherwise
    and an attack or a training amplifies that: docs/scaleout.md lists which experiments differ then."""
    from trustlab.experiments.runner import experiment_ids

    on_ray = reproduce_quick([], tmp_path / "ray", ["--executor", "ray", "--address", ray_head], timeout_s=3000)
    local = reproduce_quick([], tmp_path / "local", ["--threads-per-task", "1"], timeout_s=3000)
    assert sorted(local.experiments) == sorted(experiment_ids()), local.tail
    errors = {e: v["error"]["message"] for run in (local, on_ray) for e, v in run.experiments.items() if v["error"]}
    assert not errors, errors
    assert compare_runs(local, on_ray) == dict.fromkeys(local.experiments, "equal")


def test_xhacking_searches_on_ray_equal_the_in_process_searches():
    pytest.importorskip("shap")
    pytest.importorskip("optuna")
    from trustlab.methods.xhacking import (
        EvalSettings,
        SearchContext,
        achievable_drop,
        make_redundant_classification,
        tiny_space,
    )

    X, y, info = make_redundant_classification(240, rhos=(0.0, 0.95), n_independent=1, random_state=0)
    names = [d["name"] for d in info]
    kw = dict(budget=4, seeds=(0, 1), search_space=tiny_space(), n_startup_trials=2)
    here = achievable_drop(None, None, ["t0", "t1"], context=SearchContext(
        X, y, EvalSettings(n_background=15, n_explain=15), feature_names=names), **kw)
    with RayExecutor(workers=2) as ex:
        there = achievable_drop(None, None, ["t0", "t1"], context=SearchContext(
            X, y, EvalSettings(n_background=15, n_explain=15), feature_names=names), executor=ex, **kw)
    assert {k: v.to_dict() for k, v in there.items()} == {k: v.to_dict() for k, v in here.items()}
