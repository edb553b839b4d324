"""Named numpy arrays cached on disk under a content key (e.g. extracted activations), and model fingerprints.

An entry is a folder ``<cache>/<kind>/<key hash>/`` written atomically with a sha256 manifest by the same
machinery as the model cache (:func:`trustlab.llm._cache.cached_build`), and verified on every read: a
corrupt entry is reported with a warning and rebuilt, never loaded. Nothing is written unless the caller
passes a cache folder (or ``True`` for :func:`trustlab.llm.cache_root`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import CallableRule, InstanceOf, Satisfies
from trustlab.core.hashing import content_hash, state_dict_hash
from trustlab.llm._cache import cache_root, cached_build

__all__ = ["model_fingerprint", "cached_arrays"]


def _is_module(m: Any) -> bool:
    return callable(getattr(m, "state_dict", None))


@validate_args(model=[Satisfies(_is_module, "a torch module (with state_dict())", [3.5, "model"])])
def model_fingerprint(model: Any) -> str:
    """SHA-256 over a model's class, config and every weight (names, dtypes, shapes, bytes).

    Two models with the same fingerprint give the same activations for the same inputs; a fine-tuned copy
    or another dtype gets a new one. Hashing reads every weight once (about 1 s for SmolLM2-135M on CPU;
    weights on a GPU are copied to the CPU tensor by tensor).

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model_fingerprint(tiny_random_llama(0)[0]) == model_fingerprint(tiny_random_llama(0)[0])
    True
    """
    config = getattr(model, "config", None)
    cfg = config.to_dict() if hasattr(config, "to_dict") else {}
    cfg = {k: v for k, v in cfg.items() if k not in ("_name_or_path", "transformers_version", "_commit_hash")}
    return content_hash(type(model).__name__, json.dumps(cfg, sort_keys=True, default=str), state_dict_hash(model))


def _cache_dir(cache_dir: Any) -> Path:
    return cache_root() if cache_dir is True else cache_root(cache_dir)


@validate_args(_example=lambda: {"key": {"x": 1}, "build": dict, "cache_dir": "/nonexistent-trustlab-cache"},
               key=[InstanceOf(Mapping)], build=[CallableRule()],
               cache_dir=[Satisfies(lambda v: v is True or isinstance(v, str | os.PathLike),
                                    "True (trustlab's cache root) or a folder path", [False, 3.5, None])],
               kind=[Satisfies(lambda v: isinstance(v, str) and v.isidentifier(), "a plain name such as 'activations'",
                               ["", "a/b", 3])])
def cached_arrays(key: Mapping[str, Any], build: Callable[[], Mapping[str, np.ndarray]], *,
                  cache_dir: str | os.PathLike[str] | bool, kind: str = "arrays") -> tuple[dict[str, np.ndarray], bool]:
    """The arrays stored under ``key``, built by ``build()`` and stored on the first call.

    ``key`` is any mapping of strings, numbers and arrays (hashed with :func:`trustlab.core.hashing.content_hash`
    and kept readable in the entry's manifest). Returns ``(arrays, hit)``; ``hit`` is False when ``build``
    ran. ``cache_dir=True`` uses :func:`cache_root`.

    Example
    -------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> cached_arrays({"x": 1}, lambda: {"a": np.arange(3)}, cache_dir=d)[1]
    False
    >>> arrays, hit = cached_arrays({"x": 1}, lambda: {"a": np.zeros(3)}, cache_dir=d)
    >>> hit, arrays["a"].tolist()
    (True, [0, 1, 2])
    """
    digest = content_hash(dict(key))
    folder = _cache_dir(cache_dir) / kind / digest[:32]
    made: dict[str, np.ndarray] = {}

    def write(tmp: Path) -> dict[str, Any]:
        arrays = {str(k): np.asarray(v) for k, v in build().items()}
        made.update(arrays)
        with open(tmp / "arrays.npz", "wb") as fh:
            np.savez(fh, **arrays)
        readable = {k: v for k, v in key.items() if isinstance(v, str | int | float | bool)}
        return {"kind": kind, "key": readable, "key_sha256": digest}

    hit, _ = cached_build(folder, write)
    if not hit and made:
        return made, False
    with np.load(folder / "arrays.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}, hit
