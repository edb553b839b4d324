"""Per-token linear deception probes (LR, MMS, LAT) on residual-stream activations.

Training samples are the detected *tokens* of honest (y = 0) and deceptive (y = 1) dialogues; activations
are standardised (``StandardScaler`` fit on the training tokens); the LR probe is an L2 logistic
regression without intercept, ``C = 1 / reg_coeff``. A token's score is ``s_t = ((a_t - mu) / sigma) . w``
and a dialogue's score aggregates its detected tokens (``mean``, as in the paper, ``max`` or ``last``).

References
----------
Goldowsky-Dill et al., "Detecting Strategic Deception Using Linear Probes", ICML 2025 (arXiv:2502.03407);
official code https://github.com/ApolloResearch/deception-detection (``detectors.py``, ``prompt_scorer.py``).
Zou et al., "Representation Engineering", 2023 (LAT).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import AnyValue, InstanceOf, Interval, Options
from trustlab.core.exceptions import InputError, UnknownNameError
from trustlab.core.roles import Predictor
from trustlab.core.validation import check_array, check_is_fitted
from trustlab.methods.deception._paper import PAPER

__all__ = ["DialogueActivations", "DeceptionProbe"]


#: activations checked by the estimator's _validate_X (InputError naming X)
_CHECKED_X = "DialogueActivations checked by _validate_X (InputError naming X)"


@dataclass
class DialogueActivations:
    """Per-token activations of the detected tokens of ``n`` dialogues, for one or more layers.

    Parameters
    ----------
    acts : dict int -> float32 array [n_tokens, d]
        Layer (index into ``hidden_states``) -> activations of every detected token, grouped by dialogue.
    dialogue : int array [n_tokens]
        Which dialogue (0..n-1) each token row belongs to, non-decreasing; every dialogue has >= 1 token.
    labels : array [n] or None
    meta : list of dict
    """

    acts: dict[int, np.ndarray]
    dialogue: np.ndarray
    labels: np.ndarray | None = None
    meta: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.dialogue = np.asarray(self.dialogue, dtype=np.int64)
        n = int(self.dialogue.max()) + 1 if self.dialogue.size else 0
        self._n = n
        for layer, a in self.acts.items():
            if a.shape[0] != self.dialogue.shape[0]:
                raise InputError(f"Layer {layer} has {a.shape[0]} token rows for {self.dialogue.shape[0]} indices.")

    def __len__(self) -> int:
        return self._n

    @property
    def layers(self) -> list[int]:
        return sorted(self.acts)

    @property
    def n_tokens(self) -> np.ndarray:
        return np.bincount(self.dialogue, minlength=len(self))

    def with_labels(self, *labels: Any) -> DialogueActivations:
        """The dialogues whose label is one of ``labels`` (default: honest and deceptive, i.e. no ambiguous/skip)."""
        keep = labels or ("honest", "deceptive")
        lab = np.asarray(self.labels, dtype=object)
        return self.subset(np.nonzero(np.isin(lab, list(keep)))[0])

    @validate_args(idx=[ArrayLike(ndim=1, dtype="integer", low=0, min_len=0)])
    def subset(self, idx: Any) -> DialogueActivations:
        """The dialogues ``idx`` (in that order), re-indexed 0..len(idx)-1."""
        idx = np.asarray(idx, dtype=np.int64)
        order = np.concatenate([np.nonzero(self.dialogue == i)[0] for i in idx]) if len(idx) else np.zeros(0, int)
        counts = self.n_tokens[idx]
        new_d = np.repeat(np.arange(len(idx)), counts)
        labels = None if self.labels is None else np.asarray(self.labels)[idx]
        meta = [self.meta[i] for i in idx] if self.meta else []
        return DialogueActivations({k: v[order] for k, v in self.acts.items()}, new_d, labels, meta)


def toward_classes_1(scores: np.ndarray, classes: np.ndarray, positive_class: Any) -> np.ndarray:
    """``scores`` (higher = more deceptive) turned to scikit-learn's rule for ``decision_function``: higher means
    more of ``classes[1]``. With the default labels ``classes_ = ['deceptive', 'honest']``, so the sign flips."""
    return scores if classes[1] == positive_class else -scores


def positive_index(classes: np.ndarray, positive_label: Any, owner: str) -> int:
    """Index into ``classes`` of the deceptive class (see the label convention of :class:`DeceptionProbe`)."""
    values = classes.tolist()
    if positive_label is not None:
        from trustlab.methods.deception._metrics import _same_label

        hits = [i for i, c in enumerate(values) if _same_label(c, positive_label)]
        if not hits:
            raise InputError(f"The 'positive_label' parameter of {owner} must be one of the labels {values}. "
                             f"Got {positive_label!r} instead.")
        return hits[0]
    if all(isinstance(c, str) for c in values) and set(values) == {"honest", "deceptive"}:
        return values.index("deceptive")
    if all(isinstance(c, int | float | bool | np.integer | np.floating | np.bool_) and not isinstance(c, str)
           for c in values) and {float(c) for c in values} == {0.0, 1.0}:
        return [float(c) for c in values].index(1.0)
    raise InputError(
        f"{owner} cannot tell which label is deceptive: got the labels {values}. Use 'honest'/'deceptive' or "
        "0/1 (1 = deceptive), or pass positive_label=<the deceptive label>."
    )


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


class DeceptionProbe(Predictor):
    """Linear probe for deception-related directions in the residual stream (role: predictor).

    ``X`` is a :class:`DialogueActivations` (per-token activations; the probe reads ``layer``) or, as a
    special case, a 2-d array ``[n, d]`` read as *one token per dialogue* (e.g. mean-pooled activations).
    ``y`` holds one label per dialogue: ``"honest"`` / ``"deceptive"`` or 0 / 1 (1 = deceptive); any other
    pair of labels needs ``positive_label`` (the deceptive one) and is refused without it, so that a probe
    is never silently inverted. Every detector of this package follows the same convention: ``fit(X, y)``
    with ``X`` what the detector reads (activations here, dialogues for :class:`TextBaseline`) and one label
    per dialogue; ``score_samples(X)`` gives one score per dialogue, higher = more deceptive.

    Parameters
    ----------
    layer : int, default=9
        Index into ``hidden_states`` (0 = embeddings; 9 of SmolLM2's 30 ~ the paper's 22 of 80).
    method : {"lr", "mms", "lat"}, default="lr"
        ``lr``: L2 logistic regression without intercept on standardised tokens (the paper's probe);
        ``mms``: difference of class means of the standardised tokens; ``lat``: first principal component
        of paired (deceptive - honest) per-dialogue mean differences with alternating signs, oriented so
        that deceptive scores higher (RepE LAT).
    reg_coeff : float, default=10.0
        ``lambda``; the LR uses ``C = 1 / reg_coeff`` (paper configs: 10).
    aggregation : {"mean", "max", "last"}, default="mean"
        How token scores form a dialogue score (the paper: mean over the detection mask).
    positive_label : str or int, optional
        The label of the deceptive class, needed when the labels are not honest/deceptive or 0/1.

    Attributes
    ----------
    direction_ : ndarray [d]
        ``w`` in standardised coordinates. ``mean_``, ``scale_``: the scaler. ``positive_class_``: the
        label scored as deceptive.

    Example
    -------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 5)); y = (X[:, 0] > 0).astype(int)
    >>> p = DeceptionProbe(layer=0).fit(X, y)
    >>> s = p.score_samples(X)
    >>> bool(s[y == 1].mean() > s[y == 0].mean()), p.score(X, y) > 0.9
    (True, True)

    References
    ----------
    Goldowsky-Dill et al., ICML 2025 (arXiv:2502.03407); https://github.com/ApolloResearch/deception-detection
    """

    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {
        "requires": (), "stochastic": False,
        # the classifier-semantics check: deceptive sorting first (the default labels), then last
        "test_label_orders": (("honest", "deceptive", {}), ("Honest", "deceptive", {"positive_label": "deceptive"})),
    }
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "layer": [Interval(int, 0, None)],
        "method": [Options(["lr", "mms", "lat"])],
        "reg_coeff": [Interval(float, 0, None, closed="neither")],
        "aggregation": [Options(["mean", "max", "last"])],
        "positive_label": [None, InstanceOf(str, int, np.integer)],
    }

    def __init__(self, *, layer: int = 9, method: str = "lr", reg_coeff: float = 10.0,
                 aggregation: str = "mean", positive_label: str | int | None = None) -> None:
        self.layer = layer
        self.method = method
        self.reg_coeff = reg_coeff
        self.aggregation = aggregation
        self.positive_label = positive_label

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{}, {"method": "mms", "aggregation": "max"}, {"method": "lat", "aggregation": "last"}]

    # -- inputs ------------------------------------------------------------------------------------
    def _validate_X(self, X: Any, *, reset: bool) -> Any:
        owner = type(self).__name__
        if isinstance(X, DialogueActivations):
            if self.layer not in X.acts:
                raise UnknownNameError(
                    f"{owner} reads layer {self.layer}, but the activations hold layers {X.layers}. "
                    "Collect that layer or set layer= to one of them."
                )
            if len(X) == 0:
                raise InputError(f"{owner} got activations of 0 dialogues.")
            if np.any(X.n_tokens == 0):
                raise InputError(
                    f"{owner} got dialogues with an empty detection mask: "
                    f"{np.nonzero(X.n_tokens == 0)[0][:5].tolist()}."
                )
            tokens = check_array(X.acts[self.layer], owner=owner, name="X.acts[layer]", ndim=2)
            groups = X.dialogue
            n = len(X)
        else:
            tokens = check_array(X, owner=owner, ndim=2)
            groups = np.arange(tokens.shape[0])
            n = tokens.shape[0]
        if reset:
            self.n_features_in_ = tokens.shape[1]
        elif tokens.shape[1] != self.n_features_in_:
            raise InputError(
                f"{owner} was fitted on {self.n_features_in_} features, got {tokens.shape[1]}."
            )
        return _Tokens(tokens.astype(np.float64), groups, n)

    # -- fit ---------------------------------------------------------------------------------------
    def _fit(self, X: _Tokens, y: np.ndarray, **fit_params: Any) -> None:
        if len(self.classes_) != 2:
            raise InputError(
                f"{type(self).__name__} needs exactly two classes (honest, deceptive). Got {self.classes_.tolist()}; "
                "drop ambiguous/skip dialogues first."
            )
        pos = positive_index(self.classes_, self.positive_label, type(self).__name__)
        self.positive_class_ = self.classes_[pos]
        y_dec = (y == pos).astype(int)
        # balance the classes at the dialogue level (the paper truncates to min(n_honest, n_deceptive))
        hon, dec = np.nonzero(y_dec == 0)[0], np.nonzero(y_dec == 1)[0]
        k = min(len(hon), len(dec))
        keep = np.sort(np.concatenate([hon[:k], dec[:k]]))
        tok_keep = np.isin(X.groups, keep)
        A, t = X.tokens[tok_keep], y_dec[X.groups[tok_keep]]
        self.mean_ = A.mean(axis=0)
        scale = A.std(axis=0)
        self.scale_ = np.where(scale > 1e-12, scale, 1.0)
        Z = (A - self.mean_) / self.scale_
        if self.method == "lr":
            from sklearn.linear_model import LogisticRegression

            clf = LogisticRegression(C=1.0 / float(self.reg_coeff), fit_intercept=False, max_iter=1000,
                                     random_state=42)
            clf.fit(Z, t)
            w = clf.coef_.ravel()
        elif self.method == "mms":
            w = Z[t == 1].mean(axis=0) - Z[t == 0].mean(axis=0)
        else:  # lat: paired per-dialogue mean differences, alternating signs, first PC (uncentred)
            zg = X.groups[tok_keep]
            means = {g: Z[zg == g].mean(axis=0) for g in keep}
            diffs = np.stack([means[d] - means[h] for h, d in zip(hon[:k], dec[:k])])
            diffs[1::2] *= -1.0
            _, _, vt = np.linalg.svd(diffs, full_matrices=False)
            w = vt[0]
            if (Z[t == 1] @ w).mean() < (Z[t == 0] @ w).mean():
                w = -w
        self.direction_ = np.asarray(w, dtype=np.float64)
        self.n_train_tokens_ = int(Z.shape[0])

    # -- scores ------------------------------------------------------------------------------------
    def _token_scores(self, X: _Tokens) -> np.ndarray:
        return ((X.tokens - self.mean_) / self.scale_) @ self.direction_

    def _aggregate(self, s: np.ndarray, groups: np.ndarray, n: int) -> np.ndarray:
        if self.aggregation == "mean":
            return np.bincount(groups, weights=s, minlength=n) / np.maximum(np.bincount(groups, minlength=n), 1)
        out = np.full(n, -np.inf if self.aggregation == "max" else np.nan)
        if self.aggregation == "max":
            np.maximum.at(out, groups, s)
        else:
            out[groups] = s  # later tokens of a dialogue overwrite earlier ones: the last token wins
        return out

    @validate_args(X=[AnyValue(_CHECKED_X)])
    def token_scores(self, X: Any) -> np.ndarray:
        """Per-token scores ``((a - mu) / sigma) . w`` of every detected token."""
        check_is_fitted(self, "direction_")
        return self._token_scores(self._validate_X(X, reset=False))

    @validate_args(X=[AnyValue(_CHECKED_X)])
    def score_samples(self, X: Any) -> np.ndarray:
        """Dialogue scores (higher = more deceptive): token scores aggregated by ``aggregation``.

        ``score(X, y)`` keeps scikit-learn's meaning (accuracy), so ``cross_val_score`` and ``GridSearchCV``
        work; ``decision_function`` (what scikit-learn's AUROC scorer reads) is this score oriented to
        ``classes_[1]``, scikit-learn's rule.
        """
        check_is_fitted(self, "direction_")
        T = self._validate_X(X, reset=False)
        return self._aggregate(self._token_scores(T), T.groups, T.n)

    @validate_args(X=[AnyValue(_CHECKED_X)])
    def decision_function(self, X: Any) -> np.ndarray:
        """Scikit-learn's decision values: higher = more ``classes_[1]``. That is :meth:`score_samples` when the
        deceptive class is ``classes_[1]`` (0/1 labels) and its negative when it is ``classes_[0]`` (the default
        string labels, ``['deceptive', 'honest']``), so ``roc_auc`` scorers and ``GridSearchCV`` read it right."""
        return toward_classes_1(self.score_samples(X), self.classes_, self.positive_class_)

    def _predict_proba(self, X: _Tokens) -> np.ndarray:
        p = _sigmoid(self._aggregate(self._token_scores(X), X.groups, X.n))
        pos = int(np.nonzero(self.classes_ == self.positive_class_)[0][0])
        out = np.empty((X.n, 2))
        out[:, pos], out[:, 1 - pos] = p, 1.0 - p
        return out

    @validate_args(control=[AnyValue("the control activations, checked by score_samples (_validate_X)")],
                   fpr=[Interval(float, 0, 1, closed="neither")])
    def threshold_at_fpr(self, control: Any, fpr: float = 0.01) -> Any:
        """The score threshold flagging a fraction ``fpr`` of the control dialogues (see ``threshold_at_fpr``)."""
        from trustlab.methods.deception._metrics import threshold_at_fpr

        return threshold_at_fpr(self.score_samples(control), fpr)


@dataclass
class _Tokens:
    tokens: np.ndarray
    groups: np.ndarray
    n: int

    def __len__(self) -> int:
        return self.n
