"""Comparing two runs of the same experiment: the one rule for what may differ (wall-clock times).

Two runs on different executors (local, process pool, Ray) must give identical claims and summary values;
only times differ. Three things name what holds a time, and :func:`comparable` leaves all three out, so
every comparison (tests, ``benchmarks/``) uses one rule:

- :data:`TIMING_KEY`: summary keys (at any depth) holding a time (:func:`without_timing` drops them);
- claims built with ``Claim(..., timed=True)``: a speed claim, or one judged on an arm given equal wall time;
- ``summary["timed_paths"]``: dotted summary paths (``*`` matches one key) whose values depend on a time
  without being one, e.g. what a baseline found in a wall-clock budget (featkd's gplearn at equal time).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any

from trustlab.core.arguments import AnyValue, validate_args

__all__ = ["TIMING_KEY", "without_timing", "comparable"]

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


def _drop_paths(value: Any, patterns: list[list[str]]) -> Any:
    """``value`` without the dict entries whose dotted path matches one of ``patterns`` (lists of key globs)."""
    if not patterns or not isinstance(value, dict):
        return value
    out = {}
    for k, v in value.items():
        here = [p for p in patterns if p and fnmatch.fnmatchcase(str(k), p[0])]
        if any(len(p) == 1 for p in here):
            continue
        out[k] = _drop_paths(v, [p[1:] for p in here])
    return out


def _is_result_document(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("claims"), list) and isinstance(value.get("summary"), dict)


@validate_args(result=[AnyValue("a Result or its JSON document (a mapping with 'claims' and 'summary')")],
               _enforced_by_body=True)
def comparable(result: Any) -> dict[str, Any]:
    """What two runs of one experiment must share on any executor: every untimed claim's ``(id, status,
    observed)`` and the summary without timing keys and without the paths in ``summary["timed_paths"]``.

    Examples
    --------
    >>> doc = {"claims": [{"id": "acc", "passed": True, "observed": 0.9},
    ...                   {"id": "speed", "passed": True, "observed": 12.5, "timed": True}],
    ...        "summary": {"acc": 0.9, "fit_s": 1.2, "gp": {"at_time": {"r2": 0.5}, "ridge": {"r2": 0.4}},
    ...                    "timed_paths": ["gp.at_time"]}}
    >>> comparable(doc)
    {'claims': [('acc', 'PASS', 0.9)], 'summary': {'acc': 0.9, 'gp': {'ridge': {'r2': 0.4}}}}
    """
    doc = result.to_dict() if hasattr(result, "to_dict") else result
    if not _is_result_document(doc):
        from trustlab.core.exceptions import InputError

        raise InputError("The 'result' argument of comparable must be a Result or its JSON document (a mapping "
                         f"with a 'claims' list and a 'summary' object). Got {type(result).__name__} {result!r:.60} "
                         "instead.")
    claims = []
    for c in doc["claims"]:
        if c.get("timed"):
            continue
        status = "SKIP" if c.get("passed") is None else "VOID" if c.get("voided_by") else \
            "PASS" if c.get("passed") else "FAIL"
        claims.append((c["id"], status, c.get("observed")))
    summary = dict(doc["summary"])
    paths = [str(p).split(".") for p in summary.pop("timed_paths", []) or []]
    return {"claims": claims, "summary": without_timing(_drop_paths(summary, paths))}
