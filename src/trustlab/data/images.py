"""Image loaders: scikit-learn's 8x8 digits scaled to [0, 1], optionally with fixed seeded noise."""

from __future__ import annotations

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, Interval
from trustlab.data._base import Dataset

__all__ = ["load_digits_images"]


@validate_args(noise=[Interval("real", 0, None)], seed=[Interval(int, 0, None)], flatten=[Boolean()])
def load_digits_images(noise: float = 0.0, *, seed: int = 0, flatten: bool = False) -> Dataset:
    """The 1,797 8x8 digits as float32 images in [0, 1] (pixels / 16).

    Parameters
    ----------
    noise : float, default=0.0
        Standard deviation of fixed Gaussian noise added once (seeded by ``seed``), then clipped to
        [0, 1]. Used for "noisy digits", where memorisation makes membership visible.
    seed : int, default=0
    flatten : bool, default=False
        Return (n, 64) instead of (n, 8, 8).

    Examples
    --------
    >>> ds = load_digits_images()
    >>> ds.X.shape, float(ds.X.max()) <= 1.0
    ((1797, 8, 8), True)
    """
    from sklearn.datasets import load_digits

    b = load_digits()
    X = (b.images / 16.0).astype(np.float32)
    if noise > 0:
        X = np.clip(X + np.random.default_rng(seed).normal(0.0, noise, X.shape).astype(np.float32), 0.0, 1.0)
    if flatten:
        X = X.reshape(len(X), -1)
    return Dataset(
        X=X,
        y=np.asarray(b.target),
        name="digits" if noise == 0 else f"noisy_digits(sigma={noise},seed={seed})",
        target_names=[str(t) for t in b.target_names],
        description="8x8 handwritten digits (UCI optdigits test set via scikit-learn), pixels scaled to [0, 1].",
        provenance={"source": "sklearn.datasets.load_digits", "noise": noise, "seed": seed},
    )
