"""Thread settings: one context manager for BLAS/OpenMP pools and torch's intra-op threads.

Library code never changes thread counts for good: it wraps work in :func:`limit_threads`, which
restores every setting on exit (also when the block raises). Torch's inter-op pool cannot be resized
once used, so it is left alone.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from trustlab.core._declare import takes_any

__all__ = ["limit_threads", "thread_state", "preserve_torch_threads"]


def thread_state() -> dict[str, Any]:
    """Current thread counts: torch intra-op (if torch is imported) and each BLAS/OpenMP pool."""
    out: dict[str, Any] = {}
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch_num_threads"] = int(torch.get_num_threads())
    try:
        from threadpoolctl import threadpool_info

        out["threadpools"] = sorted(
            (str(p.get("internal_api")), str(p.get("filepath", ""))[-60:], int(p.get("num_threads", 0)))
            for p in threadpool_info()
        )
    except Exception:  # noqa: BLE001 - threadpoolctl missing or a pool that cannot be inspected
        out["threadpools"] = []
    return out


@contextlib.contextmanager
def preserve_torch_threads() -> Iterator[None]:
    """Restore torch's intra-op thread count on exit (cheap; used around every public verb)."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    try:
        yield
    finally:
        torch = sys.modules.get("torch")
        if torch is not None and before is not None and torch.get_num_threads() != before:
            torch.set_num_threads(before)


@takes_any(n="None or an int >= 1, checked on entering the block with the template message (the rule "
           "classes are imported only then: this module stays numpy-free)",
           import_torch="a bool: import torch on entry when it is installed")
@contextlib.contextmanager
def limit_threads(n: int | None, *, import_torch: bool = False) -> Iterator[None]:
    """Limit BLAS/OpenMP pools (threadpoolctl) and torch intra-op threads to ``n`` inside the block.

    ``n=None`` changes nothing. Every setting is restored on exit. Torch is limited only if it is imported
    on entry: a block that imports torch itself runs torch at its default thread count (its threads are
    restored all the same). ``import_torch=True`` imports torch first when it is installed, so such a block
    runs at ``n`` threads too; executors use it for every task (a worker's first task would otherwise run
    torch at all cores).

    Examples
    --------
    >>> from trustlab.core.threads import limit_threads
    >>> with limit_threads(1):
    ...     pass
    """
    if not isinstance(import_torch, bool):
        from trustlab.core.exceptions import ConfigError

        raise ConfigError(f"The 'import_torch' argument of limit_threads must be a bool. Got {import_torch!r} "
                          "instead.")
    if n is None:
        yield
        return
    from trustlab.core.constraints import Interval, validate_value

    validate_value("limit_threads", "n", n, [Interval(int, 1, None), None], noun="argument")
    from threadpoolctl import threadpool_limits

    if import_torch and "torch" not in sys.modules:
        import importlib.util

        if importlib.util.find_spec("torch") is not None:
            import torch  # noqa: F401 - imported so that its intra-op threads can be limited below
    torch = sys.modules.get("torch")
    torch_before = torch.get_num_threads() if torch is not None else None
    with threadpool_limits(limits=int(n)):
        if torch is not None:
            torch.set_num_threads(int(n))
        try:
            yield
        finally:
            torch_now = sys.modules.get("torch")
            if torch_now is not None:
                torch_now.set_num_threads(torch_before if torch_before is not None else torch_now.get_num_threads())
