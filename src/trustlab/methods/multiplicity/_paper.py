"""The paper this package implements (kept apart so importing it costs nothing)."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(title="Quantifying Prediction Consistency Under Fine-tuning Multiplicity in Tabular LLMs",
                  arxiv="2407.04173")
