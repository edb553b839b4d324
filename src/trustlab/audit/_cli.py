"""The ``trustlab audit`` command (registered in ``trustlab.cli`` with a few lines; all of it lives here)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["audit_command"]

_EXAMPLE = 'sklearn.ensemble.RandomForestClassifier(n_estimators=200)'


def _model_from_options(model: Path | None, estimator: str | None, torch_factory: str | None, trust_type: list[str],
                        trust_pickle: bool) -> tuple[Any, str]:
    from trustlab.audit._inputs import load_model, load_torch_classifier, parse_estimator
    from trustlab.core.exceptions import InputError

    if (model is None) == (estimator is None):
        raise InputError("trustlab audit needs exactly one of --model FILE (a fitted model: .skops, or .safetensors "
                         f"with --torch-factory) and --estimator SPEC (refitted by trustlab, e.g. {_EXAMPLE!r}).")
    if estimator is not None:
        parse_estimator(estimator)  # fail early, before reading data
        return estimator, f"estimator {estimator}"
    if torch_factory is not None:
        return load_torch_classifier(torch_factory, model), f"torch module {torch_factory} with weights {model}"
    loaded = load_model(model, trusted=list(trust_type), trust_pickle=trust_pickle)
    note = f"{loaded.format} file {model}"
    if loaded.format == "pickle":
        note += " (unpickled because --trust-pickle was given)"
    return loaded.model, note


def audit_command(
    data: Annotated[str, typer.Option(help="training table (CSV); example:clean and example:planted are shipped")],
    target: Annotated[str, typer.Option(help="the label column (or the numeric target of a regressor)")],
    test: Annotated[str | None, typer.Option(help="held-out table (CSV, same columns); default: hold out --test-size "
                                             "of --data")] = None,
    model: Annotated[Path | None, typer.Option(help="a fitted model: .skops (types checked before loading), "
                                               ".safetensors with --torch-factory, .pkl/.joblib only with "
                                               "--trust-pickle")] = None,
    estimator: Annotated[str | None, typer.Option(help=f"an estimator spec fitted by trustlab, e.g. '{_EXAMPLE}'")]
    = None,
    checks: Annotated[str, typer.Option(help="all, or a comma-separated list of: data_quality, leakage, membership, "
                                        "multiplicity, explanation_stability, explanation_controls, "
                                        "interpretability_gap, calibration, drift, fairness")] = "all",
    out: Annotated[Path, typer.Option(help="folder for report.html, report.md, report.json and plots/")] = Path("audit"),
    fail_on: Annotated[str | None, typer.Option(help="exit 1 when a rule holds, e.g. 'membership_auc>0.6,"
                                                "duplicate_rows>0' or 'any' (a flagged check)")] = None,
    trust_type: Annotated[list[str] | None, typer.Option(help="a type the .skops file may contain beyond skops' "
                                                         "defaults (repeat the option)")] = None,
    trust_pickle: Annotated[bool, typer.Option(help="allow unpickling a .pkl/.joblib model: it runs the file's code, "
                                               "so only for files you made")] = False,
    torch_factory: Annotated[str | None, typer.Option(help="package.module:function building the torch module for "
                                                      "--model weights.safetensors")] = None,
    test_size: Annotated[float, typer.Option(help="share held out when --test is not given")] = 0.3,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    executor: Annotated[str, typer.Option(help="where the independent checks run: local, process or ray")] = "local",
    workers: Annotated[int | None, typer.Option(help="process-pool size or local Ray CPUs")] = None,
    progress: Annotated[bool, typer.Option(help="progress bars on stderr")] = True,
    sensitive: Annotated[list[str] | None, typer.Option(help="a column whose groups the fairness check compares "
                                                         "(repeat the option)")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="a check setting, check.param=value (e.g. "
                                                  "membership.n_reference=8; repeat the option)")] = None,
) -> None:
    """Audit your own classifier and data with every applicable trustlab method; writes an HTML/Markdown/JSON report.

    Exit codes: 0 the gate passed, 1 a --fail-on rule holds, 2 bad input, 3 a check or the model crashed."""
    from rich.console import Console
    from rich.markup import escape

    from trustlab.audit._audit import audit
    from trustlab.audit._gate import AuditCrashError, parse_settings
    from trustlab.audit._inputs import read_table, split_target
    from trustlab.core.exceptions import TrustlabError

    console, err = Console(), Console(stderr=True, soft_wrap=True)
    command = "trustlab audit " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 1 else ""
    try:
        settings = parse_settings(set_ or [])
        the_model, origin = _model_from_options(model, estimator, torch_factory, trust_type or [], trust_pickle)
        X, y = split_target(read_table(data), target, name="--data")
        X_test = y_test = None
        if test is not None:
            X_test, y_test = split_target(read_table(test), target, name="--test")
        ex = None
        if executor != "local" or workers is not None:
            from trustlab.core.executor import make_executor

            ex = make_executor(executor, workers=workers)
        try:
            report = audit(the_model, X, y, X_test=X_test, y_test=y_test, checks=checks, settings=settings, sensitive=sensitive or [],
                           fail_on=fail_on or "",
                           test_size=test_size, executor=ex, progress=progress, command=command, random_state=seed)
        finally:
            if ex is not None:
                ex.close()
        report.model["loaded_from"] = origin
        paths = report.write(out)
    except AuditCrashError as exc:
        err.print("[bold red]crash:[/] " + escape(str(exc)), highlight=False)
        raise typer.Exit(code=3) from None
    except TrustlabError as exc:
        err.print("[bold red]error:[/] " + escape(str(exc)), highlight=False)
        raise typer.Exit(code=2) from None
    except Exception as exc:  # noqa: BLE001 - an internal failure is exit 3 with its message, not a traceback
        err.print(f"[bold red]internal error:[/] {escape(type(exc).__name__)}: {escape(str(exc))}", highlight=False)
        raise typer.Exit(code=3) from None
    _finish(report, paths, console, err)


def _finish(report: Any, paths: dict[str, Path], console: Any, err: Any) -> None:
    """Print the verdicts and exit: 3 when a check crashed (named), 1 when a fail-on rule holds, else 0."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="trustlab audit")
    for col in ("check", "verdict", "finding"):
        table.add_column(col, overflow="fold")
    colour = {"FLAG": "red", "OK": "green", "INFO": "blue", "SKIPPED": "dim", "ERROR": "magenta"}
    for title, status, text in report.summary_rows():
        table.add_row(title, f"[{colour.get(status, 'white')}]{status}[/]", escape(text))
    console.print(table)
    console.print(f"report: {paths['html']} (also {paths['markdown'].name}, {paths['json'].name})")
    if report.errored:
        err.print("[bold red]check(s) crashed:[/] " + escape("; ".join(f"{k}: {v}" for k, v in report.errored.items())),
                  highlight=False)
        raise typer.Exit(code=3)
    if report.policy:
        if report.policy_failures:
            console.print("[bold red]fail-on policy failed:[/] " + escape("; ".join(report.policy_failures)))
            raise typer.Exit(code=1)
        console.print("fail-on policy passed: " + escape(", ".join(report.policy)))
