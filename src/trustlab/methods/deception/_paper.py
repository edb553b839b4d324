"""The paper record of deception, shared by the method package and its experiment."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

__all__ = ["PAPER"]

PAPER = PaperInfo(
    title="Detecting Strategic Deception Using Linear Probes",
    arxiv="2502.03407",
    repo="https://github.com/ApolloResearch/deception-detection",
)
