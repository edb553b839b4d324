"""The reproduction report's HTML in a real browser (headless Chromium, like the audit report; marker browser):
VOID rows name their premise, the default-mode column comes from the committed result, every plot loads and
the page never scrolls sideways (wide claims tables scroll inside their own box)."""

from __future__ import annotations

import sys

import pytest
from tests.test_audit_browser import _chromium

pytestmark = pytest.mark.browser

_INFO = """() => {
  const root = document.documentElement;
  const rows = [...document.querySelectorAll('table.claims tr')].slice(1).map(tr =>
      [...tr.querySelectorAll('td')].map(td => td.textContent));
  const imgs = [...document.querySelectorAll('img')].map(i => ({w: i.naturalWidth, shown: i.width}));
  return {pageScroll: root.scrollWidth, viewport: root.clientWidth, rows, imgs,
          voidRows: document.querySelectorAll('tr.void').length};
}"""


@pytest.fixture
def report(toy_experiment, tmp_path):
    from trustlab.experiments import run_experiment
    from trustlab.results.committed import committed_defaults
    from trustlab.results.report import build_report

    runs, papers = tmp_path / "runs", tmp_path / "papers"
    run_experiment("toypremise", "quick", out_dir=runs, show_progress=False, knockout=True)
    default, _ = run_experiment("toypremise", "default", out_dir=None, show_progress=False)
    default.save(papers / "toypremise_files" / "default.json")
    out = build_report(runs, tmp_path / "report.md", defaults=committed_defaults(papers))
    yield out.with_suffix(".html")
    sys.modules.pop("trustlab.experiments.toypremise", None)


def test_reproduction_report_renders_void_rows_and_the_default_column(report):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), headless=True, args=["--no-sandbox"])
        try:
            for width in (1280, 420):
                page = browser.new_page(viewport={"width": width, "height": 900})
                page.goto(report.as_uri())
                page.wait_for_load_state("load")
                info = page.evaluate(_INFO)
                by_id = {r[0]: r for r in info["rows"]}
                assert by_id["pre-biased (premise)"][6] == "FAIL" and by_id["pre-biased (premise)"][7] == "PASS"
                assert by_id["C1"][6] == "VOID" and "premise pre-biased FAIL" in by_id["C1"][-1]
                assert by_id["C2"][6] == "PASS", by_id  # holds by construction: PASS under the knockout
                assert info["voidRows"] == 1
                assert info["imgs"] and all(i["w"] > 100 and 0 < i["shown"] <= width for i in info["imgs"]), info
                assert info["pageScroll"] <= info["viewport"], f"page scrolls sideways at {width}px: {info}"
                page.close()
        finally:
            browser.close()
