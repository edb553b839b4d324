"""Executors: one ``map(fn, items)`` for the independent units experiments and methods loop over.

Seeds of an experiment, the experiments of ``trustlab reproduce``, RMIA reference models, directed X-hacking
searches: each is a list of items processed by a function that does not depend on the other items. An
:class:`Executor` runs them

* ``"local"`` (:class:`LocalExecutor`, the default): one after another in this process;
* ``"process"`` (:class:`ProcessExecutor`): in a pool of fresh local Python processes (``spawn``);
* ``"ray"`` (:class:`RayExecutor`, extra ``dist``): as Ray tasks, on a Ray runtime this executor starts on
  127.0.0.1 (dashboard and usage statistics off) or on the cluster at ``address``.

Results are the same whichever executor runs them: every task runs with its global Python/NumPy/torch RNGs
seeded from ``derive_seed(seed, index)`` (restored afterwards) and its BLAS/torch threads limited to
``threads_per_task`` (default 1), so a task sees the same state in this process as in a worker. Results come
back in the order of ``items``. A task that raises is retried once; if it fails again :class:`TaskError`
names its index and item and carries the original exception's type, message and traceback summary (the
remaining tasks are cancelled; nothing is dropped silently). Ctrl-C cancels the outstanding tasks and stops
the workers this executor started.

Functions and items travel to workers by (cloud)pickle: pass module-level functions (``functools.partial``
of them) or closures; workers must be able to import trustlab (same environment on every node).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import traceback
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from trustlab.core.arguments import AnyValue, validate_args
from trustlab.core.constraints import (
    Boolean,
    CallableRule,
    InstanceOf,
    Interval,
    Options,
    Satisfies,
    short_repr,
)
from trustlab.core.exceptions import ConfigError, TrustlabError
from trustlab.core.optional import require
from trustlab.core.seeding import derive_seed, isolated_global_rng
from trustlab.core.threads import limit_threads

__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "ProcessExecutor", "RayExecutor", "TaskError",
           "make_executor", "map_items", "run_task"]

EXECUTORS = ("local", "process", "ray")
_ATTEMPTS = 2  # a failed task is retried once


class TaskError(TrustlabError, RuntimeError):
    """A task failed on both attempts. ``index``, ``item``, ``error_type``, ``message`` and ``traceback``
    (the original one, as text) describe the failure."""

    def __init__(self, what: str, index: int, item: Any, error_type: str, message: str, tb: str, *,
                 attempts: int = _ATTEMPTS) -> None:
        self.index, self.item, self.error_type, self.message, self.traceback = index, item, error_type, message, tb
        summary = _summary(tb)
        tries = "once" if attempts == 1 else f"on {attempts} attempts"
        super().__init__(f"{what} task {index} (item {short_repr(item, 80)}) failed {tries}: "
                         f"{error_type}: {message}" + (f"\n{summary}" if summary else ""))


def _summary(tb: str, frames: int = 3) -> str:
    """The last ``frames`` 'File ..., line ...' entries of a traceback (where it raised)."""
    lines = [ln for ln in tb.splitlines() if ln.strip().startswith("File ")]
    return "\n".join(ln.strip() for ln in lines[-frames:])


@dataclass(frozen=True)
class _Outcome:
    ok: bool
    value: Any = None
    error_type: str = ""
    message: str = ""
    traceback: str = ""


#: a task seed: derived per task by derive_seed (not a random_state: it seeds the task's global RNGs)
_TASK_SEED = [Interval(int, 0, 2**32 - 1)]
_ITEMS = [Satisfies(lambda v: iter(v) is not None, "an iterable of task items", invalid=[None, 3], valid=[])]


@validate_args(fn=[CallableRule()], item=[AnyValue("the task's payload, handed to fn as is")], seed=_TASK_SEED,
               threads=[Interval(int, 1, None), None])
def run_task(fn: Callable[[Any], Any], item: Any, seed: int, threads: int | None) -> _Outcome:
    """Run ``fn(item)`` as every executor does: global RNGs seeded with ``seed`` and restored, threads
    limited to ``threads``; an exception becomes a failed outcome (type, message, traceback text)."""
    try:
        with isolated_global_rng(seed), limit_threads(threads):
            return _Outcome(True, fn(item))
    except Exception as exc:  # noqa: BLE001 - reported to the driver, which retries or raises TaskError
        return _Outcome(False, None, type(exc).__name__, str(exc) or repr(exc), "".join(traceback.format_exception(exc)))


def _run_pickled(payload: bytes, item: Any, seed: int, threads: int | None) -> _Outcome:
    return run_task(pickle.loads(payload), item, seed, threads)


def _dumps(fn: Any) -> bytes:
    try:
        import cloudpickle
    except ImportError:
        return pickle.dumps(fn)
    return cloudpickle.dumps(fn)


class Executor:
    """Runs ``fn`` over ``items`` (see the module docstring). Use as a context manager, or call :meth:`close`."""

    name = "executor"

    def __init__(self, *, threads_per_task: int | None = 1) -> None:
        if threads_per_task is not None and (not isinstance(threads_per_task, int) or threads_per_task < 1):
            raise ConfigError(f"The 'threads_per_task' argument of {type(self).__name__} must be an int >= 1 or "
                              f"None. Got {threads_per_task!r} instead.")
        self.threads_per_task = threads_per_task

    # -- what a backend provides -------------------------------------------------------------------------
    def _submit(self, index: int, fn: Any, item: Any, seed: int) -> None:
        raise NotImplementedError

    def _next_done(self) -> tuple[int, _Outcome]:
        raise NotImplementedError

    def _prepare(self, fn: Any) -> Any:
        return fn

    def _cancel(self) -> None:
        """Drop outstanding tasks (on an error or Ctrl-C)."""

    def close(self) -> None:
        """Release workers and any runtime this executor started (idempotent)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(threads_per_task={self.threads_per_task})"

    # -- the one driver loop -------------------------------------------------------------------------------
    @validate_args(fn=[CallableRule()], items=_ITEMS, seed=_TASK_SEED, desc=[InstanceOf(str)],
                   show_progress=[Boolean()], on_result=[CallableRule(), None])
    def map(self, fn: Callable[[Any], Any], items: Iterable[Any], *, seed: int = 0, desc: str = "",
            show_progress: bool = False, on_result: Callable[[int, Any], None] | None = None) -> list[Any]:
        """``[fn(item) for item in items]``, each call run as a task (order kept).

        ``seed`` derives each task's global RNG seed (``derive_seed(seed, "task", index)``); ``desc`` names the
        tasks in the progress bar and in errors; ``on_result(index, value)`` is called in this process as
        each task finishes (in completion order).
        """
        if not callable(fn):
            raise ConfigError(f"The 'fn' argument of {type(self).__name__}.map must be a callable. Got {fn!r} instead.")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2**32 - 1:
            raise ConfigError(f"The 'seed' argument of {type(self).__name__}.map must be an int in [0, 2**32 - 1]. "
                              f"Got {seed!r} instead.")
        items = list(items)
        if not items:
            return []
        what = desc or getattr(fn, "__name__", type(fn).__name__)
        seeds = [derive_seed(seed, "task", i) for i in range(len(items))]
        results: list[Any] = [None] * len(items)
        attempts = [1] * len(items)
        remaining = len(items)
        prepared = self._prepare(fn)
        bar = _progress(len(items), desc, show_progress)
        try:
            for i, item in enumerate(items):
                self._submit(i, prepared, item, seeds[i])
            while remaining:
                i, out = self._next_done()
                if not out.ok:
                    if attempts[i] < _ATTEMPTS:
                        attempts[i] += 1
                        self._submit(i, prepared, items[i], seeds[i])
                        continue
                    raise TaskError(what, i, items[i], out.error_type, out.message, out.traceback)
                results[i] = out.value
                remaining -= 1
                bar.update(1)
                if on_result is not None:
                    on_result(i, out.value)
        except BaseException:
            self._cancel()
            raise
        finally:
            bar.close()
        return results


def _progress(total: int, desc: str, show: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc or "tasks", leave=False, disable=not show)


class LocalExecutor(Executor):
    """Runs every task in this process, one after another, in the order given (the default executor)."""

    name = "local"

    def __init__(self, *, threads_per_task: int | None = 1) -> None:
        super().__init__(threads_per_task=threads_per_task)
        self._queue: deque[tuple[int, Any, Any, int]] = deque()

    def _submit(self, index: int, fn: Any, item: Any, seed: int) -> None:
        self._queue.append((index, fn, item, seed))

    def _next_done(self) -> tuple[int, _Outcome]:
        index, fn, item, seed = self._queue.popleft()
        return index, run_task(fn, item, seed, None)  # threads are limited once around the whole map

    @validate_args(fn=[CallableRule()], items=_ITEMS)
    def map(self, fn: Callable[[Any], Any], items: Iterable[Any], **kwargs: Any) -> list[Any]:
        with limit_threads(self.threads_per_task):
            return super().map(fn, items, **kwargs)

    def _cancel(self) -> None:
        self._queue.clear()


class ProcessExecutor(Executor):
    """A pool of ``workers`` fresh local Python processes (``spawn``; kept until :meth:`close`).

    A worker process that dies (killed, out of memory) ends the map with :class:`TaskError` naming an item
    that was outstanding; only exceptions are retried here (Ray also retries a lost worker).
    """

    name = "process"

    def __init__(self, workers: int | None = None, *, threads_per_task: int | None = 1) -> None:
        super().__init__(threads_per_task=threads_per_task)
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ConfigError(f"The 'workers' argument of ProcessExecutor must be an int >= 1 or None. "
                              f"Got {workers!r} instead.")
        self.workers = workers or os.cpu_count() or 1
        self._pool: Any = None
        self._futures: dict[Any, tuple[int, Any]] = {}
        self._ready: deque[tuple[int, _Outcome]] = deque()

    def _prepare(self, fn: Any) -> Any:
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        return _dumps(fn)

    def _submit(self, index: int, fn: Any, item: Any, seed: int) -> None:
        self._futures[self._pool.submit(_run_pickled, fn, item, seed, self.threads_per_task)] = (index, item)

    def _next_done(self) -> tuple[int, _Outcome]:
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        while not self._ready:
            done, _ = wait(list(self._futures), return_when=FIRST_COMPLETED)
            for fut in done:
                index, item = self._futures.pop(fut)
                try:
                    self._ready.append((index, fut.result()))
                except BrokenProcessPool as exc:
                    raise TaskError("process", index, item, type(exc).__name__, "a worker process died (killed, "
                                    "out of memory, or a script without an 'if __name__ == \"__main__\":' guard)",
                                    "", attempts=1) from None
        return self._ready.popleft()

    def _cancel(self) -> None:
        for fut in self._futures:
            fut.cancel()
        self._futures.clear()
        self._ready.clear()
        self._shutdown(force=True)  # running tasks cannot be cancelled: stop the workers

    def close(self) -> None:
        """Stop the workers: idle ones exit normally (their finalizers run); running tasks are terminated."""
        self._shutdown(force=bool(self._futures))

    def _shutdown(self, *, force: bool) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if not force:  # every worker is idle: let it exit through its own shutdown, releasing what it holds
            pool.shutdown(wait=True)
            return
        procs = list(getattr(pool, "_processes", {}).values())  # to stop running tasks on Ctrl-C / errors
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=5)

    def __repr__(self) -> str:
        return f"ProcessExecutor(workers={self.workers}, threads_per_task={self.threads_per_task})"


@contextlib.contextmanager
def _env_defaults(**values: str) -> Iterator[None]:
    """Set environment defaults for the block only (Ray's processes started inside inherit them)."""
    before = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        os.environ.setdefault(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _check_reachable(address: str, timeout_s: float) -> None:
    """Refuse an ``host:port`` address nothing listens on, within ``timeout_s`` (Ray would retry for long)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in address:
        return  # "auto", "ray://...": left to Ray
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            return
    except OSError as exc:
        raise ConfigError(
            f"The 'address' argument of RayExecutor names no reachable Ray cluster: nothing answered at "
            f"{address!r} within {timeout_s:g} s ({exc}). Start one with 'ray start --head "
            "--node-ip-address=127.0.0.1 --port=6379', or leave the address out to start a local runtime."
        ) from None


class RayExecutor(Executor):
    """Ray tasks (extra ``dist``). Without ``address`` it starts a local Ray runtime on 127.0.0.1 with
    ``workers`` CPUs (dashboard, usage statistics and log forwarding off) on first use and stops it in
    :meth:`close`; with ``address`` (``host:port`` of a running cluster, e.g. from ``ray start --head``) it
    connects there and leaves the cluster running. An already initialised Ray in this process is used as it
    is. Each task asks for ``threads_per_task`` CPUs (1 when None); Ray retries a task whose worker died
    once, and trustlab retries a task that raised once.

    Ray's own servers listen on every interface (Ray has no option to bind them to loopback); the runtime
    advertises 127.0.0.1 only, but on a shared network keep its ports behind a firewall.
    """

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None, *, threads_per_task: int | None = 1,
                 connect_timeout_s: float = 10.0) -> None:
        super().__init__(threads_per_task=threads_per_task)
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise ConfigError(f"The 'workers' argument of RayExecutor must be an int >= 1 or None. Got {workers!r} instead.")
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise ConfigError(f"The 'address' argument of RayExecutor must be a non-empty str or None. "
                              f"Got {address!r} instead.")
        self.address, self.workers, self.connect_timeout_s = address, workers, float(connect_timeout_s)
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
            kw: dict[str, Any] = {"log_to_driver": False, "configure_logging": False, "namespace": "trustlab"}
            if self.address is not None:
                _check_reachable(self.address, self.connect_timeout_s)
                kw["address"] = self.address
            else:  # "local": always a new runtime, never a cluster someone else started on this machine
                kw.update(address="local", include_dashboard=False, _node_ip_address="127.0.0.1",
                          num_cpus=(self.workers or os.cpu_count() or 1) * (self.threads_per_task or 1))
            with _env_defaults(RAY_USAGE_STATS_ENABLED="0", RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO="0"), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                ray.init(**kw)
            self._owns_runtime = True
        self._ray = ray
        self._remote = ray.remote(run_task).options(num_cpus=self.threads_per_task or 1, max_retries=1)

    def _prepare(self, fn: Any) -> Any:
        self.start()
        return self._ray.put(fn)  # once per map, not once per task

    def _submit(self, index: int, fn: Any, item: Any, seed: int) -> None:
        ref = self._remote.remote(fn, item, seed, self.threads_per_task)
        self._pending[ref] = (index, item, seed)

    def _next_done(self) -> tuple[int, _Outcome]:
        ray = self._ray
        while not self._ready:
            done, _ = ray.wait(list(self._pending), num_returns=1)
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


@validate_args(kind=[Options(EXECUTORS), InstanceOf(Executor)], address=[InstanceOf(str), None],
               workers=[Interval(int, 1, None), None], threads_per_task=[Interval(int, 1, None), None])
def make_executor(kind: str | Executor = "local", *, address: str | None = None, workers: int | None = None,
                  threads_per_task: int | None = 1) -> Executor:
    """An executor by name: ``"local"`` (default), ``"process"`` or ``"ray"``; an Executor is returned as is.

    ``address`` (ray only) connects to a running cluster; ``workers`` is the pool size (process) or the
    CPUs of the local Ray runtime (ray without address); ``threads_per_task`` limits each task's threads.

    Examples
    --------
    >>> from trustlab.core.executor import make_executor
    >>> with make_executor("local") as ex:
    ...     ex.map(abs, [-1, 2, -3])
    [1, 2, 3]
    """
    if isinstance(kind, Executor):
        return kind
    if address is not None and kind != "ray":
        raise ConfigError(f"The 'address' argument of make_executor only applies to kind='ray'. Got kind={kind!r}.")
    if kind == "local":
        return LocalExecutor(threads_per_task=threads_per_task)
    if kind == "process":
        return ProcessExecutor(workers, threads_per_task=threads_per_task)
    return RayExecutor(address, workers, threads_per_task=threads_per_task)


@validate_args(lambda: {"executor": None, "fn": abs, "items": [1]}, executor=[InstanceOf(Executor), None],
               fn=[CallableRule()], items=[InstanceOf(Sequence)], seed=[Interval(int, 0, 2**32 - 1)],
               desc=[InstanceOf(str)], show_progress=[Boolean()])
def map_items(executor: Executor | None, fn: Callable[[Any], Any], items: Sequence[Any], *, seed: int = 0,
              desc: str = "", show_progress: bool = False) -> list[Any]:
    """``executor.map(...)``, or a :class:`LocalExecutor`'s when ``executor`` is None (what methods call)."""
    if executor is None:
        return LocalExecutor().map(fn, items, seed=seed, desc=desc, show_progress=show_progress)
    return executor.map(fn, items, seed=seed, desc=desc, show_progress=show_progress)

