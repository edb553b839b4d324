"""``trustlab audit`` (issue 30): the command itself lives in :mod:`trustlab.audit._cli`."""

from __future__ import annotations

from trustlab.audit._cli import audit_command
from trustlab.cli._app import app

app.command("audit")(audit_command)
