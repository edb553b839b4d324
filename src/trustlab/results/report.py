"""One Markdown (and HTML) report over a runs folder: a claims table per experiment and its plots."""

from __future__ import annotations

import html
import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, InstanceOf, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.files import atomic_write, atomic_write_text
from trustlab.results._table import claim_rows, fmt_number, status_counts
from trustlab.results.plots import claims_plot
from trustlab.results.result import Result

__all__ = [ "build_report"]

Plotter = Callable[[Result], Mapping[str, Any]]
_PATH = [InstanceOf(str, os.PathLike)]
_MAPPING_OR_NONE = [Satisfies(lambda v: isinstance(v, Mapping), "a mapping", ["not-a-mapping", 3], valid={}), None]


def _find_results(runs_dir: str | Path) -> list[Path]:
    """Every ``<id>/<mode>/<utc>.json`` below ``runs_dir``, sorted by name."""
    root = Path(runs_dir)
    return sorted(p for p in root.glob("*/*/*.json") if not p.name.startswith("."))


def scan_results(runs_dir: str | Path) -> tuple[list[tuple[Path, Result]], list[tuple[Path, str]]]:
    """The newest *readable* result per (experiment, mode), and the files skipped on the way with why.

    Files are tried newest first, so a corrupt, foreign or future-schema newest file never hides a valid
    older one; each file skipped is reported with its reason.
    """
    groups: dict[tuple[str, str], list[Path]] = {}
    for p in _find_results(runs_dir):
        groups.setdefault((p.parent.parent.name, p.parent.name), []).append(p)
    found: list[tuple[Path, Result]] = []
    skipped: list[tuple[Path, str]] = []
    for _, paths in sorted(groups.items()):
        for p in sorted(paths, key=lambda q: q.name, reverse=True):
            try:
                found.append((p, Result.load(p)))
                break
            except InputError as exc:
                skipped.append((p, str(exc)))
            except Exception as exc:  # noqa: BLE001 - any file we cannot read is skipped, never a crash
                skipped.append((p, f"The result file {str(p)!r} was skipped: {type(exc).__name__}: {exc}"))
    return found, skipped


@validate_args(runs_dir=_PATH)
def latest_results(runs_dir: str | Path) -> list[tuple[Path, Result]]:
    """The newest readable result per (experiment, mode) under ``runs_dir`` as ``(path, Result)`` pairs.

    Unreadable files (corrupt JSON, another program's JSON, a newer schema) are skipped with a
    ``UserWarning`` naming each file and the reason; an older valid file of the same run is used instead.
    """
    found, skipped = scan_results(runs_dir)
    for _, reason in skipped:
        warnings.warn(reason, UserWarning, stacklevel=2)
    return found


def _save_fig(fig: Any, path: Path) -> None:
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))


COLUMNS = ("claim", "statement", "observed", "baseline", "threshold", "paper", "status", "default", "scale_note",
           "detail")
HEADER = ["claim", "statement", "observed", "baseline", "threshold", "paper", "status", "default mode", "scale note",
          "detail"]


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def _threads(prov: Mapping[str, Any]) -> str:
    th = prov.get("threads") or {}
    parts = [f"{k}={th[k]}" for k in ("cpu_count", "torch_num_threads", "OMP_NUM_THREADS") if th.get(k) is not None]
    pools = th.get("threadpools") or []
    if pools:
        parts.append("BLAS/OpenMP pools " + "/".join(str(p[-1]) for p in pools))
    return ", ".join(parts) or "-"


def _run_line(r: Result) -> str:
    prov = r.provenance
    text = (f"git {prov.get('git_sha', '?')}, seeds {prov.get('seeds', '?')}, wall time "
            f"{fmt_number(prov.get('wall_time_s', float('nan')))} s")
    if prov.get("untimed_s"):
        text += (f" (measured {fmt_number(prov.get('timed_s', float('nan')))} s; kept out of the budget: "
                 + ", ".join(f"{k} {fmt_number(v)} s" for k, v in prov["untimed_s"].items()) + ")")
    budget = prov.get("budget_s")
    if budget is not None:
        text += f", budget target {fmt_number(budget)} s" + ("" if prov.get("within_budget", True) else " (exceeded)")
    return text + f", threads: {_threads(prov)}"


def _summary(results: list[tuple[Path, Result]], md: list[str], body: list[str]) -> None:
    head = ["experiment", "mode", "primary passed", "failed", "void", "status", "wall time (s)", "result file"]
    md += [_md_row(head), "|" + "---|" * len(head)]
    body.append("<div class='t'><table id='summary'><tr>" + "".join(f"<th>{h}</th>" for h in head[:-1]) + "</tr>")
    for path, r in results:
        n = status_counts(r)
        checked = n["PASS"] + n["FAIL"] + n["VOID"]
        status = "ERROR" if n["ERROR"] else ("FAIL" if n["FAIL"] else ("VOID" if n["VOID"] else "PASS"))
        if n["WARN"]:
            status += " (over budget)"
        cells = [r.experiment, _mode_label(r), f"{n['PASS']}/{checked}", str(n["FAIL"]), str(n["VOID"]), status,
                 fmt_number(r.provenance.get("wall_time_s", float("nan")))]
        md.append(_md_row([*cells, f"`{path}`"]))
        body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    body.append("</table></div>")


def _mode_label(r: Result) -> str:
    return r.mode + (" (knockout)" if r.provenance.get("knockout") else "")


def _claims_section(r: Result, md: list[str], body: list[str], default: Result | None = None) -> None:
    caption = ""
    if default is not None:
        caption = (f"default mode: each claim's status in the committed default-mode result (git "
                   f"{str(default.provenance.get('git_sha', '?'))[:10]}, {default.provenance.get('utc', '?')})")
        md += ["", caption]
    md += ["", _md_row(HEADER), "|" + "---|" * len(HEADER)]
    body.append("<div class='t'><table class='claims'>" + (f"<caption>{html.escape(caption)}</caption>" if caption else "")
                + "<tr>" + "".join(f"<th>{h}</th>" for h in HEADER) + "</tr>")
    for row in claim_rows(r, default):
        cells = row.cells(COLUMNS)
        if row.status == "ERROR":  # the traceback goes to the HTML only, folded
            cells = [*cells[:-1], "see the HTML report" if row.detail else ""]
        md.append(_md_row(cells))
        tds = [html.escape(c) for c in cells[:-1]]
        last = (f"<details><summary>traceback</summary><pre>{html.escape(row.detail)}</pre></details>"
                if row.status == "ERROR" and row.detail else html.escape(cells[-1]))
        cls = f' class="{row.status.lower()}"'
        body.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in [*tds, last]) + "</tr>")
    body.append("</table></div>")


def _figures(r: Result, plotters: Mapping[str, Plotter] | None, md: list[str]) -> dict[str, Any]:
    if r.error is not None:
        return {}
    figures: dict[str, Any] = {"claims": claims_plot(r)}
    if plotters and r.experiment in plotters:
        try:
            figures.update(plotters[r.experiment](r))
        except Exception as exc:  # noqa: BLE001 - a broken plot must not lose the report
            md.append(f"\n(plotting failed: {type(exc).__name__}: {exc})")
    return figures


def _result_section(r: Result, title: str, plotters: Mapping[str, Plotter] | None, files_dir: Path, out: Path,
                    md: list[str], body: list[str], default: Result | None = None) -> None:
    """One result's heading, run line, claims table, notes and figures."""
    md += ["", f"## {title} [{_mode_label(r)}]", "", _run_line(r)]
    body += [f"<h2>{html.escape(title)} [{html.escape(_mode_label(r))}]</h2>", f"<p>{html.escape(_run_line(r))}</p>"]
    _claims_section(r, md, body, default if r.mode != "default" else None)
    for note in r.notes:
        md.append(f"\n> {note}")
        body.append(f"<blockquote>{html.escape(note)}</blockquote>")
    md.append("")
    for name, fig in _figures(r, plotters, md).items():
        png = files_dir / f"{r.experiment}-{_mode_label(r).replace(' (knockout)', '-knockout')}-{name}.png"
        _save_fig(fig, png)
        rel = png.relative_to(out.parent) if png.is_relative_to(out.parent) else png
        md.append(f"![{r.experiment} {name}]({rel.as_posix()})")
        body.append(f'<p><img src="{html.escape(rel.as_posix())}" alt="{html.escape(name)}"></p>')


_STYLE = ("body{font-family:sans-serif;max-width:1100px;margin:auto;padding:0 8px}table{border-collapse:collapse}"
          ".t{overflow-x:auto;max-width:100%}img{max-width:100%;height:auto}blockquote{overflow-wrap:anywhere}"
          "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}tr.fail td:nth-child(7){color:#c62828}"
          "tr.pass td:nth-child(7){color:#2e7d32}tr.void td:nth-child(7){color:#6a1b9a}tr.warn td{background:#fff8e1}"
          "tr.error td{background:#ffebee}")


@validate_args(runs_dir=_PATH, out=_PATH, plotters=_MAPPING_OR_NONE, titles=_MAPPING_OR_NONE, html_out=[Boolean()],
               defaults=_MAPPING_OR_NONE)
def build_report(
    runs_dir: str | Path, out: str | Path = "report.md", *, plotters: Mapping[str, Plotter] | None = None,
    titles: Mapping[str, str] | None = None, html_out: bool = True, defaults: Mapping[str, Result] | None = None,
) -> Path:
    """Write ``out`` (Markdown), its plots under ``<out stem>_files/`` and, optionally, ``<out stem>.html``.

    ``plotters[experiment](result)`` returns ``{name: matplotlib Figure}`` drawn from the saved result.
    The newest readable result per experiment and mode is reported; files that cannot be read are listed
    with the reason. Runs that raised show an ERROR row, runs past their budget target a WARN row, and a
    claim resting on a failed premise is VOID with the premise's numbers. ``defaults[experiment]`` (e.g.
    :func:`~trustlab.results.committed.committed_defaults`) adds each claim's default-mode status to the
    tables of quick and paper runs.
    """
    out = Path(out)
    files_dir = out.with_name(out.stem + "_files")
    found, skipped = scan_results(runs_dir)
    results, sections = [], []
    for path, r in found:
        sec_md: list[str] = []
        sec_body: list[str] = []
        try:  # a result we cannot render is skipped with its reason; the others are still reported
            _summary([(path, r)], [], [])
            _result_section(r, (titles or {}).get(r.experiment, r.experiment), plotters, files_dir, out, sec_md,
                            sec_body, (defaults or {}).get(r.experiment))
        except Exception as exc:  # noqa: BLE001
            reason = f"it could not be rendered ({type(exc).__name__}: {exc})"
            skipped.append((path, reason))
            warnings.warn(f"report: skipped {path}: {reason}", UserWarning, stacklevel=3)
            continue
        results.append((path, r))
        sections.append((sec_md, sec_body))
    md: list[str] = ["# trustlab reproduction report", ""]
    body: list[str] = ["<h1>trustlab reproduction report</h1>"]
    if not results:
        md.append(f"No readable results found under `{runs_dir}`. Run `trustlab reproduce --quick --all` first.")
        body.append(f"<p>No readable results found under <code>{html.escape(str(runs_dir))}</code>.</p>")
    else:
        _summary(results, md, body)
    for path, reason in skipped:
        md.append(f"\n> skipped `{path}`: {reason}")
        body.append(f"<blockquote>skipped <code>{html.escape(str(path))}</code>: {html.escape(reason)}</blockquote>")
    for sec_md, sec_body in sections:
        md += sec_md
        body += sec_body
    atomic_write_text(out, "\n".join(md) + "\n")
    if html_out:
        page = ("<!doctype html><html><head><meta charset='utf-8'><title>trustlab report</title><style>" + _STYLE
                + "</style></head><body>" + "\n".join(body) + "</body></html>\n")
        atomic_write_text(out.with_suffix(".html"), page)
    return out
