"""Load language models offline: SmolLM2 from its pip package, any local HF folder or GGUF file.

A GGUF file is de-quantised by transformers once; the fp32 result is saved as safetensors in a cache
directory (``$TRUSTLAB_CACHE``, default ``~/.cache/trustlab``) keyed by the GGUF file's sha256, written
atomically with a manifest of per-file sha256 sums. Later loads verify the manifest and read the
safetensors (about 1 s instead of 15-45 s). A corrupt or truncated cache entry is detected, reported with
a warning and rebuilt; it is never loaded silently.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, InstanceOf, Options, Satisfies
from trustlab.core.exceptions import AssetNotFoundError, ConfigError, UnknownNameError, did_you_mean
from trustlab.core.optional import require
from trustlab.llm._cache import MANIFEST, cache_root, cached_build, file_sha256, remove_tree, verify_entry
from trustlab.llm._registry import (
    _MODELS,
    DEFAULT_MODEL,
    ModelEntry,
    available_models,
    register_model,
)

__all__ = [
    "ModelEntry",
    "available_models",
    "load_model",
    "load_tokenizer",
    "register_model",
]

_DTYPES = ("float32", "bfloat16", "float16")
_ATTN = ("sdpa", "eager")


# ------------------------------------------------------------------------------------------ load results
@dataclass(frozen=True)
class LoadInfo:
    """Where a model came from and what the load cost."""

    name: str
    source: str
    source_sha256: str | None = None
    cache_path: str | None = None
    cache_hit: bool = False
    rebuilt: bool = False
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoadedModel:
    """A causal LM with its tokenizer; unpacks as ``model, tokenizer = load_model(...)``."""

    model: Any
    tokenizer: Any
    info: LoadInfo

    def __iter__(self) -> Iterator[Any]:
        yield self.model
        yield self.tokenizer

    def __getitem__(self, index: int) -> Any:
        return (self.model, self.tokenizer)[index]

    def __len__(self) -> int:
        return 2


def _check_options(owner: str, attn_implementation: str, dtype: Any) -> Any:
    torch = require("torch", purpose="trustlab.llm")
    if attn_implementation not in _ATTN:
        raise ConfigError(
            f"The 'attn_implementation' argument of {owner} must be one of {list(_ATTN)}. "
            f"Got {attn_implementation!r} instead. Use 'eager' when you need attention weights."
        )
    names = {getattr(torch, n): n for n in _DTYPES}
    if isinstance(dtype, str) and dtype in _DTYPES:
        return getattr(torch, dtype)
    if dtype in names:
        return dtype
    raise ConfigError(
        f"The 'dtype' argument of {owner} must be one of {list(_DTYPES)} (or the torch dtype). "
        f"Got {dtype!r} instead."
    )


def _strip_quantizer(model: Any) -> None:
    """Drop the GGUF quantizer flag so the (already fp32) model can be saved and trained."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        try:
            quantizer.remove_quantization_config(model)
        except Exception:  # noqa: BLE001 - fall back to clearing the attributes by hand
            pass
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        try:
            del model.config.quantization_config
        except AttributeError:
            pass
    if hasattr(model, "is_quantized") and not isinstance(type(model).__dict__.get("is_quantized"), property):
        try:
            model.is_quantized = False
        except AttributeError:
            pass


def _gguf_load(path: Path, attn: str, what: str = "both") -> tuple[Any, Any]:
    torch = require("torch", purpose="trustlab.llm")
    tf = require("transformers", purpose="loading language models")
    try:
        tok = (
            tf.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            if what != "model"
            else None
        )
        model = None
        if what != "tokenizer":
            model = tf.AutoModelForCausalLM.from_pretrained(
                str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation=attn
            )
            _strip_quantizer(model)
    except (ValueError, OSError, KeyError, RuntimeError, EOFError, IndexError) as exc:
        raise AssetNotFoundError(
            f"The GGUF file {path} could not be read by transformers ({type(exc).__name__}: {exc}). "
            "It is probably truncated or corrupt; reinstall the package that ships it."
        ) from exc
    return model, tok


def _resolve(name_or_path: str | os.PathLike[str], root: Path) -> tuple[str, Path, ModelEntry | None]:
    if isinstance(name_or_path, str) and name_or_path in _MODELS:
        entry = _MODELS[name_or_path]
        return name_or_path, entry.resolve(root), entry
    if not isinstance(name_or_path, str | os.PathLike):
        raise ConfigError(
            "The 'name_or_path' argument of load_model must be a registered name or a path. "
            f"Got {type(name_or_path).__name__} instead."
        )
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path.stem if path.is_file() else path.name, path, None
    text = str(name_or_path)
    if os.sep in text or text.endswith(".gguf") or text.startswith("."):
        raise AssetNotFoundError(f"The model file or folder {text!r} passed to load_model does not exist.")
    raise UnknownNameError(
        f"Unknown model {text!r} for load_model: it is neither a registered name nor an existing path."
        f"{did_you_mean(text, _MODELS)} Registered: {', '.join(available_models())}."
    )


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name.lower())[:60]


def resolve_device(device: str, owner: str = "load_model") -> str:
    """``"auto"`` -> ``"cuda"`` when available, else ``"cpu"``; ``"cuda..."`` without CUDA is a ConfigError."""
    torch = require("torch", purpose="trustlab.llm")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"The 'device' argument of {owner} is {device!r}, but this torch ({torch.__version__}) sees no CUDA "
            "device. Use 'cpu' or 'auto' (CUDA when available)."
        )
    return device


def _attach(model: Any, tokenizer: Any, attn: str, dtype: Any, device: str) -> Any:
    if dtype is not None and next(model.parameters()).dtype != dtype:
        model = model.to(dtype)
    device = resolve_device(device)
    if device != "cpu":
        model = model.to(device)
    model.eval()
    if (
        attn
        and getattr(model.config, "_attn_implementation", attn) != attn
        and hasattr(model, "set_attn_implementation")
    ):
        model.set_attn_implementation(attn)
    model.trustlab_tokenizer = tokenizer
    return model


def _load_verified(tf: Any, folder: Path, dtype: Any, attn: str, *, full: bool) -> tuple[Any, Any] | None:
    """Load a cache entry while its sha256 check runs in a thread; None (after a warning) if it fails.

    The model is returned only once the check has passed, so a corrupt entry is never used; hashing in
    parallel with reading hides most of its cost (hashlib releases the GIL).
    """
    if not folder.exists():
        return None
    reason = verify_entry(folder, full=False)
    loaded: tuple[Any, Any] | None = None
    if reason is None:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            check = pool.submit(verify_entry, folder, full=True) if full else None
            try:
                model = tf.AutoModelForCausalLM.from_pretrained(
                    str(folder), dtype=dtype, attn_implementation=attn, local_files_only=True
                )
                tok = tf.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
                loaded = (model, tok)
            except (OSError, ValueError, RuntimeError) as exc:
                reason = f"transformers could not load it ({type(exc).__name__}: {exc})"
            if check is not None:
                reason = check.result() or reason
    if reason is None:
        return loaded
    warnings.warn(
        f"The trustlab cache entry {folder} failed verification: {reason}. Rebuilding it.",
        UserWarning,
        stacklevel=3,
    )
    remove_tree(folder)
    return None


_NAME = [InstanceOf(str, os.PathLike)]
_DIR = [InstanceOf(str, os.PathLike), None]
_VERIFY = [Options(("full", "size"))]
_ATTN_RULE = [Options(_ATTN)]


def _is_dtype(value: Any) -> bool:
    """A dtype name of :data:`_DTYPES` or the torch dtype itself (torch is not imported to check)."""
    if isinstance(value, str):
        return value in _DTYPES
    return type(value).__name__ == "dtype" and str(value).removeprefix("torch.") in _DTYPES


_DTYPE_RULE = [Satisfies(_is_dtype, f"one of {list(_DTYPES)} or the torch dtype", invalid=["float8", 3, None],
                         valid="float32")]


@validate_args(name_or_path=_NAME, attn_implementation=_ATTN_RULE, dtype=_DTYPE_RULE, device=[InstanceOf(str)],
               cache_dir=_DIR, use_cache=[Boolean()], verify=_VERIFY)
def load_model(
    name_or_path: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    attn_implementation: str = "sdpa",
    dtype: Any = "float32",
    device: str = "cpu",
    cache_dir: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
    verify: str = "full",
) -> LoadedModel:
    """Load a causal LM and its tokenizer offline, caching de-quantised GGUF weights.

    Parameters
    ----------
    name_or_path : str or path, default="smollm2-135m-instruct"
        A registered name (:func:`available_models`), a ``.gguf`` file, or a local HF folder (e.g. your own
        ``save_pretrained`` checkpoint of any family in the architecture table), read offline.
    attn_implementation : {"sdpa", "eager"}, default="sdpa"
        ``"eager"`` is needed for attention weights (``output_attentions`` / the ``pattern`` site).
    dtype : {"float32", "bfloat16", "float16"}, default="float32"
        Weights are cached in fp32 and cast after loading.
    device : str, default="cpu"
        ``"cpu"``, ``"cuda"`` (``"cuda:1"``...) or ``"auto"`` (CUDA when available); a CUDA device without
        CUDA raises ConfigError.
    cache_dir : path, optional
        Cache folder; default ``$TRUSTLAB_CACHE`` or ``~/.cache/trustlab``.
    use_cache : bool, default=True
        False loads straight from the GGUF and writes nothing.
    verify : {"full", "size"}, default="full"
        How a cache entry is checked before loading: sha256 of every file (about 0.5 s for SmolLM2) or
        sizes only. For a local HF folder ``"full"`` records the sha256 of its files in
        ``info.source_sha256`` (remembered per file in the cache's hash book unless ``use_cache=False``) and
        checks a trustlab manifest when the folder has one.

    Returns
    -------
    LoadedModel
        ``model`` (in eval mode, quantisation flag removed, ``model.trustlab_tokenizer`` set),
        ``tokenizer`` and ``info`` (source, sha256, cache hit, seconds).

    Raises
    ------
    AssetNotFoundError
        When the model file is missing or unreadable; the message names the package to install.
    UnknownNameError
        For an unknown name that is not a path.
    ConfigError
        For an invalid ``attn_implementation``, ``dtype`` or ``verify``.

    Example
    -------
    >>> model, tok = load_model("smollm2-135m-instruct")  # doctest: +SKIP
    >>> model.config.num_hidden_layers  # doctest: +SKIP
    30
    """
    t0 = time.perf_counter()
    torch_dtype = _check_options("load_model", attn_implementation, dtype)
    resolve_device(device)  # before any load: a missing CUDA fails fast (verify is checked by its rule)
    tf = require("transformers", purpose="loading language models")
    root = cache_root(cache_dir)
    name, path, entry = _resolve(name_or_path, root)
    path = _model_path(path)
    if path.is_dir():  # a plain HF folder (a user's save_pretrained checkpoint or a trustlab cache entry)
        digest = _folder_digest(path, root if use_cache else None) if verify == "full" else None
        model, tok = _load_folder(tf, path, torch_dtype, attn_implementation, verify)
        info = LoadInfo(name, str(path), digest, seconds=time.perf_counter() - t0)
        return LoadedModel(_attach(model, tok, attn_implementation, torch_dtype, device), tok, info)
    digest = _checked_digest(path, root, entry)
    if not use_cache:
        model, tok = _gguf_load(path, attn_implementation)
        info = LoadInfo(name, str(path), digest, seconds=time.perf_counter() - t0)
        return LoadedModel(_attach(model, tok, attn_implementation, torch_dtype, device), tok, info)
    folder = root / "models" / f"{_slug(name)}-{digest[:16]}"
    model, tok, hit, rebuilt = _load_cached_gguf(tf, path, name, digest, folder, torch_dtype,
                                                 attn_implementation, verify)
    info = LoadInfo(name, str(path), digest, str(folder), hit, rebuilt, time.perf_counter() - t0)
    return LoadedModel(_attach(model, tok, attn_implementation, torch_dtype, device), tok, info)


def _model_path(path: Path) -> Path:
    """A folder holding exactly one ``.gguf`` and no ``config.json`` stands for that file."""
    if not path.is_dir() or (path / "config.json").is_file():
        return path
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) == 1:
        return ggufs[0]
    raise AssetNotFoundError(
        f"The folder {path} passed to load_model holds neither an HF model (config.json) nor exactly "
        f"one .gguf file (found {len(ggufs)})."
    )


def _folder_digest(path: Path, root: Path | None) -> str:
    """sha256 over the folder's files (relative name and sha256 of each, sorted); remembered in the cache's
    hash book when ``root`` is given, computed afresh otherwise (nothing written)."""
    import hashlib

    from trustlab.llm._cache import sha256_path

    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")):
        digest = file_sha256(f, root) if root is not None else sha256_path(f)
        h.update(f"{f.relative_to(path).as_posix()}:{digest}\n".encode())
    return h.hexdigest()


def _load_folder(tf: Any, path: Path, torch_dtype: Any, attn: str, verify: str) -> tuple[Any, Any]:
    if (path / MANIFEST).is_file():
        reason = verify_entry(path, full=verify == "full")
        if reason is not None:
            raise AssetNotFoundError(f"The model folder {path} failed verification: {reason}.")
    model = tf.AutoModelForCausalLM.from_pretrained(
        str(path), dtype=torch_dtype, attn_implementation=attn, local_files_only=True
    )
    return model, tf.AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def _checked_digest(path: Path, root: Path, entry: ModelEntry | None) -> str:
    digest = file_sha256(path, root)
    if entry is not None and entry.sha256 and digest != entry.sha256:
        raise AssetNotFoundError(
            f"The GGUF file {path} has sha256 {digest[:12]}..., expected {entry.sha256[:12]}... for "
            f"{entry.name}: it is corrupt or a different version. Reinstall with: {entry.install_hint} "
            "--force-reinstall"
        )
    return digest


def _load_cached_gguf(tf: Any, path: Path, name: str, digest: str, folder: Path, torch_dtype: Any, attn: str,
                      verify: str) -> tuple[Any, Any, bool, bool]:
    """``(model, tokenizer, cache hit, rebuilt)``: load the verified cache entry or build it from the GGUF."""
    built: dict[str, Any] = {}

    def build(tmp: Path) -> dict[str, Any]:
        model, tok = _gguf_load(path, attn)
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        built["model"], built["tok"] = model, tok
        return {"source": str(path), "source_sha256": digest, "name": name, "transformers": tf.__version__}

    existed = folder.exists()
    loaded = _load_verified(tf, folder, torch_dtype, attn, full=verify == "full")
    if loaded is not None:
        return loaded[0], loaded[1], True, False
    hit_late, _ = cached_build(folder, build, full_verify=verify == "full")
    if not hit_late:
        return built["model"], built["tok"], False, existed
    # another process wrote it meanwhile
    loaded = _load_verified(tf, folder, torch_dtype, attn, full=False)
    if loaded is None:
        raise AssetNotFoundError(f"The trustlab cache entry {folder} could not be loaded.")
    return loaded[0], loaded[1], False, existed


def _is_tokenizer_file(rel: str) -> bool:
    """Files of a saved HF folder that the tokenizer reads (not weights or the model config)."""
    return not rel.endswith((".safetensors", ".bin")) and rel not in ("config.json", "generation_config.json")


@validate_args(name_or_path=_NAME, cache_dir=_DIR, verify=_VERIFY)
def load_tokenizer(
    name_or_path: str | os.PathLike[str] = DEFAULT_MODEL, *, cache_dir: str | os.PathLike[str] | None = None,
    verify: str = "full",
) -> Any:
    """Load only the tokenizer of a model (cached separately; about 0.3 s once cached).

    ``verify="full"`` (default) checks the cached tokenizer files' sha256 against the cache manifest, so
    a same-size corruption (two token ids swapped) is caught and rebuilt; ``verify="size"`` checks sizes
    only.

    Example
    -------
    >>> tok = load_tokenizer()  # doctest: +SKIP
    >>> len(tok)  # doctest: +SKIP
    49152
    """
    if verify not in ("full", "size"):
        raise ConfigError(f"The 'verify' argument of load_tokenizer must be 'full' or 'size'. Got {verify!r} instead.")
    tf = require("transformers", purpose="loading tokenizers")
    root = cache_root(cache_dir)
    name, path, _ = _resolve(name_or_path, root)
    if path.is_dir() and (path / "config.json").is_file():
        return tf.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) != 1:
            raise AssetNotFoundError(
                f"The folder {path} holds {len(ggufs)} .gguf files; expected exactly one."
            )
        path = ggufs[0]
    digest = file_sha256(path, root)
    full = verify == "full"
    model_folder = root / "models" / f"{_slug(name)}-{digest[:16]}"
    if model_folder.exists():
        reason = verify_entry(model_folder, full=full, only=_is_tokenizer_file)
        if reason is None:
            return tf.AutoTokenizer.from_pretrained(str(model_folder), local_files_only=True)
        warnings.warn(f"The tokenizer files of the trustlab cache entry {model_folder} failed verification: "
                      f"{reason}. Using a separately built tokenizer instead.", UserWarning, stacklevel=2)
    folder = root / "tokenizers" / f"{_slug(name)}-{digest[:16]}"
    built: dict[str, Any] = {}

    def build(tmp: Path) -> dict[str, Any]:
        _, tok = _gguf_load(path, "sdpa", what="tokenizer")
        tok.save_pretrained(str(tmp))
        built["tok"] = tok
        return {"source": str(path), "source_sha256": digest, "name": name}

    hit, _ = cached_build(folder, build, full_verify=full)
    return tf.AutoTokenizer.from_pretrained(str(folder), local_files_only=True) if hit else built["tok"]
