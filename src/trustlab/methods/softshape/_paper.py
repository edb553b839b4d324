"""The paper this package implements (kept apart so importing it costs nothing)."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(
    title="Learning Soft Sparse Shapes for Efficient Time-Series Classification",
    arxiv="2505.06892", repo="https://github.com/ZLiu21/SoftShape",
)
