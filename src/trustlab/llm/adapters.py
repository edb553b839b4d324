"""LoRA adapters via peft on chosen blocks and modules; the adapter-free model as reference; save and load.

* :func:`add_lora` wraps a causal LM (from :func:`trustlab.llm.load_model` or the user's own) in a peft
  model with LoRA on the chosen modules of the chosen blocks (``layers="top4"``, a list, or ``"all"``).
  The initialisation is seeded from ``random_state`` without touching the global RNGs.
* :func:`reference_policy` (= peft's ``disable_adapter()``) runs the base model, a free reference policy.
* :func:`save_adapter` / :func:`load_adapter` use peft's safetensors format (never pickle); writes are
  atomic. :func:`merge_adapter` returns a merged copy, :func:`save_merged` writes it as an HF folder.
* :func:`weights_fingerprint` hashes the adapter-free weights (names as in the plain model), so caches
  keyed by it stay valid while an adapter trains and become stale when the base weights change.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import re
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import Boolean, Interval, Satisfies
from trustlab.core.exceptions import AssetNotFoundError, ConfigError, UnknownNameError, did_you_mean
from trustlab.core.hashing import content_hash
from trustlab.core.optional import require
from trustlab.core.seeding import as_seed, isolated_global_rng
from trustlab.llm._architectures import LAYER_RE
from trustlab.llm._cache import remove_tree
from trustlab.llm.rules import Tokenizer
from trustlab.llm.sites import arch_spec, dims, get_module, unwrap

torch = require("torch", purpose="trustlab.llm adapters")

__all__ = [
    "add_lora",
    "adapter_layers",
    "is_adapted",
    "load_adapter",
    "merge_adapter",
    "reference_policy",
    "reset_lora",
    "resolve_layers",
    "save_adapter",
    "save_merged",
    "weights_fingerprint",
]

#: shorthand module groups (canonical names relative to a llama block; other families map them through
#: their ArchSpec aliases, e.g. q/k/v -> GPT-2's fused attn.c_attn)
MODULE_GROUPS: dict[str, tuple[str, ...]] = {
    "attention": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"),
    "mlp": ("mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"),
}
MODULE_GROUPS["all-linear"] = MODULE_GROUPS["attention"] + MODULE_GROUPS["mlp"]

_TOP = re.compile(r"^top(\d+)$")
_LAYER = LAYER_RE


def _is_layer_spec(v: Any) -> bool:
    if isinstance(v, str):
        return v == "all" or _TOP.match(v) is not None
    if isinstance(v, bool):
        return False
    if isinstance(v, int | np.integer):
        return True
    if isinstance(v, range):
        return True
    return isinstance(v, list | tuple) and len(v) > 0 and all(
        isinstance(x, int | np.integer) and not isinstance(x, bool) for x in v)


LAYER_RULE = Satisfies(_is_layer_spec, "'all', 'topK' (e.g. 'top4'), a block index or a non-empty list of them",
                       invalid=["top", "bottom4", [], 1.5, [0.5]], valid="all")


def _model_rule() -> Any:
    return Satisfies(lambda m: isinstance(m, torch.nn.Module), "a torch causal LM (torch.nn.Module)",
                     invalid=["not-a-model", None], valid=None)


def _plain_example() -> dict[str, Any]:
    from trustlab.llm._small import tiny_random_llama

    return {"model": tiny_random_llama()[0]}


def _peft_example() -> dict[str, Any]:
    return {"model": add_lora(_plain_example()["model"], layers="all", r=2)}


@validate_args(_example=_plain_example, model=[_model_rule()], layers=[LAYER_RULE])
def resolve_layers(model: Any, layers: Any) -> list[int]:
    """Block indices of a layer spec: ``"all"``, ``"topK"``, an index, or a list/range of indices.

    Raises ConfigError for K larger than the model or an index out of range.

    Examples
    --------
    >>> from trustlab.llm import tiny_random_llama
    >>> resolve_layers(tiny_random_llama(n_layers=4)[0], "top2")
    [2, 3]
    """
    n = dims(model).n_layers
    if not _is_layer_spec(layers):
        raise ConfigError(f"The 'layers' argument must be {LAYER_RULE.describe()}. Got {layers!r} instead.")
    if isinstance(layers, str):
        if layers == "all":
            return list(range(n))
        k = int(_TOP.match(layers).group(1))  # type: ignore[union-attr]
        if not 1 <= k <= n:
            raise ConfigError(
                f"The 'layers' argument {layers!r} asks for the top {k} blocks, but the model has {n} "
                f"blocks. Use 'top1'..'top{n}' or 'all'."
            )
        return list(range(n - k, n))
    idx = [int(layers)] if isinstance(layers, int | np.integer) else [int(x) for x in layers]
    bad = [i for i in idx if not 0 <= i < n]
    if bad or not idx:
        raise ConfigError(
            f"The 'layers' argument must hold block indices in [0, {n - 1}] (the model has {n} blocks). "
            f"Got {list(layers)!r} instead (out of range: {bad})."
        )
    return sorted(set(idx))


def _block_linears(model: Any, layer: int) -> dict[str, Any]:
    inner = unwrap(model)
    block = get_module(inner, f"{arch_spec(inner).layers}.{layer}")
    return {n: m for n, m in block.named_modules() if n and _is_linear(m)}


def _is_linear(m: Any) -> bool:
    from transformers.pytorch_utils import Conv1D  # GPT-2's projections

    base = getattr(m, "base_layer", m)  # an already wrapped peft layer: its base
    return isinstance(base, torch.nn.Linear | Conv1D)


@validate_args(_example=_plain_example, model=[_model_rule()], modules=[SequenceOf(str), str],
               layers=[SequenceOf(Interval(int, 0, None))])
def resolve_modules(model: Any, modules: Any, layers: Sequence[int]) -> list[str]:
    """Full module names (``model.layers.{i}.self_attn.q_proj``...) for module names relative to a block.

    ``modules`` is a group name (:data:`MODULE_GROUPS`: ``"attention"``, ``"mlp"``, ``"all-linear"``) or
    a list of names such as ``"q_proj"`` or ``"mlp.down_proj"`` (a suffix of the module's path in the
    block). Canonical (llama) names map through the family's :class:`~trustlab.llm.sites.ArchSpec` aliases
    (Phi-3's ``qkv_proj``, GPT-2's ``c_attn``); a fused module must be asked for with all its parts. An
    unknown name raises :class:`UnknownNameError` with close matches.
    """
    group = isinstance(modules, str)
    if group:
        if modules not in MODULE_GROUPS:
            raise UnknownNameError(
                f"Unknown module group {modules!r}.{did_you_mean(modules, MODULE_GROUPS)} Groups: "
                f"{', '.join(MODULE_GROUPS)}; or pass a list of module names such as ['q_proj', 'v_proj']."
            )
        modules = MODULE_GROUPS[modules]
    inner = unwrap(model)
    spec = arch_spec(inner)
    out: list[str] = []
    for layer in layers:
        linears = _block_linears(inner, layer)
        names = [_block_name(spec, m, linears, layer, group) for m in modules]
        out += [f"{spec.layers}.{layer}.{n}" for n in names if n]
    _check_fused(spec, modules)
    return list(dict.fromkeys(out))


def _block_name(spec: Any, m: str, linears: dict[str, Any], layer: int, group: bool) -> str:
    """The path in a block that the name ``m`` stands for (``""``: the family has none, skipped in a group)."""
    hits = [n for n in linears if n == m or n.endswith("." + m)]
    alias = spec.module_path(m.rsplit(".", 1)[-1])
    if not hits and alias == "" and group:
        return ""
    if not hits and alias:
        hits = [n for n in linears if n == alias]
    if not hits:
        leaves = sorted({n.rsplit(".", 1)[-1] for n in linears} | set(linears))
        lacks = f" The {spec.name} family has no {m!r}." if alias == "" else ""
        raise UnknownNameError(
            f"No linear module named {m!r} in block {layer} of this {spec.name} model.{lacks}"
            f"{did_you_mean(m, leaves)} Linear modules of a block: {', '.join(sorted(linears))}."
        )
    if len(hits) > 1:
        raise ConfigError(f"The module name {m!r} is ambiguous in block {layer}: {hits}. Give the full path.")
    return hits[0]


def _check_fused(spec: Any, modules: Sequence[str]) -> None:
    """Refuse part of a fused projection: LoRA on Phi-3's qkv_proj for "q_proj" would also adapt k and v."""
    asked = {m.rsplit(".", 1)[-1] for m in modules}
    for name in sorted(asked):
        path = spec.module_path(name)
        parts = spec.fused_with(path) if path else ()
        if len(parts) > 1 and not set(parts) <= asked:
            raise ConfigError(
                f"The module {name!r} is part of the fused {spec.name} module {path!r} ({', '.join(parts)}); "
                f"adapting it adapts all of them. Ask for all of {list(parts)} or for {path.rsplit('.', 1)[-1]!r}."
            )


@validate_args(model=[_model_rule()], _example=_plain_example)
def is_adapted(model: Any) -> bool:
    """True when ``model`` is a peft model (has adapters that ``disable_adapter`` can switch off)."""
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def _strip_gguf_flag(model: Any) -> None:
    """A model loaded straight from a GGUF file is flagged quantised (its weights are fp32): clear it."""
    q = getattr(unwrap(model), "hf_quantizer", None)
    if q is not None and "gguf" in type(q).__name__.lower():
        from trustlab.llm.loading import _strip_quantizer

        _strip_quantizer(unwrap(model))


@validate_args(
    _example=_plain_example,
    model=[_model_rule()],
    layers=[LAYER_RULE],
    modules=[SequenceOf(str), str],
    r=[Interval(int, 1, None)],
    alpha=[Interval(float, 0, None, closed="neither")],
    dropout=[Interval(float, 0, 1, closed="left")],
    random_state=["random_state"],
)
def add_lora(
    model: Any,
    layers: Any = "top4",
    modules: Sequence[str] | str = ("q_proj", "k_proj", "v_proj", "o_proj"),
    *,
    r: int = 8,
    alpha: float = 16.0,
    dropout: float = 0.0,
    random_state: Any = 0,
) -> Any:
    """Add LoRA adapters (peft) to the chosen modules of the chosen blocks; returns the peft model.

    Parameters
    ----------
    model : causal LM
        Modified in place (peft injects the LoRA layers into its modules); use the returned wrapper.
    layers : "topK", "all", int or list of int, default="top4"
    modules : list of str or group name, default=("q_proj", "k_proj", "v_proj", "o_proj")
        Names relative to a block (suffixes such as ``"q_proj"`` or ``"mlp.down_proj"``) or a group of
        :data:`MODULE_GROUPS`.
    r : int, default=8
        LoRA rank.
    alpha : float, default=16
        LoRA scaling numerator (the update is scaled by ``alpha / r``).
    dropout : float in [0, 1), default=0
        LoRA dropout (drawn from the global torch RNG; :func:`trustlab.llm.train` seeds it per run).
    random_state : int, Generator or None, default=0
        Seeds the LoRA initialisation (``lora_A`` Kaiming-uniform, ``lora_B`` zero); global RNGs are
        left unchanged.

    Returns
    -------
    peft.PeftModelForCausalLM
        Only the LoRA parameters require grad.

    Raises
    ------
    ConfigError
        For a layer spec out of range (e.g. ``"top40"`` on a 30-block model) or an already adapted model.
    UnknownNameError
        For a module name that is not in the blocks ("did you mean").

    Examples
    --------
    >>> from trustlab.llm import tiny_random_llama
    >>> m = add_lora(tiny_random_llama(n_layers=4)[0], layers="top2", modules=["q_proj", "v_proj"], r=4)
    >>> adapter_layers(m)
    [2, 3]
    """
    peft = require("peft", purpose="LoRA adapters")
    if is_adapted(model):
        raise ConfigError(
            "add_lora got a model that already has peft adapters. Merge them first (merge_adapter) or load "
            "the base model again."
        )
    blocks = resolve_layers(model, layers)
    targets = resolve_modules(model, modules, blocks)  # all checks before peft touches the model
    _strip_gguf_flag(model)
    config = peft.LoraConfig(r=int(r), lora_alpha=float(alpha), lora_dropout=float(dropout),
                             target_modules=targets, task_type="CAUSAL_LM", bias="none",
                             fan_in_fan_out=arch_spec(model).conv1d)
    seed = as_seed(random_state)
    was_training = model.training
    try:
        with isolated_global_rng(seed), warnings.catch_warnings():
            # peft 0.21 calls a transformers method deprecated in 5.x; nothing for our users to act on
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            wrapped = peft.get_peft_model(model, config)
    except BaseException:
        _remove_lora_layers(model)
        raise
    wrapped.train(was_training)
    return wrapped


def _remove_lora_layers(model: Any) -> None:
    """Undo a partial injection: replace every peft LoRA layer by its base layer."""
    inner = unwrap(model)
    for name, mod in list(inner.named_modules()):
        base = getattr(mod, "base_layer", None)
        if base is not None and hasattr(mod, "lora_A"):
            parent = get_module(inner, name.rsplit(".", 1)[0]) if "." in name else inner
            setattr(parent, name.rsplit(".", 1)[-1], base)


@validate_args(model=[_model_rule()], _example=_plain_example)
def trainable_parameters(model: Any) -> dict[str, Any]:
    """``name -> parameter`` for the parameters that require grad (names of the plain model)."""
    return {_plain_name(n): p for n, p in unwrap(model).named_parameters() if p.requires_grad}


@validate_args(model=[_model_rule()], _example=_plain_example)
def adapter_layers(model: Any) -> list[int]:
    """Sorted block indices that hold trainable parameters."""
    return sorted({int(m.group(1)) for n in trainable_parameters(model) if (m := _LAYER.search(n))})


@validate_args(model=[_model_rule()], _example=_peft_example)
@contextlib.contextmanager
def reference_policy(model: Any) -> Iterator[Any]:
    """Run ``model`` with its adapters disabled (the base model: a free reference policy).

    Examples
    --------
    >>> from trustlab.llm import tiny_random_llama
    >>> m = add_lora(tiny_random_llama()[0], layers="all", r=2)
    >>> with reference_policy(m):
    ...     pass
    """
    if not is_adapted(model):
        raise ConfigError(
            "reference_policy needs a peft model (from add_lora or load_adapter); this model has no adapters "
            "to disable. Pass a separate reference model instead."
        )
    with model.disable_adapter():
        yield model


def _plain_name(name: str) -> str:
    return name.replace(".base_layer.", ".")


@validate_args(model=[_model_rule()], prefixes=[SequenceOf(str), None], _example=_plain_example)
def weights_fingerprint(model: Any, *, prefixes: Sequence[str] | None = None) -> str:
    """Content hash of the adapter-free weights of ``model`` (peft LoRA tensors excluded).

    Parameter names are those of the plain model (``.base_layer`` dropped), tied tensors count once, so a
    peft-wrapped model and its base give the same fingerprint. ``prefixes`` restricts the hash to
    parameters under those module paths (e.g. the embedding and the bottom blocks).
    """
    inner = unwrap(model)
    sd = inner.state_dict(keep_vars=True)
    seen: set[int] = set()
    parts: dict[str, Any] = {}
    for name in sorted(sd):
        if ".lora_" in name or "lora_magnitude" in name:
            continue
        plain = _plain_name(name)
        if prefixes is not None and not any(plain == p or plain.startswith(p + ".") for p in prefixes):
            continue
        t = sd[name]
        key = t.data_ptr() if t.numel() else id(t)
        if key in seen:
            continue
        seen.add(key)
        parts[plain] = t.detach()
    return content_hash({"weights": parts, "model_type": str(getattr(inner.config, "model_type", ""))})


def _atomic_dir(path: str | os.PathLike[str], write: Any) -> Path:
    """Fill a temp folder beside ``path`` with ``write(tmp)``, then move it into place."""
    dest = Path(path).expanduser()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        write(tmp)
        if dest.exists():
            remove_tree(dest)
        os.rename(tmp, dest)
    finally:
        if tmp.exists():
            remove_tree(tmp)
    return dest


_PATH_RULE = [str, os.PathLike]


@validate_args(_example=_peft_example, model=[_model_rule()], path=_PATH_RULE)
def save_adapter(model: Any, path: str | os.PathLike[str]) -> Path:
    """Save the adapters of a peft model to the folder ``path`` (peft format, safetensors), atomically.

    Returns the folder. An existing folder at ``path`` is replaced only once the new one is complete.
    """
    if not is_adapted(model):
        raise ConfigError("save_adapter needs a peft model (from add_lora or load_adapter).")
    return _atomic_dir(path, lambda tmp: model.save_pretrained(str(tmp), safe_serialization=True))


@validate_args(_example=_plain_example, model=[_model_rule()], path=_PATH_RULE, trainable=[Boolean()])
def load_adapter(model: Any, path: str | os.PathLike[str], *, trainable: bool = False) -> Any:
    """Load adapters saved by :func:`save_adapter` (or peft) onto the base ``model``; returns the peft model.

    Only safetensors weights are read (``adapter_model.safetensors``); a folder with pickled weights only
    is refused.
    """
    peft = require("peft", purpose="LoRA adapters")
    folder = Path(path).expanduser()
    if not (folder / "adapter_config.json").is_file():
        raise AssetNotFoundError(f"The folder {str(folder)!r} passed to load_adapter holds no adapter_config.json.")
    if not (folder / "adapter_model.safetensors").is_file():
        raise AssetNotFoundError(
            f"The folder {str(folder)!r} passed to load_adapter holds no adapter_model.safetensors (pickled "
            "adapter weights are not loaded)."
        )
    if is_adapted(model):
        raise ConfigError("load_adapter needs the base model; this one already has peft adapters.")
    _strip_gguf_flag(model)
    was_training = model.training
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        loaded = peft.PeftModel.from_pretrained(model, str(folder), is_trainable=bool(trainable))
    loaded.train(was_training)
    return loaded


@validate_args(_example=_peft_example, model=[_model_rule()], random_state=["random_state"], name_order=[Boolean()])
def reset_lora(model: Any, random_state: Any = 0, *, name_order: bool = False) -> None:
    """Put every LoRA adapter of ``model`` back to a fresh state, in place: ``lora_A`` Kaiming-uniform
    (``a = sqrt(5)``, peft's default), ``lora_B`` zero, so the adapted model equals its base model again.

    The draws come from a local ``torch.Generator`` seeded from ``random_state`` (global RNGs are left alone), in
    the order of ``model.named_parameters()``, or of the sorted parameter names with ``name_order=True``. The
    state is not bit-equal to :func:`add_lora`'s, whose initialisation runs through peft. A model without LoRA
    parameters is refused (never a silent no-op).
    """
    params = list(model.named_parameters())
    if not any("lora_A" in name for name, _ in params):
        raise ConfigError(f"reset_lora needs a model with LoRA adapters (add_lora). Got {type(model).__name__} "
                          "with no lora_A parameter.")
    seed = as_seed(random_state)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(params, key=lambda kv: kv[0]) if name_order else params:
            if "lora_A" in name:
                torch.nn.init.kaiming_uniform_(p, a=math.sqrt(5), generator=gen)
            elif "lora_B" in name:
                p.zero_()


@validate_args(_example=_peft_example, model=[_model_rule()])
def merge_adapter(model: Any) -> Any:
    """A merged copy of a peft model (base weights + LoRA update), as a plain causal LM.

    The peft model passed in is left unchanged. The copy shares the tokenizer attached by ``load_model``.
    """
    if not is_adapted(model):
        raise ConfigError("merge_adapter needs a peft model (from add_lora or load_adapter).")
    tok = getattr(unwrap(model), "trustlab_tokenizer", None)
    memo = {id(tok): tok} if tok is not None else {}
    merged = copy.deepcopy(model, memo).merge_and_unload()
    return merged


@validate_args(_example=_peft_example, model=[_model_rule()], path=_PATH_RULE, tokenizer=[Tokenizer(), None])
def save_merged(model: Any, path: str | os.PathLike[str], tokenizer: Any = None) -> Path:
    """Write the merged model (and ``tokenizer``, default the one ``load_model`` attached) as an HF folder
    of safetensors, atomically; :func:`trustlab.llm.load_model` can load it back."""
    merged = merge_adapter(model) if is_adapted(model) else model
    tok = tokenizer if tokenizer is not None else getattr(unwrap(model), "trustlab_tokenizer", None)

    def write(tmp: Path) -> None:
        merged.save_pretrained(str(tmp), safe_serialization=True)
        if tok is not None:
            tok.save_pretrained(str(tmp))

    return _atomic_dir(path, write)
