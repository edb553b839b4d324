"""The paper this package implements (kept apart so importing it costs nothing)."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(
    title="Near-Optimal Decision Trees in a SPLIT Second (Babbar, McTavish, Rudin, Seltzer)",
    venue="ICML 2025",
    arxiv="2502.15988",
    repo="https://github.com/VarunBabbar/SPLIT-ICML",
    commit="20fd3b4",
)
