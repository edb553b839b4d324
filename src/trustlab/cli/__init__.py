"""The ``trustlab`` command line: list, run, reproduce, report, doctor, route, licensing, freqpure, audit.

``main`` is the console-script entry point (the Typer app is ``trustlab.cli._app.app``); each command lives in a module
(``_experiments``: list, run, reproduce, report; ``_health``: doctor; ``_papers``: route, licensing, freqpure; ``_audit``: audit), and
importing this package registers them all.
"""

from __future__ import annotations

# registration order is the order of `trustlab --help`
from trustlab.cli import _experiments, _health, _papers  # noqa: F401  (registers the commands)

# isort: split
from trustlab.cli import _audit  # noqa: F401  (registered last, after the paper commands)
from trustlab.cli._app import main

__all__ = ["main"]
