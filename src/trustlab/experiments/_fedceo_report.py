"""FedCEO experiment: the curve's table (docs/papers/fedceo.md) and plot (PLOTS)."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.experiments._fedceo_e2e import DP_FEDAVG, FEDCEO, NO_DP
from trustlab.results.result import Result


def curve_table(result: Result) -> str:
    """The curve as a markdown table (docs/papers/fedceo.md renders it from the committed JSON)."""
    s = result.summary
    if not s.get("curve"):
        return "no end-to-end runs"
    nd = s["no_dp"]
    lines = [
        "| epsilon | sigma (per seed) | DP-FedAvg % (95% CI) | FedCEO % (95% CI) | gap, points (95% CI) | "
        "lambda chosen | FedAvg without DP % (95% CI) |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in s["curve"]:
        sig = sorted(p["sigma"].values())
        cell = {
            k: f"{p[k]['mean']:.2f} ({p[k]['low']:.2f} .. {p[k]['high']:.2f})" for k in (DP_FEDAVG, FEDCEO)
        }
        lines.append(
            f"| {p['epsilon']:g} | {sig[0]:.3f} .. {sig[-1]:.3f} | {cell[DP_FEDAVG]} | {cell[FEDCEO]} | "
            f"{p['gap']:+.2f} ({p['gap_low']:+.2f} .. {p['gap_high']:+.2f}) | "
            f"{', '.join(f'{v:g}' for v in p['lam'].values())} | "
            f"{nd['mean']:.2f} ({nd['low']:.2f} .. {nd['high']:.2f}) |"
        )
    return "\n".join(lines)


def PLOTS(result: Result) -> dict[str, Any]:
    from trustlab.results.plots import new_figure

    fig, ax = new_figure(6.4, 3.8)
    curve, nd = result.summary.get("curve") or [], result.summary.get("no_dp")
    if not curve:
        ax.text(0.5, 0.5, "no end-to-end runs", ha="center", va="center")
        return {"accuracy_vs_epsilon": fig}
    eps = [p["epsilon"] for p in curve]
    for i, name in enumerate((DP_FEDAVG, FEDCEO)):
        m = np.array([p[name]["mean"] for p in curve])
        err = np.array([[m_ - p[name]["low"], p[name]["high"] - m_] for m_, p in zip(m, curve)]).T
        xs = [e * (0.97 if i == 0 else 1.03) for e in eps]
        ax.errorbar(xs, m, yerr=np.nan_to_num(err), marker="o", ms=4, capsize=3, lw=1.2, label=name)
    ax.axhline(nd["mean"], color="0.3", ls="--", lw=1, label=f"{NO_DP} {nd['mean']:.1f} %")
    if np.isfinite(nd["low"]):
        ax.axhspan(nd["low"], nd["high"], color="0.8", alpha=0.5, lw=0)
    ax.set_xscale("log", base=2)
    ax.set_xticks(eps, [f"{e:g}" for e in eps])
    ax.set_xlabel("target epsilon (delta 1e-5, worst client, RDP)")
    ax.set_ylabel("test accuracy (%), mean over seeds, 95% CI")
    ax.set_title(
        "FedCEO vs DP-FedAvg on digits; gap " + ", ".join(f"{p['gap']:+.1f}" for p in curve) + " points",
        fontsize=9,
    )
    ax.legend(fontsize=7)
    return {"accuracy_vs_epsilon": fig}
