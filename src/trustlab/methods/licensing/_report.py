"""``CompensationReport``: who gets how much of the pool, why, and what de-duplication and noise flags
changed; JSON (byte-identical for the same inputs and seed), CSV, Markdown and two matplotlib Figures."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import PATH, validate_args
from trustlab.core.constraints import NONE, Interval

__all__ = ["OwnerLine", "CompensationReport"]


@dataclass
class OwnerLine:
    """One owner's line. ``n_points``: rows submitted; ``n_unique``: rows valued after de-duplication;
    ``n_dup_within`` / ``n_dup_cross``: dropped rows repeating the owner's own / another owner's earlier
    row; ``n_flagged_noisy``: kept rows flagged as likely mislabelled (dropped when ``noisy="drop"``);
    ``raw_value``: the owner's value before clipping; ``value_se``: its Monte-Carlo standard error;
    ``share``: the fraction of the pool paid; ``payout_minor``: the payout in minor units (cents for
    EUR, whole yen for JPY); ``share_no_dedup``: the share the same method would pay without
    de-duplication (what gaming would have earned); ``share_dedup``: the share after de-duplication and
    before noisy points are dropped; ``share_se`` / ``payout_se_minor``: Monte-Carlo standard errors of the
    share and the payout (SE of the value over the sum of payout weights; None for exact methods)."""

    owner: str
    n_points: int
    n_unique: int
    n_dup_within: int
    n_dup_cross: int
    n_flagged_noisy: int
    raw_value: float
    value_se: float | None
    share: float
    payout_minor: int
    payout: str
    rank: int
    share_no_dedup: float | None
    share_dedup: float
    share_se: float | None = None
    payout_se_minor: float | None = None


@dataclass
class CompensationReport:
    """The compensation report of :class:`~trustlab.methods.licensing.CompensationAudit`.

    Global fields: the valuation ``method`` and ``utility``, ``k``, ``v_full`` = v(N), ``v_empty`` =
    v(empty), ``sum_raw`` = sum of raw values, ``efficient`` (whether the method is efficient by
    definition), ``efficiency_residual`` = sum_raw - (v_full - v_empty) (None where not defined),
    ``efficiency_se`` (Monte-Carlo methods), money (``currency``, ``minor_unit``, ``pool_minor``, the
    sum of payouts always equals ``pool_minor``), ``seed``, library ``versions``, ``input_hash``
    (SHA-256 of the training/validation arrays and owner ids), ``params`` and ``warnings``;
    ``payout_rule`` ("proportional" or "nothing left: unpaid" / "nothing left: equal split"), ``unpaid_minor``
    (minor units not paid out; payouts plus it sum to ``pool_minor``) and ``dedup_tol`` (the near or
    embedded tolerance used).
    """

    owners: list[OwnerLine]
    method: str
    utility: str
    k: int
    v_full: float
    v_empty: float
    sum_raw: float
    efficient: bool
    efficiency_residual: float | None
    efficiency_se: float | None
    negative: str
    fallback_used: bool
    currency: str
    minor_unit: int
    pool_minor: int
    n_train: int
    n_kept: int
    n_val: int
    n_duplicates: int
    n_flagged_noisy: int
    seed: Any
    versions: dict[str, str]
    input_hash: str
    params: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    payout_rule: str = "proportional"
    unpaid_minor: int = 0
    dedup_tol: float | None = None

    # -- serialisation ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        from trustlab.results.result import to_jsonable

        return to_jsonable(asdict(self))

    @classmethod
    @validate_args(data=[dict])
    def from_dict(cls, data: dict[str, Any]) -> CompensationReport:
        """Rebuild a report from :meth:`to_dict` output (e.g. a stored JSON)."""
        data = dict(data)
        data["owners"] = [OwnerLine(**o) for o in data["owners"]]
        return cls(**data)

    @validate_args(indent=[NONE, Interval(int, 0, None), str])
    def to_json(self, indent: int | None = 1) -> str:
        """Strict JSON with sorted keys: the same inputs and seed give the same bytes."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True, allow_nan=False)

    def to_csv(self) -> str:
        """One row per owner (the fields of :class:`OwnerLine`)."""
        buf = io.StringIO()
        names = list(OwnerLine.__dataclass_fields__)
        w = csv.DictWriter(buf, fieldnames=names, lineterminator="\n")
        w.writeheader()
        for line in self.owners:
            w.writerow({k: ("" if v is None else (repr(v) if isinstance(v, float) else v))
                        for k, v in asdict(line).items()})
        return buf.getvalue()

    @validate_args(minor=[Interval(int, None, None)])
    def amount(self, minor: int) -> str:
        """An amount of minor units as a decimal string in major units (``1234`` cents -> ``"12.34"``)."""
        return format(Decimal(int(minor)).scaleb(-self.minor_unit), "f")

    def to_markdown(self) -> str:
        """A Markdown report: settings and checks, then the per-owner table, then warnings."""
        eff = ("not defined (the method is not efficient; shares normalise its values)"
               if self.efficiency_residual is None else f"{self.efficiency_residual:.3g}"
               + (f" (SE of the sum {self.efficiency_se:.3g})" if self.efficiency_se is not None else ""))
        p = self.params
        lines = [
            "## Collective-licensing compensation report", "",
            f"- pool: {self.amount(self.pool_minor)} {self.currency} = {self.pool_minor} minor units "
            f"(10^-{self.minor_unit}); paid out: {self.amount(sum(o.payout_minor for o in self.owners))} {self.currency}",
            f"- method: `{self.method}`, utility: `{self.utility}`, k = {self.k}, seed = {self.seed}",
            f"- v(N) = {self.v_full:.6g}, v(empty) = {self.v_empty:.6g}, sum of raw values = {self.sum_raw:.6g}, "
            f"efficiency residual: {eff}",
            f"- negative values: `{self.negative}`; payout rule: {self.payout_rule}"
            + (f" ({self.amount(self.unpaid_minor)} {self.currency} not paid out)" if self.unpaid_minor else ""),
            f"- de-duplication: `{p.get('dedup')}`" + (f" (tolerance {self.dedup_tol:.4g})" if self.dedup_tol is not None
                                                     else "") + f" (credit `{p.get('dup_credit')}`), {self.n_duplicates} duplicate "
            f"row(s) dropped; noisy-label flags: {self.n_flagged_noisy} (bottom {p.get('noise_flag_quantile')} of "
            f"point values and against the KNN vote; `{p.get('noisy')}`)",
            f"- data: {self.n_train} training rows ({self.n_kept} valued), {self.n_val} validation rows; input "
            f"SHA-256 `{self.input_hash[:16]}...`; versions "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.versions.items())),
            "",
            f"| rank | owner | points | valued | dup (own) | dup (others') | flagged noisy | raw value | share "
            f"| payout ({self.currency}) | share without dedup |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for o in sorted(self.owners, key=lambda o: o.rank):
            se = f" ± {o.value_se:.2g}" if o.value_se is not None else ""
            pse = f" ± {self.amount(round(o.payout_se_minor))}" if o.payout_se_minor is not None else ""
            nd = "-" if o.share_no_dedup is None else f"{100 * o.share_no_dedup:.2f} %"
            lines.append(f"| {o.rank} | {o.owner} | {o.n_points} | {o.n_unique} | {o.n_dup_within} | {o.n_dup_cross} "
                         f"| {o.n_flagged_noisy} | {o.raw_value:.4g}{se} | {100 * o.share:.2f} % | {o.payout}{pse} | {nd} |")
        if self.warnings:
            lines += ["", "Warnings:"] + [f"- {w}" for w in self.warnings]
        return "\n".join(lines) + "\n"

    @validate_args(path=[PATH])
    def save(self, path: str | Path) -> Path:
        """Write the report atomically to ``path``; the format follows the suffix (.json, .csv, .md)."""
        from trustlab.core.exceptions import InputError
        from trustlab.results.result import atomic_write_text

        path = Path(path)
        render = {".json": self.to_json, ".csv": self.to_csv, ".md": self.to_markdown}.get(path.suffix.lower())
        if render is None:
            raise InputError(f"The 'path' argument of CompensationReport.save must end in .json, .csv or .md. "
                             f"Got {str(path)!r} instead.")
        return atomic_write_text(path, render())

    # -- plots -----------------------------------------------------------------------------------
    def plot_shares(self) -> Any:
        """A bar plot of each owner's share of the pool (percent), flagged rows annotated."""
        from trustlab.results.plots import new_figure

        fig, ax = new_figure(6.4, 3.4)
        names = [o.owner for o in self.owners]
        shares = [100 * o.share for o in self.owners]
        bars = ax.bar(range(len(names)), shares, color=["tab:red" if o.n_flagged_noisy else "tab:blue"
                                                         for o in self.owners])
        for b, o in zip(bars, self.owners):
            if o.n_flagged_noisy:
                ax.annotate(f"{o.n_flagged_noisy} flagged", (b.get_x() + b.get_width() / 2, b.get_height()),
                            ha="center", va="bottom", fontsize=6)
        ax.set_xticks(range(len(names)), names, fontsize=7)
        ax.set_xlabel("owner")
        ax.set_ylabel("share of the pool (%)")
        ax.set_title(f"{self.method} ({self.utility}, k={self.k}): shares of {self.amount(self.pool_minor)} "
                     f"{self.currency}", fontsize=9)
        return fig

    def plot_waterfall(self) -> Any:
        """Per owner: the share without de-duplication, the change de-duplication made, the change from
        dropping noisy points (zero unless ``noisy="drop"``), and the final share (black tick)."""
        from trustlab.results.plots import new_figure

        fig, ax = new_figure(6.8, 3.6)
        x = np.arange(len(self.owners))
        start = np.array([100 * (o.share_no_dedup if o.share_no_dedup is not None else o.share_dedup)
                          for o in self.owners])
        mid = np.array([100 * o.share_dedup for o in self.owners])
        end = np.array([100 * o.share for o in self.owners])
        ax.bar(x - 0.27, start, 0.25, color="0.7", label="without de-duplication")
        for dx, lo, hi, lab in ((0.0, start, mid, "de-duplication"), (0.27, mid, end, "noisy points dropped")):
            col = np.where(hi >= lo, "tab:green", "tab:red")
            ax.bar(x + dx, hi - lo, 0.25, bottom=lo, color=col, label=lab, edgecolor="black", linewidth=0.3)
        ax.scatter(x + 0.27, end, marker="_", s=120, color="black", zorder=3, label="final share")
        ax.set_xticks(x, [o.owner for o in self.owners], fontsize=7)
        ax.set_ylim(min(0.0, float(np.min([start, mid, end]))) * 1.1, float(np.max([start, mid, end])) * 1.3 + 1e-9)
        ax.set_xlabel("owner")
        ax.set_ylabel("share of the pool (%)")
        ax.set_title("what de-duplication and noise flags changed (green: gain, red: loss)", fontsize=9)
        ax.legend(fontsize=6, ncol=2, loc="upper left")
        return fig
