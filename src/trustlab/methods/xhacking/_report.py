"""The X-hacking audit report: per-feature explanation intervals, the trial log and its renderings."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = ["FeatureInterval", "XHackingReport"]


@dataclass
class FeatureInterval:
    """The explanation interval of one feature over the defensible trials."""

    name: str
    index: int
    reference_share: float
    reference_rank: int
    min_share: float
    max_share: float
    min_rank: int
    max_rank: int
    argmin_share_trial: int
    argmax_share_trial: int
    best_rank_trial: int
    worst_rank_trial: int
    redundancy: float
    crosses_top_k: bool
    can_be_negligible: bool
    top_or_negligible: bool


@dataclass
class XHackingReport:
    """What :class:`XHackingAudit` found; ``to_markdown()``, ``to_json()``, ``plot_data()``, ``plot()``."""

    features: list[FeatureInterval]
    reference: dict[str, Any]
    eps: float
    score_floor: float
    top_k: int
    negligible: float
    n_trials: int
    n_defensible: int
    trials: list[dict[str, Any]]
    spec: dict[str, Any]
    spec_hash: str
    warnings: list[str] = field(default_factory=list)
    #: trial number (0 = the reference) -> sanity verdict of its explanation (``trustlab.explain`` controls)
    controls: dict[int, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from trustlab.results.result import to_jsonable

        return to_jsonable(asdict(self))

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def flagged(self) -> list[FeatureInterval]:
        return [f for f in self.features if f.crosses_top_k or f.top_or_negligible]

    def plot_data(self) -> dict[str, list[Any]]:
        """Columns for an interval plot: name, reference, min and max share, flag."""
        fs = sorted(self.features, key=lambda f: -f.reference_share)
        return {"name": [f.name for f in fs], "reference": [f.reference_share for f in fs],
                "min": [f.min_share for f in fs], "max": [f.max_share for f in fs],
                "flagged": [bool(f.crosses_top_k or f.top_or_negligible) for f in fs]}

    def plot(self) -> Any:
        """A matplotlib Figure of the share intervals (reference as a dot, flagged features in red)."""
        from matplotlib.figure import Figure

        d = self.plot_data()
        n = len(d["name"])
        fig = Figure(figsize=(6.0, 0.6 + 0.28 * n), dpi=110, layout="constrained")
        ax = fig.add_subplot(1, 1, 1)
        ys = np.arange(n)[::-1]
        for yv, lo, hi, flag in zip(ys, d["min"], d["max"], d["flagged"]):
            ax.plot([lo, hi], [yv, yv], color="tab:red" if flag else "tab:blue", lw=3, alpha=0.7)
        ax.scatter(d["reference"], ys, color="black", s=12, zorder=3, label="reference")
        ax.set_yticks(ys, d["name"], fontsize=7)
        ax.set_xlabel("SHAP share within eps")
        ax.set_title(f"X-hacking audit: explanation intervals (eps={self.eps})", fontsize=9)
        ax.legend(fontsize=7)
        return fig

    def to_markdown(self, max_features: int | None = None) -> str:
        """A Markdown report: settings, the interval table, flags and the disclosure of all trials."""
        fs = sorted(self.features, key=lambda f: -f.reference_share)[:max_features]
        ref = self.reference
        lines = [
            "## X-hacking audit",
            "",
            f"- reference pipeline: `{json.dumps(ref['config'], sort_keys=True)}`",
            f"- reference score: {ref['score']:.4f}; defensible = score >= {self.score_floor:.4f} (eps = {self.eps})",
            f"- trials: {self.n_trials} tried, {self.n_defensible} defensible (all logged in the JSON report)",
            f"- search-specification SHA-256: `{self.spec_hash}`",
            "",
            f"| feature | ref share | share interval | ref rank | rank range | R^2 | top-{self.top_k}? | "
            f"negligible (< {self.negligible:g})? | flag |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for f in fs:
            flag = "**FLAG**" if (f.crosses_top_k or f.top_or_negligible) else ""
            lines.append(
                f"| {f.name} | {f.reference_share:.3f} | [{f.min_share:.3f}, {f.max_share:.3f}] | {f.reference_rank} | "
                f"{f.min_rank}-{f.max_rank} | {f.redundancy:.2f} | {'can be' if f.min_rank <= self.top_k else 'no'} | "
                f"{'can be' if f.can_be_negligible else 'no'} | {flag} |")
        if self.controls:
            lines += ["", "Explanation controls (trustlab.explain; model and data randomisation, placebos):", ""]
            lines += [f"- trial {n}{' (reference)' if n == 0 else ''}: **{v['status']}**"
                      for n, v in sorted(self.controls.items())]
        flagged = self.flagged()
        lines += ["", f"{len(flagged)} feature(s) flagged: their explanation can be reported as top-{self.top_k} "
                  "or not (or as top and negligible) by choosing among equally accurate pipelines."]
        if self.warnings:
            lines += ["", "Warnings:"] + [f"- {w}" for w in self.warnings]
        return "\n".join(lines) + "\n"
