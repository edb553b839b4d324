"""Seeding: one place that turns a ``random_state`` into generators and seeds torch when it is loaded."""

from __future__ import annotations

import os
import random
import sys
import zlib
from typing import Any

import numpy as np

__all__ = ["as_generator", "seed_everything", "derive_seed", "thread_settings", "RUNTIME_ENV", "set_runtime_env"]

#: Environment defaults for our runs: OpenMP busy-waiting can triple run times on shared cores, and nothing
#: may reach a model hub or send telemetry at run time. Must be applied before torch is imported.
RUNTIME_ENV = {
    "OMP_WAIT_POLICY": "PASSIVE", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1", "TRANSFORMERS_OFFLINE": "1", "FLWR_TELEMETRY_ENABLED": "0",
    "RAY_USAGE_STATS_ENABLED": "0", "DO_NOT_TRACK": "1", "MPLBACKEND": "Agg",
}


def set_runtime_env() -> None:
    """Apply :data:`RUNTIME_ENV` as defaults (values the user already set are kept)."""
    for key, value in RUNTIME_ENV.items():
        os.environ.setdefault(key, value)


def as_generator(random_state: Any = None) -> np.random.Generator:
    """Return a numpy ``Generator`` from None, an int, a Generator or a legacy RandomState."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**32 - 1))
    return np.random.default_rng(random_state)


def derive_seed(random_state: Any, *salt: Any) -> int:
    """A deterministic 32-bit seed from a base seed and any salt (e.g. a fold or client index)."""
    if random_state is None:
        return int(np.random.default_rng().integers(0, 2**32 - 1))
    if isinstance(random_state, np.random.Generator | np.random.RandomState):
        base = int(as_generator(random_state).integers(0, 2**32 - 1))
    else:
        base = int(random_state)
    ss = np.random.SeedSequence([base, *[zlib.crc32(str(s).encode()) for s in salt]])
    return int(ss.generate_state(1)[0])


def seed_everything(seed: int | None) -> np.random.Generator:
    """Seed python, numpy's legacy global RNG and torch (only if torch is already imported).

    Returns a fresh numpy Generator seeded with ``seed``. Never imports torch itself.
    """
    if seed is not None:
        random.seed(seed)
        np.random.seed(seed % (2**32))
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.manual_seed(seed)
    return np.random.default_rng(seed)


def thread_settings() -> dict[str, Any]:
    """Thread-related settings worth recording with every result."""
    out: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch_num_threads"] = torch.get_num_threads()
    return out
