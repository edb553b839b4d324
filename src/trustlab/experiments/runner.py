"""Find experiments, apply ``--set`` overrides, run with provenance and write results atomically."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.metadata
import pkgutil
import platform
import subprocess
import sys
import time
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trustlab.core.base import PaperInfo
from trustlab.core.exceptions import ConfigError, UnknownNameError, did_you_mean
from trustlab.core.seeding import thread_settings
from trustlab.experiments.base import MODES, Claim, ExperimentConfig, RunContext, evaluate_claims
from trustlab.results.result import Result

__all__ = ["Experiment", "MODES", "experiment_ids", "get_experiment", "apply_overrides", "run_experiment", "provenance"]

_NOT_EXPERIMENTS = {"base", "runner"}


@dataclass(frozen=True)
class Experiment:
    """An experiment module seen through its contract."""

    id: str
    paper: PaperInfo
    config_cls: type[ExperimentConfig]
    run: Callable[[ExperimentConfig, RunContext], Result]
    claims: tuple[Claim, ...]
    plots: Callable[[Result], dict[str, Any]] | None
    title: str
    extras: tuple[str, ...]
    module: types.ModuleType


def experiment_ids() -> list[str]:
    """Ids of every experiment module (found without importing them)."""
    import trustlab.experiments as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)
                  if not m.name.startswith("_") and m.name not in _NOT_EXPERIMENTS)


def get_experiment(exp_id: str) -> Experiment:
    """Import ``trustlab.experiments.<exp_id>`` and check it follows the contract."""
    ids = experiment_ids()
    if exp_id not in ids:
        raise UnknownNameError(
            f"Unknown experiment '{exp_id}'.{did_you_mean(exp_id, ids)}"
            f" Known: {', '.join(ids) if ids else 'none registered yet'}. See 'trustlab list'."
        )
    mod = importlib.import_module(f"trustlab.experiments.{exp_id}")
    missing = [n for n in ("PAPER", "Config", "run", "CLAIMS") if not hasattr(mod, n)]
    if missing:
        raise TypeError(f"Experiment module trustlab.experiments.{exp_id} lacks {missing} (see DESIGN section 4).")
    if not (isinstance(mod.Config, type) and issubclass(mod.Config, ExperimentConfig)):
        raise TypeError(f"trustlab.experiments.{exp_id}.Config must subclass ExperimentConfig.")
    return Experiment(exp_id, mod.PAPER, mod.Config, mod.run, tuple(mod.CLAIMS), getattr(mod, "PLOTS", None),
                      getattr(mod, "TITLE", mod.PAPER.title), tuple(getattr(mod, "EXTRAS", ())), mod)


def _coerce(text: str, current: Any, annotation: Any, key: str, owner: str) -> Any:
    if text.lower() == "none":
        return None
    target = type(current) if current is not None else annotation
    origin = typing.get_origin(target)
    try:
        if target is bool or isinstance(current, bool):
            low = text.lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError("expected true/false")
            return low in ("true", "1", "yes")
        if isinstance(current, tuple) or target is tuple or origin is tuple:
            parts = [p.strip() for p in text.strip("()[] ").split(",") if p.strip()]
            elem = type(current[0]) if current else None
            return tuple(_coerce(p, elem() if elem in (int, float, str) else None, elem, key, owner) for p in parts)
        if isinstance(current, int) or target is int:
            return int(text)
        if isinstance(current, float) or target is float:
            return float(text)
        if isinstance(current, str) or target is str:
            return text
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError) as exc:
        want = type(current).__name__ if current is not None else str(annotation)
        raise ConfigError(
            f"The '{key}' field of {owner} must be a {want}. Got {text!r} instead ({exc})."
        ) from None


def apply_overrides(cfg: ExperimentConfig, overrides: Iterable[str]) -> ExperimentConfig:
    """Apply ``key=value`` strings to a frozen config; unknown keys get "did you mean"."""
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    hints = typing.get_type_hints(type(cfg))
    changes: dict[str, Any] = {}
    owner = f"{type(cfg).__module__.rsplit('.', 1)[-1]}.Config"
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"A --set override must look like key=value. Got {item!r} instead.")
        key, _, text = item.partition("=")
        key = key.strip()
        if key not in fields:
            raise UnknownNameError(
                f"Unknown config key '{key}' for {owner}.{did_you_mean(key, fields)} Keys: {', '.join(fields)}."
            )
        changes[key] = _coerce(text.strip(), getattr(cfg, key), hints.get(key), key, owner)
    new = dataclasses.replace(cfg, **changes)
    new.validate()
    return new


def _git_sha() -> str:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        sha = out.stdout.strip() if out.returncode == 0 else "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5)
        return sha + ("-dirty" if sha != "unknown" and dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance(extra_packages: Sequence[str] = ()) -> dict[str, Any]:
    """Versions, git SHA, platform and thread settings of this process."""
    versions = {}
    for dist in ("trustlab", "numpy", "scipy", "scikit-learn", "pandas", "torch", "transformers", *extra_packages):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return {
        "versions": versions,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "git_sha": _git_sha(),
        "threads": thread_settings(),
        "utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def run_experiment(
    exp_id: str, mode: str = "quick", *, seeds: Sequence[int] | None = None, overrides: Iterable[str] = (),
    out_dir: str | Path | None = "runs", budget_s: float | None = None, show_progress: bool = True,
) -> tuple[Result, Path | None]:
    """Run one experiment, evaluate its claims, add provenance and write ``<out>/<id>/<mode>/<utc>.json``."""
    exp = get_experiment(exp_id)
    cfg = exp.config_cls.for_mode(mode)
    overrides = list(overrides)
    if seeds is not None:
        overrides.append("seeds=" + ",".join(str(int(s)) for s in seeds))
    cfg = apply_overrides(cfg, overrides) if overrides else cfg
    cfg.validate()
    budget = budget_s if budget_s is not None else exp.config_cls.budgets.get(mode)
    ctx = RunContext(seeds=tuple(cfg.seeds), out_dir=Path(out_dir) if out_dir else None, budget_s=budget,
                     show_progress=show_progress)
    t0 = time.perf_counter()
    result = exp.run(cfg, ctx)
    wall = time.perf_counter() - t0
    if not isinstance(result, Result):
        raise TypeError(f"trustlab.experiments.{exp_id}.run must return a Result. Got {type(result).__name__}.")
    result.experiment, result.mode, result.config = exp_id, mode, cfg.to_dict()
    result.notes.extend(ctx.log)
    result.provenance.update(provenance(), seeds=list(cfg.seeds), wall_time_s=round(wall, 3),
                             budget_s=budget, within_budget=budget is None or wall <= budget,
                             overrides=overrides, paper=dataclasses.asdict(exp.paper))
    result.claims = evaluate_claims(result, exp.claims)
    path = None
    if out_dir is not None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        path = result.save(Path(out_dir) / exp_id / mode / f"{stamp}.json")
    return result, path

