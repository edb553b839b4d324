"""SoftShape: soft sparse shapes for interpretable time-series classification, as an aeon classifier.

Liu et al., "Learning Soft Sparse Shapes for Efficient Time-Series Classification", ICML 2025
(arXiv:2505.06892). Exports load lazily: importing this package imports neither torch nor aeon.
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "SoftShapeClassifier": "_classifier", "PAPER_SHAPE_SIZES": "_classifier", "InceptionTimeLite": "_inception",
    "plot_shape_scores": "_interpret", "mask_top_steps": "_interpret",
    "p1_split": "_protocol", "p2_splits": "_protocol", "evaluate": "_protocol",
}

__all__ = sorted(_LAZY)
METHODS.register_exports(__name__, _LAZY, ["SoftShapeClassifier", "InceptionTimeLite"], paper="softshape", role="predictor")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
