"""Federated partitioners: split sample indices among clients (IID, Dirichlet label skew, shards).

Each returns a list of ``n_clients`` sorted index arrays that are disjoint and together cover every
sample exactly once; the same seed gives the same partition.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval
from trustlab.core.exceptions import InputError
from trustlab.core.seeding import check_random_state, seed_alias
from trustlab.core.validation import check_array

__all__ = ["partition_iid", "partition_dirichlet",]


_LABELS = [ArrayLike(ndim=1, dtype="any")]
_CLIENTS = [Interval(int, 1, None)]
_SEED = [Interval(int, 0, None)]


def _prep(y: Any, n_clients: int, owner: str) -> np.ndarray:
    y = check_array(y, name="y", owner=owner, ndim=1, dtype=None)
    if len(y) < n_clients:
        raise InputError(f"{owner} needs at least one sample per client: got {len(y)} samples for {n_clients} clients.")
    return y


@seed_alias
@validate_args(y=_LABELS, n_clients=_CLIENTS, random_state=["random_state"])
def partition_iid(y: Any, n_clients: int, *, random_state: Any = 0) -> list[np.ndarray]:
    """Shuffle and cut into ``n_clients`` near-equal parts (``random_state``: int, Generator or None; ``seed=`` is
    its deprecated name)."""
    y = _prep(y, n_clients, "partition_iid")
    perm = check_random_state(random_state).permutation(len(y))
    return [np.sort(p) for p in np.array_split(perm, n_clients)]


@seed_alias
@validate_args(y=_LABELS, n_clients=_CLIENTS, alpha=[Interval("real", 0, None, closed="neither")],
               random_state=["random_state"], min_size=[Interval(int, 0, None)], max_tries=[Interval(int, 1, None)])
def partition_dirichlet(
    y: Any, n_clients: int, alpha: float = 0.5, *, random_state: Any = 0, min_size: int = 1, max_tries: int = 100
) -> list[np.ndarray]:
    """Label skew: for each class, client shares ~ Dirichlet(alpha). Small alpha = more skew.

    Re-draws (up to ``max_tries``) until every client holds at least ``min_size`` samples. ``random_state``: int,
    Generator or None (``seed=`` is its deprecated name).
    """
    y = _prep(y, n_clients, "partition_dirichlet")
    if min_size * n_clients > len(y):
        raise InputError(f"partition_dirichlet cannot give {n_clients} clients {min_size} samples each from {len(y)}.")
    rng = check_random_state(random_state)
    classes = np.unique(y)
    for _ in range(max_tries):
        parts: list[list[int]] = [[] for _ in range(n_clients)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(y == c))
            shares = rng.dirichlet(np.full(n_clients, alpha))
            cuts = (np.cumsum(shares)[:-1] * len(idx)).astype(int)
            for k, chunk in enumerate(np.split(idx, cuts)):
                parts[k].extend(chunk.tolist())
        if min(len(p) for p in parts) >= min_size:
            return [np.sort(np.asarray(p, dtype=int)) for p in parts]
    raise InputError(
        f"partition_dirichlet found no partition with >= {min_size} samples per client in {max_tries} draws "
        f"(alpha={alpha}); raise alpha or lower min_size."
    )


@validate_args(y=_LABELS, n_clients=_CLIENTS, shards_per_client=[Interval(int, 1, None)], seed=_SEED)
def partition_shards(y: Any, n_clients: int, shards_per_client: int = 2, *, seed: int = 0) -> list[np.ndarray]:
    """McMahan et al.'s pathological split: sort by label, cut into shards, deal shards to clients."""
    y = _prep(y, n_clients, "partition_shards")
    n_shards = n_clients * shards_per_client
    if n_shards > len(y):
        raise InputError(f"partition_shards needs at least {n_shards} samples for {n_shards} shards; got {len(y)}.")
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(len(y)), y))
    shards = np.array_split(order, n_shards)
    deal = rng.permutation(n_shards).reshape(n_clients, shards_per_client)
    return [np.sort(np.concatenate([shards[s] for s in row])) for row in deal]
