"""One Markdown (and HTML) report over a runs folder: a claims table per experiment and its plots."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trustlab.results.plots import claims_plot
from trustlab.results.result import Result, atomic_write, atomic_write_text

__all__ = ["find_results", "latest_results", "build_report", "claims_rows"]

Plotter = Callable[[Result], Mapping[str, Any]]


def find_results(runs_dir: str | Path) -> list[Path]:
    """Every ``<id>/<mode>/<utc>.json`` below ``runs_dir``, sorted by name."""
    root = Path(runs_dir)
    return sorted(p for p in root.glob("*/*/*.json") if not p.name.startswith("."))


def latest_results(runs_dir: str | Path) -> list[tuple[Path, Result]]:
    """The newest result per (experiment, mode); unreadable files are skipped with a note."""
    latest: dict[tuple[str, str], Path] = {}
    for p in find_results(runs_dir):
        key = (p.parent.parent.name, p.parent.name)
        if key not in latest or p.name > latest[key].name:
            latest[key] = p
    return [(p, Result.load(p)) for _, p in sorted(latest.items())]


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def claims_rows(result: Result) -> list[list[str]]:
    """Rows (claim, statement, observed, baseline, threshold, status, scale note) for tables."""
    return [[c.id, c.statement, _fmt(c.observed), _fmt(c.baseline), _fmt(c.threshold), c.status, c.scale_note]
            for c in result.claims]


def _save_fig(fig: Any, path: Path) -> None:
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))


HEADER = ["claim", "statement", "observed", "baseline", "threshold", "status", "scale note"]


def build_report(
    runs_dir: str | Path, out: str | Path = "report.md", *, plotters: Mapping[str, Plotter] | None = None,
    titles: Mapping[str, str] | None = None, html_out: bool = True,
) -> Path:
    """Write ``out`` (Markdown), its plots under ``<out stem>_files/`` and, optionally, ``<out stem>.html``.

    ``plotters[experiment](result)`` returns ``{name: matplotlib Figure}`` drawn from the saved result.
    """
    out = Path(out)
    files_dir = out.with_name(out.stem + "_files")
    results = latest_results(runs_dir)
    md: list[str] = ["# trustlab reproduction report", ""]
    body_html: list[str] = ["<h1>trustlab reproduction report</h1>"]
    if not results:
        md.append(f"No results found under `{runs_dir}`. Run `trustlab reproduce --quick --all` first.")
        body_html.append(f"<p>No results found under <code>{html.escape(str(runs_dir))}</code>.</p>")
    else:
        md += ["| experiment | mode | claims passed | failed | wall time (s) | result file |", "|---|---|---|---|---|---|"]
        body_html.append("<table><tr><th>experiment</th><th>mode</th><th>passed</th><th>failed</th><th>wall s</th></tr>")
        for path, r in results:
            n_pass = sum(c.passed is True for c in r.claims)
            n_fail = sum(c.passed is False for c in r.claims)
            wall = r.provenance.get("wall_time_s")
            md.append(f"| {r.experiment} | {r.mode} | {n_pass}/{len(r.claims)} | {n_fail} | {_fmt(wall)} | `{path}` |")
            body_html.append(f"<tr><td>{r.experiment}</td><td>{r.mode}</td><td>{n_pass}/{len(r.claims)}</td>"
                             f"<td>{n_fail}</td><td>{_fmt(wall)}</td></tr>")
        body_html.append("</table>")
    for _, r in results:
        title = (titles or {}).get(r.experiment, r.experiment)
        md += ["", f"## {title} [{r.mode}]", ""]
        body_html.append(f"<h2>{html.escape(title)} [{r.mode}]</h2>")
        prov = r.provenance
        md.append(f"git {prov.get('git_sha', '?')}, seeds {prov.get('seeds', '?')}, wall time "
                  f"{_fmt(prov.get('wall_time_s'))} s, threads {prov.get('threads', {})}")
        md += ["", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        body_html.append("<table><tr>" + "".join(f"<th>{h}</th>" for h in HEADER) + "</tr>")
        for row in claims_rows(r):
            md.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
            body_html.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
        body_html.append("</table>")
        for note in r.notes:
            md.append(f"\n> {note}")
            body_html.append(f"<blockquote>{html.escape(note)}</blockquote>")
        figures: dict[str, Any] = {"claims": claims_plot(r)}
        if plotters and r.experiment in plotters:
            try:
                figures.update(plotters[r.experiment](r))
            except Exception as exc:  # noqa: BLE001 - a broken plot must not lose the report
                md.append(f"\n(plotting failed: {type(exc).__name__}: {exc})")
        md.append("")
        for name, fig in figures.items():
            png = files_dir / f"{r.experiment}-{r.mode}-{name}.png"
            _save_fig(fig, png)
            rel = png.relative_to(out.parent) if png.is_relative_to(out.parent) else png
            md.append(f"![{r.experiment} {name}]({rel.as_posix()})")
            body_html.append(f'<p><img src="{html.escape(rel.as_posix())}" alt="{html.escape(name)}"></p>')
    atomic_write_text(out, "\n".join(md) + "\n")
    if html_out:
        page = ("<!doctype html><html><head><meta charset='utf-8'><title>trustlab report</title><style>"
                "body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}"
                "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}</style></head><body>"
                + "\n".join(body_html) + "</body></html>\n")
        atomic_write_text(out.with_suffix(".html"), page)
    return out
