"""Watermark keys: a secret held by an object, shown (in reprs, results, logs) only as a short hash."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Interval
from trustlab.core.exceptions import ConfigError
from trustlab.core.hashing import content_hash
from trustlab.core.seeding import check_random_state

__all__ = ["WatermarkKey", "make_keys"]

_MAX = 2**62


class WatermarkKey:
    """A secret watermark key (an int in ``[1, 2**62)``).

    The secret never appears in ``repr``/``str`` or in anything trustlab writes: results carry
    :attr:`key_id` (the first 12 hex digits of a SHA-256 of the secret). Two keys are equal when their
    secrets are. Use :meth:`generate` for a fresh random key.

    Example
    -------
    >>> k = WatermarkKey(15485863)
    >>> str(k).startswith("WatermarkKey(id=")
    True
    """

    __slots__ = ("_secret",)

    def __init__(self, secret: int) -> None:
        if isinstance(secret, bool) or not isinstance(secret, int | np.integer) or not 1 <= int(secret) < _MAX:
            raise ConfigError("The 'secret' argument of WatermarkKey must be an int in [1, 2**62). Got "
                              f"{type(secret).__name__} instead.")  # the value itself is never echoed
        self._secret = int(secret)

    @classmethod
    @validate_args(random_state=["random_state"])
    def generate(cls, random_state: Any = None) -> WatermarkKey:
        """A random key drawn from ``random_state`` (int, Generator or None)."""
        rng = check_random_state(random_state, owner="WatermarkKey.generate")
        return cls(int(rng.integers(1, _MAX)))

    @property
    def key_id(self) -> str:
        """A short public id: the first 12 hex digits of SHA-256 over the secret."""
        return content_hash("trustlab-watermark-key", self._secret)[:12]

    def reveal(self) -> int:
        """The secret (for the embed/detect code that needs it; never log it)."""
        return self._secret

    def __repr__(self) -> str:
        return f"WatermarkKey(id={self.key_id})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WatermarkKey) and other._secret == self._secret

    def __hash__(self) -> int:
        return hash(("WatermarkKey", self._secret))

    def __getstate__(self) -> int:
        return self._secret

    def __setstate__(self, state: int) -> None:
        self._secret = state


@validate_args(n=[Interval(int, 1, None)], random_state=["random_state"])
def make_keys(n: int, random_state: Any = None) -> list[WatermarkKey]:
    """``n`` distinct random keys (e.g. an attacker's surrogate keys) from one ``random_state``.

    Example
    -------
    >>> len(make_keys(3, random_state=0))
    3
    """
    rng = check_random_state(random_state, owner="make_keys")
    secrets = set()
    while len(secrets) < n:
        secrets.add(int(rng.integers(1, _MAX)))
    return [WatermarkKey(s) for s in sorted(secrets)]
