"""Image loaders: scikit-learn's 8x8 digits scaled to [0, 1], optionally with fixed seeded noise."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, Interval, Options
from trustlab.core.seeding import as_seed, seed_alias
from trustlab.data._base import Dataset

__all__ = ["load_digits_images"]


@seed_alias
@validate_args(noise=[Interval("real", 0, None)], random_state=["random_state"], flatten=[Boolean()],
               size=[Options((8, 16, 24, 32))])
def load_digits_images(noise: float = 0.0, *, random_state: Any = 0, flatten: bool = False, size: int = 8) -> Dataset:
    """The 1,797 8x8 digits as float32 images in [0, 1] (pixels / 16).

    Parameters
    ----------
    noise : float, default=0.0
        Standard deviation of fixed Gaussian noise added once (seeded by ``seed``), then clipped to
        [0, 1]. Used for "noisy digits", where memorisation makes membership visible.
    random_state : int, numpy Generator or None, default=0
        Seeds the noise; the int seed used (drawn once from a Generator) is in the name and the provenance.
        ``seed=`` is its deprecated name.
    flatten : bool, default=False
        Return (n, size * size) instead of (n, size, size).
    size : int, default=8
        Side of the returned images: 8 keeps the originals; a multiple of 8 upsamples them bilinearly
        (``scipy.ndimage.zoom(order=1, grid_mode=True)``, the same values as torch's bilinear
        ``interpolate(align_corners=False)``), before any noise is added. 16 gives the 16x16 digits of
        the diffusion-purification experiment (``freqpure``).

    Examples
    --------
    >>> ds = load_digits_images()
    >>> ds.X.shape, float(ds.X.max()) <= 1.0
    ((1797, 8, 8), True)
    """
    from sklearn.datasets import load_digits

    seed = as_seed(random_state)
    b = load_digits()
    X = (b.images / 16.0).astype(np.float32)
    if size != 8:
        from scipy.ndimage import zoom

        X = np.clip(zoom(X, (1, size / 8, size / 8), order=1, grid_mode=True, mode="nearest"), 0.0, 1.0)
        X = X.astype(np.float32)
    if noise > 0:
        X = np.clip(X + np.random.default_rng(seed).normal(0.0, noise, X.shape).astype(np.float32), 0.0, 1.0)
    if flatten:
        X = X.reshape(len(X), -1)
    return Dataset(
        X=X,
        y=np.asarray(b.target),
        name=("digits" if noise == 0 else f"noisy_digits(sigma={noise},seed={seed})") + ("" if size == 8 else f"@{size}"),
        target_names=[str(t) for t in b.target_names],
        description="8x8 handwritten digits (UCI optdigits test set via scikit-learn), pixels scaled to [0, 1].",
        provenance={"source": "sklearn.datasets.load_digits", "noise": noise, "seed": seed, "size": size},
    )
