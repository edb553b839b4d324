"""FPO: feature-level constrained preference optimisation with a sparse autoencoder and an offline reference.

Yin, Leong et al., "Constrain Alignment with Sparse Autoencoders", ICML 2025 (arXiv:2411.07618,
https://github.com/MikaStars39/FeatureAlignment). The SAE (TopK or ReLU + L1, input scale stored, safetensors
with a fingerprint) and its trainer, FPO's feature distance and loss and the TDPO baseline loss as pure
functions, the offline reference feature cache, FPO and TDPO as objectives of the shared trainer
(:func:`trustlab.llm.train`), held-out KL / feature-MSE evaluation, and :class:`FPOAligner` (a ModelEdit:
one call aligns a model on preference data). Importing this package imports no torch.
"""

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "FPOAligner": "_aligner",
    "SparseAutoencoder": "_sae", "SAEReport": "_sae", "train_sae": "_sae", "sae_report": "_sae",
    "collect_activations": "_sae",
    "feature_distance": "_loss", "fpo_loss": "_loss", "tdpo_loss": "_loss",
    "FeatureCache": "_cache", "pooled_features": "_cache",
    "FPOObjective": "_objective", "TDPOObjective": "_objective", "PostNormSAEWarning": "_objective",
    "FeatureTermWarning": "_diagnostics",
    "KLEval": "_evaluate", "reference_kl": "_evaluate", "feature_mse": "_evaluate",
}

METHODS.register_exports(__name__, _LAZY, ["FPOAligner"], paper="fpo", role="model_edit")

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
