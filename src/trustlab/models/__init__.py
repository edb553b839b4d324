"""Small torch models (MLP, CNN) and a minimal deterministic train/evaluate loop.

Importing this package imports torch; ``import trustlab`` does not import it.
"""

from trustlab.models.nets import MLP, SmallCNN, make_model
from trustlab.models.training import TrainConfig, TrainHistory, evaluate, fit_model, predict_proba

__all__ = ["MLP", "SmallCNN", "make_model", "TrainConfig", "TrainHistory", "fit_model", "evaluate", "predict_proba"]
