#!/usr/bin/env bash
# Install the browser the report's browser test (pytest -m browser, tests/test_audit_browser.py) drives:
# Debian's headless-capable Chromium, from the distribution's packages (no browser download by Playwright).
# Playwright's Python package (extra `audit`) drives it through `executable_path`. Needs root (or sudo) and apt.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "chromium present: $(chromium --version)"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
echo "installed $(chromium --version)"
