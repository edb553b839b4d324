"""Seeding: turn a ``random_state`` into local generators; never leave global RNG state changed.

Library code draws from local generators made from ``random_state`` (:func:`check_random_state`,
:func:`torch_generator`). Third-party code that draws from the *global* RNGs (torch module
initialisation, dropout, some libraries' ``np.random`` calls) runs inside :func:`isolated_global_rng`,
which seeds the global Python, NumPy and torch RNGs from the method's own generator for the duration of
the call and restores their previous state on exit. Calling a public verb therefore never changes
``random.getstate()``, ``np.random.get_state()`` or ``torch.get_rng_state()`` (a common check asserts it).
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf, Interval, Satisfies, validate_value

__all__ = [
    "check_random_state",
    "as_generator",
    "spawn_seed",
    "as_seed",
    "derive_seed",
    "torch_generator",
    "isolated_global_rng",
    "global_rng_state",
    "same_global_rng_state",
    "seed_everything",
    "thread_settings",
    "RUNTIME_ENV",
    "set_runtime_env",
    "seed_alias",
]

#: Environment defaults for our runs: OpenMP busy-waiting can triple run times on shared cores, and nothing
#: may reach a model hub or send telemetry at run time. Applied by the CLI and the tests (never by library
#: code, which reads no environment), before torch is imported.
RUNTIME_ENV = {
    "OMP_WAIT_POLICY": "PASSIVE", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1", "TRANSFORMERS_OFFLINE": "1", "FLWR_TELEMETRY_ENABLED": "0",
    "RAY_USAGE_STATS_ENABLED": "0", "DO_NOT_TRACK": "1", "MPLBACKEND": "Agg",
}

_MAX_SEED = 2**32 - 1


#: held by every isolated_global_rng block (re-entrant: verbs call verbs)
_GLOBAL_RNG_LOCK = threading.RLock()

def set_runtime_env() -> None:
    """Apply :data:`RUNTIME_ENV` as defaults (values the user already set are kept). CLI, tests and benchmarks only."""
    for key, value in RUNTIME_ENV.items():
        os.environ.setdefault(key, value)


def _is_seed(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_) and 0 <= int(value) <= _MAX_SEED


_STR = Satisfies(lambda v: isinstance(v, str), "a str", invalid=[3, None], valid="random_state")
#: a seed of the global RNGs: python's random and torch take any int, numpy's legacy RNG its value mod 2**32;
#: seed_everything also seeds a Generator, which needs an int >= 0
_ANY_SEED = [Interval(int, None, None), None]
_GLOBAL_SEED = [Interval(int, 0, None), None]


def _is_snapshot(value: Any) -> bool:
    return isinstance(value, dict) and {"python", "numpy"} <= value.keys()


_SNAPSHOT = [Satisfies(_is_snapshot, "a global_rng_state() snapshot (a dict with 'python' and 'numpy')",
                       invalid=[None, {}])]


@validate_args(lambda: {"owner": None}, random_state=["random_state"], name=[_STR], owner=[_STR, None],
               _enforced_by_body=True)
def check_random_state(random_state: Any = None, *, name: str = "random_state", owner: str | None = None
                       ) -> np.random.Generator:
    """A numpy ``Generator`` from ``random_state``: None (fresh entropy), an int seed or a ``Generator``.

    A ``Generator`` is returned as is (the caller's generator is advanced, as in scikit-learn); an int
    gives a new generator seeded with it. Anything else raises :class:`ConfigError` with the template
    message. The one accepted set of types matches :class:`~trustlab.core.constraints.RandomStateRule`.
    The body checks its arguments (declared, not wrapped: it runs in every verb).
    """
    if not isinstance(name, str) or not (owner is None or isinstance(owner, str)):
        validate_value("check_random_state", "name", name, [_STR], noun="argument")
        validate_value("check_random_state", "owner", owner, [_STR, None], noun="argument")
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if _is_seed(random_state):
        return np.random.default_rng(int(random_state))
    from trustlab.core.exceptions import ConfigError

    where = f"parameter of {owner}" if owner else "argument of check_random_state"
    raise ConfigError(
        f"The '{name}' {where} must be None, an int in [0, {_MAX_SEED}] or a numpy Generator. "
        f"Got {random_state!r} instead."
    )


@validate_args(random_state=["random_state"])
def as_generator(random_state: Any = None) -> np.random.Generator:
    """Alias of :func:`check_random_state` (kept for internal callers)."""
    return check_random_state(random_state)


@validate_args(rng=[InstanceOf(np.random.Generator)])
def spawn_seed(rng: np.random.Generator) -> int:
    """Draw a 32-bit seed from ``rng`` (advancing it), e.g. to seed a torch generator or a library."""
    return int(rng.integers(0, _MAX_SEED, endpoint=True))


@validate_args(random_state=["random_state"])
def as_seed(random_state: Any = None) -> int:
    """An int seed from ``random_state`` for libraries that take only ints (scikit-learn, optuna).

    An int is kept (so int seeds give exactly what passing them on directly gives), a ``Generator`` is
    advanced once, ``None`` draws fresh entropy; anything else raises like :func:`check_random_state`.
    """
    if _is_seed(random_state):
        return int(random_state)
    return spawn_seed(check_random_state(random_state))


@validate_args(random_state=["random_state"])
def derive_seed(random_state: Any, *salt: Any) -> int:
    """A deterministic 32-bit seed from a base seed and any salt (e.g. a fold or client index).

    An int gives the same seed for the same salt; a Generator is advanced once; None draws fresh entropy.
    """
    rng_or_seed = check_random_state(random_state) if not _is_seed(random_state) else None
    base = spawn_seed(rng_or_seed) if rng_or_seed is not None else int(random_state)
    ss = np.random.SeedSequence([base, *[zlib.crc32(str(s).encode()) for s in salt]])
    return int(ss.generate_state(1)[0])


@validate_args(random_state=["random_state"],
               device=[Satisfies(lambda v: isinstance(v, str) or type(v).__name__ == "device",
                                 "a device name (str) or a torch.device", invalid=[3, None], valid="cpu")])
def torch_generator(random_state: Any = None, device: Any = "cpu") -> Any:
    """A local ``torch.Generator`` seeded from ``random_state`` (int, Generator or None)."""
    import torch

    seed = spawn_seed(check_random_state(random_state)) if not _is_seed(random_state) else int(random_state)
    return torch.Generator(device=device).manual_seed(seed)


def global_rng_state() -> dict[str, Any]:
    """A snapshot of the global Python, NumPy and (if imported) torch RNG states, for comparisons."""
    state: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state()}
    torch = sys.modules.get("torch")
    if torch is not None:
        state["torch"] = torch.get_rng_state()
    return state


@validate_args(lambda: {"a": global_rng_state(), "b": global_rng_state()}, a=_SNAPSHOT, b=_SNAPSHOT)
def same_global_rng_state(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two :func:`global_rng_state` snapshots are equal (torch compared when both have it)."""
    if a["python"] != b["python"]:
        return False
    na, nb = a["numpy"], b["numpy"]
    if na[0] != nb[0] or not np.array_equal(na[1], nb[1]) or tuple(na[2:]) != tuple(nb[2:]):
        return False
    if ("torch" in a) != ("torch" in b):
        return "torch" not in a  # torch imported during the call: its fresh state cannot be compared
    return "torch" not in a or bool((a["torch"] == b["torch"]).all())


@validate_args(seed=_ANY_SEED)
@contextlib.contextmanager
def isolated_global_rng(seed: int | None = None) -> Iterator[None]:
    """Seed the global RNGs with ``seed`` inside the block and restore their previous states on exit.

    ``seed=None`` leaves the globals as they are inside the block (their states are still restored).
    torch's CPU state (and CUDA's, when CUDA is initialised) is restored when torch was imported before
    the block; a torch imported inside the block keeps the state the block left.

    Blocks are serialised across threads by one re-entrant lock (issue 43): two threads calling verbs at once
    would otherwise seed and restore the same process-wide generators in between each other's draws. A block
    nested in another on the same thread re-enters the lock.
    """
    with _GLOBAL_RNG_LOCK:  # one thread at a time: the global RNGs are process-wide
        py_state, np_state = random.getstate(), np.random.get_state()
        torch = sys.modules.get("torch")
        torch_state = torch.get_rng_state() if torch is not None else None
        cuda_states = None
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            cuda_states = torch.cuda.get_rng_state_all()
        try:
            if seed is not None:
                random.seed(seed)
                np.random.seed(seed % (2**32))
                if torch is not None:
                    torch.manual_seed(seed)
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
            if torch is not None:
                torch.set_rng_state(torch_state)
                if cuda_states is not None:
                    torch.cuda.set_rng_state_all(cuda_states)


@validate_args(seed=_GLOBAL_SEED)
def seed_everything(seed: int | None) -> np.random.Generator:
    """Seed python, numpy's legacy global RNG and torch (only if already imported) *globally*.

    For scripts and the experiment runner's worker process only; library code uses
    :func:`isolated_global_rng` instead. Returns a fresh numpy Generator seeded with ``seed``.
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
    from trustlab.core.threads import thread_state

    out: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
    }
    out.update(thread_state())
    return out


@takes_any(fn="any function taking random_state; its own rule tables are kept on the wrapper")
def seed_alias(fn: Any) -> Any:
    """Accept the deprecated keyword ``seed=`` of ``fn`` as ``random_state=`` (FutureWarning).

    For the public functions that took an int-only ``seed`` before the project's ``random_state`` rule
    (int, numpy Generator or None). Passing both is a :class:`~trustlab.core.exceptions.ConfigError`.
    The rule tables of ``fn`` (``validate_args``) are kept on the wrapper.
    """
    import functools
    import warnings

    from trustlab.core.exceptions import ConfigError

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if "seed" in kwargs:
            if "random_state" in kwargs:
                raise ConfigError(f"{fn.__qualname__} got both 'seed' and 'random_state'; 'seed' is the "
                                  "deprecated name of 'random_state': pass random_state only.")
            warnings.warn(f"{fn.__qualname__}(seed=...) is deprecated and will be removed: use "
                          "random_state=... (an int, a numpy Generator or None).", FutureWarning, stacklevel=2)
            kwargs["random_state"] = kwargs.pop("seed")
        return fn(*args, **kwargs)

    return wrapper
