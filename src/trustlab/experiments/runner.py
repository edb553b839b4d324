"""Find experiments, apply ``--set`` overrides, run with provenance and write results atomically."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import importlib.metadata
import os
import pkgutil
import platform
import subprocess
import sys
import time
import types
import typing
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.base import PaperInfo
from trustlab.core.constraints import Boolean, InstanceOf, Interval, Options
from trustlab.core.exceptions import ConfigError, UnknownNameError, did_you_mean
from trustlab.core.executor import Executor
from trustlab.core.seeding import isolated_global_rng, thread_settings
from trustlab.core.threads import preserve_torch_threads
from trustlab.experiments.base import MODES, Claim, ExperimentConfig, RunContext, evaluate_claims
from trustlab.results.result import Result

__all__ = ["Experiment", "experiment_ids", "get_experiment", "run_experiment", "exit_status"]

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
    #: claim ids expected to PASS in quick mode (the module's ``QUICK_EXPECTED_PASS``; None if undeclared)
    quick_expected_pass: tuple[str, ...] | None = None
    #: ``key=value`` overrides that switch the paper's mechanism off (the module's ``KNOCKOUT``; None if undeclared)
    knockout: tuple[str, ...] | None = None

    @property
    def premises(self) -> tuple[Claim, ...]:
        return tuple(c for c in self.claims if c.kind == "premise")


@validate_args()
def experiment_ids() -> list[str]:
    """Ids of every experiment module (found without importing them)."""
    import trustlab.experiments as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)
                  if not m.name.startswith("_") and m.name not in _NOT_EXPERIMENTS)


@validate_args(exp_id=[InstanceOf(str)])
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
    expected = getattr(mod, "QUICK_EXPECTED_PASS", None)
    knockout = getattr(mod, "KNOCKOUT", None)
    claims = tuple(mod.CLAIMS)
    _check_claim_ids(exp_id, claims, expected, knockout)
    return Experiment(exp_id, mod.PAPER, mod.Config, mod.run, claims, getattr(mod, "PLOTS", None),
                      getattr(mod, "TITLE", mod.PAPER.title), tuple(getattr(mod, "EXTRAS", ())), mod,
                      None if expected is None else tuple(expected), None if knockout is None else tuple(knockout))


def _check_claim_ids(exp_id: str, claims: tuple[Claim, ...], expected: Any, knockout: Any) -> None:
    """Claim ids are unique, ``requires`` names premises of the same experiment, the gate names known ids."""
    where = f"trustlab.experiments.{exp_id}"
    ids = [c.id for c in claims]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise TypeError(f"{where}.CLAIMS repeats the ids {dup}.")
    premises = {c.id for c in claims if c.kind == "premise"}
    for c in claims:
        unknown = [r for r in c.requires if r not in premises]
        if unknown:
            raise TypeError(f"{where}: claim {c.id!r} requires {unknown}, which are not premises in its CLAIMS.")
    unknown = [i for i in (expected or ()) if i not in ids]
    if unknown:
        raise TypeError(f"{where}.QUICK_EXPECTED_PASS names {unknown}, which are not in its CLAIMS.")
    if knockout is not None and (isinstance(knockout, str) or not all(isinstance(k, str) and "=" in k
                                                                       for k in knockout)):
        raise TypeError(f"{where}.KNOCKOUT must be a tuple of 'key=value' strings. Got {knockout!r}.")


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


@validate_args(lambda: {"cfg": ExperimentConfig()}, cfg=[InstanceOf(ExperimentConfig)],
               overrides=[SequenceOf(InstanceOf(str), min_len=0)])
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


def _git(args: list[str], cwd: Path) -> str | None:
    """Output of a read-only git command (``--no-optional-locks``: never takes the index lock), or None."""
    try:
        out = subprocess.run(["git", "--no-optional-locks", *args], cwd=cwd, capture_output=True, text=True,
                             timeout=5, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git_sha() -> str:
    """HEAD of the checkout trustlab runs from (``-dirty`` with uncommitted tracked changes).

    "unknown (installed package)" when trustlab is not a tracked file of a git checkout, e.g. a wheel in a
    virtual environment that happens to sit inside some other repository.
    """
    here = Path(__file__).resolve().parent
    if _git(["ls-files", "--error-unmatch", Path(__file__).name], here) is None:
        return "unknown (installed package, no git checkout)"
    sha = _git(["rev-parse", "HEAD"], here)
    if not sha:
        return "unknown"
    dirty = _git(["status", "--porcelain", "--untracked-files=no"], here)
    return sha + ("-dirty" if dirty else "")


def _provenance(extra_packages: Sequence[str] = ()) -> dict[str, Any]:
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


@contextlib.contextmanager
def _restored_global_state(seed: int) -> Iterator[None]:
    """Run an experiment from a fixed global state and give the caller's state back afterwards.

    Global RNGs start seeded with ``seed`` (the same state whether the experiment runs alone or after
    another one) and are restored; torch intra-op and BLAS/OpenMP thread counts, warnings filters and
    matplotlib's rc settings are restored too. ``reproduce`` additionally runs each experiment in its own
    process, which also isolates state no save/restore can reach (torch's inter-op pool, imported modules).
    """
    from threadpoolctl import threadpool_limits

    with contextlib.ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        stack.enter_context(preserve_torch_threads())
        stack.enter_context(threadpool_limits(limits=None))  # restores every pool's count on exit
        mpl = sys.modules.get("matplotlib")
        if mpl is not None:
            stack.enter_context(mpl.rc_context())
        stack.enter_context(isolated_global_rng(seed))
        yield


def _import_torch_first(exp: Experiment) -> None:
    """Import torch before the run when the experiment uses it, so its global RNG gets seeded too
    (torch seeds itself from entropy at import; seeding it first makes the start state reproducible)."""
    from trustlab.core.optional import EXTRA_MODULES, is_available

    if any("torch" in EXTRA_MODULES.get(e, ()) for e in exp.extras) and is_available("torch"):
        importlib.import_module("torch")


def _resolve_config(exp: Experiment, mode: str, seeds: Sequence[int] | None, overrides: Iterable[str],
                    knockout: bool = False) -> tuple[ExperimentConfig, list[str]]:
    cfg = exp.config_cls.for_mode(mode)
    overrides = list(overrides)
    if knockout:
        if not exp.knockout:
            raise ConfigError(f"Experiment '{exp.id}' declares no KNOCKOUT, so knockout=True cannot switch its "
                              "mechanism off.")
        overrides = [*exp.knockout, *overrides]  # the user's own --set still wins
    if seeds is not None:
        overrides.append("seeds=" + ",".join(str(int(s)) for s in seeds))
    cfg = apply_overrides(cfg, overrides) if overrides else cfg
    cfg.validate()
    return cfg, overrides


@validate_args(
    exp_id=[InstanceOf(str)], mode=[Options(MODES)], seeds=[SequenceOf(Interval(int, 0, None)), None],
    overrides=[SequenceOf(InstanceOf(str), min_len=0)], out_dir=[InstanceOf(str, os.PathLike), None],
    budget_s=[Interval("real", 0, None, closed="neither"), None], strict_budget=[Boolean()],
    show_progress=[Boolean()], executor=[InstanceOf(Executor), None], knockout=[Boolean()],
)
def run_experiment(
    exp_id: str, mode: str = "quick", *, seeds: Sequence[int] | None = None, overrides: Iterable[str] = (),
    out_dir: str | Path | None = "runs", budget_s: float | None = None, strict_budget: bool = False,
    show_progress: bool = True, executor: Executor | None = None, knockout: bool = False,
) -> tuple[Result, Path | None]:
    """Run one experiment, evaluate its claims, add provenance and write ``<out>/<id>/<mode>/<utc>.json``.

    The mode's budget (``Config.budgets``) is a target: a run past it is recorded with
    ``within_budget=False`` and goes on. Passing ``budget_s`` (the CLI's ``--budget``) or
    ``strict_budget=True`` makes it a hard stop (:class:`BudgetExceededError` at the next
    ``ctx.check_budget``). Time inside ``ctx.untimed(...)`` blocks is recorded separately and not
    measured. The experiment starts from global RNGs seeded with its first seed, and the caller's RNG,
    thread, warnings and matplotlib state is restored afterwards. ``executor`` runs the units the
    experiment maps over (``ctx.map``: seeds, trials, reference models; default: in this process); the
    caller owns it (and closes it). ``knockout=True`` applies the experiment's ``KNOCKOUT`` overrides
    (the mechanism switched off; recorded in provenance ``knockout``) before ``overrides``, and writes
    the result under ``<out>/<id>/<mode>-knockout/`` so it never stands for the real run in a report.
    """
    exp = get_experiment(exp_id)
    cfg, overrides = _resolve_config(exp, mode, seeds, overrides, knockout)
    strict = strict_budget or budget_s is not None
    budget = budget_s if budget_s is not None else exp.config_cls.budgets.get(mode)
    ctx = RunContext(seeds=tuple(cfg.seeds), out_dir=Path(out_dir) if out_dir else None, budget_s=budget,
                     show_progress=show_progress, strict_budget=strict, executor=executor)
    start = _provenance()  # the code that runs: a commit made during a long run must not be recorded
    t0 = time.perf_counter()
    _import_torch_first(exp)
    mapped_before = getattr(executor, "tasks_mapped", 0)
    with _restored_global_state(int(cfg.seeds[0])):
        result = exp.run(cfg, ctx)
    wall = time.perf_counter() - t0
    tasks = getattr(executor, "tasks_mapped", 0) - mapped_before
    if executor is not None and executor.name != "local" and tasks == 0:
        _nothing_distributed(exp_id, executor, ctx)
    if not isinstance(result, Result):
        raise TypeError(f"trustlab.experiments.{exp_id}.run must return a Result. Got {type(result).__name__}.")
    result.experiment, result.mode, result.config = exp_id, mode, cfg.to_dict()
    result.notes.extend(ctx.log)
    untimed = {k: round(v, 3) for k, v in ctx.untimed_s.items()}
    timed = wall - sum(ctx.untimed_s.values())
    result.provenance.update(start, seeds=list(cfg.seeds), wall_time_s=round(wall, 3),
                             timed_s=round(timed, 3), untimed_s=untimed, budget_s=budget, strict_budget=strict,
                             within_budget=budget is None or timed <= budget, overrun_at=ctx.overrun_at,
                             overrides=overrides, paper=dataclasses.asdict(exp.paper),
                             executor=repr(executor) if executor is not None else "local (in process)",
                             executor_tasks=tasks,
                             knockout=list(exp.knockout or ()) if knockout else None)
    result.claims = evaluate_claims(result, exp.claims)
    return result, _save(result, out_dir)


def _nothing_distributed(exp_id: str, executor: Executor, ctx: RunContext) -> None:
    """Say once (a warning and a result note) that a run on a remote executor mapped no task."""
    import warnings

    msg = (f"{exp_id} ran in this process: in this mode it has no independent units to put on the "
           f"{executor.name} executor (its seeds/trials are one unit, or it does not map them)")
    warnings.warn(msg, RuntimeWarning, stacklevel=3)
    ctx.note(msg)


def _save(result: Result, out_dir: str | Path | None) -> Path | None:
    if out_dir is None:
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    folder = result.mode + ("-knockout" if result.provenance.get("knockout") else "")
    return result.save(Path(out_dir) / result.experiment / folder / f"{stamp}.json")


@validate_args(results=[SequenceOf(InstanceOf(Result), min_len=0)])
def exit_status(results: Iterable[Result]) -> int:
    """The command's exit code over results: 2 if a run raised, 1 if a primary claim or premise is FAIL or
    VOID, else 0.

    Secondary claims, skipped claims and budget overruns never change it.
    """
    results = list(results)
    if any(r.error is not None for r in results):
        return 2
    return 0 if all(r.passed for r in results) else 1
