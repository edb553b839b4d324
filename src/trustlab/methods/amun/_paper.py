"""The paper this package implements (kept apart so importing it costs nothing)."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(
    title="Not All Wrong is Bad: Using Adversarial Examples for Unlearning (AMUN)",
    venue="ICML 2025",
    arxiv="2503.00917",
    repo="https://github.com/Ali-E/AMUN",
    commit="9e341a9",
)
