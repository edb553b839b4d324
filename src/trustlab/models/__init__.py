"""Small torch models (MLP, CNN) and the one deterministic minibatch train/evaluate loop trustlab uses.

Names load on first use (then torch is imported); ``import trustlab`` does not import torch.
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports

_LAZY = {
    **dict.fromkeys(("MLP", "SmallCNN", "make_model"), "nets"),
    **dict.fromkeys(("TrainConfig", "TrainHistory", "TrainingDivergedError", "fit_model", "train_epoch",
                     "make_optimizer", "device_of", "evaluate", "predict_proba", "predict_logits"), "training"),
}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
