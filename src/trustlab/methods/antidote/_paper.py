"""The paper this package implements (kept apart so importing it costs nothing)."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(
    title="Antidote: Post-fine-tuning Safety Alignment for Large Language Models against Harmful Fine-tuning",
    venue="ICML 2025",
    arxiv="2408.09600",
    repo="https://github.com/git-disl/Antidote",
)
