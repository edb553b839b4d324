"""The shipped 16x16 digits DDPM (``trustlab/data/_files/freqpure/``) and the digit split it was trained on."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.exceptions import AssetNotFoundError
from trustlab.core.seeding import as_seed

__all__ = ["SHIPPED_WEIGHTS", "REBUILD_COMMAND", "load_shipped_ddpm", "shipped_provenance", "digits16_split"]

SHIPPED_WEIGHTS = "ddpm16.safetensors"
REBUILD_COMMAND = f"trustlab freqpure train-ddpm --out src/trustlab/data/_files/freqpure/{SHIPPED_WEIGHTS}"
#: the test split of the 16x16 digits: held out from the DDPM's training data
N_TEST = 300


@validate_args(random_state=["random_state"])
def digits16_split(random_state: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(X_train, y_train, X_test, y_test)``: scikit-learn's digits upsampled to 16x16 (``(n, 1, 16, 16)``,
    [0, 1]), a stratified split with 300 test digits. ``random_state=0`` is the split the shipped DDPM was
    trained on (its training half only); the experiment's classifier uses the same training half."""
    random_state = as_seed(random_state)  # int seeds unchanged; a Generator is accepted
    from sklearn.model_selection import train_test_split

    from trustlab.data import load_digits_images

    ds = load_digits_images(size=16)
    X = ds.X[:, None].astype(np.float32)
    Xtr, Xte, ytr, yte = train_test_split(X, np.asarray(ds.y), test_size=N_TEST, random_state=random_state,
                                          stratify=ds.y)
    return Xtr, ytr, Xte, yte


@validate_args()
def shipped_provenance() -> dict[str, Any]:
    """How the shipped DDPM was trained (config, loss, wall time, command) and its fingerprint."""
    from trustlab.data import read_shipped_json

    return dict(read_shipped_json("freqpure", "provenance.json"))


@functools.lru_cache(maxsize=1)
def _shipped_bytes() -> tuple[bytes, str]:
    from trustlab.data import read_shipped_bytes

    blob = read_shipped_bytes("freqpure", SHIPPED_WEIGHTS, rebuild=REBUILD_COMMAND)
    try:
        fingerprint = shipped_provenance()["fingerprint"]
    except Exception as exc:  # noqa: BLE001 - missing or broken provenance file
        raise AssetNotFoundError(f"The fingerprint of trustlab/data/_files/freqpure/{SHIPPED_WEIGHTS} cannot be read "
                                 f"from provenance.json ({type(exc).__name__}: {exc}). Rebuild both with: "
                                 f"{REBUILD_COMMAND}") from None
    return blob, str(fingerprint)


@validate_args()
def load_shipped_ddpm() -> Any:
    """The shipped DDPM for 16x16 digits (an :class:`EpsUNet` in a :class:`DiffusionModel`, eval mode, weights
    frozen), checked against its recorded fingerprint; a fresh copy on every call."""
    from trustlab.methods.freqpure._diffusion import ddpm_from_bytes

    blob, fingerprint = _shipped_bytes()
    return ddpm_from_bytes(blob, f"trustlab/data/_files/freqpure/{SHIPPED_WEIGHTS}",
                           expected_fingerprint=fingerprint, rebuild=REBUILD_COMMAND)


@functools.lru_cache(maxsize=1)
def shared_shipped_ddpm() -> Any:
    """One loaded copy of the shipped DDPM shared by the purifiers that use the default model (never
    modified: its weights are frozen and purifiers only read it)."""
    return load_shipped_ddpm()
