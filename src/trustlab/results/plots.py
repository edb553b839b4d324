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

__all__ = ["bar_plot", "line_plot", "claims_plot", "new_figure", "front_plot"]


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


def _no_data_figure() -> Any:
    """An empty panel saying "no data" (what every plot returns when its columns are missing)."""
    fig, ax = new_figure()
    ax.text(0.5, 0.5, "no data", ha="center", va="center")
    return fig


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
    if df.empty or x not in df or y not in df:
        return _no_data_figure()
    fig, ax = new_figure()
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
    if df.empty or x not in df or y not in df:
        return _no_data_figure()
    fig, ax = new_figure()
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


_COLORS = {"PASS": "#2e7d32", "FAIL": "#c62828", "VOID": "#6a1b9a", "SKIP": "#9e9e9e"}
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_OP = r"(<=|>=|<|>|==|=|\u2264|\u2265)"
_BAND = re.compile(rf"^\s*({_NUM})\s*(?:\+-|\+/-|\u00b1)\s*({_NUM})")
_THRESHOLD = re.compile(rf"^\s*{_OP}?\s*({_NUM})(.*)$", re.S)
_LEADING = re.compile(rf"^\s*({_NUM})(?![\w.])")
@validate_args(lambda: {"result": Result("x", "quick", {}), "x": "a", "y": "b"}, result=[InstanceOf(Result)],
               x=[InstanceOf(str)], y=[InstanceOf(str)], hue=[InstanceOf(str)], facet=[InstanceOf(str)],
               where=_OPT_DICT, title=_OPT_STR, xlabel=_OPT_STR, ylabel=_OPT_STR, logx=["boolean"])
def front_plot(result: Result, x: str, y: str, *, hue: str = "method", facet: str = "dataset",
               where: dict[str, Any] | None = None, title: str | None = None, xlabel: str | None = None,
               ylabel: str | None = None, logx: bool = True) -> Any:
    """One panel per ``facet`` value: the mean of metric ``y`` against the mean of metric ``x`` per ``hue``
    (records in long form: a ``metric`` column names what ``value`` holds), with error bars of one sd
    over the remaining columns (e.g. seeds). Used for complexity-accuracy fronts."""
    from matplotlib.figure import Figure

    df = _frame(result, where)
    if df.empty or "metric" not in df:
        return _no_data_figure()
    facets = list(dict.fromkeys(df[facet])) if facet in df else [None]
    facets = [f for f in facets if {x, y} <= set(df[df[facet] == f]["metric"] if f is not None else df["metric"])]
    if not facets:
        return _no_data_figure()
    fig = Figure(figsize=(3.3 * len(facets), 3.4), dpi=110, layout="constrained")
    axes = fig.subplots(1, len(facets), squeeze=False)[0]
    for ax, f in zip(axes, facets):
        sub = df if f is None else df[df[facet] == f]
        for h in dict.fromkeys(sub[hue]):
            rows = sub[sub[hue] == h]
            xs, ys = rows[rows["metric"] == x]["value"], rows[rows["metric"] == y]["value"]
            if xs.empty or ys.empty:
                continue
            ax.errorbar(float(xs.mean()), float(ys.mean()), xerr=float(np.nan_to_num(xs.std())),
                        yerr=float(np.nan_to_num(ys.std())), fmt="o", ms=5, capsize=2, label=str(h))
        if logx and ax.has_data():
            ax.set_xscale("log")
        ax.set_title(str(f) if f is not None else "", fontsize=9)
        ax.set_xlabel(xlabel or x, fontsize=8)
        ax.set_ylabel(ylabel or y, fontsize=8)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(4, len(labels)), fontsize=7)
    if title:
        fig.suptitle(title, fontsize=9)
    return fig


def _short(value: Any, width: int = 38) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def _number(v: Any) -> float | None:
    if isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v)):
        return float(v)
    return None


def _leading_number(v: Any) -> float | None:
    """A number, or the number a short text starts with (``"0.91 (layer 15)"`` -> 0.91)."""
    if (x := _number(v)) is not None:
        return x
    m = _LEADING.match(v) if isinstance(v, str) else None
    return float(m.group(1)) if m and math.isfinite(float(m.group(1))) else None


def parse_threshold(threshold: Any) -> tuple[str, float] | None:
    """``(operator, value)`` of a threshold such as ``0.6``, ``">= 0.6"``, ``"<= 0.3x"`` or ``">= 0.75 and ..."``
    (its first comparison); ``("+-", centre)`` for a band ``"0.5 +- 0.1"``; ``"?"`` is the operator of a bare
    number (its direction is not stated). None when the threshold does not start with a number."""
    if _number(threshold) is not None:
        return "?", float(threshold)
    if not isinstance(threshold, str):
        return None
    if m := _BAND.match(threshold):
        return "+-", float(m.group(1))
    m = _THRESHOLD.match(threshold)
    if m is None:
        return None
    op = {"\u2264": "<=", "\u2265": ">=", "=": "==", None: "?"}.get(m.group(1), m.group(1))
    return op, float(m.group(2))


def _band_width(threshold: Any) -> float:
    m = _BAND.match(threshold) if isinstance(threshold, str) else None
    return float(m.group(2)) if m else 0.0


def _text_row(ax: Any, c: Any) -> None:
    from trustlab.results._table import fmt_value, shorten

    ax.set_xticks([])
    ax.spines["bottom"].set_visible(False)
    if c.passed is None:
        text = c.detail or "not checked in this run"
    else:
        text = (f"observed {shorten(fmt_value(c.observed, c.unit), 45)}   threshold "
                f"{shorten(fmt_value(c.threshold, c.unit), 35)}   (not numeric: as text)")
    ax.text(0.0, 0.5, text, transform=ax.transAxes, va="center", fontsize=7)


def _claim_row(ax: Any, c: Any) -> None:
    from trustlab.results._table import shorten

    status = c.status
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.set_ylabel(f"{shorten(c.id, 10)}\n{status}" + (" (2nd)" if c.secondary else ""), rotation=0, ha="right",
                  va="center", fontsize=7, color=_COLORS[status], weight="bold")
    obs, thr, paper = _leading_number(c.observed), parse_threshold(c.threshold), _number(c.paper_value)
    if obs is None or thr is None or c.passed is None:
        _text_row(ax, c)
        return
    op, t = thr
    if op == "?":  # a bare number: the passing side is where a PASS lies (or the other side of a FAIL)
        op = ">=" if (obs >= t) == bool(c.passed) else "<="
    base = _leading_number(c.baseline)
    half = _band_width(c.threshold)
    values = [v for v in (obs, t - half, t + half, paper, base) if v is not None]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.15 or max(abs(hi), 1.0) * 0.15
    left, right = lo - pad, hi + pad
    if op in (">=", ">"):
        ax.axvspan(t, right, color=_COLORS["PASS"], alpha=0.10, lw=0)
    elif op in ("<=", "<"):
        ax.axvspan(left, t, color=_COLORS["PASS"], alpha=0.10, lw=0)
    elif op == "+-":
        ax.axvspan(t - half, t + half, color=_COLORS["PASS"], alpha=0.10, lw=0)
    ax.axvline(t, color="black", ls="--", lw=1)
    ax.plot([obs], [0], "o", color=_COLORS[status], ms=7, label="observed")
    if base is not None:
        ax.plot([base], [0], "s", mfc="none", mec="#555", ms=6, label="baseline")
    if paper is not None:
        ax.plot([paper], [0], "D", color="#1565c0", ms=5, label="paper")
    rest = _THRESHOLD.match(c.threshold) if isinstance(c.threshold, str) else None
    if rest is not None and rest.group(3).strip(" x%"):  # more than "op number unit": show the whole rule
        ax.text(1.0, 0.9, shorten(c.threshold, 60), transform=ax.transAxes, ha="right", va="top", fontsize=6,
                color="#555")
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
