"""Ray nodes on loopback for tests and for trying a cluster on one machine (extra ``dist``).

``ray start --node-ip-address=127.0.0.1`` is rewritten by Ray to the machine's interface address; a
:class:`RayNode` starts ``ray start --block`` in its own process group with that rewrite switched off
for loopback hosts (:func:`trustlab.core._ray.keep_loopback`, in the child process only), so the node
registers and listens on 127.0.0.1. Use it as a context manager; leaving the block stops the node's
processes (SIGTERM to the group, SIGKILL after 30 s)::

    with RayNode(head=True, num_cpus=1) as head, RayNode(address=head.address, resources={"second": 1}):
        with RayExecutor(address=head.address) as ex:
            ...

A real multi-machine cluster does not need this: run ``ray start`` on each machine (docs/scaleout.md).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, InstanceOf, Interval
from trustlab.core.exceptions import TrustlabError

__all__ = ["RayNode", "free_port"]

_LAUNCH = ("import sys\n"
           "from trustlab.core._ray import is_loopback\n"
           "from ray._private import services\n"
           "orig = services.resolve_ip_for_localhost\n"
           "services.resolve_ip_for_localhost = lambda h: h if is_loopback(h) else orig(h)\n"
           "from ray.scripts.scripts import main\n"
           "sys.argv[0] = 'ray'\n"
           "main()\n")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RayNode:
    """One ``ray start --block`` node on 127.0.0.1: the head (``head=True``, its GCS on ``port``) or a node
    joining ``address``. ``num_cpus`` and ``resources`` (``{"name": amount}``) are the node's."""

    @validate_args(head=[Boolean()], address=[InstanceOf(str), None], port=[Interval(int, 1, 65535), None],
                   num_cpus=[Interval(int, 0, None)], resources=[InstanceOf(dict), None],
                   start_timeout_s=[Interval(float, 0, None, closed="neither")])
    def __init__(self, *, head: bool = False, address: str | None = None, port: int | None = None,
                 num_cpus: int = 1, resources: dict[str, float] | None = None, start_timeout_s: float = 120.0) -> None:
        if head == (address is not None):
            raise TrustlabError("RayNode needs head=True or the 'address' of a head to join (not both). "
                                f"Got head={head!r}, address={address!r}.")
        self.head, self.port = head, port or (free_port() if head else None)
        self.address = f"127.0.0.1:{self.port}" if head else str(address)
        self.num_cpus, self.resources, self.start_timeout_s = num_cpus, dict(resources or {}), start_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def _command(self) -> list[str]:
        tmp = tempfile.mkdtemp(prefix="tlray", dir="/tmp")  # short: Ray's unix sockets live below it
        cmd = [sys.executable, "-c", _LAUNCH, "start", "--block", "--node-ip-address=127.0.0.1",
               f"--num-cpus={self.num_cpus}", "--disable-usage-stats", f"--temp-dir={tmp}"]
        if self.resources:
            cmd.append("--resources=" + json.dumps(self.resources))
        if self.head:
            return [*cmd, "--head", f"--port={self.port}", "--include-dashboard=false"]
        return [*cmd, f"--address={self.address}"]

    def __enter__(self) -> RayNode:
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        self._log = tempfile.NamedTemporaryFile(prefix="tlray-", suffix=".log", delete=False)  # noqa: SIM115
        self._proc = subprocess.Popen(self._command(), env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        self.pgid = self._proc.pid  # its own session: the process group of every process the node starts
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        """Until ``ray start`` says the node runs (it prints that once the node has registered)."""
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            text = Path(self._log.name).read_text(errors="replace")
            if self._proc is not None and self._proc.poll() is not None:
                raise TrustlabError(f"ray start ({'head' if self.head else 'node'}) exited: {text[-2000:]}")
            if "Ray runtime started" in text:
                return
            time.sleep(0.5)
        raise TrustlabError(f"the Ray {'head' if self.head else 'node'} at {self.address} was not ready within "
                            f"{self.start_timeout_s:g} s")

    def stop(self) -> None:
        """Stop the node's processes (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        self._log.close()
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # --block: ray start stops the processes it started
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        except ProcessLookupError:  # it had exited already
            proc.wait(timeout=10)
        Path(self._log.name).unlink(missing_ok=True)

    def __exit__(self, *exc: Any) -> None:
        self.stop()
