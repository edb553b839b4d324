"""SoftShape: soft sparse shapes for interpretable time-series classification, as an aeon classifier.

Liu et al., "Learning Soft Sparse Shapes for Efficient Time-Series Classification", ICML 2025
(arXiv:2505.06892). Exports load lazily: importing this package imports neither torch nor aeon.
"""

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

METHODS.register("SoftShapeClassifier", "trustlab.methods.softshape._classifier:SoftShapeClassifier",
                 paper="softshape", role="predictor")
METHODS.register("InceptionTimeLite", "trustlab.methods.softshape._classifier:InceptionTimeLite",
                 paper="softshape", role="predictor")

__all__ = ["SoftShapeClassifier", "InceptionTimeLite", "PAPER_SHAPE_SIZES", "RoutingCollapseWarning",
           "SoftShapeNet", "InceptionTimeNet", "soft_sparsify", "TrainHistory", "tokens_to_steps",
           "plot_shape_scores", "mask_top_steps", "Split", "p1_split", "p2_splits", "evaluate"]

_LAZY = {
    "SoftShapeClassifier": "_classifier", "InceptionTimeLite": "_classifier", "PAPER_SHAPE_SIZES": "_classifier",
    "RoutingCollapseWarning": "_classifier", "SoftShapeNet": "_model", "InceptionTimeNet": "_model",
    "soft_sparsify": "_model", "TrainHistory": "_train", "tokens_to_steps": "_interpret",
    "plot_shape_scores": "_interpret", "mask_top_steps": "_interpret", "Split": "_protocol",
    "p1_split": "_protocol", "p2_splits": "_protocol", "evaluate": "_protocol",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
