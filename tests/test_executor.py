"""The executor interface (trustlab.core.executor): local and process pools give the same results in order,
retry a failed task once, report a task that fails twice with its item and traceback, and clean up.
Ray runs live in tests/scaleout (marker ``dist``; they start a Ray runtime)."""

from __future__ import annotations

import functools
import random
import time

import numpy as np
import pytest

from trustlab.core.exceptions import ConfigError, MissingDependencyError, TrustlabError
from trustlab.core.executor import (
    LocalExecutor,
    ProcessExecutor,
    RayExecutor,
    TaskError,
    make_executor,
    map_items,
)
from trustlab.core.seeding import global_rng_state, same_global_rng_state
from trustlab.testing import tasks
from trustlab.testing.functions import check_function_refuses_invalid


@pytest.fixture(scope="module")
def pool():
    with ProcessExecutor(2) as ex:
        yield ex


def test_local_and_process_give_the_same_results_in_order(pool):
    items = list(range(7))
    before = global_rng_state()
    local = LocalExecutor().map(tasks.global_draws, items, seed=3)
    assert same_global_rng_state(before, global_rng_state())  # the caller's RNGs are untouched
    assert [r[0] for r in local] == items
    assert len({r[1] for r in local}) == len(items)  # each task has its own seed
    assert pool.map(tasks.global_draws, items, seed=3) == local
    assert LocalExecutor().map(tasks.global_draws, items, seed=4) != local  # the seed matters
    # tasks ran in other processes
    assert {pid for _, pid in pool.map(tasks.pid_of, range(4))} != {__import__("os").getpid()}


def test_closures_travel_to_a_process_pool(pool):
    offset = 10
    assert pool.map(lambda x: x + offset, [1, 2]) == [11, 12]
    assert pool.map(functools.partial(pow, 2), [3, 4]) == [8, 16]


@pytest.mark.parametrize("kind", ["local", "process"])
def test_a_failed_task_is_retried_once(kind, tmp_path, pool):
    ex = LocalExecutor() if kind == "local" else pool
    markers = [str(tmp_path / f"m{i}") for i in range(3)]
    assert ex.map(tasks.fail_first, markers) == ["m0", "m1", "m2"]


@pytest.mark.parametrize("kind", ["local", "process"])
def test_a_task_failing_twice_names_its_item_and_traceback(kind, pool):
    ex = LocalExecutor() if kind == "local" else pool
    with pytest.raises(TaskError) as info:
        ex.map(tasks.always_fail, ["ok?", "second"], desc="toy")
    err = info.value  # the first item to fail twice (in a pool, either one)
    assert err.item == ["ok?", "second"][err.index] and err.error_type == "ValueError"
    assert f"bad item {err.item!r}" in str(err) and f"toy task {err.index}" in str(err) and "2 attempts" in str(err)
    assert "tasks.py" in str(err) and "always_fail" in err.traceback
    assert isinstance(err, TrustlabError)


def test_keyboard_interrupt_stops_the_pool_and_propagates():
    ex = ProcessExecutor(2)

    def stop(i, value):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ex.map(tasks.sleep_for, [0.0, 5.0, 5.0, 5.0], on_result=stop)
    assert ex._pool is None  # workers terminated, not left running
    t0 = time.perf_counter()
    assert ex.map(abs, [-1]) == [1]  # usable again (a fresh pool)
    ex.close()
    assert time.perf_counter() - t0 < 60


def test_threads_are_limited_inside_tasks_and_restored():
    from trustlab.core.threads import thread_state

    before = thread_state()
    ex = LocalExecutor(threads_per_task=1)
    ex.map(lambda _: None, [0])
    assert thread_state() == before


def test_a_task_that_imports_torch_first_runs_at_the_task_threads():
    """A fresh worker has not imported torch: the task's own import must still run torch at the task's
    threads, not at torch's default (all cores); limit_threads(import_torch=True) sees to it."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from trustlab.core.executor import run_task, LocalExecutor\n"
            "def f(_):\n    import torch\n    return torch.get_num_threads()\n"
            "assert 'torch' not in sys.modules\n"
            "print(run_task(f, 0, 0, 1).value, LocalExecutor(threads_per_task=1).map(f, [0])[0])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["1", "1"], out.stderr
    from trustlab.core.threads import limit_threads

    with pytest.raises(ConfigError, match="The 'import_torch' argument of limit_threads"):
        with limit_threads(1, import_torch=1):
            pass


def test_map_items_and_run_context_map_use_the_local_executor_by_default():
    from trustlab.experiments.base import RunContext

    ctx = RunContext(seeds=(5,), show_progress=False)
    out = ctx.map(tasks.global_draws, ["a", "b"])
    assert out == map_items(None, tasks.global_draws, ["a", "b"], seed=5)
    assert out == LocalExecutor().map(tasks.global_draws, ["a", "b"], seed=5)


def test_make_executor_rules_and_errors():
    check_function_refuses_invalid(make_executor)
    check_function_refuses_invalid(map_items)
    assert isinstance(make_executor(), LocalExecutor)
    ex = LocalExecutor()
    assert make_executor(ex) is ex
    with pytest.raises(ConfigError, match="only applies to kind='ray'"):
        make_executor("process", address="127.0.0.1:6379")
    with pytest.raises(ConfigError, match="'kind' argument of make_executor"):
        make_executor("dask")
    with pytest.raises(ConfigError, match="'workers'"):
        ProcessExecutor(0)
    with pytest.raises(ConfigError, match="'seed'"):
        LocalExecutor().map(abs, [1], seed=-1)
    assert LocalExecutor().map(abs, []) == []


def test_unreachable_ray_address_fails_fast_with_advice():
    pytest.importorskip("ray")
    import socket

    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ex = RayExecutor(address=f"127.0.0.1:{port}", connect_timeout_s=5)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="names no reachable Ray cluster") as info:
        ex.map(abs, [1])
    assert time.perf_counter() - t0 < 30
    assert "ray start --head" in str(info.value)
    import ray

    assert not ray.is_initialized()


def test_missing_ray_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(MissingDependencyError, match=r"trustlab\[dist\]"):
        RayExecutor().start()


def test_process_executor_global_state_of_the_caller_is_untouched(pool):
    random.seed(1)
    np.random.seed(1)
    a = (random.random(), np.random.rand())
    random.seed(1)
    np.random.seed(1)
    pool.map(tasks.global_draws, [0, 1])
    LocalExecutor().map(tasks.global_draws, [0, 1])
    assert (random.random(), np.random.rand()) == a


def test_cli_refuses_a_bad_executor_and_an_unreachable_address(tmp_path):
    pytest.importorskip("ray")
    import socket

    from typer.testing import CliRunner

    from trustlab.cli._app import app

    runner = CliRunner()
    res = runner.invoke(app, ["run", "licensing", "--quick", "--executor", "dask", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "'kind' argument of make_executor" in res.output
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    res = runner.invoke(app, ["reproduce", "licensing", "--quick", "--executor", "ray", "--address",
                              f"127.0.0.1:{port}", "--out", str(tmp_path), "--no-progress"])
    assert res.exit_code == 2 and "names no reachable Ray cluster" in res.output, res.output
    assert time.perf_counter() - t0 < 30
    assert not list(tmp_path.rglob("*.json"))  # nothing ran, nothing written


_LEAK_SCRIPT = """
import multiprocessing
from trustlab.core.executor import ProcessExecutor

def hold_semaphore(x):
    import builtins
    builtins._trustlab_test_sem = multiprocessing.get_context("spawn").Semaphore()  # lives until the worker exits
    return x

if __name__ == "__main__":
    with ProcessExecutor(1) as ex:
        assert ex.map(hold_semaphore, [1, 2]) == [1, 2]
"""


def test_closing_an_idle_process_pool_lets_workers_release_what_they_hold(tmp_path):
    # close() used to terminate idle workers, so a semaphore a task's library made in the worker leaked: the
    # resource tracker warned "1 leaked semaphore objects" at exit (seen under `trustlab audit --executor process`)
    import os
    import subprocess
    import sys

    script = tmp_path / "leak.py"
    script.write_text(_LEAK_SCRIPT)
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "leaked semaphore" not in proc.stderr, proc.stderr
