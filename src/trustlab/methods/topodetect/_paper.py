"""Where topodetect comes from."""

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(
    title="Topological Signatures of Adversaries in Multimodal Alignments",
    venue="ICML 2025",
    arxiv="2501.18006",
    repo=None,  # no official code found (spec 2.1)
)
