"""InceptionTimeLite: one InceptionTime network in torch, the deep baseline (aeon's needs TensorFlow)."""

from __future__ import annotations

from typing import Any, ClassVar

from trustlab.core.constraints import Interval
from trustlab.methods.softshape._base import COMMON_CONSTRAINTS, INT1, TorchSeriesClassifier

__all__ = ["InceptionTimeLite"]


class InceptionTimeLite(TorchSeriesClassifier):
    """One InceptionTime network (depth 3, residual) in torch, the deep baseline (aeon's needs TensorFlow).

    Parameters
    ----------
    n_filters : int, default=32
        Filters per branch (the block outputs 4 x n_filters channels).
    depth : int, default=3
    kernel_size : int, default=40
        Largest kernel; the branches use kernel_size-1, kernel_size/2-1, kernel_size/4-1 (odd).
    epochs, patience, batch_size, lr, validation_fraction, normalize, pad, random_state
        As in :class:`~trustlab.methods.softshape.SoftShapeClassifier` (no warm-up).

    References
    ----------
    H. Ismail Fawaz et al. InceptionTime: Finding AlexNet for time series classification. DMKD 2020.
    """

    _constraints: ClassVar[dict[str, list[Any]]] = {
        "n_filters": INT1,
        "depth": INT1,
        "kernel_size": [Interval(int, 4, None)],
        **COMMON_CONSTRAINTS,
    }

    def __init__(self, *, n_filters: int = 32, depth: int = 3, kernel_size: int = 40, epochs: int = 200,
                 patience: int = 40, batch_size: int = 64, lr: float = 1e-3, validation_fraction: float = 0.2,
                 normalize: bool = True, pad: str | int | None = None, random_state: Any = None) -> None:
        self.n_filters = n_filters
        self.depth = depth
        self.kernel_size = kernel_size
        self.epochs = epochs
        self.patience = patience
        self.batch_size = batch_size
        self.lr = lr
        self.validation_fraction = validation_fraction
        self.normalize = normalize
        self.pad = pad
        self.random_state = random_state
        super().__init__()
        self._init_tags()

    @classmethod
    def _get_test_params(cls, parameter_set: str = "default") -> list[dict[str, Any]]:
        return [{"n_filters": 4, "depth": 3, "kernel_size": 8, "epochs": 3, "patience": 2, "random_state": 0}]

    def _build(self, n_channels: int, T: int, n_classes: int) -> Any:
        from trustlab.methods.softshape._model import InceptionTimeNet

        return InceptionTimeNet(n_channels, n_classes, n_filters=self.n_filters, depth=self.depth,
                                kernel_size=self.kernel_size)
