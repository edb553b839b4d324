"""The paper this package implements (kept apart so importing it costs nothing)."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(
    title="Constrain Alignment with Sparse Autoencoders (FPO: Feature-level constrained Preference Optimization)",
    venue="ICML 2025",
    arxiv="2411.07618",
    repo="https://github.com/MikaStars39/FeatureAlignment",
)
