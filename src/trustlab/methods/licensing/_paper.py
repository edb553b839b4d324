"""The paper this package implements (kept apart so importing it costs nothing)."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(
    title="Position: AI Safety Should Prioritize the Future of Work (Hazra, Majumder, Chakrabarty)",
    venue="ICML 2025",
    arxiv="2504.13959",
    repo=None,
    commit=None,
)
