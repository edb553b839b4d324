"""What run, reproduce and report print: the claims table, errors, the exit code, the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from trustlab.cli._app import console, err

_STATUS_STYLE = {"PASS": "green", "FAIL": "red", "SKIP": "yellow", "WARN": "yellow", "ERROR": "bold red"}


def _claims_table(results: list) -> Table:
    from trustlab.results._table import claim_rows

    t = Table(title="claims (statements, scale notes and details are in the report)")
    t.add_column("experiment", no_wrap=True, min_width=10)
    t.add_column("claim", no_wrap=True, min_width=6)
    t.add_column("status", no_wrap=True, min_width=6)
    for col in ("observed", "baseline", "threshold"):
        t.add_column(col, overflow="fold", max_width=28)
    for r in results:
        for row in claim_rows(r):
            claim = f"[dim]{escape(row.claim)}[/]" if row.claim.endswith("(secondary)") else escape(row.claim)
            t.add_row(r.experiment, claim, f"[{_STATUS_STYLE[row.status]}]{row.status}[/]", escape(row.observed),
                      escape(row.baseline), escape(row.threshold))
    return t


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

    console.print(_claims_table(results))
    _show_errors(results, debug)
    code = exit_status(results)
    failed = [c for r in results for c in r.claims if c.passed is False and not c.secondary]
    slow = [r.experiment for r in results if r.provenance.get("within_budget") is False]
    if slow:
        console.print(f"[yellow]past the budget target (a busy machine?): {', '.join(slow)}[/]; results are kept.")
    if code == 2:
        console.print(f"[bold red]{sum(r.error is not None for r in results)} experiment(s) raised an error[/]"
                      + (f"; {len(failed)} claim(s) FAILED" if failed else "") + ".")
    elif code == 1:
        console.print(f"[red]{len(failed)} claim(s) FAILED[/] (see the scale notes in the report).")
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
    path = build_report(runs_dir, out, plotters=plotters, titles=titles)
    console.print(f"report written to {path} (and {path.with_suffix('.html')})")
    return found
