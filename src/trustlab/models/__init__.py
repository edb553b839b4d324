"""Small torch models (MLP, CNN) and the one deterministic minibatch train/evaluate loop trustlab uses.

Importing this package imports torch; ``import trustlab`` does not import it.
"""

from trustlab.models.nets import MLP, SmallCNN, make_model
from trustlab.models.training import (
    TrainConfig,
    TrainHistory,
    TrainingDivergedError,
    device_of,
    evaluate,
    fit_model,
    make_optimizer,
    predict_logits,
    predict_proba,
    train_epoch,
)

__all__ = ["MLP", "SmallCNN", "make_model", "TrainConfig", "TrainHistory", "TrainingDivergedError", "fit_model",
           "train_epoch", "make_optimizer", "device_of", "evaluate", "predict_proba", "predict_logits"]
