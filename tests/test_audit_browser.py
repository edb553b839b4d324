"""The audit's HTML report in a real browser: headless Chromium (Debian's package, scripts/install_browser.sh)
driven by Playwright's Python package. Marker ``browser`` (.ci/run installs the browser, then runs it)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytestmark = pytest.mark.browser

#: every check with small budgets, so each section has its plot
SETTINGS = {"membership": {"n_reference": 2}, "multiplicity": {"n_models": 3},
            "explanation_stability": {"max_rows": 200, "n_features": 1, "n_explore": 3, "budget": 1},
            "explanation_controls": {"n_rows": 10, "n_background": 10}, "fairness": {"n_boot": 50}}
#: the sections issue 42 added, each with its plot
NEW_SECTIONS = ("fairness", "calibration", "drift")
WIDTHS = (1280, 800, 420)


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("no chromium on PATH: run scripts/install_browser.sh first")
    return path


@pytest.fixture(scope="module")
def report_html(tmp_path_factory):
    from trustlab.audit import audit, read_table

    df = read_table("example:planted")
    rng = np.random.default_rng(0)
    X = df.drop(columns="y").assign(group=rng.choice(["a", "b"], len(df)))  # a sensitive column for the fairness view
    spec = ("sklearn.pipeline.Pipeline([('pre', sklearn.compose.ColumnTransformer([('cat', "
            "sklearn.preprocessing.OneHotEncoder(), ['group'])], remainder='passthrough')), ('m', "
            "sklearn.ensemble.RandomForestClassifier(n_estimators=50, min_samples_leaf=10))])")
    rep = audit(spec, X, df["y"], settings=SETTINGS, sensitive=["group"], random_state=0)
    out = tmp_path_factory.mktemp("report")
    return rep, rep.write(out)["html"]


_LAYOUT = """() => {
  const root = document.documentElement;
  const vw = root.clientWidth;
  const over = [];
  for (const el of document.querySelectorAll('main *')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > vw + 1 || r.left < -1) over.push(el.tagName + '.' + el.className + ' right=' + r.right);
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible')
      over.push(el.tagName + ' scrolls ' + el.scrollWidth + '>' + el.clientWidth);
  }
  const imgs = [...document.querySelectorAll('img.plot')];
  return {pageScroll: root.scrollWidth, viewport: vw, overflowing: over,
          rows: document.querySelectorAll('#summary tbody tr').length,
          verdicts: [...document.querySelectorAll('#summary tbody tr td.verdict')].map(td => td.textContent),
          sections: [...document.querySelectorAll('section.check')].map(s => s.id),
          plots: imgs.map(i => ({check: i.dataset.check, w: i.naturalWidth, h: i.naturalHeight, shown: i.width}))};
}"""


def test_report_renders_summary_and_every_plot_without_overflow(report_html, tmp_path):
    from playwright.sync_api import sync_playwright

    rep, html = report_html
    n_plots = sum(len(c.plots) for c in rep.checks)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), headless=True, args=["--no-sandbox"])
        try:
            for width in WIDTHS:
                page = browser.new_page(viewport={"width": width, "height": 900})
                page.goto(html.as_uri())
                page.wait_for_load_state("load")
                info = page.evaluate(_LAYOUT)
                page.screenshot(path=str(tmp_path / f"report_{width}.png"), full_page=True)
                assert info["rows"] == len(rep.checks), info
                assert info["verdicts"] == [c.status.upper() for c in rep.checks]
                assert info["sections"] == [f"check-{c.name}" for c in rep.checks]
                assert len(info["plots"]) == n_plots and n_plots >= len(rep.checks) - 1, info["plots"]
                assert all(p["w"] > 100 and p["h"] > 50 and 0 < p["shown"] <= width for p in info["plots"]), info
                assert {p["check"] for p in info["plots"]} == {c.name for c in rep.checks if c.plots}
                for name in NEW_SECTIONS:  # fairness, calibration and drift: a section with a rendered plot
                    assert f"check-{name}" in info["sections"] and name in {p["check"] for p in info["plots"]}
                    assert rep.check(name).status in ("ok", "flag"), (name, rep.check(name).reason)
                assert info["pageScroll"] <= info["viewport"], f"page scrolls sideways at {width}px: {info}"
                assert not info["overflowing"], f"at {width}px: {info['overflowing'][:5]}"
                page.close()
        finally:
            browser.close()
    assert (tmp_path / "report_1280.png").stat().st_size > 10_000
