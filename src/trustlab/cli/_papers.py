"""Paper-specific commands: route (cascade), licensing report, freqpure train-ddpm."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trustlab.cli._app import _fail, app, console, err
from trustlab.core.exceptions import TrustlabError


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
        from trustlab.data import read_csv

        return read_csv(path)

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
