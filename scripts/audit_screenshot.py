"""Render the audit report of the shipped planted table and save a screenshot for the docs (docs/audit_report.png).

Needs the browser from ``scripts/install_browser.sh`` and Playwright (extra ``audit``). Run under the CPU lock:

    OMP_NUM_THREADS=1 python scripts/audit_screenshot.py [--out docs/audit_report.png] [--report-dir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = "sklearn.ensemble.RandomForestClassifier(n_estimators=50, min_samples_leaf=10)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "audit_report.png")
    ap.add_argument("--report-dir", type=Path, default=None)
    ap.add_argument("--height", type=int, default=1400, help="height of the captured top of the page (px)")
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    from trustlab.audit import audit, read_table

    df = read_table("example:planted")
    cmd = f'trustlab audit --data example:planted --target y --estimator "{SPEC}" --out audit/'
    rep = audit(SPEC, df.drop(columns="y"), df["y"], command=cmd, random_state=0)
    folder = args.report_dir or Path(tempfile.mkdtemp())
    html = rep.write(folder)["html"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1100, "height": args.height})
        page.goto(html.as_uri())
        page.screenshot(path=str(args.out), full_page=False)
        browser.close()
    print(f"flagged: {rep.flagged}; screenshot {args.out}; report {html}")


if __name__ == "__main__":
    main()
