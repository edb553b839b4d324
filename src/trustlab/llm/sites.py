"""Canonical hook sites on the real Hugging Face model, one table per architecture.

Names follow TransformerLens (``embed``, ``blocks.{i}.resid_pre``, ``blocks.{i}.attn_out``,
``blocks.{i}.head_out``, ``blocks.{i}.mlp_out``, ``blocks.{i}.resid_post``, ``logits``) but every site
is a plain forward or forward-pre hook on a module of the unmodified HF model, so numerics are exactly
the library's. Two capture-only extras are provided: ``blocks.{i}.resid_mid`` (the residual stream
between attention and MLP) and ``blocks.{i}.pattern`` (attention weights, needs
``attn_implementation="eager"``).

Shapes (batch ``B``, sequence ``T``): ``[B, T, d_model]`` for residual-stream sites, ``[B, T, n_heads,
d_head]`` for ``head_out`` (the per-head slice of the input of ``o_proj``; grouped-query attention only
shares K/V, so there are ``n_heads`` query heads), ``[B, n_heads, T, T]`` for ``pattern`` and
``[B, T_kept, vocab]`` for ``logits`` (the causal LM's returned logits, after Gemma's soft-capping; a
forward hook on the model itself). ``resid_pre`` of block 0 is the embedding output; ``resid_post`` of
block ``i < L - 1`` equals ``output_hidden_states[i + 1]``, while ``output_hidden_states[L]`` is after the
final norm.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf
from trustlab.core.exceptions import InputError, UnknownNameError, UnsupportedModelError, did_you_mean
from trustlab.llm.rules import TorchModule

_MODULE = TorchModule()

__all__ = [
    "arch_spec",
    "base_model",
    "dims",
    "get_module",
    "resolve_site",
    "resolve_sites",
    "site_names",
    "unwrap",
]

#: Site kinds that exist once per block, in forward order.
BLOCK_KINDS = ("resid_pre", "attn_out", "head_out", "pattern", "resid_mid", "mlp_out", "resid_post")
#: Site kinds that exist once per model.
GLOBAL_KINDS = ("embed", "logits")
#: Sites whose hook is an observation point only (editing them would not change the forward).
CAPTURE_ONLY = ("resid_mid", "pattern")


@dataclass(frozen=True)
class ArchSpec:
    """Where the canonical sites live in one architecture (paths relative to the causal-LM module).

    Parameters
    ----------
    name : str
        Architecture name used in messages.
    model_types : tuple of str
        ``config.model_type`` values this spec covers.
    layers, embed, final_norm, lm_head, rotary : str
        Dotted paths of the decoder-layer list, the token embedding, the final norm, the LM head and the
        rotary-embedding module.
    attn, o_proj : str
        Paths relative to one decoder layer of the attention module and of its output projection.
    attn_out, mlp_out : tuple of (str, int or None)
        Module (relative to a layer) whose *output* is the branch added to the residual stream, and the
        index of the tensor in a tuple output (``None`` when the output is a tensor).
    resid_mid : str
        Module (relative to a layer) whose *input* is the residual stream after the attention branch.
    sliding_layers : bool
        True when layers alternate full and sliding-window attention (``config.layer_types``).
    """

    name: str
    model_types: tuple[str, ...]
    layers: str
    embed: str
    final_norm: str
    lm_head: str
    rotary: str
    attn: str
    o_proj: str
    attn_out: tuple[str, int | None]
    mlp_out: tuple[str, int | None]
    resid_mid: str
    sliding_layers: bool = False


LLAMA = ArchSpec(
    name="llama",
    model_types=("llama",),
    layers="model.layers",
    embed="model.embed_tokens",
    final_norm="model.norm",
    lm_head="lm_head",
    rotary="model.rotary_emb",
    attn="self_attn",
    o_proj="self_attn.o_proj",
    attn_out=("self_attn", 0),
    mlp_out=("mlp", None),
    resid_mid="post_attention_layernorm",
)

# Gemma 3 normalises each branch *after* the sublayer (post_attention_layernorm / post_feedforward_layernorm)
# before adding it to the residual stream, so the branch outputs are the outputs of those norms.
GEMMA3 = ArchSpec(
    name="gemma3",
    model_types=("gemma3_text",),
    layers="model.layers",
    embed="model.embed_tokens",
    final_norm="model.norm",
    lm_head="lm_head",
    rotary="model.rotary_emb",
    attn="self_attn",
    o_proj="self_attn.o_proj",
    attn_out=("post_attention_layernorm", None),
    mlp_out=("post_feedforward_layernorm", None),
    resid_mid="pre_feedforward_layernorm",
    sliding_layers=True,
)

#: model_type -> ArchSpec. Add an architecture by adding one entry.
ARCHITECTURES: dict[str, ArchSpec] = {t: spec for spec in (LLAMA, GEMMA3) for t in spec.model_types}


@dataclass(frozen=True)
class Dims:
    """Sizes of a decoder-only model."""

    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_model: int
    d_head: int
    d_mlp: int
    vocab: int
    n_ctx: int


@dataclass(frozen=True)
class Site:
    """A resolved canonical site.

    Attributes
    ----------
    name : str
        Canonical name, e.g. ``"blocks.3.head_out"``.
    kind : str
        ``embed``, ``logits`` or one of the block kinds.
    layer : int or None
        Block index (None for ``embed`` and ``logits``).
    module_path : str
        Dotted path of the hooked module, relative to the causal-LM module.
    hook : str
        ``"forward"`` (the module's output) or ``"pre"`` (the module's first input).
    index : int or None
        Position of the tensor in a tuple output (forward hooks only).
    editable : bool
        Whether an edit at this site changes the forward.
    """

    name: str
    kind: str
    layer: int | None
    module_path: str
    hook: str
    index: int | None
    editable: bool


@validate_args(model=[_MODULE])
def unwrap(model: Any) -> Any:
    """Return the causal-LM module inside a PEFT wrapper (or the model itself).

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> m, _ = tiny_random_llama()
    >>> unwrap(m) is m
    True
    """
    seen = 0
    while seen < 4 and hasattr(model, "get_base_model") and callable(model.get_base_model):
        inner = model.get_base_model()
        if inner is model:
            break
        model, seen = inner, seen + 1
    return model


@validate_args(model=[_MODULE])
def arch_spec(model: Any) -> ArchSpec:
    """The :class:`ArchSpec` for ``model`` or :class:`UnsupportedModelError` listing supported ones.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> arch_spec(tiny_random_llama()[0]).name
    'llama'
    """
    inner = unwrap(model)
    config = getattr(inner, "config", None)
    model_type = getattr(config, "model_type", None)
    supported = ", ".join(sorted(ARCHITECTURES))
    if model_type not in ARCHITECTURES:
        got = f"model_type {model_type!r}" if model_type else f"an object of type {type(model).__name__}"
        raise UnsupportedModelError(
            f"trustlab.llm hook sites support the architectures [{supported}]. Got {got} instead. "
            "Add an ArchSpec to trustlab.llm.sites.ARCHITECTURES to support it."
        )
    spec = ARCHITECTURES[model_type]
    if not hasattr(inner, "lm_head") or not _has_path(inner, spec.layers):
        raise UnsupportedModelError(
            f"trustlab.llm needs a causal-LM model (e.g. {type(inner).__name__.replace('Model', 'ForCausalLM')})"
            f" with '{spec.layers}' and 'lm_head'. Got {type(inner).__name__} instead; load it with "
            "AutoModelForCausalLM or trustlab.llm.load_model."
        )
    return spec


def _has_path(obj: Any, path: str) -> bool:
    try:
        get_module(obj, path)
    except AttributeError:
        return False
    return True


@validate_args(model=[_MODULE], path=[InstanceOf(str)])
def get_module(model: Any, path: str) -> Any:
    """Return the submodule at dotted ``path`` (integers index module lists).

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> type(get_module(tiny_random_llama()[0], "model.layers.0.mlp")).__name__
    'LlamaMLP'
    """
    obj = model
    for part in path.split(".") if path else []:
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


def model_device(model: Any) -> Any:
    """The device of ``model``'s first parameter (inputs are moved there)."""
    for p in unwrap(model).parameters():
        return p.device
    return "cpu"


@validate_args(model=[_MODULE])
def base_model(model: Any) -> Any:
    """The decoder stack (``model.model``) of a causal LM: embeddings, layers and final norm, no head."""
    inner = unwrap(model)
    spec = arch_spec(inner)
    return get_module(inner, spec.layers.rsplit(".", 1)[0])


@validate_args(model=[_MODULE])
def dims(model: Any) -> Dims:
    """Sizes of ``model`` read from its config.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> d = dims(tiny_random_llama()[0]); (d.n_layers, d.n_heads, d.n_kv_heads, d.d_head)
    (2, 9, 3, 8)
    """
    cfg = unwrap(model).config
    cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    n_heads = int(cfg.num_attention_heads)
    d_head = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    return Dims(
        n_layers=int(cfg.num_hidden_layers),
        n_heads=n_heads,
        n_kv_heads=int(getattr(cfg, "num_key_value_heads", None) or n_heads),
        d_model=int(cfg.hidden_size),
        d_head=int(d_head),
        d_mlp=int(cfg.intermediate_size),
        vocab=int(cfg.vocab_size),
        n_ctx=int(getattr(cfg, "max_position_embeddings", 0) or 0),
    )


@validate_args(model=[_MODULE], kinds=[SequenceOf(InstanceOf(str)), None])
def site_names(model: Any, kinds: tuple[str, ...] | None = None) -> list[str]:
    """Every canonical site name of ``model`` in forward order (optionally only some kinds).

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> site_names(tiny_random_llama()[0], kinds=("resid_post",))
    ['blocks.0.resid_post', 'blocks.1.resid_post']
    """
    n_layers = dims(model).n_layers
    kinds_set = set(kinds) if kinds is not None else set(BLOCK_KINDS + GLOBAL_KINDS)
    names = ["embed"] if "embed" in kinds_set else []
    for i in range(n_layers):
        names += [f"blocks.{i}.{k}" for k in BLOCK_KINDS if k in kinds_set]
    if "logits" in kinds_set:
        names.append("logits")
    return names


_BLOCK_RE = re.compile(r"^blocks\.(-?\d+)\.([a-z_]+)$")


@validate_args(model=[_MODULE], name=[InstanceOf(str)])
def resolve_site(model: Any, name: str) -> Site:
    """Resolve a canonical site name on ``model``.

    Raises
    ------
    UnknownNameError
        For an unknown site (with a "did you mean").
    InputError
        For a layer index out of range.
    UnsupportedModelError
        For an architecture not in :data:`ARCHITECTURES`.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> s = resolve_site(tiny_random_llama()[0], "blocks.1.head_out")
    >>> (s.module_path, s.hook)
    ('model.layers.1.self_attn.o_proj', 'pre')
    """
    spec = arch_spec(model)
    if not isinstance(name, str):
        raise UnknownNameError(
            f"A hook site must be a str such as 'blocks.0.resid_post'. Got {type(name).__name__} {name!r} instead."
        )
    if name == "embed":
        return Site(name, "embed", None, spec.embed, "forward", None, True)
    if name == "logits":  # the causal LM's own output: after any final soft-capping (Gemma)
        return Site(name, "logits", None, "", "forward", None, True)
    match = _BLOCK_RE.match(name)
    if match is None or match.group(2) not in BLOCK_KINDS:
        choices = site_names(model)
        hint = did_you_mean(name, choices)
        if not hint and match is None:
            hint = " Block sites look like 'blocks.{i}.<kind>' with kind in " + ", ".join(BLOCK_KINDS) + "."
        raise UnknownNameError(
            f"Unknown hook site {name!r} for the {spec.name} architecture.{hint} "
            "List them with trustlab.llm.site_names(model)."
        )
    layer, kind = int(match.group(1)), match.group(2)
    n_layers = dims(model).n_layers
    if not 0 <= layer < n_layers:
        raise InputError(
            f"The layer index of hook site {name!r} must be an int in [0, {n_layers - 1}]. "
            f"Got {layer} instead."
        )
    prefix = f"{spec.layers}.{layer}"
    if kind == "resid_pre":
        return Site(name, kind, layer, prefix, "pre", None, True)
    if kind == "resid_post":
        return Site(name, kind, layer, prefix, "forward", 0, True)
    if kind == "head_out":
        return Site(name, kind, layer, f"{prefix}.{spec.o_proj}", "pre", None, True)
    if kind == "attn_out":
        return Site(name, kind, layer, f"{prefix}.{spec.attn_out[0]}", "forward", spec.attn_out[1], True)
    if kind == "mlp_out":
        return Site(name, kind, layer, f"{prefix}.{spec.mlp_out[0]}", "forward", spec.mlp_out[1], True)
    if kind == "resid_mid":
        return Site(name, kind, layer, f"{prefix}.{spec.resid_mid}", "pre", None, False)
    # pattern: second element of the attention module's output (None unless eager attention)
    return Site(name, kind, layer, f"{prefix}.{spec.attn}", "forward", 1, False)


@validate_args(model=[_MODULE], names=[InstanceOf(str), SequenceOf(InstanceOf(str), min_len=0)])
def resolve_sites(model: Any, names: str | list[str] | tuple[str, ...]) -> list[Site]:
    """Resolve several sites (a single str is accepted); duplicates are dropped, order kept."""
    if isinstance(names, str):
        names = [names]
    out: list[Site] = []
    seen: set[str] = set()
    for n in names:
        if n not in seen:
            out.append(resolve_site(model, n))
            seen.add(n)
    return out


def check_head(model: Any, head: int, *, owner: str = "head index") -> int:
    """Validate a head index against ``dims(model).n_heads`` (InputError with the template message)."""
    n_heads = dims(model).n_heads
    if isinstance(head, bool) or not isinstance(head, int | _np_integer()) or not 0 <= int(head) < n_heads:
        raise InputError(f"The {owner} must be an int in [0, {n_heads - 1}]. Got {head!r} instead.")
    return int(head)


def check_layer(model: Any, layer: int, *, owner: str = "layer index") -> int:
    """Validate a layer index against ``dims(model).n_layers`` (InputError with the template message)."""
    n_layers = dims(model).n_layers
    if (
        isinstance(layer, bool)
        or not isinstance(layer, int | _np_integer())
        or not 0 <= int(layer) < n_layers
    ):
        raise InputError(f"The {owner} must be an int in [0, {n_layers - 1}]. Got {layer!r} instead.")
    return int(layer)


def _np_integer() -> type:
    import numpy as np

    return np.integer
