"""The paper this package implements (kept apart so importing it costs nothing)."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(
    title="Learning Concise Representations for Single and Multi-Target Regression via TabNet Knowledge "
          "Distillation (Fong, Motani)",
    venue="ICML 2025 (PMLR 267:17378-17391)",
    repo=None,  # no official code found; the pipeline is reconstructed from the paper (spec featkd 2.2)
)
