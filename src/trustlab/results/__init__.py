"""Results: the ``Result`` record (JSON, atomic writes), plots drawn from results, and the report builder."""

from trustlab.results.plots import bar_plot, claims_plot, line_plot, new_figure
from trustlab.results.report import build_report, latest_results
from trustlab.results.result import SCHEMA_VERSION, ClaimOutcome, Result, atomic_write_text, to_jsonable

__all__ = [
    "Result", "ClaimOutcome", "SCHEMA_VERSION", "atomic_write_text", "to_jsonable", "bar_plot", "line_plot",
    "claims_plot", "new_figure", "build_report", "latest_results",
]
