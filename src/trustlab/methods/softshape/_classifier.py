"""SoftShapeClassifier: soft sparse shapes for interpretable time-series classification (an aeon classifier)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import AnyValue, Interval, Options, Satisfies
from trustlab.methods.softshape._base import BOOL, CHECKED_X, COMMON_CONSTRAINTS, INT1, TorchSeriesClassifier

__all__ = ["SoftShapeClassifier", "PAPER_SHAPE_SIZES", "COLLAPSE_SHARE"]

#: shape sizes m from the official per-data-set table (data/shape_size_hyp.py) for the bundled sets we use
PAPER_SHAPE_SIZES: dict[str, int] = {"GunPoint": 32, "ArrowHead": 16, "ItalyPowerDemand": 4, "ECG200": 64,
                                     "Chinatown": 16, "Wine": 16, "CBF": 32}
#: ``routing_collapsed_`` is True when one MoE expert took more than this share of the tokens
COLLAPSE_SHARE = 0.9


class SoftShapeClassifier(TorchSeriesClassifier):
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
    batch_size : int, default=64
        Minibatch size (min(batch_size, n_train)); the same as InceptionTimeLite's, so both take the same
        number of steps per epoch. The official code's latest default is min(512, n_train) (its
        ``use_large_batch``; the first release used min(0.06 n, 16)): with 500 epochs that is fine, but under
        our CPU epoch caps a full batch leaves larger training sets under-trained (the issue-31 diagnosis:
        still improving at the last epoch). Pass 512 for the official setting.
    lr : float, default=1e-3
        Adam learning rate (weight decay 0).
    moe_loss_rate : float, default=0.001
        Weight of the MoE cv^2 load-balancing loss.
    validation_fraction : float, default=0.2
        Stratified part of the training data for early stopping and model selection (0: training loss).
    normalize : bool, default=True
        Z-normalise every series (the official ``normalize_way='single'``).
    channels : {"independent", "mixed"}, default="independent"
        Multivariate input (the official code is univariate): ``"independent"`` cuts every channel into
        shapes with the same embedding plus a learnable channel embedding, and all C x M shapes compete in
        one token sequence; ``"mixed"`` embeds the window of all channels into one token. Univariate input
        is identical either way.
    pad : "auto", int or None, default=None
        None refuses variable-length series with a clear error; ``"auto"`` pads every series to the
        longest training series with aeon's ``Padder`` (each channel padded with its own mean, before the
        z-normalisation) and predict-time series to the same length; an int pads to that length. Series
        longer than the padded length are refused (never truncated).
    random_state : int, numpy Generator or None, default=None

    Attributes
    ----------
    network_ : torch.nn.Module
        The fitted SoftShape network.
    history_ : EpochLog
        Per-epoch losses and times (``mean_epoch_time(warm=False)`` is the sparsified-phase time).
    expert_load_ : ndarray or None
        Tokens per MoE expert in the last sparsified epoch.
    routing_collapsed_ : bool
        One expert took more than 90 % of those tokens. This is the normal behaviour of the official design
        (a zero-initialised top-1 router whose gate p / (p + 1e-6) has almost no gradient), so it is
        recorded here and explained in the docs, not warned about.
    shape_size_, stride_, n_tokens_ : int
        Resolved m, q and M (shapes per channel).
    padder_ : aeon Padder or None
        The fitted padder when ``pad="auto"`` met variable-length training series.

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
        "stride": INT1,
        "d_model": [Satisfies(lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 4 and v % 4 == 0,
                              "an int >= 4 and a multiple of 4", ["x", 2, 6, 8.0])],
        "depth": INT1,
        "sparse_rate": [Interval(float, 0, 1, closed="left")],
        "sparsify": [Options(("soft", "hard", "none"))],
        "use_moe": BOOL,
        "use_inception": BOOL,
        "dropout": [Interval(float, 0, 1, closed="left")],
        "warm_up_epochs": [Interval(int, 0, None)],
        "moe_loss_rate": [Interval(float, 0, None)],
        "channels": [Options(("independent", "mixed"))],
        **COMMON_CONSTRAINTS,
    }

    def __init__(self, *, shape_size: int | float | None = None, stride: int = 4, d_model: int = 128,
                 depth: int = 2, sparse_rate: float = 0.5, sparsify: str = "soft", use_moe: bool = True,
                 use_inception: bool = True, dropout: float = 0.15, epochs: int = 200, warm_up_epochs: int = 60,
                 patience: int = 40, batch_size: int = 64, lr: float = 1e-3, moe_loss_rate: float = 1e-3,
                 validation_fraction: float = 0.2, normalize: bool = True, channels: str = "independent",
                 pad: str | int | None = None, random_state: Any = None) -> None:
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
        self.channels = channels
        self.pad = pad
        self.random_state = random_state
        super().__init__()
        self._init_tags()

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
                           use_inception=self.use_inception, channels=self.channels)
        self.shape_size_, self.stride_, self.n_tokens_ = net.m, net.q, net.n_tokens
        return net

    def _warm_up(self) -> int:
        return self.warm_up_epochs if self.sparsify != "none" else 0

    def _aux_rate(self) -> float:
        return self.moe_loss_rate

    def _after_fit(self) -> None:
        load = self.history_.expert_load
        self.expert_load_ = load
        self.routing_collapsed_ = bool(load is not None and load.sum() > 0 and len(load) > 1
                                       and load.max() / load.sum() > COLLAPSE_SHARE)

    # -- interpretation --------------------------------------------------------------------------------
    @validate_args(X=[AnyValue(CHECKED_X)])
    def forward_info(self, X: Any) -> Any:
        """Run the fitted network on ``X`` and return what the forward pass exposes (per-layer scores,
        kept token ids, token counts, expert loads, final scores)."""
        import torch

        from trustlab.core.seeding import isolated_global_rng
        from trustlab.core.threads import preserve_torch_threads

        Xp = self.preprocess(X)
        self.network_.eval()
        with torch.no_grad(), isolated_global_rng(None), preserve_torch_threads():
            return self.network_(torch.from_numpy(Xp.astype(np.float32)), warm=False)[2]

    @validate_args(X=[ArrayLike(ndim=(2, 3), finite=False)])
    def sparsification_effect(self, X: Any) -> dict[str, float]:
        """How much the fitted model's sparsification changes its output on ``X``: the logits with the trained
        keep ratios against the same network with every token kept (keep ratio 1, as in warm-up).
        ``rel_logit_change`` = ||l_sparse - l_full|| / ||l_full|| (Frobenius, over all cases), and
        ``pred_changed`` = the fraction of cases whose predicted class differs. Both are 0 for
        ``sparsify="none"``."""
        import torch

        from trustlab.core.seeding import isolated_global_rng
        from trustlab.core.threads import preserve_torch_threads
        from trustlab.methods.softshape._train import predict_logits

        Xp = torch.from_numpy(self.preprocess(X).astype(np.float32))
        with isolated_global_rng(None), preserve_torch_threads():
            sparse, full = (predict_logits(self.network_, Xp, warm=w).double().numpy() for w in (False, True))
        return {"rel_logit_change": float(np.linalg.norm(sparse - full) / max(np.linalg.norm(full), 1e-12)),
                "pred_changed": float(np.mean(sparse.argmax(1) != full.argmax(1)))}

    @validate_args(X=[AnyValue(CHECKED_X)])
    def token_scores(self, X: Any) -> np.ndarray:
        """(n_cases, N) effective weight of every original shape token (N = M, or C x M channel-major with
        ``channels="independent"``): the product of the scores it received through the layers, times the
        final score of the token that carries it (the merged token for dropped ones)."""
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

    @validate_args(X=[AnyValue(CHECKED_X)], per_channel=["boolean"])
    def shape_scores(self, X: Any, *, per_channel: bool = False) -> np.ndarray:
        """Per-time-step contribution: the mean token weight (``token_scores``) over the shapes
        [p*q, p*q + m) that cover the step (0 for uncovered tail steps). ``(n_cases, n_timepoints)``, for
        several channels the maximum over channels; ``per_channel=True`` gives ``(n_cases, n_channels,
        n_timepoints)`` (with ``channels="mixed"`` every channel gets the same map)."""
        from trustlab.methods.softshape._interpret import tokens_to_steps

        w = self.token_scores(X)
        T, C, M = self.network_.n_timepoints, self.network_.n_channels, self.n_tokens_
        per = w.reshape(len(w), -1, M)  # (n, C or 1, M)
        steps = np.stack([tokens_to_steps(per[:, c], self.shape_size_, self.stride_, T) for c in range(per.shape[1])],
                         axis=1)
        if steps.shape[1] != C:
            steps = np.repeat(steps, C, axis=1)
        return steps if per_channel else steps.max(axis=1)


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


