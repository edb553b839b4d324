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
from trustlab.core.constraints import InstanceOf, Interval
from trustlab.core.exceptions import InputError, UnknownNameError, UnsupportedModelError, did_you_mean
from trustlab.llm._architectures import ARCHITECTURES, ArchSpec, derive_spec
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
    "use_generic_sites",
]

#: Site kinds that exist once per block, in forward order.
BLOCK_KINDS = ("resid_pre", "attn_out", "head_out", "pattern", "resid_mid", "mlp_out", "resid_post")
#: Site kinds that exist once per model.
GLOBAL_KINDS = ("embed", "logits")
#: Sites whose hook is an observation point only (editing them would not change the forward).
CAPTURE_ONLY = ("resid_mid", "pattern")


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
    """The :class:`ArchSpec` for ``model`` or :class:`UnsupportedModelError` saying what is missing.

    A spec attached by :func:`use_generic_sites` wins over the table.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> arch_spec(tiny_random_llama()[0]).name
    'llama'
    """
    inner = unwrap(model)
    attached = getattr(inner, "trustlab_arch_spec", None)
    if isinstance(attached, ArchSpec):
        return attached
    config = getattr(inner, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in ARCHITECTURES:
        raise UnsupportedModelError(_unsupported_message(inner, model_type))
    spec = ARCHITECTURES[model_type]
    if not _has_path(inner, spec.lm_head) or not _has_path(inner, spec.layers):
        raise UnsupportedModelError(
            f"trustlab.llm needs a causal-LM model (e.g. {type(inner).__name__.replace('Model', 'ForCausalLM')})"
            f" with '{spec.layers}' and '{spec.lm_head}'. Got {type(inner).__name__} instead; load it with "
            "AutoModelForCausalLM or trustlab.llm.load_model."
        )
    return spec


def _unsupported_message(inner: Any, model_type: Any) -> str:
    supported = ", ".join(sorted(ARCHITECTURES))
    got = f"model_type {model_type!r} ({type(inner).__name__})" if model_type else (
        f"an object of type {type(inner).__name__}")
    _, missing = derive_spec(inner)
    if missing:
        why = " Deriving sites from the standard module names fails: not found " + "; ".join(missing) + "."
    else:
        why = (" Its module names look standard: trustlab.llm.use_generic_sites(model) derives the sites and "
               "keeps them if a self-check passes.")
    return (
        f"trustlab.llm hook sites support the architectures [{supported}]. Got {got} instead.{why} "
        "To support it, add one ArchSpec entry to ARCHITECTURES in trustlab/llm/_architectures.py "
        "(and its tiny config to tests/llm/test_families.py)."
    )


@validate_args(model=[_MODULE], atol=[Interval("real", 0, None)])
def use_generic_sites(model: Any, *, atol: float = 1e-5) -> ArchSpec:
    """Derive an :class:`ArchSpec` for an unlisted family from standard module names, self-check it, attach it.

    The self-check runs one forward on a few token ids and requires the ``embed`` site and every block's
    ``resid_pre`` to equal ``output_hidden_states`` within ``atol``, and ``blocks.{i}.resid_post`` to equal
    the next block's input. Only then is the spec stored on the model (``model.trustlab_arch_spec``; nothing
    global changes) and used by every trustlab.llm function. Families in the table need no call.

    Raises
    ------
    UnsupportedModelError
        Listing the modules that were not found, or the site whose check failed.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> use_generic_sites(tiny_random_llama()[0]).name
    'generic:llama'
    """
    import torch

    inner = unwrap(model)
    spec, missing = derive_spec(inner)
    if spec is None:
        raise UnsupportedModelError(
            f"use_generic_sites cannot derive hook sites for {type(inner).__name__}: not found "
            + "; ".join(missing) + ". Add an ArchSpec to ARCHITECTURES in trustlab/llm/_architectures.py."
        )
    previous = getattr(inner, "trustlab_arch_spec", None)
    inner.trustlab_arch_spec = spec
    try:
        bad = _self_check(inner, spec, float(atol), torch)
    except Exception as exc:  # noqa: BLE001 - any failure of the derived sites is a failed check
        bad = f"the checking forward raised {type(exc).__name__}: {exc}"
    if bad is not None:
        if previous is None:
            del inner.trustlab_arch_spec
        else:
            inner.trustlab_arch_spec = previous
        raise UnsupportedModelError(
            f"The generic hook sites derived for {type(inner).__name__} fail the self-check: {bad}. "
            "Add an ArchSpec to ARCHITECTURES in trustlab/llm/_architectures.py instead."
        )
    return spec


def _self_check(inner: Any, spec: ArchSpec, atol: float, torch: Any) -> str | None:
    from trustlab.llm.hooks import trace

    n = dims(inner).n_layers
    names = ["embed"] + [f"blocks.{i}.{k}" for i in range(n) for k in ("resid_pre", "resid_post")]
    ids = torch.arange(3, 9, device=model_device(inner))[None] % max(dims(inner).vocab, 1)
    with torch.no_grad(), trace(inner, names) as tr:
        hs = inner(ids, output_hidden_states=True).hidden_states
    pairs = [("embed", hs[0])] + [(f"blocks.{i}.resid_pre", hs[i]) for i in range(n)]
    pairs += [(f"blocks.{i}.resid_post", tr[f"blocks.{i + 1}.resid_pre"]) for i in range(n - 1)]
    for name, want in pairs:
        got = tr[name]
        if got.shape != want.shape or float((got - want).abs().max()) > atol:
            return f"site {name!r} differs from output_hidden_states"
    return None


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


def embed_states(model: Any, input_ids: Any, position_ids: Any) -> Any:
    """The residual stream entering block 0 (``output_hidden_states[0]``) for ``input_ids`` at ``position_ids``.

    The token embedding's output, plus the position embedding and the dropout after the sum where the family
    has them (GPT-2).
    """
    inner = unwrap(model)
    spec = arch_spec(inner)
    h = get_module(inner, spec.embed)(input_ids)
    if spec.pos_embed:
        h = h + get_module(inner, spec.pos_embed)(position_ids)
    return get_module(inner, spec.embed_out)(h) if spec.embed_out else h


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
        d_mlp=int(getattr(cfg, "intermediate_size", None) or getattr(cfg, "n_inner", None) or 4 * cfg.hidden_size),
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
        return Site(name, "embed", None, spec.embed_site, "forward", None, True)
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


def head_weight(model: Any, layer: int, head: int) -> Any:
    """The ``[d_model, d_head]`` block of the attention output projection that maps one head's output.

    ``o_proj(x)`` adds ``head_weight @ x_head`` for each head (``Conv1D`` families store the transpose).
    """
    inner = unwrap(model)
    spec, d = arch_spec(inner), dims(inner)
    w = get_module(inner, f"{spec.layers}.{layer}.{spec.o_proj}").weight
    cols = slice(head * d.d_head, (head + 1) * d.d_head)
    return w[cols, :].T if spec.conv1d else w[:, cols]


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
