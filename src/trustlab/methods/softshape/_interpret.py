"""Map SoftShape token scores back to time steps, overlay them on series, and the faithfulness check."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import InstanceOf, Interval
from trustlab.core.exceptions import InputError

__all__ = ["tokens_to_steps", "plot_shape_scores", "mask_top_steps"]


def tokens_to_steps(token_scores: np.ndarray, shape_size: int, stride: int, n_timepoints: int) -> np.ndarray:
    """(n, M) token scores -> (n, T) step scores: the mean over the shapes [p*q, p*q + m) covering each
    step; steps no shape covers (the tail when (T - m) % q != 0) get 0."""
    w = np.asarray(token_scores, dtype=float)
    n, M = w.shape
    total = np.zeros((n, n_timepoints))
    count = np.zeros(n_timepoints)
    for p in range(M):
        a, b = p * stride, min(p * stride + shape_size, n_timepoints)
        total[:, a:b] += w[:, p:p + 1]
        count[a:b] += 1
    return np.divide(total, count, out=np.zeros_like(total), where=count > 0)


@validate_args(X=[ArrayLike(ndim=3, finite=False)], scores=[None, ArrayLike(ndim=2)],
               fraction=[Interval(float, 0, 1, closed="right")], rng=[None, InstanceOf(np.random.Generator)],
               value=[Interval(float, None, None)])
def mask_top_steps(X: np.ndarray, scores: np.ndarray | None, fraction: float, *, rng: np.random.Generator | None = None,
                   value: float = 0.0) -> np.ndarray:
    """Copy of ``X`` (n, c, T) with ``fraction`` of each series' steps set to ``value``: the highest-scored
    steps when ``scores`` (n, T) is given, else steps drawn at random with ``rng`` (None: a generator
    seeded with 0, so the call is reproducible)."""
    X = np.array(X, dtype=float, copy=True)
    n, _, T = X.shape
    if scores is not None and np.shape(scores) != (n, T):
        raise InputError(f"The 'scores' argument of mask_top_steps must have shape (n_cases, n_timepoints) = "
                         f"{(n, T)}. Got {np.shape(scores)} instead.")
    rng = rng if rng is not None else np.random.default_rng(0)
    k = max(1, int(round(fraction * T)))
    for i in range(n):
        if scores is not None:
            idx = np.argsort(-np.asarray(scores[i]), kind="stable")[:k]
        else:
            idx = rng.choice(T, size=k, replace=False)
        X[i, :, idx] = value
    return X


@validate_args(X=[ArrayLike(ndim=(2, 3))], scores=[ArrayLike(ndim=2)], n_cols=[Interval(int, 1, None)],
               labels=[None, ArrayLike(ndim=1, dtype="any", finite=False)],
               titles=[None, ArrayLike(ndim=1, dtype="any", finite=False)])
def plot_shape_scores(X: np.ndarray, scores: np.ndarray, *, labels: Any = None, titles: Any = None,
                      n_cols: int = 2) -> Any:
    """A matplotlib ``Figure`` with one panel per series: the (first-channel) series coloured by its
    per-step score, and the score as a shaded band below. ``X`` is (n, c, T) or (n, T); ``scores`` (n, T)."""
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure

    X = np.asarray(X, dtype=float)
    if X.ndim == 3:
        X = X[:, 0]
    S = np.asarray(scores, dtype=float)
    if S.shape != X.shape:
        raise InputError(f"The 'scores' argument of plot_shape_scores must have the shape of the (first-channel) "
                         f"series, {X.shape}. Got {S.shape} instead.")
    n = len(X)
    n_rows = int(np.ceil(n / n_cols))
    fig = Figure(figsize=(4.2 * n_cols, 2.6 * n_rows), layout="constrained")
    axes = fig.subplots(n_rows, n_cols, squeeze=False).ravel()
    covered = S[S > 0]  # uncovered tail steps score 0 and would flatten the colour scale
    lo, hi = (float(covered.min()), float(covered.max())) if covered.size else (0.0, 1.0)
    norm = __import__("matplotlib.colors", fromlist=["Normalize"]).Normalize(lo, hi if hi > lo else lo + 1e-9)
    lc = None
    for i, ax in enumerate(axes):
        if i >= n:
            ax.set_visible(False)
            continue
        t = np.arange(X.shape[1])
        pts = np.stack([t, X[i]], axis=1)
        segs = np.stack([pts[:-1], pts[1:]], axis=1)
        lc = LineCollection(segs, cmap="viridis", norm=norm, linewidths=2.2)
        lc.set_array(0.5 * (S[i, :-1] + S[i, 1:]))
        ax.add_collection(lc)
        y0, y1 = float(X[i].min()), float(X[i].max())
        pad = 0.1 * (y1 - y0 + 1e-9)
        span = y1 - y0 + 1e-9
        base = y0 - pad - 0.4 * span
        height = np.clip((S[i] - lo) / (hi - lo + 1e-12), 0, 1) * 0.35 * span
        ax.fill_between(t, base, base + height, color="tab:orange", alpha=0.5, lw=0, label="score")
        ax.set_xlim(0, len(t) - 1)
        ax.set_ylim(base - pad, y1 + pad)
        title = titles[i] if titles is not None else (f"class {labels[i]}" if labels is not None else f"series {i}")
        ax.set_title(str(title), fontsize=9)
        ax.set_xlabel("time step", fontsize=8)
    if lc is not None:
        fig.colorbar(lc, ax=axes[:n].tolist(), shrink=0.8, label="contribution score")
    return fig
