"""The paper this package implements (kept apart so importing it costs nothing)."""

from __future__ import annotations

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(
    title="Clients Collaborate: Flexible Differentially Private Federated Learning with Guaranteed "
          "Improvement of Utility-Privacy Trade-off",
    venue="ICML 2025",
    arxiv="2402.07002",
    repo="https://github.com/6lyc/FedCEO_Collaborate-with-Each-Other",
    commit="80280ca",
)
