"""Baselines that keep a deception probe honest, and a layer-sweep helper.

* random direction: the fitted probe's scaler with a random unit direction (chance-level reference);
* shuffled-label probe: the same probe trained with dialogue labels permuted (AUROC should be ~0.5);
* text-only baselines: TF-IDF + LR and MiniLM sentence embeddings + LR on the dialogue text (the detected
  response, or the whole transcript): whether the probe reads model internals or surface wording.

Every detector here follows the probe's convention: ``fit(X, y)`` with one label per dialogue
(``"honest"``/``"deceptive"``, 0/1, or ``positive_label``) and ``score_samples(X)``, higher = more deceptive.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import AnyValue, InstanceOf, Interval, Options, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.roles import Predictor
from trustlab.core.validation import check_is_fitted
from trustlab.methods.deception._dialogue import Dialogue
from trustlab.methods.deception._metrics import auroc, label_masks
from trustlab.methods.deception._probe import (
    DeceptionProbe,
    DialogueActivations,
    _sigmoid,
    positive_index,
    toward_classes_1,
)

__all__ = ["random_direction_probe", "shuffled_label_probe", "TextBaseline", "layer_sweep"]

_ACTS = InstanceOf(DialogueActivations)


def _toy_acts() -> DialogueActivations:
    rng = np.random.default_rng(0)
    return DialogueActivations({0: rng.normal(size=(8, 3))}, np.arange(8), np.array(["honest", "deceptive"] * 4))


@validate_args(probe=[InstanceOf(DeceptionProbe)], random_state=["random_state"])
def random_direction_probe(probe: DeceptionProbe, random_state: int | np.random.Generator | None = 0) -> DeceptionProbe:
    """A copy of a fitted probe whose direction is a random unit vector (same scaler and aggregation)."""
    check_is_fitted(probe, "direction_")
    out = copy.deepcopy(probe)
    w = np.random.default_rng(random_state).normal(size=probe.direction_.shape)
    out.direction_ = w / np.linalg.norm(w)
    return out


@validate_args(_example=lambda: {"acts": _toy_acts(), "labels": ["honest", "deceptive"] * 4},
               acts=[_ACTS, ArrayLike(ndim=2)], labels=[ArrayLike(ndim=1, dtype="any")], random_state=["random_state"])
def shuffled_label_probe(acts: DialogueActivations | Any, labels: Any, *,
                         random_state: int | np.random.Generator | None = 0, **params: Any) -> DeceptionProbe:
    """A probe fitted with the dialogue labels randomly permuted (the control for spurious separability)."""
    y = np.asarray(labels).copy()
    np.random.default_rng(random_state).shuffle(y)
    return DeceptionProbe(**params).fit(acts, y)


@dataclass
class _Texts:
    texts: list[str]

    def __len__(self) -> int:
        return len(self.texts)


def _has_encode(e: Any) -> bool:
    return callable(getattr(e, "encode", None)) and not isinstance(e, str | bytes)


class TextBaseline(Predictor):
    """Logistic regression on the text alone (no model internals).

    ``fit(dialogues, labels)`` and ``score_samples(dialogues)``, the same convention as
    :class:`DeceptionProbe` (``X`` is a sequence of :class:`Dialogue` here).

    Parameters
    ----------
    kind : {"tfidf", "minilm"}
        TF-IDF (word 1-2 grams) or all-MiniLM-L6-v2 embeddings (``trustlab.llm.load_embedder``).
    view : {"detected", "full"}
        The detected response only, or the whole transcript (system, user and assistant turns).
    embedder : SentenceTransformer, optional
        Reused across baselines to avoid reloading (``kind="minilm"``; loaded on first use otherwise and kept
        as ``embedder_``).
    C : float
        Inverse L2 strength of the logistic regression.
    positive_label : str or int, optional
        The deceptive label when the labels are not honest/deceptive or 0/1.

    Example
    -------
    >>> from trustlab.methods.deception import Dialogue, Message
    >>> ds = [Dialogue([Message("assistant", t, detect=True)], lab) for t, lab in
    ...       [("It is true.", "honest"), ("It is a lie.", "deceptive")] * 5]
    >>> TextBaseline(kind="tfidf").fit(ds, [d.label for d in ds]).score_samples(ds).shape
    (10,)
    """

    tags: ClassVar[dict[str, Any]] = {"requires": (), "stochastic": False}
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "kind": [Options(["tfidf", "minilm"])],
        "view": [Options(["detected", "full"])],
        "embedder": [None, Satisfies(_has_encode, "an object with an encode(texts) method", [3.5])],
        "C": [Interval(float, 0, None, closed="neither")],
        "positive_label": [None, InstanceOf(str, int, np.integer)],
    }

    def __init__(self, *, kind: str = "tfidf", view: str = "detected", embedder: Any = None, C: float = 1.0,
                 positive_label: str | int | None = None) -> None:
        self.kind, self.view, self.embedder, self.C = kind, view, embedder, C
        self.positive_label = positive_label

    def _validate_X(self, X: Any, *, reset: bool) -> _Texts:
        owner = type(self).__name__
        if isinstance(X, Dialogue) or isinstance(X, str | bytes) or not isinstance(X, Sequence):
            raise InputError(f"The 'X' argument of {owner} must be a sequence of Dialogue objects. "
                             f"Got {type(X).__name__} instead.")
        bad = [i for i, d in enumerate(X) if not isinstance(d, Dialogue)]
        if bad:
            raise InputError(f"The 'X' argument of {owner} must hold Dialogue objects; items {bad[:5]} are not.")
        if not len(X):
            raise InputError(f"The 'X' argument of {owner} holds no dialogues.")
        return _Texts([d.detected_text if self.view == "detected" else d.full_text for d in X])

    def _features(self, texts: list[str], fit: bool) -> Any:
        if self.kind == "tfidf":
            if fit:
                from sklearn.feature_extraction.text import TfidfVectorizer

                self.vectorizer_ = TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True)
                return self.vectorizer_.fit_transform(texts)
            return self.vectorizer_.transform(texts)
        if fit:
            if self.embedder is None:
                from trustlab.llm import load_embedder

                self.embedder_ = load_embedder()
            else:
                self.embedder_ = self.embedder
        return np.asarray(self.embedder_.encode(texts, batch_size=32, show_progress_bar=False))

    def _fit(self, X: _Texts, y: np.ndarray, **fit_params: Any) -> None:
        from sklearn.linear_model import LogisticRegression

        if len(self.classes_) != 2:
            raise InputError(f"{type(self).__name__} needs exactly two classes (honest, deceptive). Got "
                             f"{self.classes_.tolist()}; drop ambiguous/skip dialogues first.")
        pos = positive_index(self.classes_, self.positive_label, type(self).__name__)
        self.positive_class_ = self.classes_[pos]
        t = (y == pos).astype(int)
        self.clf_ = LogisticRegression(C=self.C, max_iter=2000).fit(self._features(X.texts, True), t)

    @validate_args(X=[AnyValue("dialogues checked by _validate_X (InputError naming X)")])
    def score_samples(self, X: Sequence[Dialogue]) -> np.ndarray:
        """Decision values, one per dialogue (higher = more deceptive)."""
        check_is_fitted(self, "clf_")
        T = self._validate_X(X, reset=False)
        return np.asarray(self.clf_.decision_function(self._features(T.texts, False)), dtype=np.float64)

    @validate_args(X=[AnyValue("dialogues checked by _validate_X (InputError naming X)")])
    def decision_function(self, X: Sequence[Dialogue]) -> np.ndarray:
        """Scikit-learn's decision values (higher = more ``classes_[1]``): :meth:`score_samples`, negated when the
        deceptive class is ``classes_[0]``."""
        return toward_classes_1(self.score_samples(X), self.classes_, self.positive_class_)

    def _predict_proba(self, X: _Texts) -> np.ndarray:
        p = _sigmoid(np.asarray(self.clf_.decision_function(self._features(X.texts, False)), dtype=np.float64))
        pos = int(np.nonzero(self.classes_ == self.positive_class_)[0][0])
        out = np.empty((len(X), 2))
        out[:, pos], out[:, 1 - pos] = p, 1.0 - p
        return out


@validate_args(_example=lambda: {"train": _toy_acts(), "evals": {"toy": _toy_acts()}},
               train=[_ACTS], evals=[InstanceOf(Mapping)], layers=[None, SequenceOf(Interval(int, 0, None))])
def layer_sweep(train: DialogueActivations, evals: Mapping[str, DialogueActivations],
                layers: Sequence[int] | None = None, **params: Any) -> list[dict[str, Any]]:
    """Fit one probe per layer on ``train`` and report the honest-vs-deceptive AUROC on each eval set.

    Returns tidy rows ``{"layer", "dataset", "auroc"}``; ``params`` go to :class:`DeceptionProbe`.

    Example
    -------
    >>> rng = np.random.default_rng(0)
    >>> a = {3: rng.normal(size=(40, 4))}; a[3][20:, 0] += 3
    >>> tr = DialogueActivations(a, np.arange(40), np.array(["honest"] * 20 + ["deceptive"] * 20))
    >>> layer_sweep(tr, {"train": tr}, [3])[0]["auroc"] > 0.9
    True
    """
    layers = train.layers if layers is None else list(layers)
    positive = params.get("positive_label")
    tr = _known(train, positive)
    rows = []
    for layer in layers:
        probe = DeceptionProbe(layer=layer, **params).fit(tr, tr.labels)
        for name, ev in evals.items():
            evb = _known(ev, positive)
            s = probe.score_samples(evb)
            h, d = label_masks(evb.labels, positive, owner="layer_sweep")
            rows.append({"layer": int(layer), "dataset": name, "auroc": auroc(s[h], s[d])})
    return rows


def _known(acts: DialogueActivations, positive_label: Any) -> DialogueActivations:
    """Only the dialogues labelled honest or deceptive (ambiguous / skip dropped)."""
    h, d = label_masks(acts.labels, positive_label, owner="layer_sweep")
    return acts.subset(np.nonzero(h | d)[0])
