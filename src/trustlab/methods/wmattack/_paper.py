"""The paper this package implements (kept apart so importing it costs nothing)."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(
    title="Optimizing Adaptive Attacks against Watermarks for Language Models",
    venue="ICML 2025",
    arxiv="2410.02440",
    repo="https://github.com/nilslukas/ada-wm-evasion",
)
