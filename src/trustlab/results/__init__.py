"""Results: the ``Result`` record (JSON, atomic writes), plots drawn from results, and the report builder."""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports

_LAZY = {
    "Result": "result",
    "ClaimOutcome": "result",
    "bar_plot": "plots",
    "line_plot": "plots",
    "claims_plot": "plots",
    "new_figure": "plots",
    "build_report": "report",
    "without_timing": "compare",
    "comparable": "compare",
}

#: old import paths of file helpers that moved to trustlab.core.files (kept working, not re-exported)
_MOVED = dict.fromkeys(("atomic_write", "atomic_write_text", "to_jsonable"), "trustlab.core.files")

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, {**_LAZY, **_MOVED})
