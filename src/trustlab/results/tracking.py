"""Run tracking: log each trustlab result to MLflow (extra ``track``), where researchers already look.

``trustlab run ID --track mlflow`` and ``trustlab reproduce ... --track mlflow`` call
:func:`log_to_mlflow` (through ``trustlab.experiments._tracking``, which adds each experiment's plots) after
the result JSON files are written. Each result becomes one MLflow run in the MLflow experiment
``trustlab/<experiment id>``, named ``<id> [<mode>]``, holding

* **params**: the experiment's config (flattened ``a.b`` keys), its mode and seeds;
* **tags**: paper, mode, trustlab version, overall status (PASS / FAIL / ERROR), executor, threads, the
  path of the result JSON;
* **metrics**: each claim's outcome (``claim/<id>/pass`` 1 or 0) and numeric observed value
  (``claim/<id>/observed``), the wall time, the numeric scalars of the summary (``summary/<key>``) and the
  tidy records that carry a numeric ``value`` (``<method>/<dataset>/<metric>``, step = the record's seed);
* **artifacts**: the result JSON itself, ``claims.json`` (every outcome with its threshold, baseline and
  scale note) and the experiment's plots as PNG (``plots/<name>.png``, the same figures as the report).

The result JSON stays the source of truth: MLflow gets a copy, and a tracking failure never changes a result
or the command's claims. Without ``tracking_uri`` the store is MLflow's local file store under the runs
folder (``<runs>/mlruns``; view it with ``mlflow ui --backend-store-uri <runs>/mlruns``). MLflow 3.17
keeps that backend in maintenance mode and refuses it unless ``MLFLOW_ALLOW_FILE_STORE=true``; this module
sets that (and MLflow's telemetry off) only while it writes, and restores the environment afterwards. Any
other URI (``sqlite:///runs/mlflow.db``, ``http://host:5000``) is used as given.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Satisfies
from trustlab.core.executor import _env_defaults
from trustlab.core.files import to_jsonable
from trustlab.core.optional import require
from trustlab.results.result import Result

__all__ = ["TRACKERS", "default_tracking_uri", "log_to_mlflow"]

#: what ``--track`` accepts
TRACKERS = ("none", "mlflow")
_PATH = [InstanceOf(str, os.PathLike)]
_PARAM_CHARS = 6000  # MLflow's limit on a param value
_BAD_KEY = re.compile(r"[^A-Za-z0-9_\-. /:]")


@validate_args(runs_dir=_PATH)
def default_tracking_uri(runs_dir: str | os.PathLike[str]) -> str:
    """The local MLflow file store under a runs folder: ``file://<runs_dir>/mlruns`` (absolute).

    Examples
    --------
    >>> default_tracking_uri("/tmp/runs")
    'file:///tmp/runs/mlruns'
    """
    return (Path(runs_dir).resolve() / "mlruns").as_uri()


def _key(*parts: Any) -> str:
    return _BAD_KEY.sub("_", "/".join(str(p) for p in parts if p not in (None, "")))[:250]


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float) and math.isfinite(float(v)):
        return float(v)
    return None


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _status(r: Result) -> str:
    if r.error is not None:
        return "ERROR"
    return "PASS" if r.passed else "FAIL"


def _metrics(r: Result) -> list[tuple[str, float, int]]:
    """(key, value, step) of everything numeric a result reports."""
    rows: list[tuple[str, float, int]] = []
    for c in r.claims:
        if c.passed is not None:
            rows.append((_key("claim", c.id, "pass"), float(c.passed), 0))
        if (v := _number(c.observed)) is not None:
            rows.append((_key("claim", c.id, "observed"), v, 0))
    for k in ("wall_time_s", "measured_s"):
        if (v := _number(r.provenance.get(k))) is not None:
            rows.append((k, v, 0))
    for k, val in _flatten(r.summary).items():
        if (v := _number(val)) is not None:
            rows.append((_key("summary", k), v, 0))
    seen: dict[tuple[str, int], int] = {}
    for rec in r.records:
        if (v := _number(rec.get("value"))) is None or "metric" not in rec:
            continue
        key = _key(rec.get("method"), rec.get("dataset"), rec["metric"])
        seed = rec.get("seed")
        step = int(seed) if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 else 0
        n = seen.get((key, step), 0)  # records repeating (key, seed) get distinct keys, never overwrite
        seen[(key, step)] = n + 1
        rows.append((key if n == 0 else f"{key}/{n}", v, step))
    return rows


def _log_one(client: Any, r: Result, path: Path | None, figures: dict[str, Any]) -> str:
    from mlflow.entities import Metric, Param, RunTag

    import trustlab

    name = f"trustlab/{r.experiment}"
    exp = client.get_experiment_by_name(name)
    exp_id = exp.experiment_id if exp is not None else client.create_experiment(name)
    prov = r.provenance
    tags = {"trustlab.experiment": r.experiment, "trustlab.mode": r.mode, "trustlab.status": _status(r),
            "trustlab.version": trustlab.__version__, "trustlab.paper": str(prov.get("paper", ""))[:5000],
            "trustlab.executor": str(prov.get("executor", "")), "trustlab.threads": str(prov.get("threads", "")),
            "trustlab.result_json": "" if path is None else str(Path(path).resolve())}
    run = client.create_run(exp_id, run_name=f"{r.experiment} [{r.mode}]", tags={k: v for k, v in tags.items() if v})
    rid = run.info.run_id
    try:
        params = {k: str(v)[:_PARAM_CHARS] for k, v in _flatten(r.config).items()}
        params.update({"mode": r.mode, "seeds": str(prov.get("seeds", r.config.get("seeds", "")))})
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, s) for k, v, s in _metrics(r)]
        param_list = [Param(_key(k), v) for k, v in params.items()]
        for i in range(0, max(len(metrics), len(param_list), 1), 100):  # MLflow's batch limit (100 params)
            client.log_batch(rid, metrics=metrics[i:i + 100], params=param_list[i:i + 100], tags=[RunTag(
                "trustlab.n_metrics", str(len(metrics)))] if i == 0 else [])
        client.log_dict(rid, to_jsonable({"status": _status(r), "claims": [asdict(c) for c in r.claims],
                                          "error": r.error}), "claims.json")
        if path is not None and Path(path).is_file():
            client.log_artifact(rid, str(path))
        for fig_name, fig in figures.items():
            client.log_figure(rid, fig, f"plots/{_BAD_KEY.sub('_', fig_name)}.png")
    except BaseException:
        client.set_terminated(rid, "FAILED")
        raise
    client.set_terminated(rid, "FAILED" if r.error is not None else "FINISHED")
    return rid


def _figures(r: Result, plotter: Callable[[Result], Mapping[str, Any]] | None) -> dict[str, Any]:
    """The report's figures of a result (claims plot + the experiment's PLOTS); a broken plot is skipped."""
    if r.error is not None:
        return {}
    from trustlab.results.plots import claims_plot

    figures: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        figures["claims"] = claims_plot(r)
    if plotter is not None:
        with contextlib.suppress(Exception):
            figures.update(plotter(r))
    return figures


_RESULTS = [SequenceOf(InstanceOf(Result), min_len=0)]
_PATHS = [SequenceOf(Satisfies(lambda v: v is None or isinstance(v, str | os.PathLike), "a path or None", [3],
                                valid="r.json"), min_len=0), None]
_PLOTTERS = [Satisfies(lambda v: isinstance(v, Mapping), "a mapping", ["not-a-mapping", 3], valid={}), None]


@validate_args(lambda: {"results": [], "runs_dir": "runs"}, results=_RESULTS, runs_dir=_PATH,
               tracking_uri=[InstanceOf(str), None], paths=_PATHS, plotters=_PLOTTERS)
def log_to_mlflow(results: Sequence[Result], runs_dir: str | os.PathLike[str], *, tracking_uri: str | None = None,
                  paths: Sequence[str | os.PathLike[str] | None] | None = None,
                  plotters: Mapping[str, Callable[[Result], Mapping[str, Any]]] | None = None) -> list[str]:
    """Log each result as one MLflow run (see the module docstring); returns the MLflow run ids.

    ``runs_dir`` is the trustlab runs folder (the default store lives under it); ``paths[i]`` is the JSON
    file of ``results[i]`` (logged as an artifact); ``plotters[experiment](result)`` draws its figures.
    Needs ``pip install 'trustlab[track]'`` (mlflow-skinny).
    """
    require("mlflow", extra="track", purpose="--track mlflow")
    paths = list(paths) if paths is not None else [None] * len(results)
    if len(paths) != len(results):
        from trustlab.core.exceptions import InputError

        raise InputError(f"log_to_mlflow: {len(paths)} paths for {len(results)} results.")
    uri = tracking_uri or default_tracking_uri(runs_dir)
    ids = []
    # the file store allowed and MLflow's telemetry off, for this block only (the caller's values win)
    with _env_defaults(MLFLOW_ALLOW_FILE_STORE="true", MLFLOW_DISABLE_TELEMETRY="true"):
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        for r, p in zip(results, paths):
            ids.append(_log_one(client, r, None if p is None else Path(p), _figures(r, (plotters or {}).get(r.experiment))))
    return ids
