"""Antidote's pieces as pure functions: prune targets, calibration input norms, Wanda scores, per-row mask.

Code-exact to ``git-disl/Antidote`` (``utils.prune_wanda_outlier``): the statistic of a linear layer is
``scaler_row[j] = sum over calibration tokens of X[:, j]**2 / n_sequences`` (accumulated in float32), the
Wanda score is ``|W_ij| * sqrt(scaler_row[j])``, and the harmful mask marks, within each output row, the
``int(in_features * dense_ratio)`` columns with the highest score.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import Boolean, Interval, Options, Satisfies
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.optional import require
from trustlab.llm._architectures import LAYER_RE
from trustlab.llm.adapters import LAYER_RULE

torch = require("torch", purpose="Antidote pruning")

__all__ = ["prune_targets", "collect_input_norms", "wanda_scores", "row_topk_mask"]

_LAYER = LAYER_RE  # the block index in a module name, for every family in trustlab.llm's table
_RATIO = [Interval("real", 0, 1, closed="neither")]
_MODULE = [Satisfies(lambda m: isinstance(m, torch.nn.Module), "a torch model", invalid=["not-a-model"])]


def _toy() -> Any:
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def _layer_of(name: str) -> int | None:
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def _resolve_layers(model: Any, layers: Any) -> set[int] | None:
    if layers is None:
        return None
    from trustlab.llm import resolve_layers
    from trustlab.llm.sites import unwrap

    return set(resolve_layers(unwrap(model), layers))


def _family_names(model: Any, modules: Sequence[str]) -> list[str]:
    """Canonical names (``q_proj``...) in the LLM family's terms (GPT-2's fused ``attn.c_attn``); others as given."""
    from trustlab.core.exceptions import UnsupportedModelError
    from trustlab.llm.sites import arch_spec

    try:
        spec = arch_spec(model)
    except UnsupportedModelError:  # not a causal LM of the table (e.g. a Sequential): names are module paths
        return list(modules)
    return spec.translate(list(modules))


def _matches(name: str, modules: Sequence[str]) -> bool:
    return any(name == m or name.endswith("." + m) for m in modules)


def _lora_targets(model: Any, modules: Sequence[str], keep: set[int] | None) -> dict[str, Any]:
    wrappers = [(n, m) for n, m in model.named_modules() if isinstance(getattr(m, "lora_A", None), torch.nn.ModuleDict)]
    if not wrappers or not any(len(m.lora_A) for _, m in wrappers):
        raise ConfigError("scope='lora' needs a model with peft LoRA adapters (lora_A / lora_B modules); this model "
                          "has none (a plain or merged model? use scope='merged' with module names).")
    out: dict[str, Any] = {}
    for name, mod in wrappers:
        if not _matches(name, modules) or (keep is not None and _layer_of(name) not in keep):
            continue
        for key in mod.lora_A:
            out[f"{name}.lora_A.{key}"] = mod.lora_A[key]
            out[f"{name}.lora_B.{key}"] = mod.lora_B[key]
    if not out:
        raise ConfigError(f"No LoRA module matches modules={list(modules)} (layers {sorted(keep) if keep else 'all'}); "
                          f"adapted modules: {[n for n, _ in wrappers][:6]}... Nothing would be pruned.")
    return out


def _merged_targets(model: Any, modules: Sequence[str], keep: set[int] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, mod in model.named_modules():
        if "lora_" in name or not _matches(name, modules) or (keep is not None and _layer_of(name) not in keep):
            continue
        mod = getattr(mod, "base_layer", mod)  # a peft-wrapped layer: its base weight
        if type(mod).__name__ == "Conv1D":  # GPT-2: weight [in, out], the per-row Wanda mask would be transposed
            raise ConfigError(f"scope='merged' cannot prune {name!r}: it is a transformers Conv1D (GPT-2 style, weight "
                              "[in, out]) and Wanda's per-output-row mask needs a Linear. Use scope='lora'.")
        w = getattr(mod, "weight", None)
        if isinstance(w, torch.Tensor) and w.ndim == 2:
            out[name] = mod
    if not out:
        raise ConfigError(f"No module with a 2-d weight matches modules={list(modules)} (layers "
                          f"{sorted(keep) if keep else 'all'}) in this {type(model).__name__}. Nothing would be pruned.")
    return out


@validate_args(_example=lambda: {"model": _toy(), "modules": ["0"]}, model=_MODULE,
               scope=[Options(("lora", "merged"))], modules=[SequenceOf(str)], layers=[None, LAYER_RULE])
def prune_targets(model: Any, scope: str = "lora", modules: Sequence[str] = ("q_proj", "k_proj", "v_proj"),
                  layers: Any = None) -> dict[str, Any]:
    """``name -> linear module`` whose weight the prune edits.

    ``scope="lora"``: the ``lora_A`` and ``lora_B`` linears of every adapted module named in ``modules`` (a
    suffix such as ``"q_proj"``); ``scope="merged"``: the modules named in ``modules`` themselves (exact names
    such as ``"0"`` in a ``Sequential`` or suffixes such as ``"v_proj"``; a peft-wrapped layer gives its base
    weight). ``layers`` (None: all; a list of block indices or ``"topK"``) filters LLM blocks. A scope that
    matches nothing, or ``"lora"`` on a model without adapters, raises :class:`ConfigError` (never a
    silent zero-prune).
    """
    keep = _resolve_layers(model, layers)
    modules = _family_names(model, modules)
    return _lora_targets(model, modules, keep) if scope == "lora" else _merged_targets(model, modules, keep)


@validate_args(_example=lambda: {"model": _toy(), "targets": {"0": _toy()[0]}, "batches": []}, model=_MODULE,
               targets=[dict],
               batches=[Satisfies(lambda v: hasattr(v, "__iter__") and not isinstance(v, str | bytes | dict),
                                  "an iterable of (fn, valid) pairs", invalid=[None, 3, "batches"])],
               skip_first=[Boolean()])
def collect_input_norms(model: Any, targets: dict[str, Any], batches: Iterable[tuple[Any, Any]], *,
                        skip_first: bool = False) -> tuple[dict[str, Any], int, int]:
    """Run ``fn()`` for every ``(fn, valid)`` of ``batches`` with input hooks on ``targets``.

    ``valid`` is a bool tensor ``[B, T]`` of the tokens to count (pads excluded), or None for all; with
    ``skip_first`` position 0 of each row is dropped too (SmolLM2's first token has a "massive activation"
    that would dominate the norms). Returns ``({name: sum of x_j**2 / n_sequences}``, float32), the number of
    sequences and of counted tokens. Every hook is removed on exit, also when a forward raises.
    """
    sums = {n: torch.zeros(m.weight.shape[1], dtype=torch.float32) for n, m in targets.items()}
    state: dict[str, Any] = {"valid": None}
    n_seq = n_tok = 0

    def hook_for(name: str) -> Any:
        def hook(_mod: Any, args: tuple[Any, ...]) -> None:
            x = args[0].detach().float()
            v = state["valid"]
            x = x[v.to(x.device)] if v is not None and x.ndim == 3 and tuple(x.shape[:2]) == tuple(v.shape) \
                else x.reshape(-1, x.shape[-1])
            sums[name] += x.pow(2).sum(0).cpu()
        return hook

    handles = [m.register_forward_pre_hook(hook_for(n)) for n, m in targets.items()]
    try:
        with torch.no_grad():
            for fn, valid in batches:
                if valid is not None:
                    valid = valid.bool().clone()
                    if skip_first:
                        valid[:, 0] = False
                state["valid"] = valid
                rows = fn()
                n_seq += int(rows)
                n_tok += int(valid.sum()) if valid is not None else 0
    finally:
        for h in handles:
            h.remove()
    if n_seq == 0:
        raise InputError("The calibration set is empty: no sequence reached the prune targets.")
    return {n: s / n_seq for n, s in sums.items()}, n_seq, n_tok


@validate_args(_example=lambda: {"weight": torch.ones(2, 3), "norms": torch.ones(3)},
               weight=[ArrayLike(ndim=2)], norms=[ArrayLike(ndim=1)])
def wanda_scores(weight: Any, norms: Any) -> Any:
    """Wanda score ``|W_ij| * sqrt(norms_j)`` of a weight ``[out, in]`` and the input statistic ``[in]``."""
    w, n = torch.as_tensor(weight).float(), torch.as_tensor(norms).float()
    if n.shape[0] != w.shape[1]:
        raise InputError(f"The 'norms' argument of wanda_scores must have {w.shape[1]} entries (the weight's "
                         f"input size). Got {n.shape[0]} instead.")
    return w.abs() * n.clamp(min=0).sqrt()[None, :]


@validate_args(_example=lambda: {"scores": torch.ones(2, 4)}, scores=[ArrayLike(ndim=2)], dense_ratio=_RATIO)
def row_topk_mask(scores: Any, dense_ratio: float = 0.1) -> Any:
    """Bool mask marking, in each row, the ``int(n_cols * dense_ratio)`` highest scores (the harmful weights).

    Ties are broken by a stable sort (lower column index first), as ``torch.sort`` in the official code.
    """
    s = torch.as_tensor(scores).float()
    k = int(s.shape[1] * float(dense_ratio))
    mask = torch.zeros_like(s, dtype=torch.bool)
    if k > 0:
        idx = torch.sort(s, dim=1, descending=True, stable=True).indices[:, :k]
        mask.scatter_(1, idx, True)
    return mask
