"""The Ray executor (extra ``dist``), re-exported by :mod:`trustlab.core.executor`.

Ray rewrites a loopback host (``127.0.0.1``, ``localhost``, ``::1``) to the machine's interface address,
both where a driver connects and where a node registers (``ray._private.services.resolve_ip_for_localhost``).
On loopback this executor keeps the address as given for the duration of ``ray.init`` only (the function
is restored afterwards), so a local runtime, and a driver joining a cluster started on loopback (see
:mod:`trustlab.testing.raycluster`), register, listen and connect on 127.0.0.1 and nothing else.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import sys
import warnings
from collections import deque
from collections.abc import Iterator
from typing import Any

from trustlab.core.exceptions import ConfigError
from trustlab.core.executor import Executor, _env_defaults, _Outcome, run_task
from trustlab.core.optional import require

#: seconds between two looks at the outstanding tasks (each look collects every finished one)
_POLL_S = 0.05
#: an HTTP/2 client preface and an empty SETTINGS frame: a Ray GCS (a gRPC server) answers with SETTINGS
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and any loopback IP (127.0.0.0/8, ::1)."""
    if host.strip("[]") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _split(address: str) -> tuple[str, int] | None:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in address:
        return None  # "auto", "ray://...": left to Ray
    return host or "127.0.0.1", int(port)


@contextlib.contextmanager
def keep_loopback() -> Iterator[None]:
    """Within the block, Ray keeps a loopback host as given instead of rewriting it to the interface address."""
    from ray._private import services

    original = services.resolve_ip_for_localhost

    def resolve(host: str) -> str:
        return host if is_loopback(host) else original(host)

    services.resolve_ip_for_localhost = resolve
    try:
        yield
    finally:
        services.resolve_ip_for_localhost = original


def check_ray_address(address: str, timeout_s: float) -> None:
    """Refuse, within about ``timeout_s``, a ``host:port`` where nothing listens or where the listener is not
    a gRPC server (a Ray GCS answers an HTTP/2 preface with a SETTINGS frame; Ray itself would wait ~30 s)."""
    parsed = _split(address)
    if parsed is None:
        return
    advice = ("Start one with 'ray start --head --node-ip-address=<this machine's IP> --port=6379' (see "
              "docs/scaleout.md), or leave the address out to start a local runtime.")
    try:
        with socket.create_connection(parsed, timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(_H2_PREFACE)
            header = sock.recv(9)
    except OSError as exc:
        raise ConfigError(f"The 'address' argument of RayExecutor names no reachable Ray cluster: nothing answered "
                          f"at {address!r} within {timeout_s:g} s ({exc}). {advice}") from None
    if len(header) < 9 or header[3] != 0x04:
        raise ConfigError(f"The 'address' argument of RayExecutor names something that is not a Ray cluster: "
                          f"{address!r} accepts connections but does not speak Ray's protocol (gRPC) "
                          f"(first bytes {header[:9]!r}). {advice}")


def _versions(_: Any = None) -> dict[str, str]:
    import ray

    import trustlab

    return {"trustlab": trustlab.__version__, "ray": ray.__version__, "python": f"{sys.version_info[0]}.{sys.version_info[1]}"}


def compare_versions(driver: dict[str, str], nodes: dict[str, dict[str, str]]) -> None:
    """Raise a ConfigError naming each node whose trustlab / ray / Python version differs from the driver's."""
    bad = [f"node {node}: " + ", ".join(f"{k} {got.get(k, '?')}" for k in driver if got.get(k) != driver[k])
           for node, got in sorted(nodes.items()) if any(got.get(k) != v for k, v in driver.items())]
    if bad:
        mine = ", ".join(f"{k} {v}" for k, v in driver.items())
        raise ConfigError("The Ray cluster's workers run other versions than this driver (" + mine + "): "
                          + "; ".join(bad) + ". Install the same trustlab, ray and Python on every node.")


class RayExecutor(Executor):
    """Ray tasks (extra ``dist``). Without ``address`` it starts a local Ray runtime on 127.0.0.1 with
    ``workers`` CPUs (dashboard, usage statistics and log forwarding off) on first use and stops it in
    :meth:`close`; with ``address`` (``host:port`` of a running cluster, e.g. from ``ray start --head``) it
    checks within ``connect_timeout_s`` that a Ray cluster answers there, connects, checks that every node
    runs this driver's trustlab, ray and Python versions (``check_versions``), and leaves the cluster running
    on :meth:`close`. An already initialised Ray in this process is used as it is. Each task asks for
    ``threads_per_task`` CPUs (1 when None) plus the map's ``resources``; Ray retries a task whose worker
    died once, and trustlab retries a task that raised once. Finished tasks are collected in batches, so
    waiting costs O(tasks) per look, not per finished task.

    On loopback (no address, or a loopback one) every Ray server listens on 127.0.0.1 only; on a network,
    Ray's servers listen on the node's address: keep its ports behind a firewall (docs/scaleout.md).
    """

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None, *, threads_per_task: int | None = 1,
                 connect_timeout_s: float = 10.0, task_timeout_s: float | None = None,
                 check_versions: bool = True) -> None:
        super().__init__(threads_per_task=threads_per_task, task_timeout_s=task_timeout_s)
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ConfigError(f"The 'workers' argument of RayExecutor must be an int >= 1 or None. Got {workers!r} instead.")
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise ConfigError(f"The 'address' argument of RayExecutor must be a non-empty str or None. "
                              f"Got {address!r} instead.")
        if isinstance(connect_timeout_s, bool) or not isinstance(connect_timeout_s, int | float) \
                or not 0 < connect_timeout_s <= 30:
            raise ConfigError(f"The 'connect_timeout_s' argument of RayExecutor must be a number in (0, 30]. "
                              f"Got {connect_timeout_s!r} instead.")
        self.address, self.workers, self.connect_timeout_s = address, workers, float(connect_timeout_s)
        self.check_versions = bool(check_versions)
        self._ray: Any = None
        self._owns_runtime = False
        self._remote: Any = None
        self._pending: dict[Any, tuple[int, Any, int]] = {}
        self._ready: deque[tuple[int, _Outcome]] = deque()

    def start(self) -> None:
        """Start (or connect to) the Ray runtime now rather than on the first :meth:`map`."""
        if self._ray is not None:
            return
        ray = require("ray", extra="dist", purpose="the Ray executor")
        if not ray.is_initialized():
            self._init(ray)
        self._ray = ray
        self._remote = ray.remote(run_task)
        if self.address is not None and self.check_versions:
            self._check_node_versions()

    def _init(self, ray: Any) -> None:
        kw: dict[str, Any] = {"log_to_driver": False, "configure_logging": False, "namespace": "trustlab"}
        parsed = _split(self.address) if self.address is not None else ("127.0.0.1", 0)
        if self.address is not None:
            check_ray_address(self.address, self.connect_timeout_s)
            kw["address"] = self.address
        else:  # "local": always a new runtime, never a cluster someone else started on this machine
            kw.update(address="local", include_dashboard=False,
                      num_cpus=(self.workers or os.cpu_count() or 1) * (self.threads_per_task or 1))
        loopback = parsed is not None and is_loopback(parsed[0])
        if loopback:
            kw["_node_ip_address"] = "127.0.0.1"
        with _env_defaults(RAY_USAGE_STATS_ENABLED="0", RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO="0"), \
                warnings.catch_warnings(), keep_loopback() if loopback else contextlib.nullcontext():
            warnings.simplefilter("ignore", FutureWarning)
            ray.init(**kw)
        self._owns_runtime = True

    def _check_node_versions(self) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self._ray
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        probe = ray.remote(_versions)
        refs = {f"{n['NodeManagerAddress']} ({n['NodeID'][:8]})": probe.options(
            num_cpus=0, max_retries=0, scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote() for n in nodes}
        try:
            found = dict(zip(refs, ray.get(list(refs.values()), timeout=120), strict=True))
        except Exception as exc:  # noqa: BLE001 - a worker that cannot even import trustlab
            raise ConfigError(f"A worker of the Ray cluster at {self.address!r} could not report its versions "
                              f"({type(exc).__name__}: {str(exc)[:300]}); is trustlab installed on every node?") from None
        compare_versions(_versions(), found)

    def _prepare(self, fn: Any) -> Any:
        self.start()
        return self._ray.put(fn)  # once per map, not once per task

    def _options(self) -> Any:
        res = dict(self._resources)
        opts: dict[str, Any] = {"num_cpus": self.threads_per_task or 1, "max_retries": 1}
        gpus = res.pop("num_gpus", None)
        if gpus == "auto":
            gpus = 1 if self._ray.cluster_resources().get("GPU", 0) >= 1 else 0
        if gpus:
            opts["num_gpus"] = gpus
        if "memory" in res:
            opts["memory"] = res.pop("memory")
        if res:
            opts["resources"] = res
        return self._remote.options(**opts)

    def _submit(self, index: int, fn: Any, item: Any, seed: int) -> None:
        ref = self._options().remote(fn, item, seed, self.threads_per_task, self.task_timeout_s)
        self._pending[ref] = (index, item, seed)

    def _next_done(self) -> tuple[int, _Outcome]:
        ray = self._ray
        while not self._ready:
            refs = list(self._pending)
            done, _ = ray.wait(refs, num_returns=len(refs), timeout=_POLL_S)
            for ref in done:
                index, _, _ = self._pending.pop(ref)
                try:
                    out = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a lost worker or a Ray failure: retried once
                    out = _Outcome(False, None, type(exc).__name__, str(exc), "")
                self._ready.append((index, out))
        return self._ready.popleft()

    def _cancel(self) -> None:
        for ref in list(self._pending):
            with contextlib.suppress(Exception):
                self._ray.cancel(ref, force=True)
        self._pending.clear()
        self._ready.clear()

    def close(self) -> None:
        if self._ray is not None and self._owns_runtime:
            self._ray.shutdown()
        self._ray, self._owns_runtime, self._remote = None, False, None

    def __repr__(self) -> str:
        return f"RayExecutor(address={self.address!r}, workers={self.workers}, threads_per_task={self.threads_per_task})"


__all__ = ["RayExecutor", "check_ray_address", "compare_versions", "is_loopback", "keep_loopback"]
