"""Plots that only draw from a :class:`Result` (never compute experiment numbers).

Figures are built with ``matplotlib.figure.Figure`` directly, so no GUI backend or pyplot state is
involved; save them with ``fig.savefig(path)``.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf, Interval
from trustlab.results.result import Result

__all__ = ["bar_plot", "line_plot", "claims_plot", "new_figure"]


_RESULT = [InstanceOf(Result)]
_OPT_STR = [InstanceOf(str), None]
_OPT_DICT = [InstanceOf(dict), None]
_PLOT_ARGS = {"result": _RESULT, "x": [InstanceOf(str)], "y": [InstanceOf(str)], "hue": _OPT_STR, "where": _OPT_DICT,
              "title": _OPT_STR, "ylabel": _OPT_STR}


def _example_result() -> dict[str, Any]:
    return {"result": Result("example", "quick", {})}


@validate_args(width=[Interval("real", 0, None, closed="neither")], height=[Interval("real", 0, None, closed="neither")])
def new_figure(width: float = 6.0, height: float = 3.6) -> tuple[Any, Any]:
    """A (figure, axes) pair without pyplot."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    return fig, fig.add_subplot(1, 1, 1)


def _frame(result: Result, query: dict[str, Any] | None) -> Any:
    df = result.to_frame()
    for k, v in (query or {}).items():
        if k in df:
            df = df[df[k] == v]
    return df


@validate_args(_example_result, **_PLOT_ARGS)
def bar_plot(result: Result, x: str, y: str = "value", hue: str | None = None, *, where: dict[str, Any] | None = None,
             title: str | None = None, ylabel: str | None = None) -> Any:
    """Mean of ``y`` per ``x`` (and ``hue``) with a standard-deviation error bar over the other columns."""
    df = _frame(result, where)
    fig, ax = new_figure()
    if df.empty or x not in df or y not in df:
        ax.text(0.5, 0.5, "no data", ha="center", va="center")
        return fig
    xs = list(dict.fromkeys(df[x]))
    hues = list(dict.fromkeys(df[hue])) if hue and hue in df else [None]
    width = 0.8 / len(hues)
    for j, h in enumerate(hues):
        sub = df if h is None else df[df[hue] == h]
        grp = sub.groupby(x)[y]
        means = [grp.mean().get(v, np.nan) for v in xs]
        stds = [grp.std().get(v, 0.0) for v in xs]
        pos = np.arange(len(xs)) + (j - (len(hues) - 1) / 2) * width
        ax.bar(pos, means, width, yerr=np.nan_to_num(stds), capsize=2, label=None if h is None else str(h))
    ax.set_xticks(np.arange(len(xs)), [str(v) for v in xs], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel or y)
    ax.set_title(title or f"{result.experiment}: {y} by {x}", fontsize=9)
    if hues != [None]:
        ax.legend(fontsize=7)
    return fig


@validate_args(_example_result, **_PLOT_ARGS)
def line_plot(result: Result, x: str, y: str = "value", hue: str | None = None, *, where: dict[str, Any] | None = None,
              title: str | None = None, ylabel: str | None = None) -> Any:
    """Mean of ``y`` against ``x`` (numeric), one line per ``hue``."""
    df = _frame(result, where)
    fig, ax = new_figure()
    if df.empty or x not in df or y not in df:
        ax.text(0.5, 0.5, "no data", ha="center", va="center")
        return fig
    groups = [(None, df)] if not hue or hue not in df else list(df.groupby(hue, sort=False))
    for h, sub in groups:
        m = sub.groupby(x)[y].mean().sort_index()
        ax.plot(m.index, m.values, marker="o", ms=3, label=None if h is None else str(h))
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel or y)
    ax.set_title(title or f"{result.experiment}: {y} vs {x}", fontsize=9)
    if hue and hue in df:
        ax.legend(fontsize=7)
    return fig


_COLORS = {"PASS": "#2e7d32", "FAIL": "#c62828", "SKIP": "#9e9e9e"}
_THRESHOLD = re.compile(r"^\s*(<=|>=|<|>|==|=|\u2264|\u2265)?\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*\S{0,12}\s*$")


def _number(v: Any) -> float | None:
    if isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v)):
        return float(v)
    return None


def parse_threshold(threshold: Any) -> tuple[str, float] | None:
    """``(operator, value)`` of a threshold such as ``0.6``, ``">= 0.6"`` or ``"<= 0.3x"``; None if not numeric."""
    if _number(threshold) is not None:
        return ">=", float(threshold)
    if not isinstance(threshold, str):
        return None
    m = _THRESHOLD.match(threshold)
    if m is None:
        return None
    op = {"\u2264": "<=", "\u2265": ">=", "=": "==", None: ">="}.get(m.group(1), m.group(1))
    return op, float(m.group(2))


def _claim_row(ax: Any, c: Any) -> None:
    from trustlab.results._table import fmt_value, shorten

    status = c.status
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.set_ylabel(f"{shorten(c.id, 10)}\n{status}" + (" (2nd)" if c.secondary else ""), rotation=0, ha="right",
                  va="center", fontsize=7, color=_COLORS[status], weight="bold")
    obs, thr, paper = _number(c.observed), parse_threshold(c.threshold), _number(c.paper_value)
    if obs is None or thr is None:
        ax.set_xticks([])
        ax.spines["bottom"].set_visible(False)
        text = (c.detail or "not checked in this run") if c.passed is None else (
            f"observed {shorten(fmt_value(c.observed, c.unit), 50)}   threshold {shorten(fmt_value(c.threshold, c.unit), 30)}")
        ax.text(0.0, 0.5, text + ("" if obs is not None or c.passed is None else "  (not a number: shown as text)"),
                transform=ax.transAxes, va="center", fontsize=7)
        return
    op, t = thr
    base = _number(c.baseline)
    values = [v for v in (obs, t, paper, base) if v is not None]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.15 or max(abs(hi), 1.0) * 0.15
    left, right = lo - pad, hi + pad
    if op in (">=", ">"):
        ax.axvspan(t, right, color=_COLORS["PASS"], alpha=0.10, lw=0)
    elif op in ("<=", "<"):
        ax.axvspan(left, t, color=_COLORS["PASS"], alpha=0.10, lw=0)
    ax.axvline(t, color="black", ls="--", lw=1)
    ax.plot([obs], [0], "o", color=_COLORS[status], ms=7, label="observed")
    if base is not None:
        ax.plot([base], [0], "s", mfc="none", mec="#555", ms=6, label="baseline")
    if paper is not None:
        ax.plot([paper], [0], "D", color="#1565c0", ms=5, label="paper")
    ax.set_xlim(left, right)
    ax.set_ylim(-1, 1)
    ax.tick_params(axis="x", labelsize=6)
    if c.unit:
        ax.set_xlabel(c.unit, fontsize=6, labelpad=0)


@validate_args(result=_RESULT)
def claims_plot(result: Result) -> Any:
    """Per claim, the observed value against its threshold (shaded: the passing side), with the paper's
    value (diamond) and the baseline (square) where known.

    Claims compare values of different kinds and scales (ratios, AUCs, counts, seconds), so each claim has
    its own axis. A claim whose observed value or threshold is not a number is written out as text.
    """
    from matplotlib.figure import Figure

    rows = result.claims
    n = max(1, len(rows))
    fig = Figure(figsize=(7.2, 0.9 + 0.62 * n), dpi=110, layout="constrained")
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    fig.suptitle(f"{result.experiment} [{result.mode}]: observed value (dot) vs threshold (dashed line)",
                 fontsize=9)
    if not rows:
        axes[0].set_axis_off()
        axes[0].text(0.5, 0.5, "no claims", ha="center", va="center")
        return fig
    for ax, c in zip(axes, rows):
        _claim_row(ax, c)
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=len(handles), fontsize=7)
    return fig
