"""Resource meter: median step time after warm-up, and peak resident memory of a run in a fresh process.

``tracemalloc`` does not see torch's CPU allocations, so memory is measured as the peak resident set
size of a *fresh* process (spawned, not forked) that runs only the function under test: the number then
belongs to that run and not to whatever the caller did before.

On Linux the peak is read from ``VmHWM`` in ``/proc/self/status`` (the high-water mark of the process's
own address space). ``getrusage(...).ru_maxrss`` is not used there because the kernel carries the
parent's resident size over ``fork`` + ``exec`` into it: a child spawned by a 700 MB parent reports
``ru_maxrss`` >= 700 MB even if it never uses more than 30 MB (measured). Elsewhere ``ru_maxrss`` is the
fallback (``PeakRSS.source`` says which was read).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import CallableRule, Interval
from trustlab.core.exceptions import InputError

__all__ = [ "measure_peak_rss", "median_step_time", "peak_rss_mb", "time_steps"]


@dataclass(frozen=True)
class StepTiming:
    """Seconds per call of a step function: the median after warm-up and every measured time."""

    median_s: float
    times: tuple[float, ...]
    warmup: int


@dataclass(frozen=True)
class PeakRSS:
    """Peak resident memory (MB) of a fresh process that ran one function.

    ``peak_mb`` is the process's high-water mark (see the module docstring): interpreter, imports and the
    call.
    ``rss_before_mb`` is the resident size just before the call (after the imports that unpickling the
    function needed). High-water marks do not subtract, so compare two runs instead, e.g. a baseline
    function that only loads the model against one that also trains. ``value`` is the function's result.
    """

    peak_mb: float
    rss_before_mb: float
    wall_s: float
    value: Any = None
    source: str = "VmHWM"


@validate_args(step_times=[ArrayLike(ndim=1, low=0)], warmup=[Interval(int, 0, None)])
def median_step_time(step_times: Sequence[float], warmup: int = 2) -> float:
    """Median of ``step_times`` after dropping the first ``warmup`` entries.

    Examples
    --------
    >>> median_step_time([5.0, 1.0, 2.0, 3.0], warmup=1)
    2.0
    """
    times = list(step_times)
    if len(times) <= warmup:
        raise InputError(f"median_step_time needs more than warmup={warmup} step times. Got {len(times)}.")
    return float(statistics.median(times[warmup:]))


@validate_args(step=[CallableRule()], n_steps=[Interval(int, 1, None)], warmup=[Interval(int, 0, None)])
def time_steps(step: Callable[[], Any], n_steps: int = 10, warmup: int = 2) -> StepTiming:
    """Call ``step()`` ``warmup + n_steps`` times; the median wall time of the last ``n_steps``.

    Examples
    --------
    >>> time_steps(lambda: None, n_steps=3, warmup=1).median_s >= 0
    True
    """
    times = []
    for _ in range(warmup + n_steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return StepTiming(median_step_time(times, warmup=warmup), tuple(times[warmup:]), warmup)


def _proc_status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


@validate_args()
def peak_rss_mb() -> tuple[float, str]:
    """This process's peak resident size in MB and where it was read (``"VmHWM"`` or ``"ru_maxrss"``)."""
    hwm = _proc_status_mb("VmHWM")
    if hwm is not None:
        return hwm, "VmHWM"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (peak / 1024**2 if sys.platform == "darwin" else peak / 1024), "ru_maxrss"  # bytes on macOS, KiB else


def _child(fn: Callable[..., Any], args: tuple, kwargs: dict) -> tuple[Any, float, float, str, float]:
    start = _proc_status_mb("VmRSS")
    t0 = time.perf_counter()
    value = fn(*args, **kwargs)
    wall = time.perf_counter() - t0
    peak, source = peak_rss_mb()
    return value, peak if start is None else start, peak, source, wall


@validate_args(fn=[CallableRule()], timeout=[Interval(float, 0, None, closed="neither"), None])
def measure_peak_rss(fn: Callable[..., Any], *args: Any, timeout: float | None = None, **kwargs: Any) -> PeakRSS:
    """Run ``fn(*args, **kwargs)`` in a fresh (spawned) process and report its peak RSS.

    ``fn`` and its arguments must be picklable (a module-level function); its return value comes back
    in :attr:`PeakRSS.value`. The child inherits the environment (thread settings included).

    Examples
    --------
    >>> r = measure_peak_rss(sum, [1, 2, 3])  # doctest: +SKIP
    >>> r.value, r.peak_mb > 0  # doctest: +SKIP
    (6, True)
    """
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        value, start, peak, source, wall = pool.submit(_child, fn, tuple(args), dict(kwargs)).result(timeout=timeout)
    return PeakRSS(peak_mb=peak, rss_before_mb=start, wall_s=wall, value=value, source=source)
