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
remaining tasks are cancelled; nothing is dropped silently). ``task_timeout_s`` bounds each task's run time
(measured where it runs, from its start; a timed-out task is not retried). Ctrl-C cancels the outstanding
tasks and stops the workers this executor started. ``map(..., resources=...)`` says what each task needs
(``num_gpus``, ``memory`` in bytes, custom resources): Ray schedules by it; local and process pools, which
run on this machine, only check it.

Functions and items travel to workers by (cloud)pickle: pass module-level functions (``functools.partial``
of them) or closures; workers must be able to import trustlab (same environment on every node).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import threading
import time
import traceback
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
from trustlab.core.seeding import derive_seed, isolated_global_rng
from trustlab.core.threads import limit_threads

__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "ProcessExecutor", "RayExecutor", "TaskError",  # noqa: F822 (lazy, __getattr__)
           "TaskTimeout", "make_executor", "map_items", "run_task"]

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


class TaskTimeout(TrustlabError, TimeoutError):
    """A task ran past the executor's ``task_timeout_s`` (raised inside the task; never retried)."""


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


_TIMEOUT = [Interval(float, 0, None, closed="neither"), None]


@contextlib.contextmanager
def _alarm(timeout_s: float | None) -> Iterator[None]:
    """Raise :class:`TaskTimeout` in the block after ``timeout_s`` seconds (SIGALRM, main thread only; no
    limit elsewhere). A timer the caller armed (e.g. pytest-timeout) that would fire first is left alone;
    one that fires later is re-armed with its remaining time on exit, and the caller's handler restored."""
    usable = (timeout_s is not None and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    theirs = signal.getitimer(signal.ITIMER_REAL)[0] if usable else 0.0
    if not usable or 0 < theirs <= float(timeout_s):
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise TaskTimeout(f"the task ran past its {timeout_s:g} s timeout (task_timeout_s)")

    t0 = time.monotonic()
    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, float(timeout_s))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if theirs > 0:
            signal.setitimer(signal.ITIMER_REAL, max(theirs - (time.monotonic() - t0), 1e-3))


@validate_args(fn=[CallableRule()], item=[AnyValue("the task's payload, handed to fn as is")], seed=_TASK_SEED,
               threads=[Interval(int, 1, None), None], timeout_s=_TIMEOUT)
def run_task(fn: Callable[[Any], Any], item: Any, seed: int, threads: int | None,
             timeout_s: float | None = None) -> _Outcome:
    """Run ``fn(item)`` as every executor does: global RNGs seeded with ``seed`` and restored, threads
    limited to ``threads``, at most ``timeout_s`` seconds (:class:`TaskTimeout`); an exception becomes a
    failed outcome (type, message, traceback text)."""
    try:
        with isolated_global_rng(seed), limit_threads(threads, import_torch=True), _alarm(timeout_s):
            return _Outcome(True, fn(item))
    except Exception as exc:  # noqa: BLE001 - reported to the driver, which retries or raises TaskError
        return _Outcome(False, None, type(exc).__name__, str(exc) or repr(exc), "".join(traceback.format_exception(exc)))


def _run_pickled(payload: bytes, item: Any, seed: int, threads: int | None, timeout_s: float | None) -> _Outcome:
    return run_task(pickle.loads(payload), item, seed, threads, timeout_s)


def _dumps(fn: Any) -> bytes:
    try:
        import cloudpickle
    except ImportError:
        return pickle.dumps(fn)
    return cloudpickle.dumps(fn)


def _is_amount(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and value >= 0


def _resources_ok(value: Any) -> bool:
    if value is None:
        return True
    if not isinstance(value, dict) or not all(isinstance(k, str) and k for k in value):
        return False
    return all(v == "auto" if k == "num_gpus" and isinstance(v, str) else _is_amount(v) for k, v in value.items())


_RESOURCES = [Satisfies(_resources_ok, "None or a dict of resource name -> amount >= 0 (num_gpus may be 'auto'; "
                        "memory in bytes)", invalid=[{"num_gpus": -1}, {"memory": "8G"}, [1]],
                        valid=[None, {"num_gpus": "auto", "memory": 2**30}])]


@validate_args(resources=_RESOURCES)
def check_resources(resources: dict[str, Any] | None) -> dict[str, Any]:
    """What a task asks for, checked: ``num_gpus`` (a number, or ``"auto"``: one GPU when the cluster has
    any, else none), ``memory`` (bytes) and custom resources (``{"name": amount}``, as given to
    ``ray start --resources``). CPUs come from the executor's ``threads_per_task``; ``num_cpus`` here is refused."""
    out = dict(resources or {})
    if "num_cpus" in out or "CPU" in out:
        raise ConfigError("The 'resources' argument of Executor.map must not set num_cpus/CPU (each task asks "
                          f"for threads_per_task CPUs). Got {resources!r} instead.")
    return out


class Executor:
    """Runs ``fn`` over ``items`` (see the module docstring). Use as a context manager, or call :meth:`close`."""

    name = "executor"

    def __init__(self, *, threads_per_task: int | None = 1, task_timeout_s: float | None = None) -> None:
        if threads_per_task is not None and (not isinstance(threads_per_task, int) or threads_per_task < 1):
            raise ConfigError(f"The 'threads_per_task' argument of {type(self).__name__} must be an int >= 1 or "
                              f"None. Got {threads_per_task!r} instead.")
        if task_timeout_s is not None and (isinstance(task_timeout_s, bool) or not isinstance(task_timeout_s, int | float)
                                           or not task_timeout_s > 0):
            raise ConfigError(f"The 'task_timeout_s' argument of {type(self).__name__} must be a number > 0 or None. "
                              f"Got {task_timeout_s!r} instead.")
        self.threads_per_task = threads_per_task
        self.task_timeout_s = None if task_timeout_s is None else float(task_timeout_s)
        self._resources: dict[str, Any] = {}
        #: how many tasks :meth:`map` was given so far (a run can tell whether it distributed anything)
        self.tasks_mapped = 0

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
                   show_progress=[Boolean()], on_result=[CallableRule(), None], resources=_RESOURCES)
    def map(self, fn: Callable[[Any], Any], items: Iterable[Any], *, seed: int = 0, desc: str = "",
            show_progress: bool = False, on_result: Callable[[int, Any], None] | None = None,
            resources: dict[str, Any] | None = None) -> list[Any]:
        """``[fn(item) for item in items]``, each call run as a task (order kept).

        ``seed`` derives each task's global RNG seed (``derive_seed(seed, "task", index)``); ``desc`` names the
        tasks in the progress bar and in errors; ``on_result(index, value)`` is called in this process as
        each task finishes (in completion order); ``resources`` is what each task needs (see
        :func:`check_resources`).
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
        self._resources = check_resources(resources)
        self.tasks_mapped += len(items)
        prepared = self._prepare(fn)
        bar = _progress(len(items), desc, show_progress)
        try:
            for i, item in enumerate(items):
                self._submit(i, prepared, item, seeds[i])
            while remaining:
                i, out = self._next_done()
                if not out.ok:
                    if out.error_type == TaskTimeout.__name__:
                        raise TaskError(what, i, items[i], out.error_type, out.message, out.traceback, attempts=1)
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

    def __init__(self, *, threads_per_task: int | None = 1, task_timeout_s: float | None = None) -> None:
        super().__init__(threads_per_task=threads_per_task, task_timeout_s=task_timeout_s)
        self._queue: deque[tuple[int, Any, Any, int]] = deque()

    def _submit(self, index: int, fn: Any, item: Any, seed: int) -> None:
        self._queue.append((index, fn, item, seed))

    def _next_done(self) -> tuple[int, _Outcome]:
        index, fn, item, seed = self._queue.popleft()
        return index, run_task(fn, item, seed, None, self.task_timeout_s)  # threads limited once around the map

    @validate_args(fn=[CallableRule()], items=_ITEMS)
    def map(self, fn: Callable[[Any], Any], items: Iterable[Any], **kwargs: Any) -> list[Any]:
        with limit_threads(self.threads_per_task, import_torch=True):
            return super().map(fn, items, **kwargs)

    def _cancel(self) -> None:
        self._queue.clear()


class ProcessExecutor(Executor):
    """A pool of ``workers`` fresh local Python processes (``spawn``; kept until :meth:`close`).

    A worker process that dies (killed, out of memory) ends the map with :class:`TaskError` naming an item
    that was outstanding; only exceptions are retried here (Ray also retries a lost worker).
    """

    name = "process"

    def __init__(self, workers: int | None = None, *, threads_per_task: int | None = 1,
                 task_timeout_s: float | None = None) -> None:
        super().__init__(threads_per_task=threads_per_task, task_timeout_s=task_timeout_s)
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
        self._futures[self._pool.submit(_run_pickled, fn, item, seed, self.threads_per_task,
                                        self.task_timeout_s)] = (index, item)

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


def __getattr__(name: str) -> Any:
    """``RayExecutor`` lives in :mod:`trustlab.core._ray` (it builds on the classes here)."""
    if name == "RayExecutor":
        from trustlab.core._ray import RayExecutor

        return RayExecutor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@validate_args(kind=[Options(EXECUTORS), InstanceOf(Executor)], address=[InstanceOf(str), None],
               workers=[Interval(int, 1, None), None], threads_per_task=[Interval(int, 1, None), None],
               task_timeout_s=_TIMEOUT)
def make_executor(kind: str | Executor = "local", *, address: str | None = None, workers: int | None = None,
                  threads_per_task: int | None = 1, task_timeout_s: float | None = None) -> Executor:
    """An executor by name: ``"local"`` (default), ``"process"`` or ``"ray"``; an Executor is returned as is.

    ``address`` (ray only) connects to a running cluster; ``workers`` is the pool size (process) or the
    CPUs of the local Ray runtime (ray without address); ``threads_per_task`` limits each task's threads;
    ``task_timeout_s`` bounds each task's run time (:class:`TaskTimeout`, named in the :class:`TaskError`).

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
    kw = {"threads_per_task": threads_per_task, "task_timeout_s": task_timeout_s}
    if kind == "local":
        return LocalExecutor(**kw)
    if kind == "process":
        return ProcessExecutor(workers, **kw)
    from trustlab.core._ray import RayExecutor

    return RayExecutor(address, workers, **kw)


@validate_args(lambda: {"executor": None, "fn": abs, "items": [1]}, executor=[InstanceOf(Executor), None],
               fn=[CallableRule()], items=[InstanceOf(Sequence)], seed=[Interval(int, 0, 2**32 - 1)],
               desc=[InstanceOf(str)], show_progress=[Boolean()], resources=_RESOURCES)
def map_items(executor: Executor | None, fn: Callable[[Any], Any], items: Sequence[Any], *, seed: int = 0,
              desc: str = "", show_progress: bool = False, resources: dict[str, Any] | None = None) -> list[Any]:
    """``executor.map(...)``, or a :class:`LocalExecutor`'s when ``executor`` is None (what methods call)."""
    executor = LocalExecutor() if executor is None else executor
    return executor.map(fn, items, seed=seed, desc=desc, show_progress=show_progress, resources=resources)

