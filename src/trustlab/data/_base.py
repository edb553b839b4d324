"""The one dataclass every offline loader returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Dataset"]


@dataclass
class Dataset:
    """A small in-memory data set.

    Attributes
    ----------
    X : ndarray
        Features: (n, d) tabular (a pandas DataFrame for tables with text columns), (n, h, w) images, (n, channels, length) series, or an object array of texts.
    y : ndarray or None
        Targets (labels or values), aligned with ``X``.
    name : str
    feature_names : list of str or None
    target_names : list of str or None
    description : str
    provenance : dict
        Where the data comes from (package, file, licence, how it was generated).
    """

    X: Any
    y: np.ndarray | None
    name: str
    feature_names: list[str] | None = None
    target_names: list[str] | None = None
    description: str = ""
    provenance: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.X)

    def __repr__(self) -> str:
        shape = getattr(self.X, "shape", (len(self.X),))
        return f"Dataset(name={self.name!r}, X.shape={tuple(shape)}, n_targets={None if self.y is None else len(np.unique(self.y))})"

    def subset(self, idx: Any) -> Dataset:
        """The rows ``idx`` as a new Dataset (same names and provenance)."""
        idx = np.asarray(idx)
        X = self.X.iloc[idx] if hasattr(self.X, "iloc") else self.X[idx]  # a DataFrame (mixed-type tables)
        return Dataset(X, None if self.y is None else self.y[idx], self.name, self.feature_names,
                       self.target_names, self.description, dict(self.provenance, subset=len(idx)))
