"""The audit report: typed outcomes per check, and its JSON, Markdown and HTML forms (written atomically)."""

from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trustlab.core.arguments import PATH, validate_args
from trustlab.core.constraints import InstanceOf, Interval

__all__ = ["CheckOutcome", "AuditReport"]

#: a check's status: ``flag`` (a problem found), ``ok``, ``info`` (a finding that is not a problem),
#: ``skipped`` (not applicable; ``reason`` says why) or ``error`` (the check raised; ``reason`` holds the error)
STATUSES = ("flag", "ok", "info", "skipped", "error")


@dataclass
class CheckOutcome:
    """What one check found: ``status`` (see ``STATUSES``), a one-line ``headline``, numbers in ``metrics``
    (the keys ``--fail-on`` can test), per-row findings in ``rows``, PNG plots and the settings it ran with."""

    name: str
    title: str
    status: str
    headline: str
    metrics: dict[str, float] = field(default_factory=dict)
    rows: dict[str, list[int]] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    wall_time_s: float = 0.0
    plots: dict[str, bytes] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        from trustlab.core.files import to_jsonable

        d = asdict(self)
        d["plots"] = sorted(self.plots)
        return to_jsonable(d)


@dataclass
class AuditReport:
    """Every check's outcome, the fail-on policy's verdict and the provenance (command, versions, data hashes)."""

    checks: list[CheckOutcome]
    model: dict[str, Any]
    data: dict[str, Any]
    provenance: dict[str, Any]
    policy: list[str] = field(default_factory=list)
    policy_failures: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> list[str]:
        """Names of the checks that flagged a problem."""
        return [c.name for c in self.checks if c.status == "flag"]

    @property
    def errored(self) -> dict[str, str]:
        """The checks that raised, with their errors."""
        return {c.name: c.reason for c in self.checks if c.status == "error"}

    @property
    def skipped(self) -> dict[str, str]:
        return {c.name: c.reason for c in self.checks if c.status == "skipped"}

    @property
    def metrics(self) -> dict[str, float]:
        """Every check's metrics in one flat mapping (names are unique across checks), plus ``flagged`` and
        ``errored`` (the numbers of checks that flagged and that raised)."""
        out: dict[str, float] = {"flagged": float(len(self.flagged)), "errored": float(len(self.errored))}
        for c in self.checks:
            out.update(c.metrics)
        return out

    @validate_args(name=[InstanceOf(str)])
    def check(self, name: str) -> CheckOutcome:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def passed(self) -> bool:
        """True when the fail-on policy found nothing (no policy: always True)."""
        return not self.policy_failures

    def to_dict(self) -> dict[str, Any]:
        from trustlab.core.files import to_jsonable

        return to_jsonable({"checks": [c.to_dict() for c in self.checks], "flagged": self.flagged,
                            "metrics": self.metrics, "model": self.model, "data": self.data,
                            "policy": self.policy, "policy_failures": self.policy_failures,
                            "provenance": self.provenance})

    @validate_args(indent=[Interval(int, 0, None), InstanceOf(str), None])
    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    # -- Markdown ---------------------------------------------------------------------------------------
    def summary_rows(self) -> list[tuple[str, str, str]]:
        return [(c.title, c.status.upper(), c.reason if c.status in ("skipped", "error") else c.headline)
                for c in self.checks]

    @validate_args(plot_dir=[PATH, None])
    def to_markdown(self, plot_dir: str | None = None) -> str:
        lines = ["# trustlab audit report", "", f"Model: {self.model.get('description', '?')}; data: "
                 f"{self.data.get('n_train', '?')} training rows, {self.data.get('n_test', '?')} held-out rows, "
                 f"{self.data.get('n_features', '?')} features, {self.data.get('task', 'classification')}.", "",
                 "| check | verdict | finding |", "|---|---|---|"]
        lines += [f"| {t} | {s} | {_md(h)} |" for t, s, h in self.summary_rows()]
        if self.policy:
            lines += ["", f"Fail-on policy {self.policy}: " + ("FAILED: " + "; ".join(self.policy_failures)
                                                             if self.policy_failures else "passed")]
        for c in self.checks:
            lines += ["", f"## {c.title} ({c.status})", "", c.headline if c.status not in ("skipped", "error")
                      else c.reason]
            lines += [f"- {d}" for d in c.details]
            if c.metrics:
                lines += ["", "| metric | value |", "|---|---|"]
                lines += [f"| `{k}` | {_fmt(v)} |" for k, v in c.metrics.items()]
            if plot_dir is not None:
                lines += [f"\n![{c.name} {p}]({plot_dir}/{c.name}_{p}.png)" for p in c.plots]
        lines += ["", "## Provenance", "", f"- command: `{self.provenance.get('command', '')}`"]
        lines += [f"- {k}: {v}" for k, v in self.provenance.get("versions", {}).items()]
        lines += [f"- {k}: {v}" for k, v in self.provenance.items() if k not in ("command", "versions")]
        return "\n".join(lines) + "\n"

    # -- HTML -------------------------------------------------------------------------------------------
    def to_html(self) -> str:
        """One self-contained page: the summary table, each check's section with its plots (inline PNG),
        the commands and versions. Plots scale to the page width, tables wrap, nothing needs scripts."""
        rows = "".join(f'<tr class="status-{html.escape(s.lower())}"><td>{html.escape(t)}</td>'
                       f'<td class="verdict">{html.escape(s)}</td><td>{html.escape(h)}</td></tr>'
                       for t, s, h in self.summary_rows())
        parts = [f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
                 f"content=\"width=device-width, initial-scale=1\"><title>trustlab audit</title><style>{_CSS}</style>"
                 "</head><body><main>", "<h1>trustlab audit report</h1>",
                 f"<p>{html.escape(self._intro())}</p>",
                 '<table id="summary" class="summary"><thead><tr><th>check</th><th>verdict</th><th>finding</th></tr>'
                 f"</thead><tbody>{rows}</tbody></table>"]
        if self.policy:
            verdict = ("FAILED: " + "; ".join(self.policy_failures)) if self.policy_failures else "passed"
            parts.append(f'<p id="policy">Fail-on policy <code>{html.escape(", ".join(self.policy))}</code>: '
                         f"<b>{html.escape(verdict)}</b></p>")
        for c in self.checks:
            parts.append(self._section(c))
        prov = self.provenance
        items = "".join(f"<li>{html.escape(k)}: {html.escape(str(v))}</li>" for k, v in prov.get("versions", {}).items())
        other = "".join(f"<li>{html.escape(k)}: {html.escape(str(v))}</li>" for k, v in prov.items()
                        if k not in ("command", "versions"))
        parts.append(f'<section id="provenance"><h2>Commands and versions</h2><pre class="command">'
                     f"{html.escape(prov.get('command', ''))}</pre><ul>{items}{other}</ul></section>")
        parts.append("</main></body></html>")
        return "\n".join(parts)

    def _intro(self) -> str:
        m, d = self.model, self.data
        return (f"Model: {m.get('description', '?')} ({m.get('origin', '?')}). Data: {d.get('n_train', '?')} "
                f"training rows and {d.get('n_test', '?')} held-out rows ({d.get('split', '?')}), "
                f"{d.get('n_features', '?')} features, target '{d.get('target', '?')}'. Flagged: "
                f"{', '.join(self.flagged) or 'nothing'}.")

    @staticmethod
    def _section(c: CheckOutcome) -> str:
        body = [f'<section class="check" id="check-{c.name}"><h2>{html.escape(c.title)} '
                f'<span class="badge status-{c.status}">{c.status}</span></h2>',
                f"<p>{html.escape(c.headline if c.status not in ('skipped', 'error') else c.reason)}</p>"]
        if c.details:
            body.append("<ul>" + "".join(f"<li>{html.escape(d)}</li>" for d in c.details) + "</ul>")
        if c.metrics:
            body.append('<table class="metrics"><tbody>' + "".join(
                f"<tr><td><code>{html.escape(k)}</code></td><td>{html.escape(_fmt(v))}</td></tr>"
                for k, v in c.metrics.items()) + "</tbody></table>")
        for name, png in c.plots.items():
            b64 = base64.b64encode(png).decode("ascii")
            body.append(f'<figure><img class="plot" data-check="{c.name}" alt="{html.escape(c.name)} {html.escape(name)}" '
                        f'src="data:image/png;base64,{b64}"><figcaption>{html.escape(name)}</figcaption></figure>')
        body.append("</section>")
        return "".join(body)

    # -- files ------------------------------------------------------------------------------------------
    @validate_args(out_dir=[PATH])
    def write(self, out_dir: str | Path) -> dict[str, Path]:
        """Write ``report.html``, ``report.md`` (plots as ``plots/*.png``) and ``report.json`` into ``out_dir``
        (each file atomically). Returns the paths."""
        from trustlab.core.files import atomic_write, atomic_write_text

        out = Path(out_dir)
        paths = {"html": out / "report.html", "markdown": out / "report.md", "json": out / "report.json"}
        for c in self.checks:
            for name, png in c.plots.items():
                target = out / "plots" / f"{c.name}_{name}.png"
                atomic_write(target, lambda tmp, data=png: Path(tmp).write_bytes(data))
                paths[f"plot:{c.name}_{name}"] = target
        atomic_write_text(paths["html"], self.to_html())
        atomic_write_text(paths["markdown"], self.to_markdown(plot_dir="plots"))
        atomic_write_text(paths["json"], self.to_json())
        return paths


def figure_png(fig: Any) -> bytes:
    """A matplotlib Figure as PNG bytes (no pyplot state)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


_CSS = """
*{box-sizing:border-box} body{font-family:system-ui,sans-serif;margin:0;background:#fafafa;color:#222}
main{max-width:1000px;margin:0 auto;padding:1rem 1.5rem} h1{font-size:1.6rem} h2{font-size:1.2rem;margin-top:2rem}
table{border-collapse:collapse;width:100%;table-layout:fixed} td,th{border:1px solid #ccc;padding:.35rem .5rem;
text-align:left;vertical-align:top;overflow-wrap:anywhere} th{background:#eee}
table.summary td:nth-child(1){width:28%} table.summary td:nth-child(2){width:12%;font-weight:bold}
table.summary th:nth-child(1){width:28%} table.summary th:nth-child(2){width:12%}
table.metrics{width:auto;max-width:100%} table.metrics td{overflow-wrap:anywhere}
.status-flag .verdict,.badge.status-flag{color:#fff;background:#c62828} .status-ok .verdict,.badge.status-ok{color:#fff;
background:#2e7d32} .status-info .verdict,.badge.status-info{color:#fff;background:#1565c0}
.status-skipped .verdict,.badge.status-skipped{background:#bbb} .status-error .verdict,.badge.status-error{color:#fff;
background:#6a1b9a} .badge{font-size:.8rem;padding:.1rem .4rem;border-radius:.3rem;vertical-align:middle}
figure{margin:1rem 0} img.plot{display:block;max-width:100%;height:auto;border:1px solid #ddd;background:#fff}
pre,code{white-space:pre-wrap;overflow-wrap:anywhere} li{overflow-wrap:anywhere}
"""
