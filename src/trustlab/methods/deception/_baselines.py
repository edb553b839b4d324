"""Baselines that keep a deception probe honest, and a layer-sweep helper.

* random direction: the fitted probe's scaler with a random unit direction (chance-level reference);
* shuffled-label probe: the same probe trained with dialogue labels permuted (AUROC should be ~0.5);
* text-only baselines: TF-IDF + LR and MiniLM sentence embeddings + LR on the dialogue text (the detected
  response, or the whole transcript): whether the probe reads model internals or surface wording.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trustlab.core.exceptions import ConfigError, InputError
from trustlab.methods.deception._dialogue import Dialogue
from trustlab.methods.deception._metrics import auroc
from trustlab.methods.deception._probe import DeceptionProbe, DialogueActivations

__all__ = ["random_direction_probe", "shuffled_label_probe", "TextBaseline", "layer_sweep", "binary"]


def binary(acts: DialogueActivations) -> DialogueActivations:
    """Only the honest and deceptive dialogues (ambiguous / skip dropped)."""
    lab = np.asarray(acts.labels)
    return acts.subset(np.nonzero((lab == "honest") | (lab == "deceptive"))[0])


def random_direction_probe(probe: DeceptionProbe, random_state: int = 0) -> DeceptionProbe:
    """A copy of a fitted probe whose direction is a random unit vector (same scaler and aggregation)."""
    out = copy.deepcopy(probe)
    w = np.random.default_rng(random_state).normal(size=probe.direction_.shape)
    out.direction_ = w / np.linalg.norm(w)
    return out


def shuffled_label_probe(acts: DialogueActivations, labels: Any, *, random_state: int = 0,
                         **params: Any) -> DeceptionProbe:
    """A probe fitted with the dialogue labels randomly permuted (the control for spurious separability)."""
    y = np.asarray(labels).copy()
    np.random.default_rng(random_state).shuffle(y)
    return DeceptionProbe(**params).fit(acts, y)


class TextBaseline:
    """Logistic regression on the text alone (no model internals).

    Parameters
    ----------
    kind : {"tfidf", "minilm"}
        TF-IDF (word 1-2 grams) or all-MiniLM-L6-v2 embeddings (``trustlab.llm.load_embedder``).
    view : {"detected", "full"}
        The detected response only, or the whole transcript (system, user and assistant turns).
    embedder : SentenceTransformer, optional
        Reused across baselines to avoid reloading.

    Example
    -------
    >>> from trustlab.methods.deception import Dialogue, Message
    >>> ds = [Dialogue([Message("assistant", t, detect=True)], lab) for t, lab in
    ...       [("It is true.", "honest"), ("It is a lie.", "deceptive")] * 5]
    >>> TextBaseline(kind="tfidf").fit(ds).score(ds).shape
    (10,)
    """

    def __init__(self, *, kind: str = "tfidf", view: str = "detected", embedder: Any = None,
                 C: float = 1.0) -> None:
        if kind not in ("tfidf", "minilm"):
            raise ConfigError(f"The 'kind' parameter of TextBaseline must be 'tfidf' or 'minilm'. Got {kind!r} instead.")
        if view not in ("detected", "full"):
            raise ConfigError(f"The 'view' parameter of TextBaseline must be 'detected' or 'full'. Got {view!r} instead.")
        self.kind, self.view, self.embedder, self.C = kind, view, embedder, C

    def _texts(self, dialogues: Sequence[Dialogue]) -> list[str]:
        return [d.detected_text if self.view == "detected" else d.full_text for d in dialogues]

    def _features(self, texts: list[str], fit: bool) -> Any:
        if self.kind == "tfidf":
            if fit:
                from sklearn.feature_extraction.text import TfidfVectorizer

                self.vectorizer_ = TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True)
                return self.vectorizer_.fit_transform(texts)
            return self.vectorizer_.transform(texts)
        if self.embedder is None:
            from trustlab.llm import load_embedder

            self.embedder = load_embedder()
        return np.asarray(self.embedder.encode(texts, batch_size=32, show_progress_bar=False))

    def fit(self, dialogues: Sequence[Dialogue]) -> TextBaseline:
        from sklearn.linear_model import LogisticRegression

        ds = [d for d in dialogues if d.label in ("honest", "deceptive")]
        y = np.array([d.label == "deceptive" for d in ds], dtype=int)
        if len(set(y.tolist())) < 2:
            raise InputError("TextBaseline needs honest and deceptive dialogues. Got one class only.")
        self.clf_ = LogisticRegression(C=self.C, max_iter=2000).fit(self._features(self._texts(ds), True), y)
        return self

    def score(self, dialogues: Sequence[Dialogue]) -> np.ndarray:
        """Decision values (higher = more deceptive)."""
        return np.asarray(self.clf_.decision_function(self._features(self._texts(list(dialogues)), False)))


def layer_sweep(train: DialogueActivations, evals: Mapping[str, DialogueActivations],
                layers: Sequence[int] | None = None, **params: Any) -> list[dict[str, Any]]:
    """Fit one probe per layer on ``train`` and report the honest-vs-deceptive AUROC on each eval set.

    Returns tidy rows ``{"layer", "dataset", "auroc"}``.

    Example
    -------
    >>> rng = np.random.default_rng(0)
    >>> a = {3: rng.normal(size=(40, 4))}; a[3][20:, 0] += 3
    >>> tr = DialogueActivations(a, np.arange(40), np.array(["honest"] * 20 + ["deceptive"] * 20))
    >>> layer_sweep(tr, {"train": tr}, [3])[0]["auroc"] > 0.9
    True
    """
    layers = train.layers if layers is None else list(layers)
    tr = binary(train)
    rows = []
    for layer in layers:
        probe = DeceptionProbe(layer=layer, **params).fit(tr, tr.labels)
        for name, ev in evals.items():
            evb = binary(ev)
            s = probe.score(evb)
            lab = np.asarray(evb.labels)
            rows.append({"layer": int(layer), "dataset": name,
                         "auroc": auroc(s[lab == "honest"], s[lab == "deceptive"])})
    return rows
