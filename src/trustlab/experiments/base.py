"""The experiment contract (DESIGN section 4): Config modes, RunContext, Claim and claim evaluation.

An experiment module ``trustlab/experiments/<id>.py`` defines:

* ``PAPER`` (:class:`~trustlab.core.base.PaperInfo`) and optionally ``TITLE`` and ``EXTRAS``;
* ``Config``: a frozen dataclass subclassing :class:`ExperimentConfig` with ``quick()`` (<= 60 s, used
  in tests), ``default()`` (<= 10 min on 2 cores) and ``paper()`` (the paper's setting);
* ``run(cfg, ctx) -> Result`` using only public method APIs;
* ``CLAIMS``: a list of :class:`Claim`; optionally ``PLOTS(result) -> {name: Figure}``;
* ``QUICK_EXPECTED_PASS``: the tuple of claim or premise ids expected to PASS in quick mode
  (``tests/test_reproduce.py`` fails when one of them does not, so a regression shows in CI). It holds
  primary claims and premises only, never a secondary line, and at least one id about the mechanism;
* ``KNOCKOUT``: ``--set``-style ``"key=value"`` overrides that switch the paper's mechanism off while
  keeping the rest of the run (zero training steps, alpha = 0, the baseline in the method's place). Under
  it, every id in ``QUICK_EXPECTED_PASS`` must FAIL or be VOID (``tests/test_knockouts.py``).

``CLAIMS`` holds the premises too (:func:`Premise`): pre-registered checks that the run exercised the
mechanism (the model learned the task, the attack moved the model, the method's own term matters). A
claim names the premises it rests on in ``requires``; when one of them does not PASS, the claim is VOID.

Module top level must stay light (no torch import): heavy imports go inside ``run``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from trustlab.core.arguments import AnyValue, SequenceOf, validate_args
from trustlab.core.constraints import CallableRule, InstanceOf, Interval, Options, Satisfies
from trustlab.core.exceptions import BudgetExceededError, ConfigError
from trustlab.results.result import ClaimOutcome, Result

__all__ = ["ExperimentConfig", "RunContext", "Claim", "CheckResult", "Premise", "KINDS"]

MODES = ("quick", "default", "paper")
#: what a CLAIMS entry is: a paper claim, or a premise claims rest on
KINDS = ("claim", "premise")


#: what RunContext.progress and RunContext.map iterate over
_ITERABLE = [Satisfies(lambda v: iter(v) is not None, "an iterable", invalid=[None, 3], valid=[])]
_TEXT = [InstanceOf(str)]


@dataclass(frozen=True)
class ExperimentConfig:
    """Base of every experiment's frozen ``Config``. ``seeds`` are the experiment's repetitions."""

    seeds: tuple[int, ...] = (0,)
    #: wall-clock budget of each mode, in seconds (None = unbounded)
    budgets: ClassVar[dict[str, float | None]] = {"quick": 60.0, "default": 600.0, "paper": None}

    @classmethod
    def quick(cls) -> ExperimentConfig:
        """Tiny setting for tests and the demo (<= 60 s on 2 cores)."""
        return cls.default()

    @classmethod
    def default(cls) -> ExperimentConfig:
        """The CPU-scale setting (<= 10 min on 2 cores)."""
        return cls()

    @classmethod
    def paper(cls) -> ExperimentConfig:
        """The paper's own setting (may need hours or a GPU)."""
        return cls.default()

    @classmethod
    @validate_args(mode=[Options(MODES)])
    def for_mode(cls, mode: str) -> ExperimentConfig:
        return getattr(cls, mode)()

    def validate(self) -> None:
        """Check field values; override to add rules (raise ConfigError)."""
        if not self.seeds or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in self.seeds):
            raise ConfigError(
                f"The 'seeds' field of {type(self).__name__} must be a non-empty tuple of ints >= 0. "
                f"Got {self.seeds!r} instead."
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class RunContext:
    """What a running experiment may use: its seeds, output folder, budget and progress reporting.

    ``budget_s`` is a target: :meth:`check_budget` records the first point at which the run went past
    it (``overrun_at``) and carries on, unless ``strict_budget`` is set (the user passed ``--budget S`` or
    ``--strict-budget``), in which case it raises :class:`BudgetExceededError`. Time spent inside
    :meth:`untimed` blocks (e.g. converting a model on first use) is kept out of the measured time and
    recorded per label in ``untimed_s``.
    """

    seeds: tuple[int, ...]
    out_dir: Path | None = None
    budget_s: float | None = None
    show_progress: bool = True
    strict_budget: bool = False
    #: the :class:`~trustlab.core.executor.Executor` that :meth:`map` runs tasks on (None: in this process)
    executor: Any = None
    started: float = field(default_factory=time.perf_counter)
    log: list[str] = field(default_factory=list)
    untimed_s: dict[str, float] = field(default_factory=dict)
    overrun_at: str | None = None
    _untimed_since: float | None = field(default=None, repr=False)
    _untimed_depth: int = field(default=0, repr=False)

    @property
    def elapsed(self) -> float:
        """Measured seconds so far: wall time since the start minus time spent in :meth:`untimed` blocks."""
        now = time.perf_counter()
        open_block = now - self._untimed_since if self._untimed_since is not None else 0.0
        return now - self.started - sum(self.untimed_s.values()) - open_block

    @validate_args(label=[Satisfies(lambda v: isinstance(v, str) and bool(v), "a non-empty str", invalid=["", None])],
                   _enforced_by_body=True)
    @contextlib.contextmanager
    def untimed(self, label: str) -> Iterator[None]:
        """Keep the block's time out of the budget (recorded under ``label`` in provenance ``untimed_s``).

        Use it for one-off preparation a user pays once per machine, not for the measured work::

            with ctx.untimed("load SmolLM2"):
                model, tok = load_model("smollm2-135m-instruct")
        """
        if not isinstance(label, str) or not label:
            raise ConfigError(f"The 'label' argument of RunContext.untimed must be a non-empty str. Got {label!r} instead.")
        outer = self._untimed_depth == 0
        t0 = time.perf_counter()
        if outer:
            self._untimed_since = t0
        self._untimed_depth += 1
        try:
            yield
        finally:
            self._untimed_depth -= 1
            if outer:
                self._untimed_since = None
                self.untimed_s[label] = self.untimed_s.get(label, 0.0) + time.perf_counter() - t0

    @validate_args(what=_TEXT)
    def check_budget(self, what: str = "") -> None:
        """Record (or, with a strict budget, refuse) running past the budget; call it between stages."""
        if self.budget_s is None or self.elapsed <= self.budget_s:
            return
        where = f" at {what}" if what else ""
        if self.strict_budget:
            raise BudgetExceededError(
                f"The experiment ran past its strict budget of {self.budget_s:.0f} s ({self.elapsed:.0f} s "
                f"measured{where}). Use a smaller mode, or drop --budget/--strict-budget to treat the budget "
                "as a target."
            )
        if self.overrun_at is None:
            self.overrun_at = what or "?"
            self.note(f"budget: passed the {self.budget_s:.0f} s target after {self.elapsed:.0f} s{where}; "
                      "the run went on (the machine may be busy; results are unaffected).")

    @validate_args(iterable=_ITERABLE, desc=_TEXT, total=[Interval(int, 0, None), None])
    def progress(self, iterable: Iterable[Any], desc: str = "", total: int | None = None) -> Iterator[Any]:
        """Wrap an iterable in a progress bar (tqdm, to stderr) when progress is on."""
        if not self.show_progress:
            yield from iterable
            return
        from tqdm.auto import tqdm

        yield from tqdm(iterable, desc=desc, total=total, leave=False)

    @validate_args(fn=[CallableRule()], items=_ITERABLE, desc=_TEXT,
                   resources=[AnyValue("checked by trustlab.core.executor.map_items, which it is handed to")])
    def map(self, fn: Callable[[Any], Any], items: Iterable[Any], desc: str = "",
            resources: dict[str, Any] | None = None) -> list[Any]:
        """``[fn(item) for item in items]`` through the run's executor (local, process pool or Ray), for the
        independent units a run loops over (seeds, trials, grid points). Order is kept, each task's global
        RNGs are seeded from the run's first seed and the task's index, and one progress bar counts the
        finished tasks across workers. ``fn`` must not rely on changing ``ctx`` (a worker gets a copy).
        ``resources`` is what each task needs beyond its CPUs (``{"num_gpus": "auto"}`` for an LLM
        fine-tune; see :func:`trustlab.core.executor.check_resources`)."""
        from trustlab.core.executor import map_items

        return map_items(self.executor, fn, list(items), seed=int(self.seeds[0]), desc=desc,
                         show_progress=self.show_progress, resources=resources)

    @validate_args(message=_TEXT)
    def note(self, message: str) -> None:
        self.log.append(message)


@dataclass(frozen=True)
class CheckResult:
    """What a claim's check found on one run.

    ``passed``: True/False, or None when the claim does not apply to this run. ``observed``: the measured
    value (a number, or a short text); ``threshold``: what it is compared with (e.g. ``">= 0.6"``);
    ``baseline``: the value of the baseline it is compared against, if any; ``unit``: printed after
    numbers (e.g. ``"points"``, ``"x"``, ``"s"``); ``detail``: longer text for the report only.
    """

    passed: bool | None
    observed: Any
    threshold: Any
    baseline: Any = None
    unit: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Claim:
    """A paper claim checked on a run's own numbers.

    ``check(result)`` returns a :class:`CheckResult`. The check must read only ``result`` (never
    constants standing in for measurements). ``secondary`` marks a line reported beside a primary claim
    (e.g. a measurement added after the primary one failed); it never changes the run's exit status.
    ``scale_note`` may be a callable of the run's config dict, so counts in it come from the config.
    ``paper_value`` is the paper's own number for the measured quantity, where it reports one (drawn in
    the claims picture beside the observed value and the threshold; never used by the check).
    ``kind`` is ``"claim"`` or ``"premise"`` (see :func:`Premise`); ``requires`` names the premises the
    claim rests on: when one of them is not PASS on the run, the claim's status is VOID. ``timed`` marks a
    claim whose observed value is, or depends on, a wall-clock or memory measurement (a speed ratio, an
    arm run for equal wall time): two runs of the same code may differ there, so comparisons across executors leave it
    out (:func:`trustlab.results.compare.comparable`).
    """

    id: str
    statement: str
    check: Callable[[Result], CheckResult]
    modes: tuple[str, ...] = MODES
    scale_note: str | Callable[[dict[str, Any]], str] = ""
    secondary: bool = False
    paper_value: float | None = None
    kind: str = "claim"
    requires: tuple[str, ...] = ()
    timed: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"The 'kind' argument of Claim must be one of {KINDS}. Got {self.kind!r} instead.")
        if isinstance(self.requires, str) or not all(isinstance(r, str) and r for r in self.requires):
            raise ConfigError(f"The 'requires' argument of Claim {self.id!r} must be a tuple of premise ids. "
                              f"Got {self.requires!r} instead.")
        if self.kind == "premise" and (self.secondary or self.requires):
            raise ConfigError(f"Premise {self.id!r} must be primary and rest on no other premise (secondary="
                              f"{self.secondary!r}, requires={self.requires!r}).")
        object.__setattr__(self, "requires", tuple(self.requires))

    @validate_args(config=[InstanceOf(Mapping)])
    def note_for(self, config: dict[str, Any]) -> str:
        return self.scale_note(config) if callable(self.scale_note) else self.scale_note


def _example_check(result: Result) -> CheckResult:
    return CheckResult(True, 1.0, ">= 1")


@validate_args(lambda: {"id": "pre-x", "statement": "the mechanism ran", "check": _example_check},
               id=[InstanceOf(str)], statement=[InstanceOf(str)], check=[CallableRule()],
               modes=[SequenceOf(Options(MODES))], scale_note=[InstanceOf(str), CallableRule()],
               paper_value=[Interval("real", None, None), None])
def Premise(id: str, statement: str, check: Callable[[Result], CheckResult], *,  # noqa: N802 - a Claim kind
            modes: tuple[str, ...] = MODES, scale_note: str | Callable[[dict[str, Any]], str] = "",
            paper_value: float | None = None) -> Claim:
    """A pre-registered check that the paper's mechanism is exercised in this run.

    Examples: "the base model's zero-shot accuracy is in [10 %, 60 %]", "the feature term is >= 10 % of the
    loss gradient norm", "the attack drops the undefended model by >= 30 points". Claims that rest on it
    name its id in ``requires``; when it fails they are VOID (never PASS). A failed premise is itself a
    failed primary check (the run exits 1).
    """
    return Claim(id, statement, check, modes=modes, scale_note=scale_note, paper_value=paper_value, kind="premise")


def _as_check_result(res: Any) -> CheckResult:
    if isinstance(res, CheckResult):
        return res
    raise TypeError(f"a claim check must return a CheckResult; got {type(res).__name__}")


def _check_one(c: Claim, result: Result) -> ClaimOutcome:
    try:
        note = c.note_for(result.config)
    except Exception as exc:  # noqa: BLE001 - a broken note generator must not hide the claim
        note = f"(scale note failed: {type(exc).__name__}: {exc})"
    kw = {"scale_note": note, "secondary": c.secondary, "paper_value": c.paper_value, "kind": c.kind,
          "requires": list(c.requires), "timed": bool(c.timed)}
    if result.mode not in c.modes:
        return ClaimOutcome(c.id, c.statement, None, None, None, detail=f"not checked in mode '{result.mode}'", **kw)
    try:
        r = _as_check_result(c.check(result))
        return ClaimOutcome(c.id, c.statement, None if r.passed is None else bool(r.passed), r.observed,
                            r.threshold, r.baseline, detail=r.detail, unit=r.unit, **kw)
    except Exception as exc:  # noqa: BLE001 - a broken check must show up as a failed claim
        return ClaimOutcome(c.id, c.statement, False, None, None, detail=f"check raised {type(exc).__name__}: {exc}",
                            **kw)


def _premise_line(p: ClaimOutcome | None, pid: str) -> str:
    if p is None:
        return f"premise {pid} is not declared"
    from trustlab.results._table import fmt_value

    return (f"premise {pid} {p.status}: observed {fmt_value(p.observed, p.unit)}, threshold "
            f"{fmt_value(p.threshold, p.unit)}")


@validate_args(lambda: {"result": Result("example", "quick", {})}, result=[InstanceOf(Result)],
               claims=[SequenceOf(InstanceOf(Claim), min_len=0)])
def evaluate_claims(result: Result, claims: Iterable[Claim]) -> list[ClaimOutcome]:
    """Run every claim's check on ``result``; a check that raises is recorded as FAIL with the error.

    Premises are checked first; a checked claim whose required premise is not PASS is VOID
    (``voided_by`` lists the premises, and its detail gives their numbers). Outcomes keep the order of
    ``claims``.
    """
    claims = list(claims)
    premises = {c.id: _check_one(c, result) for c in claims if c.kind == "premise"}
    out = []
    for c in claims:
        if c.kind == "premise":
            out.append(premises[c.id])
            continue
        o = _check_one(c, result)
        bad = [pid for pid in c.requires if pid not in premises or premises[pid].status != "PASS"]
        if bad and o.passed is not None:
            o.voided_by = bad
            why = "; ".join(_premise_line(premises.get(pid), pid) for pid in bad)
            o.detail = f"VOID: {why}" + (f". {o.detail}" if o.detail else "")
        out.append(o)
    return out
