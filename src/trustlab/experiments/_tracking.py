"""``--track``: after ``trustlab run`` / ``reproduce`` wrote their result JSON files, log them to a run tracker
(:mod:`trustlab.results.tracking`) with each experiment's plots.

The CLI calls :func:`make_tracker` before running (a bad ``--track`` value, a ``--tracking-uri`` without
``--track mlflow`` or a missing ``mlflow`` fail at once, naming the extra to install) and the returned
function after the results are saved. Tracking never changes a result or the command's exit code: a
tracker that fails is reported on stderr and the JSON results stand.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trustlab.results.result import Result
from trustlab.results.tracking import TRACKERS

__all__ = ["make_tracker"]

Tracker = Callable[[Sequence[Result], "str | os.PathLike[str]", "Sequence[Any] | None"], list[str]]


def make_tracker(track: str, tracking_uri: str | None = None) -> Tracker:
    """``tracker(results, runs_dir, paths=None)`` for ``--track`` (``"none"``: does nothing)."""
    from trustlab.core.constraints import InstanceOf, Options, validate_value
    from trustlab.core.exceptions import ConfigError

    validate_value("trustlab run/reproduce", "track", track, [Options(TRACKERS)], noun="option")
    validate_value("trustlab run/reproduce", "tracking_uri", tracking_uri, [InstanceOf(str), None], noun="option")
    if tracking_uri is not None and track == "none":
        raise ConfigError("The 'tracking_uri' option of trustlab run/reproduce only applies with --track mlflow. "
                          f"Got {tracking_uri!r} with --track none instead.")
    if track == "none":
        return lambda results, runs_dir, paths=None: []
    from trustlab.core.optional import require

    require("mlflow", extra="track", purpose="--track mlflow")

    def tracker(results: Sequence[Result], runs_dir: str | os.PathLike[str], paths: Sequence[Any] | None = None
                ) -> list[str]:
        from trustlab.results.tracking import default_tracking_uri

        uri = tracking_uri or default_tracking_uri(runs_dir)
        try:
            ids = _log(results, runs_dir, uri, paths)
        except Exception as exc:  # noqa: BLE001 - the JSON results stand; the tracker's failure is reported
            print(f"--track mlflow: logging to {uri} failed ({type(exc).__name__}: {exc}); the result JSON files "
                  "are unaffected.", file=sys.stderr)
            return []
        print(f"logged {len(ids)} run(s) to MLflow at {uri}", file=sys.stderr)
        return ids

    return tracker


def _log(results: Sequence[Result], runs_dir: str | os.PathLike[str], uri: str, paths: Sequence[Any] | None
         ) -> list[str]:
    from trustlab.experiments.runner import get_experiment
    from trustlab.results.report import latest_results
    from trustlab.results.tracking import log_to_mlflow

    results = [r for r in results if r is not None]
    if paths is None:  # reproduce: the newest JSON of each experiment and mode, the one just written
        newest = {(r.experiment, r.mode): p for p, r in latest_results(runs_dir)} if Path(runs_dir).is_dir() else {}
        paths = [newest.get((r.experiment, r.mode)) for r in results]
    plotters = {}
    for r in results:
        with contextlib.suppress(Exception):  # an unknown or broken experiment module: logged without plots
            exp = get_experiment(r.experiment)
            if exp.plots is not None:
                plotters[r.experiment] = exp.plots
    return log_to_mlflow(results, runs_dir, tracking_uri=uri, paths=paths, plotters=plotters)
