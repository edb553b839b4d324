"""What run, reproduce and report print: the claims table, errors, the exit code, the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from trustlab.cli._app import console, err

_STATUS_STYLE = {"PASS": "green", "FAIL": "red", "VOID": "magenta", "SKIP": "yellow", "WARN": "yellow",
                 "ERROR": "bold red"}
_TITLE = "claims (statements, scale notes and details are in the report)"
#: the plain table's columns and widths (stdout not a terminal: CI logs, `make demo > log`)
_PLAIN = (("experiment", 12), ("claim", 22), ("status", 6), ("observed", 26), ("baseline", 18), ("threshold", 18),
          ("paper", 10), ("default", 7))


def _committed() -> dict:
    """The committed default-mode results (none when they cannot be read: the column is only context)."""
    from trustlab.results.committed import committed_defaults

    try:
        return committed_defaults()
    except Exception:  # noqa: BLE001 - the default column is context; it must never lose the table or report
        return {}


def _defaults(results: list) -> dict:
    """The committed default-mode result of each experiment in ``results`` that is not itself default mode."""
    return {} if all(r.mode == "default" for r in results) else _committed()


def _rows(results: list) -> list[tuple[str, Any]]:
    from trustlab.results._table import claim_rows

    defaults = _defaults(results)
    return [(r.experiment, row) for r in results
            for row in claim_rows(r, defaults.get(r.experiment) if r.mode != "default" else None)]


def _claims_table(results: list) -> Table:
    t = Table(title=_TITLE)
    t.add_column("experiment", no_wrap=True, min_width=10)
    t.add_column("claim", no_wrap=True, min_width=6)
    t.add_column("status", no_wrap=True, min_width=6)
    for col in ("observed", "baseline", "threshold"):
        t.add_column(col, overflow="fold", max_width=28)
    t.add_column("paper", overflow="fold", max_width=12)
    t.add_column("default", no_wrap=True)
    for exp, row in _rows(results):
        claim = f"[dim]{escape(row.claim)}[/]" if row.claim.endswith("(secondary)") else escape(row.claim)
        t.add_row(exp, claim, f"[{_STATUS_STYLE[row.status]}]{row.status}[/]", escape(row.observed),
                  escape(row.baseline), escape(row.threshold), escape(row.paper), escape(row.default))
    return t


def plain_claims_table(results: list) -> str:
    """The claims table as fixed-width plain text: each cell wrapped within its column, never squashed."""
    import textwrap

    def line(cells: list[list[str]]) -> list[str]:
        height = max(len(c) for c in cells)
        return ["  ".join((c[i] if i < len(c) else "").ljust(w) for c, (_, w) in zip(cells, _PLAIN)).rstrip()
                for i in range(height)]

    out = [_TITLE, *line([[name] for name, _ in _PLAIN]), "  ".join("-" * w for _, w in _PLAIN)]
    for exp, row in _rows(results):
        values = [exp, row.claim, row.status, row.observed, row.baseline, row.threshold, row.paper, row.default]
        out += line([textwrap.wrap(v, w, break_long_words=True) or [""] for v, (_, w) in zip(values, _PLAIN)])
    return "\n".join(out)


def _show_errors(results: list, debug: bool) -> None:
    for r in results:
        if r.error is None:
            continue
        err.print(f"[bold red]ERROR[/] {r.experiment} \\[{r.mode}]: "
                  + escape(f"{r.error.get('type')}: {r.error.get('message')}"), highlight=False)
        if debug and r.error.get("traceback"):
            err.print(r.error["traceback"], highlight=False, markup=False)
    if any(r.error is not None for r in results) and not debug:
        err.print("(run with --debug for the traceback)")


def _finish(results: list, debug: bool) -> None:
    from trustlab.experiments.runner import exit_status

    if console.is_terminal:
        console.print(_claims_table(results))
    else:
        print(plain_claims_table(results), flush=True)
    _show_errors(results, debug)
    code = exit_status(results)
    failed = [c for r in results for c in r.claims if c.status == "FAIL" and not c.secondary]
    void = [c for r in results for c in r.claims if c.status == "VOID" and not c.secondary]
    counts = {s: sum(r.counts[s] for r in results) for s in ("PASS", "FAIL", "VOID", "SKIP", "ERROR")}
    console.print("primary claims and premises: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    slow = [r.experiment for r in results if r.provenance.get("within_budget") is False]
    if slow:
        console.print(f"[yellow]past the budget target (a busy machine?): {', '.join(slow)}[/]; results are kept.")
    if code == 2:
        console.print(f"[bold red]{sum(r.error is not None for r in results)} experiment(s) raised an error[/]"
                      + (f"; {len(failed)} claim(s) FAILED" if failed else "") + ".")
    elif code == 1:
        console.print(f"[red]{len(failed)} claim(s) FAILED[/], [magenta]{len(void)} VOID[/] (a premise they rest on "
                      "failed; see the scale notes in the report).")
    else:
        console.print("[green]all checked claims PASS[/]")
    if code:
        raise typer.Exit(code=code)


def _one_line(result: Any) -> str:
    from trustlab.results._table import status_counts

    if result.error is not None:
        return f"ERROR {result.error.get('type')}"
    n = status_counts(result)
    text = ", ".join(f"{v} {k}" for k, v in n.items() if v and k != "ERROR")
    return text or "no claims"


def _write_report(runs_dir: Path, out: Path) -> list:
    from trustlab.experiments.runner import experiment_ids, get_experiment
    from trustlab.results.report import build_report, scan_results

    plotters, titles = {}, {}
    for exp_id in experiment_ids():
        try:
            exp = get_experiment(exp_id)
        except Exception:  # noqa: BLE001 - a broken experiment module must not lose the report
            continue
        titles[exp_id] = exp.title
        if exp.plots is not None:
            plotters[exp_id] = exp.plots
    found, skipped = scan_results(runs_dir)
    for _, reason in skipped:
        err.print("[yellow]skipped:[/] " + escape(reason), highlight=False)
    path = build_report(runs_dir, out, plotters=plotters, titles=titles, defaults=_committed())
    console.print(f"report written to {path} (and {path.with_suffix('.html')})")
    return found
