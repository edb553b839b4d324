"""The architecture table: one :class:`ArchSpec` per model family, the only family-specific facts in trustlab.llm.

Every mechanism (hook sites, head slicing, prefix replay, LoRA targets, the model edits built on them) reads
its module paths from here. Adding a family is one ``ArchSpec`` entry in :data:`ARCHITECTURES` plus a tiny
random config in ``tests/llm/test_families.py``. A family that is not listed can still be used through
:func:`trustlab.llm.sites.use_generic_sites`, which derives a spec from the standard module names and keeps
it only when a self-check on the model passes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["ARCHITECTURES", "ArchSpec", "LAYER_RE", "derive_spec"]

#: canonical projection names (llama's), the names LoRA targets and module groups are written in
CANONICAL_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


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
        rotary-embedding module (``""`` for absolute position embeddings).
    attn, o_proj : str
        Paths relative to one decoder layer of the attention module and of its output projection (whose
        input is the concatenation of the heads, ``[B, T, n_heads * d_head]``).
    attn_out, mlp_out : tuple of (str, int or None)
        Module (relative to a layer) whose *output* is the branch added to the residual stream, and the
        index of the tensor in a tuple output (``None`` when the output is a tensor).
    resid_mid : str
        Module (relative to a layer) whose *input* is the residual stream after the attention branch.
    pos_embed : str
        Learned absolute position embedding added to the token embedding (GPT-2's ``wpe``; ``""``: none).
    embed_out : str
        Module whose output is the residual stream entering block 0 (``""``: the token embedding; GPT-2
        adds position embeddings first, so there it is the dropout after the sum).
    positions : {"rotary", "rotary_per_type", "absolute"}
        How blocks get positions: one rotary embedding for all layers, one per ``config.layer_types``
        entry (Gemma 3), or none (added to the embedding, GPT-2).
    masks : {"full", "layer_types", "sliding_window"}
        Which attention masks the blocks get: one causal mask; one per ``config.layer_types`` entry
        (Gemma 3, Qwen2/3); or a sliding-window mask when ``config.sliding_window`` is set (Mistral, Phi-3).
    aliases : tuple of (str, str)
        Canonical projection name (``q_proj`` ... ``down_proj``) -> its path relative to a layer, for families
        that name or fuse them differently. Several canonical names with one path are one fused module
        (adapting one adapts all); an empty path means the family has no such module.
    conv1d : bool
        Projections are ``transformers.Conv1D`` (weight ``[in, out]``; LoRA needs ``fan_in_fan_out``).
    """

    name: str
    model_types: tuple[str, ...]
    layers: str = "model.layers"
    embed: str = "model.embed_tokens"
    final_norm: str = "model.norm"
    lm_head: str = "lm_head"
    rotary: str = "model.rotary_emb"
    attn: str = "self_attn"
    o_proj: str = "self_attn.o_proj"
    attn_out: tuple[str, int | None] = ("self_attn", 0)
    mlp_out: tuple[str, int | None] = ("mlp", None)
    resid_mid: str = "post_attention_layernorm"
    pos_embed: str = ""
    embed_out: str = ""
    positions: str = "rotary"
    masks: str = "full"
    aliases: tuple[tuple[str, str], ...] = ()
    conv1d: bool = False

    @property
    def bottom(self) -> tuple[str, ...]:
        """Modules below block 0 (their parameters change the residual stream entering it)."""
        return tuple(p for p in (self.embed, self.pos_embed) if p)

    @property
    def embed_site(self) -> str:
        """Path of the module whose output is the ``embed`` site (the residual stream entering block 0)."""
        return self.embed_out or self.embed

    def module_path(self, canonical: str) -> str | None:
        """Path (relative to a layer) of a canonical projection, ``""`` if the family has none, None if unmapped."""
        return dict(self.aliases).get(canonical)

    def translate(self, names: tuple[str, ...] | list[str]) -> list[str]:
        """Module names in this family's terms: canonical leaves through :attr:`aliases`, others unchanged."""
        out = []
        for n in names:
            alias = self.module_path(n.rsplit(".", 1)[-1])
            if alias != "":
                out.append(n if alias is None else alias)
        return list(dict.fromkeys(out))

    def fused_with(self, path: str) -> tuple[str, ...]:
        """Canonical names that share the module ``path`` (more than one for a fused projection)."""
        return tuple(c for c, p in self.aliases if p == path)


LLAMA = ArchSpec(name="llama", model_types=("llama",))

# Gemma 3 normalises each branch *after* the sublayer (post_attention_layernorm / post_feedforward_layernorm)
# before adding it to the residual stream, so the branch outputs are the outputs of those norms.
GEMMA3 = ArchSpec(
    name="gemma3",
    model_types=("gemma3_text",),
    attn_out=("post_attention_layernorm", None),
    mlp_out=("post_feedforward_layernorm", None),
    resid_mid="pre_feedforward_layernorm",
    positions="rotary_per_type",
    masks="layer_types",
)

# Qwen2/2.5 and Qwen3 (q/k norms inside attention) are llama-shaped; their layers may mix sliding and full
# attention (config.layer_types), with one rotary embedding.
QWEN2 = ArchSpec(name="qwen2", model_types=("qwen2",), masks="layer_types")
QWEN3 = ArchSpec(name="qwen3", model_types=("qwen3",), masks="layer_types")
MISTRAL = ArchSpec(name="mistral", model_types=("mistral",), masks="sliding_window")

# Phi-3 fuses q/k/v into qkv_proj and gate/up into gate_up_proj.
PHI3 = ArchSpec(
    name="phi3",
    model_types=("phi3",),
    masks="sliding_window",
    aliases=(("q_proj", "self_attn.qkv_proj"), ("k_proj", "self_attn.qkv_proj"), ("v_proj", "self_attn.qkv_proj"),
             ("o_proj", "self_attn.o_proj"), ("gate_proj", "mlp.gate_up_proj"), ("up_proj", "mlp.gate_up_proj"),
             ("down_proj", "mlp.down_proj")),
)

# GPT-2: fused c_attn (q, k, v), Conv1D projections, learned absolute positions added before block 0,
# LayerNorm ln_2 before the MLP, no gate projection.
GPT2 = ArchSpec(
    name="gpt2",
    model_types=("gpt2",),
    layers="transformer.h",
    embed="transformer.wte",
    pos_embed="transformer.wpe",
    embed_out="transformer.drop",
    final_norm="transformer.ln_f",
    rotary="",
    attn="attn",
    o_proj="attn.c_proj",
    attn_out=("attn", 0),
    resid_mid="ln_2",
    positions="absolute",
    aliases=(("q_proj", "attn.c_attn"), ("k_proj", "attn.c_attn"), ("v_proj", "attn.c_attn"),
             ("o_proj", "attn.c_proj"), ("gate_proj", ""), ("up_proj", "mlp.c_fc"), ("down_proj", "mlp.c_proj")),
    conv1d=True,
)

#: model_type -> ArchSpec. Add an architecture by adding one entry (and its test in tests/llm/test_families.py).
ARCHITECTURES: dict[str, ArchSpec] = {
    t: spec for spec in (LLAMA, GEMMA3, QWEN2, QWEN3, MISTRAL, PHI3, GPT2) for t in spec.model_types
}

#: the block index in a parameter or module name, for every layer-list name in the table
LAYER_RE = re.compile(
    r"(?:^|\.)(?:" + "|".join(sorted({re.escape(s.layers.rsplit(".", 1)[-1]) for s in ARCHITECTURES.values()}))
    + r")\.(\d+)\."
)

# ------------------------------------------------------------------------------ generic derivation
# Candidates tried in order when deriving a spec for an unlisted family from the standard module names.
_CANDIDATES: dict[str, tuple[str, ...]] = {
    "layers": ("model.layers", "transformer.h", "model.decoder.layers", "gpt_neox.layers", "transformer.layers"),
    "embed": ("model.embed_tokens", "transformer.wte", "model.decoder.embed_tokens", "gpt_neox.embed_in"),
    "final_norm": ("model.norm", "transformer.ln_f", "model.decoder.final_layer_norm", "gpt_neox.final_layer_norm"),
    "lm_head": ("lm_head", "embed_out"),
    "attn": ("self_attn", "attn", "attention"),
    "o_proj": ("o_proj", "c_proj", "dense", "out_proj"),
    "mlp": ("mlp", "feed_forward"),
    "resid_mid": ("post_attention_layernorm", "ln_2", "pre_feedforward_layernorm"),
}


def _first(obj: Any, paths: tuple[str, ...]) -> str | None:
    for p in paths:
        cur = obj
        try:
            for part in p.split("."):
                cur = cur[int(part)] if part.isdigit() else getattr(cur, part)
        except (AttributeError, IndexError, TypeError):
            continue
        return p
    return None


def derive_spec(model: Any) -> tuple[ArchSpec | None, list[str]]:
    """``(spec, missing)``: a llama-shaped spec from the standard module names, or None and what was not found.

    The spec is not checked here; :func:`trustlab.llm.sites.use_generic_sites` runs the self-check.
    """
    found = {k: _first(model, v) for k, v in _CANDIDATES.items() if k in ("layers", "embed", "final_norm", "lm_head")}
    missing = [f"{k} (tried {', '.join(_CANDIDATES[k])})" for k, v in found.items() if v is None]
    if found["layers"] is not None:
        block = model
        for part in (found["layers"] + ".0").split("."):
            block = block[int(part)] if part.isdigit() else getattr(block, part)
        inner = {k: _first(block, _CANDIDATES[k]) for k in ("attn", "mlp", "resid_mid")}
        attn = inner["attn"]
        o_proj = _first(getattr(block, attn), _CANDIDATES["o_proj"]) if attn else None
        inner["o_proj"] = f"{attn}.{o_proj}" if o_proj else None
        missing += [f"blocks.0.{k} (tried {', '.join(_CANDIDATES[k])})" for k, v in inner.items() if v is None]
    if missing:
        return None, missing
    rotary = _first(model, (found["layers"].rsplit(".", 1)[0] + ".rotary_emb",)) or ""
    config = getattr(model, "config", None)
    spec = replace(
        LLAMA, name=f"generic:{getattr(config, 'model_type', type(model).__name__)}",
        model_types=(str(getattr(config, "model_type", "")),), layers=found["layers"], embed=found["embed"],
        final_norm=found["final_norm"], lm_head=found["lm_head"], rotary=rotary, attn=inner["attn"],
        o_proj=inner["o_proj"], attn_out=(inner["attn"], 0), mlp_out=(inner["mlp"], None),
        resid_mid=inner["resid_mid"], positions="rotary" if rotary else "absolute",
        masks="layer_types" if getattr(config, "layer_types", None) else "full",
    )
    return spec, []
