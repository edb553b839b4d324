"""SPLIT, LicketySPLIT and RESPLIT: near-optimal sparse decision trees (Babbar et al., ICML 2025).

Pure numpy/scikit-learn; no C++ toolchain. Public objects:

* :class:`SPLITClassifier` -- lookahead prefix + optimal/greedy refill (``lookahead_depth == depth_budget``
  is the exact solver);
* :class:`LicketySPLITClassifier` -- recursive one-step lookahead (polynomial time);
* :class:`GreedyTreeClassifier` -- the greedy baseline the guarantees are stated against;
* :class:`RESPLIT` -- a lazily indexed Rashomon set of near-optimal trees;
* :class:`ThresholdGuessBinarizer` -- gradient-boosting threshold guessing (fit on training data only);
* ``fit_gosdt``, ``fit_licketysplit_package``, ``fit_treefarms``, ``fit_cart`` -- baselines through the real
  packages (extra ``trees``), each returning a :class:`BaselineFit` re-scored on the training data.

Objects are imported on first attribute access, so ``import trustlab.methods.split`` stays light.
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "SPLITClassifier": "_split", "LicketySPLITClassifier": "_split", "GreedyTreeClassifier": "_split",
    "RESPLIT": "_resplit", "ThresholdGuessBinarizer": "_binarizer", "TreeNode": "_tree", "tree_objective": "_tree",
    "BaselineFit": "_baselines", "fit_gosdt": "_baselines", "fit_licketysplit_package": "_baselines",
    "fit_treefarms": "_baselines", "fit_cart": "_baselines",
}

__all__ = sorted(_LAZY)
METHODS.register_exports(__name__, _LAZY, ["SPLITClassifier", "LicketySPLITClassifier", "GreedyTreeClassifier",
                                          "RESPLIT"], paper="split", role="predictor")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
