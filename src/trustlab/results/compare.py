"""Comparing two runs of the same experiment: the one list of keys that hold wall-clock times.

Two runs on different executors (local, process pool, Ray) must give identical claims and summary values;
only times differ. :data:`TIMING_KEY` names those keys (at any depth of a summary), and
:func:`without_timing` drops them, so every comparison (tests, ``benchmarks/scale_out.py``) uses one rule.
"""

from __future__ import annotations

import re
from typing import Any

from trustlab.core.arguments import AnyValue, validate_args

__all__ = ["TIMING_KEY", "without_timing"]

#: keys holding wall-clock measurements: ``time``, ``*_time*``, ``*time_s``, ``*_s``, ``*_s_*``,
#: ``*seconds*``, ``speedup*``, ``*warmup*``, ``wall*``
TIMING_KEY = re.compile(r"(^time$|_time|time_s|time_ratio|_s$|_s_|seconds|speedup|warmup|^wall)")


@validate_args(value=[AnyValue("a summary: any JSON-like value (dicts are walked, other values kept)")])
def without_timing(value: Any) -> Any:
    """``value`` with every dict key matching :data:`TIMING_KEY` removed, at any depth (lists walked too).

    Examples
    --------
    >>> without_timing({"acc": 0.9, "wall_s": 3.2, "per_seed": [{"seconds": 1.0, "auc": 0.7}]})
    {'acc': 0.9, 'per_seed': [{'auc': 0.7}]}
    """
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if not (isinstance(k, str) and TIMING_KEY.search(k))}
    if isinstance(value, list | tuple):
        return type(value)(without_timing(v) for v in value)
    return value
