"""aeon classifiers carrying the trustlab Method contract: SoftShapeClassifier and InceptionTimeLite.

Both subclass aeon's ``BaseClassifier`` (aeon's final ``fit``/``predict``/``predict_proba`` call our
``_fit``/``_predict``/``_predict_proba``) and trustlab's ``Method`` (``paper``, ``tags``, ``_constraints``,
``_get_test_params``, ``_get_test_inputs``). aeon's input checks raise ``ValueError``; here they surface
as :class:`~trustlab.core.exceptions.InputError` (a ``ValueError``), and predicting before ``fit`` raises an
error that is both trustlab's and scikit-learn's ``NotFittedError``.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np
from aeon.classification.base import BaseClassifier
from sklearn.exceptions import NotFittedError as _SkNotFittedError

from trustlab.core.base import Method, PaperInfo
from trustlab.core.constraints import Interval, Options, Satisfies, validate_params
from trustlab.core.exceptions import InputError, NotFittedError

__all__ = ["SoftShapeClassifier", "InceptionTimeLite", "PAPER_SHAPE_SIZES", "RoutingCollapseWarning"]

PAPER = PaperInfo(
    title="Learning Soft Sparse Shapes for Efficient Time-Series Classification",
    arxiv="2505.06892", repo="https://github.com/ZLiu21/SoftShape",
)

#: shape sizes m from the official per-data-set table (data/shape_size_hyp.py) for the bundled sets we use
PAPER_SHAPE_SIZES: dict[str, int] = {"GunPoint": 32, "ArrowHead": 16, "ItalyPowerDemand": 4, "ECG200": 64,
                                     "Chinatown": 16, "Wine": 16, "CBF": 32}


class RoutingCollapseWarning(UserWarning):
    """One MoE expert took more than 90 % of the tokens in the last sparsified epoch."""


class _NotFitted(NotFittedError, _SkNotFittedError):
    """Both trustlab's and scikit-learn's NotFittedError (aeon's checks expect the latter)."""


class _hybridmethod:
    """``get_tags`` for two contracts: on the class it gives trustlab's tags (``cls.get_tags()``: role,
    requires, stochastic), on an instance aeon's (class ``_tags`` plus dynamic tags), so that aeon's tag
    checks see only aeon tag names."""

    def __init__(self, func: Any) -> None:
        self.func = func

    def __get__(self, obj: Any, cls: type) -> Any:
        return lambda: self.func(cls, obj)


def _dispatch_tags(cls: type, obj: Any) -> dict[str, Any]:
    if obj is None:
        return Method.get_tags.__func__(cls)
    return BaseClassifier.get_tags(obj)


_INT1 = [Interval(int, 1, None)]
_BOOL = ["boolean"]


class _TorchSeriesClassifier(BaseClassifier, Method):
    """Shared plumbing: input checks, preprocessing (train-mean NaN fill, per-series z-norm), training."""

    paper: ClassVar[PaperInfo] = PAPER
    tags: ClassVar[dict[str, Any]] = {"role": "predictor", "requires": ("torch", "aeon"), "stochastic": True,
                                    "allow_nan": True}
    _tags: ClassVar[dict[str, Any]] = {
        "capability:multivariate": True,
        "capability:missing_values": True,
        "python_dependencies": "torch",
        "X_inner_type": "numpy3D",
    }
    get_tags = _hybridmethod(_dispatch_tags)

    # -- aeon hooks: make bad input an InputError ---------------------------------------------------------
    def _check_is_fitted(self) -> None:
        if not getattr(self, "is_fitted", False):
            raise _NotFitted(f"This instance of {type(self).__name__} has not been fitted yet; call 'fit' first.")

    def _preprocess_collection(self, X: Any, store_metadata: bool = True) -> Any:
        owner = type(self).__name__
        if isinstance(X, np.ndarray):
            if X.ndim not in (2, 3):
                raise InputError(f"The 'X' argument of {owner} must be a 2-d (n_cases, n_timepoints) or 3-d "
                                 f"(n_cases, n_channels, n_timepoints) array. Got shape {X.shape}.")
            if X.shape[0] == 0:
                raise InputError(f"The 'X' argument of {owner} must hold at least one series. Got shape {X.shape}.")
            if X.dtype.kind not in "biuf":
                raise InputError(f"The 'X' argument of {owner} must be numeric. Got dtype {X.dtype}.")
            if np.isinf(X).any():
                raise InputError(f"The 'X' argument of {owner} must not contain inf (NaN is filled with the "
                                 "training mean).")
            if X.shape[-1] < 2:
                raise InputError(f"The series passed to {owner} must have at least 2 time points. "
                                 f"Got {X.shape[-1]}.")
        elif isinstance(X, list) and len(X) == 0:
            raise InputError(f"The 'X' argument of {owner} must hold at least one series. Got [].")
        try:
            return super()._preprocess_collection(X, store_metadata=store_metadata)
        except InputError:
            raise
        except (ValueError, TypeError) as exc:
            hint = (" Pad or resample to one length first (e.g. aeon.transformations.collection.Padder or "
                    "Resizer)." if "unequal length" in str(exc) else "")
            raise InputError(f"{owner} cannot use this X: {exc}{hint}") from exc

    def _check_y(self, y: Any, n_cases: int, update_classes: bool = True, allow_single_class: bool = False) -> Any:
        try:
            return super()._check_y(y, n_cases, update_classes=update_classes, allow_single_class=allow_single_class)
        except (ValueError, TypeError) as exc:
            raise InputError(f"{type(self).__name__} cannot use this y: {exc}") from exc

    def _check_shape(self, X: Any) -> None:
        try:
            super()._check_shape(X)
        except ValueError as exc:
            raise InputError(f"{type(self).__name__}: {' '.join(map(str, exc.args))}") from exc

    # -- preprocessing ---------------------------------------------------------------------------------
    def _prepare(self, X: np.ndarray) -> np.ndarray:
        """Fill NaN with the training-split mean of each (channel, time step), then z-normalise per series."""
        X = np.array(X, dtype=np.float64, copy=True)
        nan = np.isnan(X)
        if nan.any():
            X[nan] = np.broadcast_to(self.train_mean_, X.shape)[nan]
        if self.normalize:
            mu = X.mean(axis=2, keepdims=True)
            sd = X.std(axis=2, keepdims=True)
            sd[sd < 1e-8] = 1.0
            X = (X - mu) / sd
        return X.astype(np.float32)

    def _fit(self, X: np.ndarray, y: np.ndarray) -> BaseClassifier:
        import torch

        from trustlab.methods.softshape._train import split_validation, train_net

        validate_params(type(self).__name__, self.get_params(deep=False), self._constraints)
        y_enc = np.searchsorted(self.classes_, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a step that is NaN in every series
            mean = np.nanmean(X, axis=0)
        self.train_mean_ = np.nan_to_num(mean, nan=0.0)  # a step that is NaN in every series gets 0
        Xp = self._prepare(X)
        seed = self.random_state if self.random_state is not None else int(np.random.default_rng().integers(2**31))
        gen_np = np.random.default_rng(seed)
        tr, va = split_validation(y_enc, self.validation_fraction, gen_np)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            gen = torch.Generator().manual_seed(seed)
            self.network_ = self._build(X.shape[1], X.shape[2], len(self.classes_))
            Xt, yt = torch.from_numpy(Xp), torch.from_numpy(y_enc.astype(np.int64))
            self.history_ = train_net(
                self.network_, Xt[tr], yt[tr], Xt[va] if len(va) else None, yt[va] if len(va) else None,
                epochs=self.epochs, warm_up=self._warm_up(), patience=self.patience, batch_size=self.batch_size,
                lr=self.lr, aux_rate=self._aux_rate(), gen=gen, select_after_warm_up=self._warm_up() > 0)
        self.n_epochs_ = self.history_.n_epochs
        self._after_fit()
        return self

    def _after_fit(self) -> None:
        pass

    def _warm_up(self) -> int:
        return 0

    def _aux_rate(self) -> float:
        return 0.0

    def _logits(self, X: np.ndarray) -> Any:
        import torch

        from trustlab.methods.softshape._train import predict_logits

        return predict_logits(self.network_, torch.from_numpy(self._prepare(X)), warm=False)

    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        import torch

        return torch.softmax(self._logits(X), dim=1).double().numpy()

    def _predict(self, X: np.ndarray) -> np.ndarray:
        return self.classes_[self._predict_proba(X).argmax(axis=1)]

    # -- inputs for trustlab's common checks --------------------------------------------------------------
    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        rng = np.random.default_rng(0)
        n, T = 16, 24
        y = np.repeat([0, 1], n // 2)
        t = np.linspace(0, 1, T)
        X = rng.normal(scale=0.3, size=(n, 1, T))
        X[y == 1, 0, 8:16] += 2.0 * np.sin(np.pi * (t[8:16] - t[8]) / (t[15] - t[8]))
        return {"X": X, "y": y}


class SoftShapeClassifier(_TorchSeriesClassifier):
    """SoftShape: soft sparse shapes for interpretable time-series classification.

    Parameters
    ----------
    shape_size : int or float or None, default=None
        Shape length m (an int), or a ratio of the series length (a float in (0, 1]). None uses
        ``max(4, round(0.2 * T))``; the paper's per-data-set values are in ``PAPER_SHAPE_SIZES``.
        Clamped to the series length.
    stride : int, default=4
        Shape stride q (if m <= q then q = min(2, m)).
    d_model : int, default=128
        Token dimension D (a multiple of 4: the Inception branch outputs 4 x D/4 channels).
    depth : int, default=2
        Number of layers L; keep ratios are 1 - linspace(0, sparse_rate, L).
    sparse_rate : float, default=0.5
        Sparsification rate of the last layer.
    sparsify : {"soft", "hard", "none"}, default="soft"
        "soft" merges the non-top-k tokens into one score-weighted token (the paper); "hard" drops them;
        "none" never sparsifies (ablation).
    use_moe, use_inception : bool, default=True
        The intra-shape MoE branch and the inter-shape Inception branch (ablations).
    dropout : float, default=0.15
    epochs : int, default=200
        Epoch cap (the paper: 500).
    warm_up_epochs : int, default=60
        Epochs with keep ratio 1 before sparsifying (the paper: 150).
    patience : int, default=40
        Early stopping after warm-up: epochs without a new minimum validation loss (the paper: 80).
    batch_size : int, default=512
        min(batch_size, n_train), the official ``use_large_batch`` setting.
    lr : float, default=1e-3
        Adam learning rate (weight decay 0).
    moe_loss_rate : float, default=0.001
        Weight of the MoE cv^2 load-balancing loss.
    validation_fraction : float, default=0.2
        Stratified part of the training data for early stopping and model selection (0: training loss).
    normalize : bool, default=True
        Z-normalise every series (the official ``normalize_way='single'``).
    random_state : int or None, default=None

    Attributes
    ----------
    network_ : SoftShapeNet
    history_ : TrainHistory
        Per-epoch losses and times (``mean_epoch_time(warm=False)`` is the sparsified-phase time).
    expert_load_ : ndarray or None
        Tokens per MoE expert in the last sparsified epoch.
    shape_size_, stride_, n_tokens_ : int
        Resolved m, q and M.

    References
    ----------
    Z. Liu, Y. Luo, B. Li, E. Eldele, M. Wu, Q. Ma. Learning Soft Sparse Shapes for Efficient Time-Series
    Classification. ICML 2025. arXiv:2505.06892. Code: https://github.com/ZLiu21/SoftShape.

    Examples
    --------
    >>> from trustlab.data import load_timeseries
    >>> from trustlab.methods.softshape import SoftShapeClassifier
    >>> tr = load_timeseries("GunPoint", "train")
    >>> clf = SoftShapeClassifier(shape_size=32, d_model=32, epochs=30, warm_up_epochs=10, random_state=0)
    >>> clf.fit(tr.X, tr.y).predict(tr.X[:3]).shape  # doctest: +SKIP
    (3,)
    """

    _constraints: ClassVar[dict[str, list[Any]]] = {
        "shape_size": [Interval(int, 1, None), Interval(float, 0, 1, closed="right"), None],
        "stride": _INT1,
        "d_model": [Satisfies(lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 4 and v % 4 == 0,
                              "an int >= 4 and a multiple of 4", ["x", 2, 6, 8.0])],
        "depth": _INT1,
        "sparse_rate": [Interval(float, 0, 1, closed="left")],
        "sparsify": [Options(("soft", "hard", "none"))],
        "use_moe": _BOOL,
        "use_inception": _BOOL,
        "dropout": [Interval(float, 0, 1, closed="left")],
        "epochs": _INT1,
        "warm_up_epochs": [Interval(int, 0, None)],
        "patience": [Interval(int, 0, None)],
        "batch_size": _INT1,
        "lr": [Interval(float, 0, None, closed="neither")],
        "moe_loss_rate": [Interval(float, 0, None)],
        "validation_fraction": [Interval(float, 0, 0.5, closed="left")],
        "normalize": _BOOL,
        "random_state": [Interval(int, 0, 2**32 - 1), None],
    }

    def __init__(self, *, shape_size: int | float | None = None, stride: int = 4, d_model: int = 128,
                 depth: int = 2, sparse_rate: float = 0.5, sparsify: str = "soft", use_moe: bool = True,
                 use_inception: bool = True, dropout: float = 0.15, epochs: int = 200, warm_up_epochs: int = 60,
                 patience: int = 40, batch_size: int = 512, lr: float = 1e-3, moe_loss_rate: float = 1e-3,
                 validation_fraction: float = 0.2, normalize: bool = True, random_state: int | None = None) -> None:
        self.shape_size = shape_size
        self.stride = stride
        self.d_model = d_model
        self.depth = depth
        self.sparse_rate = sparse_rate
        self.sparsify = sparsify
        self.use_moe = use_moe
        self.use_inception = use_inception
        self.dropout = dropout
        self.epochs = epochs
        self.warm_up_epochs = warm_up_epochs
        self.patience = patience
        self.batch_size = batch_size
        self.lr = lr
        self.moe_loss_rate = moe_loss_rate
        self.validation_fraction = validation_fraction
        self.normalize = normalize
        self.random_state = random_state
        super().__init__()

    @classmethod
    def _get_test_params(cls, parameter_set: str = "default") -> list[dict[str, Any]]:
        base = {"shape_size": 6, "stride": 2, "d_model": 8, "epochs": 4, "warm_up_epochs": 2, "patience": 2,
                "random_state": 0}
        return [base, {**base, "sparsify": "hard", "use_moe": False, "depth": 1, "validation_fraction": 0.0}]

    def _resolved_shape_size(self, T: int) -> int:
        if self.shape_size is None:
            return max(4, round(0.2 * T))
        if isinstance(self.shape_size, float):
            return max(1, int(self.shape_size * T))
        return int(self.shape_size)

    def _build(self, n_channels: int, T: int, n_classes: int) -> Any:
        from trustlab.methods.softshape._model import SoftShapeNet

        net = SoftShapeNet(n_channels, T, n_classes, shape_size=self._resolved_shape_size(T), stride=self.stride,
                           d_model=self.d_model, depth=self.depth, sparse_rate=self.sparse_rate,
                           dropout=self.dropout, sparsify=self.sparsify, use_moe=self.use_moe,
                           use_inception=self.use_inception)
        self.shape_size_, self.stride_, self.n_tokens_ = net.m, net.q, net.n_tokens
        return net

    def _warm_up(self) -> int:
        return self.warm_up_epochs if self.sparsify != "none" else 0

    def _aux_rate(self) -> float:
        return self.moe_loss_rate

    def _after_fit(self) -> None:
        load = self.history_.expert_load
        self.expert_load_ = load
        if load is not None and load.sum() > 0 and len(load) > 1 and load.max() / load.sum() > 0.9:
            warnings.warn(
                f"{type(self).__name__}: routing collapse, expert {int(load.argmax())} took "
                f"{load.max() / load.sum():.0%} of the tokens in the last sparsified epoch (loads "
                f"{load.astype(int).tolist()}). The zero-initialised top-1 router of the official code often does "
                "this; the MoE then acts as one shared MLP.", RoutingCollapseWarning, stacklevel=4)

    # -- interpretation --------------------------------------------------------------------------------
    def forward_info(self, X: Any) -> Any:
        """Run the fitted network on ``X`` and return its :class:`ForwardInfo` (scores, kept tokens...)."""
        import torch

        self._check_is_fitted()
        X = self._preprocess_collection(X, store_metadata=False)
        self._check_shape(X)
        self.network_.eval()
        with torch.no_grad():
            return self.network_(torch.from_numpy(self._prepare(X)), warm=False)[2]

    def token_scores(self, X: Any) -> np.ndarray:
        """(n_cases, M) effective weight of every original shape token: the product of the scores it
        received through the layers, times the final score of the token that carries it (the merged token
        for dropped ones)."""
        info = self.forward_info(X)
        n, M = info.scores[0].shape
        w = np.ones((n, M))
        for layer, sc in enumerate(info.scores):
            sc = sc.numpy()
            prev = np.arange(M)[None, :].repeat(n, 0) if layer == 0 else info.positions[layer - 1].numpy()
            # each original token's weight is multiplied by the score of the token that carries it
            w *= _carried(sc, prev, M)
        w *= _carried(info.end_scores.numpy(), info.positions[-1].numpy(), M)
        return w

    def shape_scores(self, X: Any) -> np.ndarray:
        """(n_cases, n_timepoints) per-time-step contribution: the mean token weight (``token_scores``)
        over the shapes [p*q, p*q + m) that cover the step (0 for uncovered tail steps)."""
        from trustlab.methods.softshape._interpret import tokens_to_steps

        w = self.token_scores(X)
        return tokens_to_steps(w, self.shape_size_, self.stride_, self.metadata_["n_timepoints"])


def _carried(scores: np.ndarray, positions: np.ndarray, M: int) -> np.ndarray:
    """Map per-token scores (n, N) whose tokens carry original ids ``positions`` (-1: merged) to (n, M)."""
    n = scores.shape[0]
    out = np.empty((n, M))
    for i in range(n):
        pos = positions[i]
        merged = scores[i][pos == -1]
        out[i] = merged[0] if merged.size else 0.0  # dropped tokens travel in the merged token (hard: 0)
        keep = pos >= 0
        out[i, pos[keep]] = scores[i][keep]
    return out


class InceptionTimeLite(_TorchSeriesClassifier):
    """One InceptionTime network (depth 3, residual) in torch, the deep baseline (aeon's needs TensorFlow).

    Parameters
    ----------
    n_filters : int, default=32
        Filters per branch (the block outputs 4 x n_filters channels).
    depth : int, default=3
    kernel_size : int, default=40
        Largest kernel; the branches use kernel_size-1, kernel_size/2-1, kernel_size/4-1 (odd).
    epochs, patience, batch_size, lr, validation_fraction, normalize, random_state
        As in :class:`SoftShapeClassifier` (no warm-up).

    References
    ----------
    H. Ismail Fawaz et al. InceptionTime: Finding AlexNet for time series classification. DMKD 2020.
    """

    _constraints: ClassVar[dict[str, list[Any]]] = {
        "n_filters": _INT1,
        "depth": _INT1,
        "kernel_size": [Interval(int, 4, None)],
        "epochs": _INT1,
        "patience": [Interval(int, 0, None)],
        "batch_size": _INT1,
        "lr": [Interval(float, 0, None, closed="neither")],
        "validation_fraction": [Interval(float, 0, 0.5, closed="left")],
        "normalize": _BOOL,
        "random_state": [Interval(int, 0, 2**32 - 1), None],
    }

    def __init__(self, *, n_filters: int = 32, depth: int = 3, kernel_size: int = 40, epochs: int = 200,
                 patience: int = 40, batch_size: int = 64, lr: float = 1e-3, validation_fraction: float = 0.2,
                 normalize: bool = True, random_state: int | None = None) -> None:
        self.n_filters = n_filters
        self.depth = depth
        self.kernel_size = kernel_size
        self.epochs = epochs
        self.patience = patience
        self.batch_size = batch_size
        self.lr = lr
        self.validation_fraction = validation_fraction
        self.normalize = normalize
        self.random_state = random_state
        super().__init__()

    @classmethod
    def _get_test_params(cls, parameter_set: str = "default") -> list[dict[str, Any]]:
        return [{"n_filters": 4, "depth": 3, "kernel_size": 8, "epochs": 3, "patience": 2, "random_state": 0}]

    def _build(self, n_channels: int, T: int, n_classes: int) -> Any:
        from trustlab.methods.softshape._model import InceptionTimeNet

        return InceptionTimeNet(n_channels, n_classes, n_filters=self.n_filters, depth=self.depth,
                                kernel_size=self.kernel_size)
