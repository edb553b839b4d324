"""Tiny executor tasks for tests and benchmarks (importable by every worker: process pools, Ray).

``global_draws`` reads the global RNGs (so a test sees each task's seeding); ``fail_first`` fails on its first
attempt per marker file (a retry test); ``always_fail`` never succeeds (a TaskError test).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import PATH, AnyValue, validate_args
from trustlab.core.constraints import Interval

_ITEM = [AnyValue("a test task's payload, returned or named as is")]

__all__ = ["global_draws", "fail_first", "always_fail", "pid_of", "sleep_for", "node_of", "sleep_then_touch"]


@validate_args(item=_ITEM)
def global_draws(item: Any) -> tuple[Any, float, float]:
    """The item with one draw from Python's and one from NumPy's global RNG."""
    return item, random.random(), float(np.random.rand())


@validate_args(marker=[PATH])
def fail_first(marker: str) -> str:
    """Raise the first time it runs for ``marker`` (a file path it creates), succeed afterwards."""
    path = Path(marker)
    if not path.exists():
        path.write_text("attempted")
        raise RuntimeError(f"first attempt for {path.name}")
    return path.name


@validate_args(item=_ITEM)
def always_fail(item: Any) -> None:
    """Raise ValueError naming the item."""
    raise ValueError(f"bad item {item!r}")


@validate_args(item=_ITEM)
def pid_of(item: Any) -> tuple[Any, int]:
    """The item and the worker's process id."""
    return item, os.getpid()


@validate_args(seconds=[Interval(float, 0, None)])
def sleep_for(seconds: float) -> float:
    """Sleep ``seconds`` and return them."""
    import time

    time.sleep(seconds)
    return seconds


@validate_args(seconds=[Interval(float, 0, None)])
def node_of(seconds: float) -> tuple[str, int]:
    """Sleep ``seconds``, then the Ray node id the task ran on and its process id."""
    import time

    import ray

    time.sleep(seconds)
    return ray.get_runtime_context().get_node_id(), os.getpid()


@validate_args(item=_ITEM)
def sleep_then_touch(item: tuple[float, str]) -> str:
    """``item = (seconds, path)``: sleep, then create the file (a task that was cancelled leaves none)."""
    import time

    seconds, path = item
    time.sleep(float(seconds))
    Path(path).write_text("done")
    return path
