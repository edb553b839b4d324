"""Where the method comes from."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(
    title="A Unified Approach to Routing and Cascading for LLMs",
    venue="ICML 2025",
    arxiv="2410.10347",
    repo="https://github.com/eth-sri/cascade-routing",
    commit="1788b90",
)
