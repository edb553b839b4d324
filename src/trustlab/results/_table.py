"""The claims table as rows of short, formatted text: one formatter for the terminal and the report.

Observed, baseline and threshold values are numbers with 4 significant digits and their unit; a dict or
list is summarised (its full text goes to the detail column, which only the report shows). Besides one
row per claim, a run that raised gets an ``ERROR`` row and a run past its budget target a ``WARN`` row.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from typing import Any

from trustlab.results.result import Result

#: statuses in the order a summary reports them
STATUSES = ("PASS", "FAIL", "VOID", "SKIP", "WARN", "ERROR")
_LONG_FLOAT = re.compile(r"(?<![\w.])[-+]?\d+\.\d{5,}(?:[eE][-+]?\d+)?|(?<![\w.])[-+]?\d\.\d+[eE][-+]?\d+")
_NO_SPACE_UNITS = ("%", "x", "\u00d7")


def fmt_number(x: Any) -> str:
    """A number as short text: ints as they are, floats with 4 significant digits, NaN/inf spelled out."""
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, numbers.Integral):
        return str(int(x))
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.4g}"


def _with_unit(text: str, unit: str) -> str:
    if not unit:
        return text
    return text + unit if unit in _NO_SPACE_UNITS else f"{text} {unit}"


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def fmt_text(text: str) -> str:
    """Shorten the long floats inside a text (``'>= 0.123456789'`` -> ``'>= 0.1235'``)."""
    return _LONG_FLOAT.sub(lambda m: fmt_number(float(m.group(0))), text)


def fmt_value(v: Any, unit: str = "") -> str:
    """A value for a table cell: numbers with their unit, mappings and sequences summarised item by item."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return fmt_number(v)
    if _is_number(v):
        return _with_unit(fmt_number(v), unit)
    if isinstance(v, str):
        text = fmt_text(v)
        return _with_unit(text, unit) if re.search(r"\d$", text) else text
    if isinstance(v, dict):
        return ", ".join(f"{k}={fmt_value(x, unit)}" for k, x in v.items())
    if isinstance(v, list | tuple):
        inner = ", ".join(fmt_value(x) for x in v[:6]) + (", ..." if len(v) > 6 else "")
        return _with_unit(f"[{inner}]", unit) if all(_is_number(x) for x in v) else f"[{inner}]"
    return fmt_text(str(v))


def shorten(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: max(1, width - 1)] + "\u2026"


@dataclass(frozen=True)
class Row:
    """One line of a claims table (already formatted text)."""

    claim: str
    statement: str
    observed: str
    baseline: str
    threshold: str
    status: str
    scale_note: str = ""
    detail: str = ""
    #: the paper's own value, and the claim's status in the committed default-mode result ("-" if none)
    paper: str = "-"
    default: str = "-"

    def cells(self, columns: tuple[str, ...]) -> list[str]:
        return [getattr(self, c) for c in columns]


_CELL = 40  # observed/baseline/threshold cells longer than this are summarised; the detail keeps all


def _cell(v: Any, unit: str, detail: list[str], name: str) -> str:
    text = fmt_value(v, unit)
    if len(text) > _CELL or isinstance(v, dict):
        detail.append(f"{name}: {text}")
        if isinstance(v, dict) and v and len(text) > _CELL:
            return shorten(text, _CELL)
    return shorten(text, _CELL) if len(text) > _CELL else text


def claim_rows(result: Result, default: Result | None = None) -> list[Row]:
    """Rows for one result: an ERROR row if it raised, one row per claim, a WARN row if past its budget.

    ``default``: the experiment's committed default-mode result; each row then shows the claim's status
    there (a quick PASS that is a default FAIL says so).
    """
    in_default = {c.id: c.status for c in default.claims} if default is not None else {}
    rows: list[Row] = []
    err = result.error
    if err is not None:
        rows.append(Row("-", "the experiment raised before its claims could be checked",
                        shorten(f"{err.get('type', 'Error')}: {err.get('message', '')}", 160), "-", "-", "ERROR",
                        detail=str(err.get("traceback", ""))))
    for c in result.claims:
        detail: list[str] = []
        observed = _cell(c.observed, c.unit, detail, "observed")
        baseline = _cell(c.baseline, c.unit, detail, "baseline")
        threshold = _cell(c.threshold, c.unit, detail, "threshold")
        paper = "-" if c.paper_value is None else _cell(c.paper_value, c.unit, detail, "paper")
        if c.detail:
            detail.append(fmt_text(c.detail))
        label = f"{c.id} (secondary)" if c.secondary else (f"{c.id} (premise)" if c.kind == "premise" else c.id)
        rows.append(Row(label, c.statement, observed, baseline, threshold, c.status, c.scale_note, "; ".join(detail),
                        paper, in_default.get(c.id, "-")))
    budget = budget_row(result)
    if budget is not None:
        rows.append(budget)
    return rows


def budget_row(result: Result) -> Row | None:
    """A WARN row when the run's measured time went past its mode's budget target (None otherwise)."""
    prov = result.provenance
    if prov.get("within_budget", True) is not False or result.error is not None:
        return None
    budget, measured = prov.get("budget_s"), prov.get("timed_s", prov.get("wall_time_s"))
    untimed = prov.get("untimed_s") or {}
    extra = ", ".join(f"{k}: {fmt_number(v)} s" for k, v in untimed.items())
    note = (f"the {result.mode} budget is a target for an idle 2-core machine; the run went on"
            + (f" (first past it at {prov['overrun_at']})" if prov.get("overrun_at") else ""))
    return Row("budget", "the run finished within its mode's wall-clock target", fmt_value(measured, "s"), "-",
               f"<= {fmt_value(budget, 's')}", "WARN", note, f"kept out of the budget: {extra}" if extra else "")


def status_counts(result: Result) -> dict[str, int]:
    """Primary claims and premises by status (PASS, FAIL, VOID, SKIP), plus WARN and ERROR rows."""
    counts = result.counts
    out = {s: counts[s] for s in ("PASS", "FAIL", "VOID", "SKIP")}
    out["WARN"] = int(budget_row(result) is not None)
    out["ERROR"] = counts["ERROR"]
    return out
