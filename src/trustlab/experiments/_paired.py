"""Paired bootstrap bounds shared by the experiments' claims (dint's C2, wmattack's C3b and C4)."""

from __future__ import annotations

from typing import Any

__all__ = ["paired_lower"]


def paired_lower(diffs: list[Any], *, alpha: float = 0.05, n_boot: int = 2000, random_state: int = 0) -> float:
    """One-sided (1 - alpha) lower bound of the mean over seeds of the mean per-item difference: a paired
    bootstrap over the test items (every seed scores the same items, so one resample of item indices is applied
    to every seed's difference vector); seeds are fixed effects, averaged in every resample."""
    import numpy as np

    d = np.asarray(diffs, dtype=float)  # (seeds, items)
    rng = np.random.default_rng(random_state)
    idx = rng.integers(0, d.shape[1], size=(n_boot, d.shape[1]))
    means = d[:, idx].mean(axis=(0, 2))
    return float(np.quantile(means, alpha))
