"""Batched all-heads activation patching on a shared KV cache.

For one corrupt prompt of ``T`` tokens, the first ``T - 1`` tokens are run once with a KV cache. The cache
is then expanded to one batch row per (layer, head) plus an unpatched baseline row, and only the last
token is run: in row ``(l, h)`` the output of head ``h`` of layer ``l`` at the last position is replaced by
its value from the clean run. Only the target tokens' logits are computed. Patching the last position
cannot change earlier positions (causal attention), so this equals one full forward per head at about
1/T of the cost per head.

A self-check guards against the known silent failure of patching code (a patch that the architecture
bypasses): every layer's hook must fire once per chunk, the baseline row must equal a plain forward, and
the patched rows whose head output actually changed must change the logits.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import Boolean, Interval
from trustlab.core.exceptions import ConfigError, InputError, TrustlabError
from trustlab.core.optional import require
from trustlab.llm._argrules import HEAD_OUTPUTS
from trustlab.llm.rules import TOKEN_IDS, LanguageModel, check_token_ids
from trustlab.llm.sites import arch_spec, base_model, check_layer, dims, get_module, model_device, unwrap

torch = require("torch", purpose="trustlab.llm patching")

__all__ = ["HeadPatchResult", "patch_all_heads"]


@dataclass(frozen=True)
class HeadPatchResult:
    """Target logits with each head patched at the last position.

    Attributes
    ----------
    logits : ndarray [n_layers, n_heads, n_targets]
        Row ``[i, h]`` is layer ``layers[i]``, head ``h`` patched.
    baseline : ndarray [n_targets]
        Unpatched (corrupt-run) logits.
    layers, target_ids : tuple of int
    n_changed : int
        Patched rows whose logits differ from the baseline by more than fp32 rounding (1e-5 relative).
    """

    logits: np.ndarray
    baseline: np.ndarray
    layers: tuple[int, ...]
    target_ids: tuple[int, ...]
    n_changed: int

    @property
    def effect(self) -> np.ndarray:
        """``logits - baseline``, shape ``[n_layers, n_heads, n_targets]``."""
        return self.logits - self.baseline


def _cache_kwarg(module: Any) -> str:
    params = inspect.signature(module.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _out_cache(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def _as_ids(x: Any, name: str) -> Any:
    t = torch.as_tensor(x)
    if t.is_floating_point() or t.dtype == torch.bool:
        raise InputError(
            f"The '{name}' of patch_all_heads must be integer token ids. Got dtype {t.dtype} instead."
        )
    if t.ndim == 2 and t.shape[0] == 1:
        t = t[0]
    if t.ndim != 1:
        raise InputError(
            f"The '{name}' of patch_all_heads must be one 1-d sequence of ids. Got shape {tuple(t.shape)}."
        )
    return t.long()


def _clean_heads(model: Any, clean: Any, layers: list[int]) -> dict[int, Any]:
    """Clean head outputs at the last position: layer -> [n_heads, d_head]."""
    from trustlab.llm.hooks import trace

    d = dims(model)
    t = torch.as_tensor(clean) if not isinstance(clean, torch.Tensor) else clean
    if t.ndim == 3 and t.is_floating_point():
        if t.shape[1:] != (d.n_heads, d.d_head) or t.shape[0] not in (len(layers), d.n_layers):
            raise InputError(
                f"Clean head outputs must have shape [n_layers, {d.n_heads}, {d.d_head}]. Got {tuple(t.shape)}."
            )
        return {
            layer: (t[i] if t.shape[0] == len(layers) else t[layer]).float() for i, layer in enumerate(layers)
        }
    ids = _as_ids(clean, "clean")
    sites = [f"blocks.{layer}.head_out" for layer in layers]
    with torch.no_grad(), trace(model, sites, stop_after="auto") as tr:
        tr.run(ids[None].to(model_device(model)), use_cache=False, logits_to_keep=1)
    return {layer: tr[s][0, -1].float() for layer, s in zip(layers, sites)}


def _patch_hook(
    layer: int,
    rows: list[int],
    heads: list[int],
    clean: Any,
    n_heads: int,
    d_head: int,
    changed_rows: Any,
    fired: dict[int, int],
) -> Any:
    """o_proj pre-hook: row rows[j] gets head heads[j] at the last position replaced by its clean value."""
    r_idx, h_idx = torch.tensor(rows), torch.tensor(heads)
    src = clean[h_idx]

    def hook(module: Any, args: Any) -> Any:
        view = args[0].unflatten(-1, (n_heads, d_head)).clone()
        old = view[r_idx, -1, h_idx]
        view[r_idx, -1, h_idx] = src.to(view)
        scale = 1e-5 * (1.0 + old.abs().amax(-1))
        changed_rows[r_idx] |= ((old - src.to(old)).abs().amax(-1) > scale).cpu()
        fired[layer] += 1
        return (view.flatten(-2), *args[1:])

    hook._trustlab_hook = True  # type: ignore[attr-defined]
    return hook


@validate_args(model=[LanguageModel()], corrupt=[TOKEN_IDS], clean=[TOKEN_IDS, HEAD_OUTPUTS],
               target_ids=[Interval(int, 0, None), SequenceOf(Interval(int, 0, None))],
               layers=[SequenceOf(Interval(int, 0, None)), None], batch_size=[Interval(int, 2, None)], check=[Boolean()])
def patch_all_heads(
    model: Any,
    corrupt: Any,
    clean: Any,
    target_ids: int | Sequence[int],
    *,
    layers: Sequence[int] | None = None,
    batch_size: int = 64,
    check: bool = True,
) -> HeadPatchResult:
    """Patch every head (layer x head) with its clean value at the last position, batched on a shared cache.

    Parameters
    ----------
    model : causal LM
    corrupt : 1-d token ids (at least 2 tokens)
        The prompt that is run and patched.
    clean : 1-d token ids, or array [n_layers, n_heads, d_head]
        The clean prompt (its last-position head outputs are captured) or those outputs directly.
    target_ids : int or sequence of int
        Vocabulary ids whose logits are returned.
    layers : sequence of int, optional
        Layers to patch (default all).
    batch_size : int, default=64
        Rows per chunk (memory grows with rows x prompt length x layers).
    check : bool, default=True
        Run the self-check (costs one extra forward); raises TrustlabError when a patch was a no-op.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> a = tok("The cat sat on the mat").input_ids; b = tok("The dog ran in the park").input_ids
    >>> r = patch_all_heads(model, b, a, target_ids=[5, 9])
    >>> r.logits.shape
    (2, 9, 2)
    """
    inner = unwrap(model)
    d = dims(inner)
    layer_list, ids, targets = _check_patch_inputs(inner, d, corrupt, target_ids, layers, batch_size)
    base = base_model(inner)
    dev = model_device(inner)
    ids, targets = ids.to(dev), targets.to(dev)
    with torch.no_grad():
        clean_heads = _clean_heads(inner, clean, layer_list)
        kv = [(layer.keys, layer.values) for layer in _out_cache(base(input_ids=ids[None, :-1], use_cache=True)).layers]
        pairs = [(layer, h) for layer in layer_list for h in range(d.n_heads)]
        result = torch.empty(len(pairs), targets.numel())
        expected = torch.zeros(len(pairs), dtype=torch.bool)
        baseline = None
        per_chunk = batch_size - 1
        for c0 in range(0, len(pairs), per_chunk):
            chunk = pairs[c0 : c0 + per_chunk]
            logits, changed_rows = _patch_chunk(inner, base, kv, chunk, clean_heads, ids, targets)
            baseline = logits[0] if baseline is None else baseline
            result[c0 : c0 + len(chunk)] = logits[1:]
            expected[c0 : c0 + len(chunk)] = changed_rows[1:]
        if baseline is None:  # pragma: no cover - pairs is never empty
            raise TrustlabError("patch_all_heads ran no chunk.")
        # fp32 rounding differs between batch rows; count a change only above it
        diff = (result - baseline).abs().amax(-1) > 1e-5 * (1.0 + float(baseline.abs().max()))
        if check:
            _self_check(inner, base, ids, targets, baseline, diff, expected)
    shape = (len(layer_list), d.n_heads, targets.numel())
    return HeadPatchResult(
        result.reshape(shape).numpy(),
        baseline.numpy(),
        tuple(layer_list),
        tuple(int(t) for t in targets.cpu()),
        int(diff.sum()),
    )


def _check_patch_inputs(inner: Any, d: Any, corrupt: Any, target_ids: Any, layers: Any,
                        batch_size: Any) -> tuple[list[int], Any, Any]:
    """``(layers, corrupt ids, target ids)`` after the checks the argument rules cannot express."""
    layer_list = list(range(d.n_layers)) if layers is None else [check_layer(inner, x) for x in layers]
    if not layer_list:
        raise InputError("patch_all_heads needs at least one layer. Got an empty list instead.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 2:
        raise ConfigError(
            f"The 'batch_size' argument of patch_all_heads must be an int >= 2. Got {batch_size!r}."
        )
    ids = _as_ids(corrupt, "corrupt")
    check_token_ids(inner, ids, owner="patch_all_heads", name="corrupt")
    if ids.shape[0] < 2:
        raise InputError(
            "The corrupt prompt of patch_all_heads needs at least 2 tokens (a prefix and a last token)."
        )
    if d.n_ctx and ids.shape[0] > d.n_ctx:
        raise InputError(f"The corrupt prompt has {ids.shape[0]} tokens, more than the context of {d.n_ctx}.")
    targets = torch.as_tensor(
        [target_ids] if isinstance(target_ids, int) else list(target_ids), dtype=torch.long
    )
    if targets.numel() == 0 or bool(((targets < 0) | (targets >= d.vocab)).any()):
        raise InputError(
            f"The 'target_ids' of patch_all_heads must be ids in [0, {d.vocab - 1}]. Got {targets.tolist()}."
        )
    return layer_list, ids, targets


def _patch_chunk(inner: Any, base: Any, kv: list, chunk: list[tuple[int, int]], clean_heads: dict,
                 ids: Any, targets: Any) -> tuple[Any, Any]:
    """Run the last token for a baseline row plus one row per (layer, head) of ``chunk`` on the shared KV
    cache; returns the rows' target logits and which rows' head input the patch changed."""
    from trustlab.llm.scoring import head_logits

    tf_cache = require("transformers", purpose="patch_all_heads").DynamicCache
    spec, d = arch_spec(inner), dims(inner)
    n = len(chunk) + 1
    fresh = tf_cache(
        ddp_cache_data=[(k.expand(n, -1, -1, -1), v.expand(n, -1, -1, -1)) for k, v in kv],
        config=inner.config,
    )
    by_layer: dict[int, tuple[list[int], list[int]]] = {}
    for r, (layer, h) in enumerate(chunk, start=1):
        by_layer.setdefault(layer, ([], []))
        by_layer[layer][0].append(r)
        by_layer[layer][1].append(h)
    fired = {layer: 0 for layer in by_layer}
    changed_rows = torch.zeros(n, dtype=torch.bool)
    handles = []
    try:
        for layer, (rows, heads) in by_layer.items():
            mod = get_module(inner, f"{spec.layers}.{layer}.{spec.o_proj}")
            hook = _patch_hook(layer, rows, heads, clean_heads[layer], d.n_heads, d.d_head, changed_rows, fired)
            handles.append(mod.register_forward_pre_hook(hook))
        last = base(
            input_ids=ids[-1:].expand(n, 1),
            position_ids=torch.full((n, 1), ids.shape[0] - 1, dtype=torch.long, device=ids.device),
            use_cache=True,
            **{_cache_kwarg(base): fresh},
        ).last_hidden_state[:, -1]
    finally:
        for h in handles:
            h.remove()
    if any(v != 1 for v in fired.values()):
        raise TrustlabError(
            f"patch_all_heads: the o_proj hooks fired {fired} times instead of once per layer; "
            "the architecture does not route head outputs through o_proj as expected."
        )
    return head_logits(inner, last, targets).float().cpu(), changed_rows


def _self_check(inner: Any, base: Any, ids: Any, targets: Any, baseline: Any, diff: Any, expected: Any) -> None:
    """The baseline row equals a plain forward, and some changed head changed the logits."""
    from trustlab.llm.scoring import head_logits

    ref = head_logits(inner, base(input_ids=ids[None], use_cache=False).last_hidden_state[0, -1:], targets)[0]
    ref = ref.float().cpu()
    if not torch.allclose(ref, baseline, atol=1e-4, rtol=1e-4):
        raise TrustlabError(
            "patch_all_heads self-check failed: the shared-KV baseline differs from a plain forward "
            f"(max abs diff {float((ref - baseline).abs().max()):.3g})."
        )
    if bool(expected.any()) and not bool((diff & expected).any()):
        raise TrustlabError(
            "patch_all_heads self-check failed: the clean head outputs differ from the corrupt ones but "
            "no patch changed the target logits (a silent no-op patch)."
        )
