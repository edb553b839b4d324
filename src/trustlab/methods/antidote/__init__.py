"""Antidote: post-fine-tuning safety alignment by one-shot pruning of harmful weights.

Huang, Bhattacharya, Joshi, Kimball, Liu, "Antidote: Post-fine-tuning Safety Alignment for Large Language Models
against Harmful Fine-tuning", ICML 2025 (arXiv:2408.09600, https://github.com/git-disl/Antidote).
:class:`Antidote` (a ModelEdit: Wanda statistics on harmful calibration data, per-row top-alpha mask, prune,
exact restore, pruned count per module, an error instead of a silent zero-prune), the ablations
:class:`MagnitudePrune` and :class:`RandomPrune`, the fine-tuning-stage baselines :class:`LisaObjective` and
:class:`LDIFSObjective` for the shared trainer, and the VaultGuard sandbox (fictional canary secrets, disjoint
template sets, an exact leak judge) with the SentimentLite benign task. Importing this package imports no torch.
"""

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "Antidote": "_prune", "MagnitudePrune": "_prune", "RandomPrune": "_prune", "PruneInfo": "_prune",
    "PruneRoundingWarning": "_prune",
    "prune_targets": "_wanda", "collect_input_norms": "_wanda", "wanda_scores": "_wanda", "row_topk_mask": "_wanda",
    "LisaObjective": "_baselines", "LDIFSObjective": "_baselines", "choose_options": "_baselines",
    "SECRETS": "_sandbox", "HELD_OUT": "_sandbox", "TEMPLATE_SPLITS": "_sandbox", "VaultPrompts": "_sandbox",
    "make_vault": "_sandbox", "SentimentData": "_sandbox", "make_sentiment": "_sandbox", "leaked": "_sandbox",
    "leak_rate": "_sandbox", "refusal_rate": "_sandbox", "check_disjoint": "_sandbox", "check_no_canary": "_sandbox",
}

METHODS.register_exports(__name__, _LAZY, ["Antidote", "MagnitudePrune", "RandomPrune"], paper="antidote",
                         role="model_edit")

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
