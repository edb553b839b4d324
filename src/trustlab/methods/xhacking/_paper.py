"""The paper this package implements (kept apart so importing it costs nothing)."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(title="X-Hacking: The Threat of Misguided AutoML", arxiv="2401.08513",
                  repo="https://github.com/datasciapps/x-hacking")
