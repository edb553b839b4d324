"""Where FreqPure comes from."""

from trustlab.core.base import PaperInfo

PAPER = PaperInfo(
    title="Diffusion-based Adversarial Purification from the Perspective of the Frequency Domain",
    venue="ICML 2025",
    arxiv="2505.01267",
    repo="https://github.com/GaozhengPei/FreqPure",
)
