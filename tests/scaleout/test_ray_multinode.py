"""A real two-raylet Ray cluster on loopback (marker ``dist``, run by .ci/run): a head and a second node,
each a separate ``ray start --block`` process registered on 127.0.0.1 (trustlab.testing.raycluster). Tasks
run on both nodes, custom resources route tasks, nothing listens or connects off loopback, per-task
timeouts and Ctrl-C stop the cluster's tasks, and the driver's version check passes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from trustlab.core.executor import RayExecutor, TaskError
from trustlab.testing import tasks
from trustlab.testing.raycluster import RayNode

pytestmark = [pytest.mark.dist]
ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster():
    with RayNode(head=True, num_cpus=1) as head, \
            RayNode(address=head.address, num_cpus=1, resources={"second": 1}) as node:
        with RayExecutor(address=head.address) as ex:  # connects, checks both nodes' versions
            ex.start()
            yield head, node, ex
    assert not ray.is_initialized()


_LOOP = ("127.", "[::ffff:127.", "[::1]", "*:", "0.0.0.0:", "[::]:")


def _cluster_pids(groups: set[int]) -> set[int]:
    """This process, its descendants (the driver's Ray processes) and every process in the nodes' groups."""
    parent: dict[int, int] = {}
    pids = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            pid = int(d.name)
            parent[pid] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if os.getpgid(pid) in groups:
                pids.add(pid)
        except (OSError, ValueError, IndexError):
            continue
    for pid in parent:
        p = pid
        while p > 1 and p in parent:
            if p == os.getpid():
                pids.add(pid)
                break
            p = parent[p]
    return pids


def _sockets_off_loopback(pids: set[int]) -> list[str]:
    """TCP sockets owned by ``pids`` whose local or peer address is not loopback (``ss -tanp``)."""
    out = subprocess.run(["ss", "-Htanp"], capture_output=True, text=True, check=True).stdout
    bad = []
    for line in out.splitlines():
        owners = {int(m) for m in re.findall(r"pid=(\d+)", line)}
        parts = line.split()
        if owners & pids and not (parts[3].startswith(_LOOP) and parts[4].startswith(_LOOP)):
            bad.append(line)
    return bad


def test_tasks_run_on_both_nodes_and_everything_stays_on_loopback(cluster):
    head, node, ex = cluster
    nodes = [n for n in ray.nodes() if n["Alive"]]
    assert len(nodes) == 2 and {n["NodeManagerAddress"] for n in nodes} == {"127.0.0.1"}
    assert ray.util.get_node_ip_address() == "127.0.0.1"  # the driver too
    placed = ex.map(tasks.node_of, [0.5] * 6)
    assert len({node for node, _ in placed}) == 2, placed  # 1 CPU per node: 6 x 0.5 s tasks use both
    second = next(n["NodeID"] for n in nodes if "second" in n["Resources"])
    routed = ex.map(tasks.node_of, [0.0] * 3, resources={"second": 1})
    assert {node for node, _ in routed} == {second}
    if shutil.which("ss"):
        pids = _cluster_pids({head.pgid, node.pgid})
        assert {pid for _, pid in placed} <= pids  # the workers that ran the tasks are among them
        assert not _sockets_off_loopback(pids), _sockets_off_loopback(pids)


def test_a_task_past_its_timeout_on_the_cluster_names_its_item(cluster):
    _, _, ex = cluster
    ex.task_timeout_s = 1.0
    try:
        t0 = time.perf_counter()
        with pytest.raises(TaskError, match=r"item 60\.0.*TaskTimeout"):
            ex.map(tasks.sleep_for, [0.01, 60.0])
        assert time.perf_counter() - t0 < 30
    finally:
        ex.task_timeout_s = None


def test_ctrl_c_stops_the_clusters_outstanding_tasks(cluster, tmp_path):
    _, _, ex = cluster
    markers = [str(tmp_path / f"m{i}") for i in range(3)]

    def interrupt(index, value):
        raise KeyboardInterrupt

    items = [(0.0, str(tmp_path / "quick"))] + [(8.0, m) for m in markers]
    with pytest.raises(KeyboardInterrupt):
        ex.map(tasks.sleep_then_touch, items, on_result=interrupt)
    time.sleep(10)  # longer than the slow tasks would take
    assert not any(Path(m).exists() for m in markers)  # cancelled on the cluster, not left running
    assert ex.map(abs, [-1]) == [1]  # the cluster still serves the next map
