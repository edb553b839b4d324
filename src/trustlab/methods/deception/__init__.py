"""Deception probes: linear probes on residual-stream activations, calibrated on control chat.

Goldowsky-Dill, Chughtai, Heimersheim, Hobbhahn, "Detecting Strategic Deception Using Linear Probes",
ICML 2025 (arXiv:2502.03407); official code https://github.com/ApolloResearch/deception-detection.

Light at import: every name is loaded on first use (no torch, no sklearn here).
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "DeceptionProbe": "_probe", "DialogueActivations": "_probe",
    "Message": "_dialogue", "Dialogue": "_dialogue",
    "tokenize_dialogues": "_dialogue",
    "load_dialogues": "_io", "split_dialogues": "_io",
    "ActivationExtractor": "_extract",
    "Threshold": "_metrics", "RecallAtFPR": "_metrics", "ScoreReport": "_metrics", "label_masks": "_metrics",
    "threshold_at_fpr": "_metrics", "auroc": "_metrics", "recall_at_fpr": "_metrics", "evaluate_scores": "_metrics",
    "random_direction_probe": "_baselines", "shuffled_label_probe": "_baselines", "TextBaseline": "_baselines",
    "layer_sweep": "_baselines",
    "instructed_pairs": "_data", "roleplay": "_data", "sandbagging": "_data", "control": "_data",
    "persona_statements": "_data", "control_heldout": "_data",
    "binomial_test_power": "_power", "heldout_size_for_power": "_power",
}

__all__ = sorted(_LAZY)
METHODS.register_exports(__name__, _LAZY, ["DeceptionProbe"], paper="deception", role="predictor")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
