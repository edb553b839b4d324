"""Content hashes: one SHA-256 over named arrays, bytes and text, used for cache keys and fingerprints."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from trustlab.core.arguments import HasMethods, validate_args
from trustlab.core.constraints import Satisfies

__all__ = ["content_hash", "state_dict_hash"]


def _feed(h: Any, value: Any) -> None:
    if isinstance(value, Mapping):
        h.update(b"{")
        for key in sorted(value, key=str):
            h.update(str(key).encode() + b"\x00")
            _feed(h, value[key])
        h.update(b"}")
        return
    if isinstance(value, str | bytes):
        h.update(b"s" + (value.encode() if isinstance(value, str) else value) + b"\x00")
        return
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu().contiguous()
        h.update(f"t{value.dtype}{tuple(value.shape)}".encode())
        if value.numel():
            import torch

            h.update(value.reshape(-1).view(torch.uint8).numpy().tobytes())
        return
    if isinstance(value, np.ndarray) or (isinstance(value, list | tuple) and value and
                                          all(isinstance(v, int | float | np.number) for v in value)):
        a = np.ascontiguousarray(value)
        if a.dtype.kind in "OU":
            h.update(f"a{a.shape}".encode() + "\x00".join(map(str, a.ravel().tolist())).encode())
        else:
            h.update(f"a{a.dtype}{a.shape}".encode() + a.tobytes())
        return
    if isinstance(value, list | tuple):
        h.update(b"[")
        for v in value:
            _feed(h, v)
        h.update(b"]")
        return
    h.update(repr(value).encode() + b"\x00")


def content_hash(*parts: Any) -> str:
    """SHA-256 hex digest over ``parts``: arrays and tensors by dtype, shape and bytes, mappings by sorted
    key, sequences in order, anything else by ``repr``. Equal contents give equal hashes across runs.

    Examples
    --------
    >>> content_hash({"w": np.zeros(2)}) == content_hash({"w": np.zeros(2)})
    True
    """
    h = hashlib.sha256()
    for p in parts:
        _feed(h, p)
    return h.hexdigest()


class _StateDictOwner:
    """The smallest object with a state dict: the example model of the generated invalid-input test."""

    def state_dict(self) -> dict[str, Any]:
        return {}


#: a torch module, or any object with a state dict
MODULE = HasMethods("state_dict", what="a torch.nn.Module")
_NAMES = Satisfies(lambda v: not isinstance(v, str | bytes) and all(isinstance(n, str) for n in v),
                   "an iterable of state-dict key names (str)", invalid=["weight", [3]], valid=[])


@validate_args(lambda: {"model": _StateDictOwner()}, model=[MODULE], names=[_NAMES, None])
def state_dict_hash(model: Any, *, names: Iterable[str] | None = None) -> str:
    """SHA-256 over a torch module's state dict (names, dtypes, shapes and exact bytes)."""
    sd = model.state_dict()
    keep = sorted(sd) if names is None else sorted(names)
    return content_hash({k: sd[k] for k in keep})
