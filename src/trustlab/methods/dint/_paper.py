"""The paper this package implements (kept apart so importing it costs nothing)."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(
    title="Learning Distribution-Wise Control in Representation Space for Language Models (D-Intervention)",
    venue="ICML 2025",
    arxiv="2506.06686",
    repo="https://github.com/chili-lab/D-Intervention",
)
