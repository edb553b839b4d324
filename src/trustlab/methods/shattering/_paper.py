"""The paper record of shattering, shared by the method package and its experiment."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

__all__ = ["PAPER"]

PAPER = PaperInfo(
    title="Representation Shattering in Transformers: A Synthetic Study with Knowledge Editing",
    arxiv="2410.17194",
    repo="https://github.com/KentoNishi/KE-ICML-2025",
)
