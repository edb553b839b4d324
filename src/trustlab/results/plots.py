"""Plots that only draw from a :class:`Result` (never compute experiment numbers).

Figures are built with ``matplotlib.figure.Figure`` directly, so no GUI backend or pyplot state is
involved; save them with ``fig.savefig(path)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf
from trustlab.results.result import Result

__all__ = ["bar_plot", "line_plot", "claims_plot", "new_figure", "front_plot"]


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


@validate_args(lambda: {"result": Result("x", "quick", {}), "x": "a", "y": "b"}, result=[InstanceOf(Result)],
               x=[InstanceOf(str)], y=[InstanceOf(str)], hue=[InstanceOf(str)], facet=[InstanceOf(str)],
               logx=["boolean"])
def front_plot(result: Result, x: str, y: str, *, hue: str = "method", facet: str = "dataset",
               where: dict[str, Any] | None = None, title: str | None = None, xlabel: str | None = None,
               ylabel: str | None = None, logx: bool = True) -> Any:
    """One panel per ``facet`` value: the mean of metric ``y`` against the mean of metric ``x`` per ``hue``
    (records in long form: a ``metric`` column names what ``value`` holds), with error bars of one sd
    over the remaining columns (e.g. seeds). Used for complexity-accuracy fronts."""
    from matplotlib.figure import Figure

    df = _frame(result, where)
    if df.empty or "metric" not in df:
        fig, ax = new_figure()
        ax.text(0.5, 0.5, "no data", ha="center", va="center")
        return fig
    facets = list(dict.fromkeys(df[facet])) if facet in df else [None]
    facets = [f for f in facets if {x, y} <= set(df[df[facet] == f]["metric"] if f is not None else df["metric"])]
    if not facets:
        fig, ax = new_figure()
        ax.text(0.5, 0.5, "no data", ha="center", va="center")
        return fig
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


def claims_plot(result: Result) -> Any:
    """One row per claim: a PASS/FAIL/SKIP box with the observed value beside its threshold.

    Claims compare values of different kinds and scales (ratios, AUCs, counts, seconds), so they are
    shown side by side as text on a status strip rather than on one shared numeric axis.
    """
    rows = result.claims
    fig, ax = new_figure(7.2, 0.7 + 0.42 * max(1, len(rows)))
    ax.set_axis_off()
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.5, max(1, len(rows)) - 0.5)
    ax.invert_yaxis()
    ax.set_title(f"{result.experiment} [{result.mode}]: claims", fontsize=9)
    if not rows:
        ax.text(0.5, 0, "no claims", ha="center", va="center")
        return fig
    colors = {"PASS": "#2e7d32", "FAIL": "#c62828", "SKIP": "#9e9e9e"}
    for i, c in enumerate(rows):
        ax.add_patch(_rect((0.0, i - 0.38), 0.11, 0.76, colors[c.status]))
        ax.text(0.055, i, c.status, ha="center", va="center", color="white", fontsize=8, weight="bold")
        ax.text(0.13, i, _short(c.id, 12), va="center", fontsize=8, weight="bold")
        if c.passed is None:
            ax.text(0.25, i, _short(c.detail or "not checked in this run", 60), va="center", fontsize=7)
            continue
        ax.text(0.25, i, "observed: " + _short(c.observed, 30), va="center", fontsize=7)
        ax.text(0.66, i, "threshold: " + _short(c.threshold, 28), va="center", fontsize=7)
    return fig


def _rect(xy: tuple[float, float], width: float, height: float, color: str) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle(xy, width, height, color=color)
