"""Generate the README's claims table and each paper page's results table from the committed results.

The default-mode result of each experiment is committed as ``docs/papers/<id>_files/default.json`` (with
the commit it ran on in its provenance). Nothing in the generated regions is typed by hand; an experiment module may
add ``TABLES(result) -> {name: markdown}``, rendered into its page's ``table-<name>`` regions:

    python scripts/paper_tables.py                  # rewrite the generated regions
    python scripts/paper_tables.py --check          # exit 1 when a generated region is stale (CI)
    python scripts/paper_tables.py --adopt runs/fpo/default/<utc>.json   # commit a new default-mode run

``--adopt`` checks the file is a default-mode run without a knockout, copies it to
``docs/papers/<id>_files/default.json``, draws its plots there (``default-<name>.png``) and regenerates.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from trustlab.experiments import experiment_ids, get_experiment  # noqa: E402
from trustlab.results import Result  # noqa: E402
from trustlab.results._table import claim_rows  # noqa: E402
from trustlab.results.committed import committed_default  # noqa: E402

PAPERS = ROOT / "docs" / "papers"
README = ROOT / "README.md"
BEGIN, END = "<!-- trustlab:generated:begin {} -->", "<!-- trustlab:generated:end {} -->"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _run_of(res: Result) -> str:
    prov = res.provenance
    return f"git {str(prov.get('git_sha', '?'))[:10]}, {prov.get('utc', '?')}, wall {prov.get('wall_time_s', '?')} s"


def _counts(res: Result) -> str:
    return ", ".join(f"{v} {k}" for k, v in res.counts.items() if v) or "no claims"


def readme_table() -> str:
    head = ["id", "premises", "quick gate", "default mode (committed result)", "primary claims not passing", "run"]
    lines = [_row(head), "|" + "---|" * len(head)]
    for exp_id in experiment_ids():
        exp = get_experiment(exp_id)
        res = committed_default(exp_id, PAPERS)
        premises = ", ".join(c.id for c in exp.premises) or "-"
        gate = ", ".join(exp.quick_expected_pass or ()) or "-"
        if res is None:
            lines.append(_row([f"`{exp_id}`", premises, gate, "not committed yet", "-", "-"]))
            continue
        bad = "; ".join(f"{c.id} {c.status}" + (f" (premise {', '.join(c.voided_by)})" if c.voided_by else "")
                        for c in res.claims if not c.secondary and c.status in ("FAIL", "VOID"))
        lines.append(_row([f"`{exp_id}`", premises, gate, _counts(res), bad or "-", _run_of(res)]))
    return "\n".join(lines)


def page_table(exp_id: str) -> str:
    exp = get_experiment(exp_id)
    res = committed_default(exp_id, PAPERS)
    out = ["### Default-mode result (generated from the committed JSON)", ""]
    if res is None:
        out += [f"No default-mode result is committed yet for the pre-registered premises and claims below. Run "
                f"`trustlab run {exp_id}` and `python scripts/paper_tables.py --adopt runs/{exp_id}/default/<utc>.json`.",
                "", _row(["id", "kind", "statement", "rests on"]), "|---|---|---|---|"]
        for c in exp.claims:
            kind = "secondary" if c.secondary else c.kind
            out.append(_row([c.id, kind, c.statement, ", ".join(c.requires) or "-"]))
        return "\n".join(out)
    out += [f"`docs/papers/{exp_id}_files/default.json`: {_run_of(res)}; {_counts(res)}.", ""]
    head = ["id", "status", "observed", "baseline", "threshold", "paper", "statement"]
    out += [_row(head), "|" + "---|" * len(head)]
    for row in claim_rows(res):
        out.append(_row([row.claim, row.status, row.observed, row.baseline, row.threshold, row.paper, row.statement]))
    pngs = sorted(p.name for p in (PAPERS / f"{exp_id}_files").glob("default-*.png"))
    out += [""] + [f"![{exp_id} {p[8:-4]}]({exp_id}_files/{p})" for p in pngs]
    return "\n".join(out).rstrip()


def _replace(text: str, key: str, body: str, *, anchor: str | None = None) -> str:
    begin, end = BEGIN.format(key), END.format(key)
    block = f"{begin}\n{body}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        return head + block + rest.split(end, 1)[1]
    if anchor is not None and anchor in text:
        return text.replace(anchor, f"{anchor}\n\n{block}\n", 1)
    lines = text.split("\n")  # a page without the region: put it after the title line
    return "\n".join([lines[0], "", block, *lines[1:]])


def extra_tables(exp_id: str, text: str) -> str:
    """An experiment module's ``TABLES(result) -> {name: markdown}`` rendered from its committed default run into
    the page's ``table-<name>`` regions (only where the page already has the region's markers)."""
    tables = getattr(get_experiment(exp_id).module, "TABLES", None)
    res = committed_default(exp_id, PAPERS) if tables is not None else None
    if res is None:
        return text
    for name, body in tables(res).items():
        if BEGIN.format(f"table-{name}") in text:
            text = _replace(text, f"table-{name}", body)
    return text


def rendered() -> dict[Path, str]:
    """Every file the generated regions live in, with its new text."""
    out = {README: _replace(README.read_text(encoding="utf-8"), "claims", readme_table())}
    for exp_id in experiment_ids():
        page = PAPERS / f"{exp_id}.md"
        if page.is_file():
            text = _replace(page.read_text(encoding="utf-8"), "results", page_table(exp_id))
            out[page] = extra_tables(exp_id, text)
    return out


def stale() -> list[Path]:
    return [p for p, text in rendered().items() if p.read_text(encoding="utf-8") != text]


def adopt(path: Path) -> Path:
    res = Result.load(path)
    if res.mode != "default" or res.provenance.get("knockout") or res.error is not None:
        raise SystemExit(f"{path}: only a finished default-mode run without a knockout can be committed "
                         f"(mode {res.mode!r}, knockout {res.provenance.get('knockout')!r}).")
    sha = str(res.provenance.get("git_sha", ""))
    if len(sha) != 40 or any(ch not in "0123456789abcdef" for ch in sha):
        raise SystemExit(f"{path}: the run must name the commit it ran on (a clean checkout); its git_sha is "
                         f"{sha!r}. Rerun it from a checkout without uncommitted changes.")
    files = PAPERS / f"{res.experiment}_files"
    files.mkdir(exist_ok=True)
    target = files / "default.json"
    shutil.copyfile(path, target)
    from trustlab.results.plots import claims_plot

    exp = get_experiment(res.experiment)
    figures = {"claims": claims_plot(res), **(exp.plots(res) if exp.plots is not None else {})}
    for old in files.glob("default-*.png"):
        old.unlink()
    for name, fig in figures.items():
        fig.savefig(files / f"default-{name}.png", format="png")
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated region is stale")
    ap.add_argument("--adopt", nargs="*", default=[], type=Path, help="default-mode result files to commit")
    args = ap.parse_args(argv)
    for p in args.adopt:
        print(f"committed {adopt(p)}")
    if args.check:
        bad = stale()
        for p in bad:
            print(f"stale generated table: {p.relative_to(ROOT)} (run python scripts/paper_tables.py)")
        return 1 if bad else 0
    for p, text in rendered().items():
        if p.read_text(encoding="utf-8") != text:
            p.write_text(text, encoding="utf-8")
            print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
