"""Data of experiment ``softshape``: the synthetic two-channel sets of claim 4 and the loader of every set."""

from __future__ import annotations

from typing import Any

import numpy as np

#: the synthetic multivariate sets of claim 4 (see :func:`_synthetic_set`)
SYNTHETIC = ("shape_any_channel", "shape_channel_pair")
#: bundled aeon sets of unequal length (loaded with aeon's own loader, padded by both models)
UNEQUAL = ("JapaneseVowels",)


def _shapes(length: int) -> list[np.ndarray]:
    t = np.linspace(0.0, 1.0, length)
    return [2.0 * np.sin(np.pi * t), np.where(t < 0.5, 2.0, -2.0), 4.0 * t - 2.0, 2.0 * np.sin(4 * np.pi * t)]


def _synthetic_set(kind: str, n: int, length: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two-channel series of Gaussian noise (sd 0.5) with one shape of length ``length // 5`` at a random offset.

    ``"shape_any_channel"``: 4 classes, class = which of 4 shapes, planted in a random one of the two channels
    (the issue's set). ``"shape_channel_pair"``: 4 classes = 2 shapes x 2 channels (the channel matters).
    """
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(n) % 4)
    X = rng.normal(scale=0.5, size=(n, 2, length))
    width = max(4, length // 5)
    shapes = _shapes(width)
    for i in range(n):
        ch, sh = (int(rng.integers(2)), int(y[i])) if kind == "shape_any_channel" else (int(y[i] % 2), int(y[i] // 2))
        off = int(rng.integers(0, length - width + 1))
        X[i, ch, off:off + width] += shapes[sh]
    return X, y


def _load(name: str, cfg: Any) -> tuple[Any, Any, Any, Any]:
    """(X_train, y_train, X_test, y_test) of a bundled or synthetic set (unequal-length sets as lists)."""
    if name in SYNTHETIC:
        Xtr, ytr = _synthetic_set(name, cfg.synthetic_train, cfg.synthetic_length, seed=1000 + SYNTHETIC.index(name))
        Xte, yte = _synthetic_set(name, cfg.synthetic_test, cfg.synthetic_length, seed=2000 + SYNTHETIC.index(name))
        return Xtr, ytr, Xte, yte
    if name in UNEQUAL:
        from aeon.datasets import load_classification

        Xtr, ytr = load_classification(name, split="train")
        Xte, yte = load_classification(name, split="test")
        return Xtr, np.asarray(ytr), Xte, np.asarray(yte)
    from trustlab.data import load_timeseries

    tr, te = load_timeseries(name, "train"), load_timeseries(name, "test")
    return tr.X, tr.y, te.X, te.y


def _pad_for(name: str, data: tuple[Any, Any, Any, Any]) -> dict[str, Any]:
    """Unequal-length sets: pad both models to the longest series of the set (train and test lengths)."""
    if name not in UNEQUAL:
        return {}
    return {"pad": int(max(s.shape[-1] for part in (data[0], data[2]) for s in part))}
