"""The paper record of iclheads, shared by the method package and its experiment."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

__all__ = ["PAPER"]

PAPER = PaperInfo(
    title="Which Attention Heads Matter for In-Context Learning?",
    arxiv="2502.14010",
    repo="https://github.com/kayoyin/icl-heads",
)
