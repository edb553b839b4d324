"""Executor limits and checks that need no cluster (issue 46): per-task timeouts, resource requests, a
non-Ray address refused fast, the driver/worker version comparison, and a run that distributed nothing."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from trustlab.core.exceptions import ConfigError
from trustlab.core.executor import (
    LocalExecutor,
    ProcessExecutor,
    RayExecutor,
    TaskError,
    check_resources,
    make_executor,
)
from trustlab.testing import tasks


@pytest.mark.parametrize("kind", ["local", "process"])
def test_a_task_past_its_timeout_fails_at_once_naming_its_item(kind):
    with make_executor(kind, workers=1, task_timeout_s=0.5) as ex:
        t0 = time.perf_counter()
        with pytest.raises(TaskError, match=r"item 30\.0.*failed once: TaskTimeout: .*0\.5 s timeout") as info:
            ex.map(tasks.sleep_for, [0.01, 30.0])
        assert time.perf_counter() - t0 < 20  # not retried, and the sleep was interrupted
        assert info.value.index == 1 and info.value.error_type == "TaskTimeout"
        assert ex.map(tasks.sleep_for, [0.01]) == [0.01]  # the executor still works afterwards


def test_the_timeout_leaves_the_callers_alarm_handler_alone():
    import signal

    def mine(*_):
        raise AssertionError("not expected")

    timer = signal.getitimer(signal.ITIMER_REAL)  # pytest-timeout's, if it runs with the signal method
    before = signal.signal(signal.SIGALRM, mine)
    try:
        LocalExecutor(task_timeout_s=5).map(tasks.sleep_for, [0.01])
        assert signal.getsignal(signal.SIGALRM) is mine
        assert abs(signal.getitimer(signal.ITIMER_REAL)[0] - timer[0]) < 2  # the caller's timer, re-armed
    finally:
        signal.signal(signal.SIGALRM, before)


def test_timeout_and_resources_rules():
    for bad in (0, -1, "5", True):
        with pytest.raises(ConfigError, match="'task_timeout_s'"):
            LocalExecutor(task_timeout_s=bad)
    assert check_resources(None) == {}
    assert check_resources({"num_gpus": "auto", "memory": 2**30, "node2": 1}) == {
        "num_gpus": "auto", "memory": 2**30, "node2": 1}
    for bad in ({"num_gpus": -1}, {"memory": "8G"}, {"num_gpus": "all"}, {"": 1}, [1]):
        with pytest.raises(ConfigError, match="'resources'"):
            check_resources(bad)
    with pytest.raises(ConfigError, match="num_cpus"):
        LocalExecutor().map(abs, [1], resources={"num_cpus": 2})
    assert LocalExecutor().map(abs, [-1], resources={"num_gpus": "auto"}) == [1]  # checked, then run here
    with ProcessExecutor(1) as ex:
        assert ex.map(abs, [-2], resources={"memory": 10**8}) == [2]


@pytest.fixture
def not_ray():
    """A TCP server on 127.0.0.1 that accepts and answers like a plain text service (not gRPC)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    stop = threading.Event()

    def serve():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"220 hello, I am not Ray\r\n")
                time.sleep(0.5)

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    yield f"127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    th.join(5)
    srv.close()


def test_an_address_that_is_not_ray_fails_fast_naming_it(not_ray):
    pytest.importorskip("ray")
    import ray

    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="not a Ray cluster") as info:
        RayExecutor(address=not_ray, connect_timeout_s=5).map(abs, [1])
    assert time.perf_counter() - t0 < 30
    assert repr(not_ray) in str(info.value) and "docs/scaleout.md" in str(info.value)
    assert not ray.is_initialized()
    with pytest.raises(ConfigError, match="'connect_timeout_s'"):
        RayExecutor(connect_timeout_s=60)


def test_version_mismatch_names_the_node_and_both_versions():
    pytest.importorskip("ray")
    from trustlab.core._ray import compare_versions

    driver = {"trustlab": "0.9.0", "ray": "2.55.1", "python": "3.11"}
    compare_versions(driver, {"127.0.0.1 (aa)": dict(driver)})  # equal: no error
    with pytest.raises(ConfigError, match=r"node 10\.0\.0\.7 \(bb\): trustlab 0\.8\.0.*Install the same"):
        compare_versions(driver, {"127.0.0.1 (aa)": dict(driver), "10.0.0.7 (bb)": {**driver, "trustlab": "0.8.0"}})


def test_loopback_hosts():
    pytest.importorskip("ray")
    from trustlab.core._ray import is_loopback

    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"))
    assert not any(is_loopback(h) for h in ("192.0.2.2", "10.0.0.1", "example.org", ""))


def test_a_run_on_an_executor_that_maps_nothing_says_so_once(toy_experiment):
    from trustlab.experiments import run_experiment

    with ProcessExecutor(1) as ex, pytest.warns(RuntimeWarning, match="no independent units") as seen:
        result, _ = run_experiment(toy_experiment, "quick", out_dir=None, show_progress=False, executor=ex)
    assert len([w for w in seen if "no independent units" in str(w.message)]) == 1
    assert any("no independent units" in n for n in result.notes)
    assert result.provenance["executor_tasks"] == 0
