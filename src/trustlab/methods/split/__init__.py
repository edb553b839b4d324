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
from trustlab.methods.split._paper import PAPER

__all__ = ["PAPER", "SPLITClassifier", "LicketySPLITClassifier", "GreedyTreeClassifier", "RESPLIT",
           "ThresholdGuessBinarizer", "TreeNode", "tree_objective", "BaselineFit", "fit_gosdt",
           "fit_licketysplit_package", "fit_treefarms", "fit_cart"]

_WHERE = {
    "SPLITClassifier": "trustlab.methods.split._split:SPLITClassifier",
    "LicketySPLITClassifier": "trustlab.methods.split._split:LicketySPLITClassifier",
    "GreedyTreeClassifier": "trustlab.methods.split._split:GreedyTreeClassifier",
    "RESPLIT": "trustlab.methods.split._resplit:RESPLIT",
    "ThresholdGuessBinarizer": "trustlab.methods.split._binarizer:ThresholdGuessBinarizer",
    "TreeNode": "trustlab.methods.split._tree:TreeNode",
    "tree_objective": "trustlab.methods.split._tree:tree_objective",
    "BaselineFit": "trustlab.methods.split._baselines:BaselineFit",
    "fit_gosdt": "trustlab.methods.split._baselines:fit_gosdt",
    "fit_licketysplit_package": "trustlab.methods.split._baselines:fit_licketysplit_package",
    "fit_treefarms": "trustlab.methods.split._baselines:fit_treefarms",
    "fit_cart": "trustlab.methods.split._baselines:fit_cart",
}

for _name in ("SPLITClassifier", "LicketySPLITClassifier", "GreedyTreeClassifier", "RESPLIT"):
    METHODS.register(_name, _WHERE[_name], paper="split", role="predictor")

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
