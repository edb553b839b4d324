"""Shared plumbing of the two torch series classifiers: aeon's estimator base with trustlab's Method contract.

Both classifiers subclass aeon's ``BaseClassifier`` (aeon's final ``fit``/``predict``/``predict_proba`` call
our ``_fit``/``_predict``/``_predict_proba``) and trustlab's ``Method`` (``paper``, ``tags``, ``_constraints``,
``_get_test_params``, ``_get_test_inputs``). They are *not* :class:`~trustlab.core.roles.Predictor`
instances: aeon's public verbs are final too, and one class cannot have two sets of final public verbs.
They keep the predictor role's guarantees instead: ``_fit`` runs inside :meth:`Method._verb_scope`
(parameters validated, a local generator from ``random_state``, global RNGs and torch threads restored),
the role tag is ``"predictor"`` so the common checks run on them, and aeon's own estimator checks pass.

aeon's input checks raise ``ValueError``; here they surface as :class:`~trustlab.core.exceptions.InputError`
(a ``ValueError``), and predicting before ``fit`` raises an error that is both trustlab's and scikit-learn's
``NotFittedError``.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np
from aeon.classification.base import BaseClassifier
from sklearn.exceptions import NotFittedError as _SkNotFittedError

from trustlab.core.arguments import validate_args
from trustlab.core.base import Method, PaperInfo
from trustlab.core.constraints import AnyValue, Interval, Options
from trustlab.core.exceptions import InputError, NotFittedError
from trustlab.core.seeding import isolated_global_rng, spawn_seed
from trustlab.core.threads import preserve_torch_threads
from trustlab.methods.softshape._paper import PAPER

__all__ = ["TorchSeriesClassifier", "INT1", "BOOL", "COMMON_CONSTRAINTS"]

INT1 = [Interval(int, 1, None)]
BOOL = ["boolean"]
#: rules of the parameters both classifiers share
COMMON_CONSTRAINTS: dict[str, list[Any]] = {
    "epochs": INT1,
    "patience": [Interval(int, 0, None)],
    "batch_size": INT1,
    "lr": [Interval(float, 0, None, closed="neither")],
    "validation_fraction": [Interval(float, 0, 0.5, closed="left")],
    "normalize": BOOL,
    "pad": [Options(["auto"]), Interval(int, 2, None), None],
    "random_state": ["random_state"],
}
_UNEQUAL_HINT = (" Pass pad='auto' to pad every series to the longest training series with aeon's Padder "
                 "(each channel padded with its own mean), pad=<length> to pad to a fixed length, or resample to "
                 "one length first (aeon's Resizer).")


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


#: a collection checked by the aeon base class (_preprocess_collection) and _check_shape
CHECKED_X = "a series collection checked by _preprocess_collection and _check_shape (errors name X)"


class TorchSeriesClassifier(BaseClassifier, Method):
    """Input checks, optional padding, preprocessing (train-mean NaN fill, per-series z-norm), training."""

    paper: ClassVar[PaperInfo] = PAPER
    tags: ClassVar[dict[str, Any]] = {"role": "predictor", "requires": ("torch", "aeon"), "stochastic": True,
                                    "allow_nan": True}
    _tags: ClassVar[dict[str, Any]] = {
        "capability:multivariate": True,
        "capability:missing_values": True,
        "python_dependencies": "torch",
        "X_inner_type": ["numpy3D", "np-list"],
    }
    get_tags = _hybridmethod(_dispatch_tags)

    def _init_tags(self) -> None:
        """Call at the end of ``__init__``: unequal-length input is accepted only with ``pad`` set."""
        if getattr(self, "pad", None) == "auto" or (isinstance(getattr(self, "pad", None), int)
                                                    and not isinstance(self.pad, bool)):
            self.set_tags(**{"capability:unequal_length": True})

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
            hint = _UNEQUAL_HINT if "unequal length" in str(exc) else ""
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
    def _pad(self, X: Any) -> np.ndarray:
        """A 3-d array: series stacked (aeon may pass equal-length lists), padded by the fitted ``padder_``.

        aeon's Padder refuses NaN, so NaN is set aside first (the series' channel mean stands in, which is
        also what the padding uses), and put back after padding for the training-mean fill.
        """
        padder = getattr(self, "padder_", None)
        if padder is None:
            return np.stack([np.asarray(s, dtype=np.float64) for s in X]) if isinstance(X, list) else np.asarray(X)
        series = [np.asarray(s, dtype=np.float64) for s in X]
        nans = [np.isnan(s) for s in series]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN channel
            filled = [np.where(m, np.nan_to_num(np.nanmean(s, axis=1, keepdims=True)), s) if m.any() else s
                      for s, m in zip(series, nans)]
        try:
            out = np.asarray(padder.transform(filled), dtype=np.float64)
        except ValueError as exc:
            length = self.pad if isinstance(self.pad, int) else padder._padded_length
            raise InputError(f"{type(self).__name__}: a series is longer than the padded length ({length} steps: "
                             f"{'the longest training series' if self.pad == 'auto' else 'pad'}), so it cannot be "
                             f"padded ({exc}). Pass pad=<the longest length you expect>.") from exc
        for i, m in enumerate(nans):
            if m.any():
                out[i, :, : m.shape[1]][m] = np.nan
        return out

    def _prepare(self, X: Any) -> np.ndarray:
        """Pad (pad='auto'), fill NaN with the training-split mean of each (channel, time step), then
        z-normalise per series and channel."""
        X = np.array(self._pad(X), dtype=np.float64, copy=True)
        nan = np.isnan(X)
        if nan.any():
            X[nan] = np.broadcast_to(self.train_mean_, X.shape)[nan]
        if self.normalize:
            mu = X.mean(axis=2, keepdims=True)
            sd = X.std(axis=2, keepdims=True)
            sd[sd < 1e-8] = 1.0
            X = (X - mu) / sd
        return X.astype(np.float32)

    @validate_args(X=[AnyValue(CHECKED_X)])
    def preprocess(self, X: Any) -> np.ndarray:
        """The series the network sees, ``(n_cases, n_channels, n_timepoints)`` float64: padded (with
        ``pad='auto'``), NaN filled with the training mean, z-normalised per series (``normalize=True``).
        Feeding them back to ``predict`` gives the same predictions (z-normalisation is idempotent)."""
        self._check_is_fitted()
        X = self._preprocess_collection(X, store_metadata=False)
        self._check_shape(X)
        return self._prepare(X).astype(np.float64)

    def _fit(self, X: Any, y: np.ndarray) -> BaseClassifier:
        import torch  # noqa: F401 - imported before the scope, so the scope seeds (and restores) torch's RNG too

        with self._verb_scope():
            return self._fit_scoped(X, y)

    def _fit_scoped(self, X: Any, y: np.ndarray) -> BaseClassifier:
        import torch

        from trustlab.methods.softshape._train import split_validation, train_net

        self.padder_ = None
        if self.pad is not None:  # unequal lengths reach here only with pad set (aeon refuses them otherwise)
            from aeon.transformations.collection.unequal_length import Padder

            lengths_only = [np.nan_to_num(np.asarray(s, dtype=np.float64)) for s in X]  # fit reads lengths only
            self.padder_ = Padder(padded_length="max" if self.pad == "auto" else int(self.pad),
                                  fill_value="mean").fit(lengths_only)
        X = self._pad(X)
        y_enc = np.searchsorted(self.classes_, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a step that is NaN in every series
            mean = np.nanmean(X, axis=0)
        self.train_mean_ = np.nan_to_num(mean, nan=0.0)  # a step that is NaN in every series gets 0
        Xp = self._prepare(X)
        rs = self.random_state
        seed = int(rs) if isinstance(rs, int | np.integer) else spawn_seed(self._rng)
        tr, va = split_validation(y_enc, self.validation_fraction, self._rng)
        gen = torch.Generator().manual_seed(seed)
        self.network_ = self._build(Xp.shape[1], Xp.shape[2], len(self.classes_))
        Xt, yt = torch.from_numpy(Xp), torch.from_numpy(y_enc.astype(np.int64))
        self.history_ = train_net(
            self.network_, Xt[tr], yt[tr], Xt[va] if len(va) else None, yt[va] if len(va) else None,
            epochs=self.epochs, warm_up=self._warm_up(), patience=self.patience, batch_size=self.batch_size,
            lr=self.lr, aux_rate=self._aux_rate(), gen=gen, select_after_warm_up=self._warm_up() > 0)
        self.n_epochs_ = self.history_.n_epochs
        self._after_fit()
        return self

    def _build(self, n_channels: int, T: int, n_classes: int) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

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

        with isolated_global_rng(None), preserve_torch_threads():
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
