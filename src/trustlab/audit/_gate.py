"""The audit's CI gate (``--fail-on``) and check settings from strings (``--set check.param=value``).

The gate fails closed: a rule on a metric whose check did not produce it (not run, skipped, errored, or a
missing value) fails unless the rule is marked optional with ``?`` (``membership_auc?>0.6``); ``any`` fails on
a flagged *or* an errored check.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from trustlab.audit._report import AuditReport
from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Satisfies
from trustlab.core.exceptions import InputError, TrustlabError, did_you_mean

__all__ = ["FailRule", "parse_fail_on", "evaluate_fail_on", "parse_settings", "AuditCrashError"]

_OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt}
_RULE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\?)?\s*(>=|<=|==|!=|>|<)\s*([-+0-9.eE]+|inf)\s*$")


#: metrics named after the data (a sensitive column, a control): the check that reports them
_PREFIXES = {"fairness_": "fairness", "controls_": "explanation_controls"}


class AuditCrashError(TrustlabError, RuntimeError):
    """The user's model (or the audit itself) raised while the audit ran: not bad input (exit 2) and not a
    policy failure (exit 1), so ``trustlab audit`` exits 3 with the message, which names the step."""


class FailRule(NamedTuple):
    """One ``--fail-on`` rule: it fails the gate when ``metric OP threshold`` holds; with ``optional`` (``?``) a
    missing metric (its check skipped, errored or not run) passes instead of failing."""

    metric: str
    op: str
    threshold: float
    optional: bool = False

    def __str__(self) -> str:
        return f"{self.metric}{'?' if self.optional else ''}{self.op}{self.threshold:g}"


@validate_args(policy=[InstanceOf(str), SequenceOf(InstanceOf(str))])
def parse_fail_on(policy: str | Sequence[str]) -> list[FailRule]:
    """Parse a fail-on policy: ``"membership_auc>0.6,duplicate_rows>0"`` (or a list of such rules) into
    :class:`FailRule` s. ``metric?>x`` makes a rule optional (a missing metric passes); ``"any"`` means
    ``flagged>0`` and ``errored>0``."""
    items = [p for part in ([policy] if isinstance(policy, str) else policy) for p in part.split(",") if p.strip()]
    out = []
    for item in items:
        if item.strip() == "any":
            out += [FailRule("flagged", ">", 0.0), FailRule("errored", ">", 0.0)]
            continue
        m = _RULE.match(item)
        if not m:
            raise InputError(f"The 'policy' argument of parse_fail_on must be rules like 'membership_auc>0.6' or "
                             f"'membership_auc?>0.6' (metric, optional '?', one of {list(_OPS)}, a number) or 'any'. "
                             f"Got {item!r} instead.")
        out.append(FailRule(m.group(1), m.group(3), float(m.group(4)), m.group(2) == "?"))
    return out


def metric_owners() -> dict[str, str]:
    """Which check reports each metric name (so a rule on a check that did not run is not taken for a typo)."""
    from trustlab.audit._checks import METRICS

    return {m: check for check, names in METRICS.items() for m in names}


def _missing_reason(report: AuditReport, rule: FailRule, owner: str | None) -> str:
    ran = {c.name: c for c in report.checks}
    if owner is not None and owner not in ran:
        return f"check {owner!r} did not run (not in --checks)"
    if owner is not None and ran[owner].status in ("skipped", "error"):
        what = "was skipped" if ran[owner].status == "skipped" else "errored"
        return f"check {owner!r} {what}: {ran[owner].reason}"
    return "the metric has no value"


@validate_args(_example=lambda: {"report": None, "rules": []},
               report=[Satisfies(lambda r: r is None or isinstance(r, AuditReport), "an AuditReport", invalid=[3, "x"])],
               rules=[InstanceOf(list, tuple)])
def evaluate_fail_on(report: AuditReport | None, rules: Sequence[tuple[Any, ...]]) -> list[str]:
    """The rules that fail the gate, each as text (``"membership_auc=0.71 > 0.6"``). Fails closed: a rule whose
    metric is missing (check not run, skipped or errored, or no value) fails unless it is optional (``?``). An
    unknown metric name is an ``InputError`` ("did you mean")."""
    if report is None:
        return []
    metrics = report.metrics
    owners = metric_owners()
    known = set(metrics) | set(owners) | {"flagged", "errored"}
    failures = []
    for raw in rules:
        rule = FailRule(*raw)
        if rule.metric not in known and not rule.metric.startswith(tuple(_PREFIXES)):
            raise InputError(f"The 'fail_on' rule names an unknown metric {rule.metric!r}."
                             f"{did_you_mean(rule.metric, sorted(known))} Metrics: {sorted(known)}.")
        value = metrics.get(rule.metric)
        owner = owners.get(rule.metric) or next((c for p, c in _PREFIXES.items() if rule.metric.startswith(p)), None)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            if not rule.optional:
                failures.append(f"{rule}: fails closed, {_missing_reason(report, rule, owner)} "
                                f"(write {rule.metric}?{rule.op}{rule.threshold:g} to let a missing value pass)")
            continue
        if _OPS[rule.op](float(value), rule.threshold):
            failures.append(f"{rule.metric}={float(value):.4g} {rule.op} {rule.threshold:g}")
    return failures


def _typed(text: str, current: Any, where: str) -> Any:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        value = text
    if isinstance(current, bool):
        if str(text).lower() in ("true", "false"):
            return str(text).lower() == "true"
        ok = isinstance(value, bool)
    elif isinstance(current, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(current, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        ok = isinstance(value, type(current)) if current is not None else True
    if not ok:
        raise InputError(f"The 'set' argument of audit: {where} must be a {type(current).__name__} "
                         f"(default {current!r}). Got {text!r} instead.")
    return value


@validate_args(items=[SequenceOf(InstanceOf(str), min_len=0)])
def parse_settings(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``["membership.n_reference=8", "data_quality.max_suspect_share=0.05"]`` as ``audit(settings=...)``, each
    value typed like its default (unknown checks and settings get "did you mean")."""
    from trustlab.audit._checks import DEFAULTS

    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, eq, text = item.partition("=")
        check, dot, param = key.strip().partition(".")
        if not eq or not dot:
            raise InputError(f"The 'set' argument of audit must look like check.param=value (e.g. "
                             f"membership.n_reference=8). Got {item!r} instead.")
        if check not in DEFAULTS:
            raise InputError(f"The 'set' argument of audit names an unknown check {check!r}."
                             f"{did_you_mean(check, DEFAULTS)}")
        if param not in DEFAULTS[check]:
            raise InputError(f"The 'set' argument of audit: check {check!r} has no setting {param!r} (settings: "
                             f"{list(DEFAULTS[check])}).{did_you_mean(param, DEFAULTS[check])}")
        out.setdefault(check, {})[param] = _typed(text.strip(), DEFAULTS[check][param], key.strip())
    return out
