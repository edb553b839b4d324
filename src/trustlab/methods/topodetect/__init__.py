"""Topological signatures of adversaries in multimodal alignments (ICML 2025): TP/MK losses, a differentiable
H0 path, per-sample topological features and topology-augmented MMD tests.

Vu, Zollicoffer, Mai, Nebgen, Alexandrov, Bhattarai, "Topological Signatures of Adversaries in Multimodal
Alignments" (arXiv:2501.18006; no public code). Light to import: torch, ripser and persim load only when a
name below is used.

* Losses: :func:`tp_loss` (total persistence, alpha, H0/H1), :func:`mk_loss` (multi-scale kernel), both via
  :func:`persistence_diagrams` (ripser) and :func:`h0_deaths` (the MST); :func:`topo_losses` gives every loss
  of a batch plus the unimodal control; :func:`contrast_clouds` the two clouds ('embedding' / 'logits' view).
* Differentiable H0: :func:`h0_persistence_torch`, :func:`tp_h0_torch`; per-sample features :func:`topo_features`.
* Signatures: :func:`signature_sweep` (losses vs adversarial proportion, Spearman rho).
* Detectors (two-sample tests, ``fit / score_samples / predict / test``): :class:`MMDGaussian`,
  :class:`MMDDeep`, :class:`SAMMD`, :class:`TopoSAMMD`; results :class:`TestResult`.
* Stand-in model: :class:`MiniCLIP`, :func:`train_miniclip`, :func:`caption_features` (frozen MiniLM).
* Attacks on zero-shot logits: :class:`ZeroShotFGSM`, :class:`ZeroShotPGD` (torchattacks).
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "persistence_diagrams": "_persistence", "h0_deaths": "_persistence", "total_persistence": "_persistence",
    "tp_loss": "_persistence", "mk_kernel": "_persistence", "mk_loss": "_persistence",
    "contrast_clouds": "_persistence", "topo_losses": "_persistence", "TopoLosses": "_persistence",
    "h0_persistence_torch": "_diffh0", "tp_h0_torch": "_diffh0", "topo_features": "_diffh0",
    "SignatureSweep": "_signature", "signature_sweep": "_signature",
    "TestResult": "_mmd", "MMDGaussian": "_mmd", "MMDDeep": "_mmd", "SAMMD": "_mmd", "TopoSAMMD": "_mmd",
    "MiniCLIP": "_miniclip", "train_miniclip": "_miniclip", "caption_features": "_miniclip",
    "ZeroShotFGSM": "_attacks", "ZeroShotPGD": "_attacks",
}

METHODS.register_exports(__name__, _LAZY, ["MMDGaussian", "MMDDeep", "SAMMD", "TopoSAMMD"], paper="topodetect",
                         role="detector")
METHODS.register_exports(__name__, _LAZY, ["ZeroShotFGSM", "ZeroShotPGD"], paper="topodetect", role="attack")

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
