"""Experiment commands: list, run, reproduce, report."""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from trustlab.cli._app import MODEL_PACKAGES, _extra_ok, _fail, app, console, err
from trustlab.cli._output import _finish, _one_line, _write_report
from trustlab.core.exceptions import TrustlabError
from trustlab.core.optional import is_available


@app.command("list")
def list_cmd() -> None:
    """List experiments (paper, extras needed and whether they are installed) and registered methods."""
    from trustlab.experiments.runner import experiment_ids, get_experiment
    from trustlab.methods import METHODS, discover_methods

    ids = experiment_ids()
    table = Table(title="experiments")
    for col in ("id", "paper", "extras", "installed", "model files"):
        table.add_column(col)
    for exp_id in ids:
        exp = get_experiment(exp_id)
        ok = all(_extra_ok(e) for e in exp.extras)
        models = "-"
        if "llm" in exp.extras:
            models = "present" if all(is_available(m) for m, _ in MODEL_PACKAGES.values()) else "[red]missing[/]"
        table.add_row(exp_id, exp.paper.title, ", ".join(exp.extras) or "-", "yes" if ok else "[red]no[/]", models)
    console.print(table if ids else "No experiments are registered yet.")
    discover_methods()
    mt = Table(title="methods")
    for col in ("name", "paper", "role"):
        mt.add_column(col)
    for name in METHODS.names():
        meta = METHODS.entry(name).meta
        mt.add_row(name, str(meta.get("paper", "-")), str(meta.get("role", "-")))
    console.print(mt if len(METHODS) else "No methods are registered yet.")


def _parse_mode(quick: bool, mode: str | None) -> str:
    if quick and mode not in (None, "quick"):
        raise typer.BadParameter("--quick conflicts with --mode " + str(mode))
    return "quick" if quick else (mode or "default")



_BUDGET_HELP = "a hard wall-clock limit in seconds (the mode's own budget is only a target)"
_EXECUTOR_HELP = "where independent tasks run: local (in this process), process (a local pool) or ray"
_ADDRESS_HELP = "a running Ray cluster (host:port) for --executor ray; default: start one on 127.0.0.1"
_WORKERS_HELP = "process-pool size, or CPUs of the local Ray runtime (default: all cores)"
_THREADS_HELP = "BLAS/torch threads of each task (default 1 for mapped units; reproduce: inherited when local)"


def _make_executor(kind: str, address: str | None, workers: int | None, threads: int | None) -> Any:
    """The executor the CLI options ask for (TrustlabError for bad values)."""
    from trustlab.core.executor import make_executor

    return make_executor(kind, address=address, workers=workers, threads_per_task=threads)
_STRICT_HELP = "stop an experiment that runs past its mode's budget (by default a run goes on and is flagged)"
_TRACK_HELP = "also log each run to a tracker: none or mlflow (extra 'track'; the JSON results stay the record)"
_URI_HELP = "MLflow tracking URI for --track mlflow (default: a local file store, <out>/mlruns)"
_KNOCKOUT_HELP = ("switch the paper's mechanism off (the experiment's KNOCKOUT overrides; saved under "
                  "<mode>-knockout): its gated claims should then FAIL or be VOID")


@app.command()
def run(
    exp_id: Annotated[str, typer.Argument(metavar="ID", help="experiment id (see 'trustlab list')")],
    quick: Annotated[bool, typer.Option("--quick", help="the quick mode (<= 60 s)")] = False,
    mode: Annotated[str | None, typer.Option(help="quick, default or paper")] = None,
    seeds: Annotated[list[int] | None, typer.Option("--seeds", help="seeds (repeat the option)")] = None,
    out: Annotated[Path, typer.Option("--out", help="runs folder")] = Path("runs"),
    set_: Annotated[list[str] | None, typer.Option("--set", help="override a config field: key=value")] = None,
    budget: Annotated[float | None, typer.Option(help=_BUDGET_HELP)] = None,
    strict_budget: Annotated[bool, typer.Option("--strict-budget", help=_STRICT_HELP)] = False,
    progress: Annotated[bool, typer.Option(help="show progress bars")] = True,
    debug: Annotated[bool, typer.Option("--debug", help="show the traceback of an error")] = False,
    executor: Annotated[str, typer.Option(help=_EXECUTOR_HELP)] = "local",
    address: Annotated[str | None, typer.Option(help=_ADDRESS_HELP)] = None,
    workers: Annotated[int | None, typer.Option(help=_WORKERS_HELP)] = None,
    threads_per_task: Annotated[int | None, typer.Option("--threads-per-task", help=_THREADS_HELP)] = None,
    track: Annotated[str, typer.Option(help=_TRACK_HELP)] = "none",
    tracking_uri: Annotated[str | None, typer.Option("--tracking-uri", help=_URI_HELP)] = None,
    knockout: Annotated[bool, typer.Option("--knockout", help=_KNOCKOUT_HELP)] = False,
) -> None:
    """Run one experiment and write its result JSON; prints its claims table.

    Exit code: 0 all primary claims and premises PASS, 1 one is FAIL or VOID, 2 bad input or the experiment
    raised.
    """
    from trustlab.experiments._tracking import make_tracker
    from trustlab.experiments.runner import run_experiment

    try:
        tracker = make_tracker(track, tracking_uri)
        # plain `--executor local`: exactly the in-process run (methods' own loops); otherwise every mapped
        # unit is a task with `threads_per_task` threads (1 by default), the same on every executor
        plain = executor == "local" and threads_per_task is None and address is None and workers is None
        with _make_executor(executor, address, workers, 1 if threads_per_task is None else threads_per_task) as ex:
            result, path = run_experiment(exp_id, _parse_mode(quick, mode), seeds=seeds, overrides=set_ or [],
                                          out_dir=out, budget_s=budget, strict_budget=strict_budget,
                                          show_progress=progress, executor=None if plain else ex,
                                          knockout=knockout)
    except TrustlabError as exc:
        if debug:
            err.print(traceback.format_exc(), highlight=False, markup=False)
        _fail(exc)
    except Exception as exc:  # noqa: BLE001 - an experiment's own error (exit 2): message, traceback on request
        if debug:
            err.print(traceback.format_exc(), highlight=False, markup=False)
        _fail(RuntimeError(f"{exp_id} raised {type(exc).__name__}: {exc}"
                           + ("" if debug else " (run with --debug for the traceback)")))
    console.print(f"result written to {path}")
    tracker([result], out, [path])
    _finish([result], debug)


def _check_ids(ids: list[str], known: list[str]) -> None:
    from trustlab.core.exceptions import UnknownNameError, did_you_mean

    for exp_id in ids:
        if exp_id not in known:
            _fail(UnknownNameError(f"Unknown experiment '{exp_id}'.{did_you_mean(exp_id, known)} "
                                   f"Known: {', '.join(known)}. See 'trustlab list'."))


@app.command()
def reproduce(
    ids: Annotated[list[str] | None, typer.Argument(metavar="[IDS]...", help="experiment ids")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every registered experiment")] = False,
    quick: Annotated[bool, typer.Option("--quick", help="the quick mode (<= 60 s each)")] = False,
    mode: Annotated[str | None, typer.Option(help="quick, default or paper")] = None,
    out: Annotated[Path, typer.Option("--out", help="runs folder")] = Path("runs"),
    report: Annotated[Path | None, typer.Option("--report", help="also write this Markdown report")] = None,
    budget: Annotated[float | None, typer.Option(help=_BUDGET_HELP + ", per experiment")] = None,
    strict_budget: Annotated[bool, typer.Option("--strict-budget", help=_STRICT_HELP)] = False,
    progress: Annotated[bool, typer.Option(help="show progress bars")] = True,
    debug: Annotated[bool, typer.Option("--debug", help="show the traceback of an experiment that raised")] = False,
    isolate: Annotated[bool, typer.Option(help="run each experiment in its own process")] = True,
    executor: Annotated[str, typer.Option(help=_EXECUTOR_HELP + " (one task per experiment)")] = "local",
    address: Annotated[str | None, typer.Option(help=_ADDRESS_HELP)] = None,
    workers: Annotated[int | None, typer.Option(help=_WORKERS_HELP)] = None,
    threads_per_task: Annotated[int | None, typer.Option("--threads-per-task", help=_THREADS_HELP)] = None,
    track: Annotated[str, typer.Option(help=_TRACK_HELP)] = "none",
    tracking_uri: Annotated[str | None, typer.Option("--tracking-uri", help=_URI_HELP)] = None,
    knockout: Annotated[bool, typer.Option("--knockout", help=_KNOCKOUT_HELP)] = False,
) -> None:
    """Run experiments, each in its own process, and print one claims table.

    An experiment that raises shows as an ERROR row and the others still run; the report is written
    either way. Exit code: 0 all primary claims and premises PASS, 1 some FAIL or VOID, 2 bad input or some
    experiment raised, 3 an internal crash of trustlab (see the README's exit codes).
    """
    from trustlab.experiments._isolated import error_result, run_isolated
    from trustlab.experiments._tracking import make_tracker
    from trustlab.experiments.runner import _save, experiment_ids, run_experiment

    try:
        tracker = make_tracker(track, tracking_uri)
    except TrustlabError as exc:
        _fail(exc)
    known = experiment_ids()
    if not known:
        console.print("No experiments are registered yet: nothing to reproduce.")
        if report is not None:
            _write_report(out, report)
        raise typer.Exit(code=0)
    if not ids and not all_:
        raise typer.BadParameter("name experiment ids or pass --all")
    chosen = known if all_ else list(ids or [])
    _check_ids(chosen, known)
    m = _parse_mode(quick, mode)
    if isolate:
        threads = threads_per_task if threads_per_task is not None or executor == "local" else 1
        try:
            ex = _make_executor(executor, address, workers, threads)
        except TrustlabError as exc:
            _fail(exc)
        results = _reproduce_on(ex, chosen, m, out, budget, strict_budget, progress, knockout)
        if report is not None:
            _write_report(out, report)
        tracker(results, out)
        _finish(results, debug)
        return
    results = []
    for i, exp_id in enumerate(chosen, 1):
        err.print(f"[{i}/{len(chosen)}] {exp_id} [{m}] ...", highlight=False)
        t0 = time.perf_counter()
        if isolate:
            result = run_isolated(exp_id, m, out_dir=out, budget_s=budget, strict_budget=strict_budget,
                                  show_progress=progress, knockout=knockout).result
        else:
            try:
                result, _ = run_experiment(exp_id, m, out_dir=out, budget_s=budget, strict_budget=strict_budget,
                                           show_progress=progress, knockout=knockout)
            except Exception as exc:  # noqa: BLE001 - shown as an ERROR row; the others go on
                result = error_result(exp_id, m, type(exc).__name__, str(exc), traceback.format_exc())
                _save(result, out)
        results.append(result)
        err.print(f"[{i}/{len(chosen)}] {exp_id}: {_one_line(result)} ({time.perf_counter() - t0:.0f} s)",
                  highlight=False)
    if report is not None:
        _write_report(out, report)
    tracker(results, out)
    _finish(results, debug)


def _reproduce_on(ex: Any, chosen: list[str], mode: str, out: Path, budget: float | None, strict_budget: bool,
                  progress: bool, knockout: bool = False) -> list:
    """Each experiment as one isolated task on ``ex``; results saved here as they finish, in ``chosen`` order."""
    import functools

    from trustlab.experiments._isolated import reproduce_task
    from trustlab.experiments.runner import _save
    from trustlab.results.result import Result

    results: list[Any] = [None] * len(chosen)
    t0 = time.perf_counter()

    def done(i: int, data: dict) -> None:
        results[i] = Result.from_dict(data)
        _save(results[i], out)
        err.print(f"[{sum(r is not None for r in results)}/{len(chosen)}] {chosen[i]}: {_one_line(results[i])} "
                  f"({time.perf_counter() - t0:.0f} s since start)", highlight=False)

    task = functools.partial(reproduce_task, mode=mode, budget_s=budget, strict_budget=strict_budget,
                             threads=ex.threads_per_task, knockout=knockout)
    err.print(f"{len(chosen)} experiment(s) [{mode}] on {ex!r} ...", highlight=False)
    try:
        with ex:
            ex.map(task, chosen, desc="experiments", show_progress=progress and ex.name != "local",
                   on_result=done)
    except TrustlabError as exc:
        _fail(exc)
    return results


@app.command()
def report(
    runs_dir: Annotated[Path, typer.Argument(help="runs folder")] = Path("runs"),
    output: Annotated[Path, typer.Option("-o", "--output", help="Markdown file to write")] = Path("report.md"),
) -> None:
    """Build one Markdown + HTML report (claims tables and plots) from saved results.

    Files that cannot be read (corrupt, not a trustlab result, a newer schema) are skipped with a note;
    the exit code is 2 only when nothing readable remains.
    """
    if not runs_dir.is_dir():
        _fail(FileNotFoundError(f"The runs folder {str(runs_dir)!r} does not exist. Run 'trustlab reproduce' first."))
    found = _write_report(runs_dir, output)
    if not found:
        _fail(FileNotFoundError(f"No readable result under {str(runs_dir)!r}."))
