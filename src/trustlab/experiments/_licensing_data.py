"""The licensing experiment's demo data (spec 3.4): digits split among owners, label flips, a re-submission."""

from __future__ import annotations

from typing import Any

import numpy as np


def _flip(y: np.ndarray, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    y = y.copy()
    y[rows] = (y[rows] + rng.integers(1, 10, len(rows))) % 10  # a different digit, uniformly
    return y


def make_demo(cfg: Any, seed: int) -> dict[str, Any]:
    """The spec 3.4 scenario: clean base data, the demo's flips, the re-submission, and a second validation set
    of the same size drawn from the digits that are neither training nor validation (S1)."""
    from trustlab.data.images import load_digits_images

    ds = load_digits_images(flatten=True)
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(ds.X))
    n = cfg.n_owners * cfg.points_per_owner
    X, y0 = ds.X[idx[:n]].astype(np.float64), ds.y[idx[:n]].copy()
    X_val, y_val = ds.X[idx[n:n + cfg.n_val]].astype(np.float64), ds.y[idx[n:n + cfg.n_val]].copy()
    v2 = idx[n + cfg.n_val:n + 2 * cfg.n_val]  # S1's disjoint validation set, from digits nobody submitted
    X_val2, y_val2 = ds.X[v2].astype(np.float64), ds.y[v2].copy()
    owner = np.repeat(np.arange(cfg.n_owners), cfg.points_per_owner)
    rates = np.zeros(cfg.n_owners)
    rates[cfg.n_owners - len(cfg.flip_rates):] = cfg.flip_rates
    y, flipped = y0.copy(), np.zeros(n, dtype=bool)
    for o in range(cfg.n_owners):
        rows = np.flatnonzero(owner == o)
        f = rng.choice(rows, int(round(rates[o] * len(rows))), replace=False)
        y = _flip(y, f, rng)
        flipped[f] = True
    src = owner == cfg.resubmitted
    return {"X": X, "y": y, "y_clean": y0, "owner": owner, "X_val": X_val, "y_val": y_val, "X_val2": X_val2, "y_val2": y_val2, "rates": rates,
            "flipped": flipped, "X_demo": np.vstack([X, X[src]]), "y_demo": np.concatenate([y, y[src]]),
            "owner_demo": np.concatenate([owner, np.full(int(src.sum()), cfg.resubmitter)]), "rng": rng}
