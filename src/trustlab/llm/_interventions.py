"""Interventions built on :func:`trustlab.llm.trace`: run-with-cache, activation patching, head ablation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Options
from trustlab.core.exceptions import ConfigError, InputError, did_you_mean
from trustlab.core.optional import require
from trustlab.core.seeding import as_seed
from trustlab.llm._argrules import EDIT_POSITIONS, HEADS, MODEL_INPUTS, per_layer_values
from trustlab.llm.hooks import Edit, Trace, trace
from trustlab.llm.rules import SITES, LanguageModel
from trustlab.llm.sites import check_head, check_layer, unwrap

torch = require("torch", purpose="trustlab.llm interventions")

__all__ = ["ablate_heads", "patch_activations", "run_with_cache"]


@validate_args(model=[LanguageModel()], inputs=[MODEL_INPUTS], sites=SITES,
               stop_after=[Interval(int, 0, None), Options(("auto",)), None])
def run_with_cache(
    model: Any, inputs: Any, sites: str | Sequence[str], *, stop_after: int | str | None = None, **kwargs: Any
) -> tuple[Any, dict[str, Any]]:
    """Run ``model`` once and return ``(output, {site: tensor})``; output is None when stopped early.

    ``inputs`` is a tensor of token ids or a mapping (e.g. a tokenizer's ``BatchEncoding``).

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> out, cache = run_with_cache(model, tok(["Hi there"], return_tensors="pt"), ["embed"])
    >>> sorted(cache)
    ['embed']
    """
    with torch.no_grad(), trace(model, sites, stop_after=stop_after) as tr:
        out = tr.run(**inputs, **kwargs) if isinstance(inputs, Mapping) else tr.run(inputs, **kwargs)
    return out, tr.captured


@validate_args(model=[LanguageModel()], clean=[InstanceOf(dict, Mapping)], positions=[EDIT_POSITIONS, None],
               heads=[Interval(int, 0, None), SequenceOf(Interval(int, 0, None)), None])
def patch_activations(
    model: Any,
    clean: Mapping[str, Any],
    *,
    positions: Any = None,
    heads: int | Sequence[int] | None = None,
) -> Trace:
    """Replace activations with those of a cached clean run (a context manager).

    Parameters
    ----------
    clean : mapping site -> tensor
        E.g. the cache from :func:`run_with_cache` on the clean input (same batch and length).
    positions, heads
        Restrict the patch (see :class:`Edit`); ``heads`` applies to ``head_out`` sites only.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> a, b = tok(["one two three"], return_tensors="pt"), tok(["four five six"], return_tensors="pt")
    >>> _, clean = run_with_cache(model, a, ["blocks.1.resid_pre"])
    >>> with patch_activations(model, clean, positions=-1):
    ...     patched = model(**b).logits
    """
    edits = []
    for site, value in clean.items():
        h = heads if site.endswith(".head_out") else None
        edits.append(Edit(site, value, "replace", positions, h))
    return Trace(model, (), edit=edits)


def _normalise_heads(model: Any, heads: Any) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    if isinstance(heads, Mapping):
        items = [(layer, h) for layer, hs in heads.items() for h in ([hs] if isinstance(hs, int) else hs)]
    else:
        items = list(heads)
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise InputError(
                "The 'heads' argument of ablate_heads must be a mapping layer -> heads or (layer, head) pairs. "
                f"Got {item!r} instead."
            )
        layer = check_layer(model, item[0], owner="layer of an ablated head")
        head = check_head(model, item[1], owner="head index of an ablated head")
        out.setdefault(layer, [])
        if head not in out[layer]:
            out[layer].append(head)
    return {k: sorted(v) for k, v in sorted(out.items())}


def _per_layer(values: Any, layer: int, what: str) -> Any:
    if isinstance(values, Mapping):
        for key in (layer, f"blocks.{layer}.head_out"):
            if key in values:
                return torch.as_tensor(
                    np.asarray(values[key]) if not isinstance(values[key], torch.Tensor) else values[key]
                )
        raise InputError(f"The '{what}' for ablate_heads has no entry for layer {layer}.")
    arr = values if isinstance(values, torch.Tensor) else torch.as_tensor(np.asarray(values))
    return arr[layer]


_MEANS = per_layer_values(3, "head means [n_layers, n_heads, d_head] or a mapping layer -> [n_heads, d_head]")
_SOURCE = per_layer_values(4, "source head outputs [n_layers, N, n_heads, d_head] or a mapping (layer or site) -> "
                           "[N, n_heads, d_head]")


@validate_args(model=[LanguageModel()], heads=[HEADS], method=[Options(("zero", "mean", "resample"))],
               positions=[EDIT_POSITIONS, None], means=[_MEANS, None], source=[_SOURCE, None],
               random_state=["random_state"])
def ablate_heads(
    model: Any,
    heads: Mapping[int, int | Sequence[int]] | Iterable[tuple[int, int]],
    *,
    method: str = "zero",
    positions: Any = None,
    means: Any = None,
    source: Any = None,
    random_state: int | None = None,
) -> Trace:
    """Ablate attention heads (their slice of the ``o_proj`` input) during forwards (a context manager).

    Parameters
    ----------
    heads : mapping layer -> heads, or iterable of (layer, head)
        An empty collection is the identity.
    method : {"zero", "mean", "resample"}, default="zero"
    positions : see :class:`Edit`
    means : array [n_layers, n_heads, d_head] or mapping layer -> [n_heads, d_head]
        For ``"mean"``; e.g. :func:`~trustlab.llm.head_means`.
    source : mapping (layer or site) -> array [N, n_heads, d_head], or array [n_layers, N, n_heads, d_head]
        For ``"resample"``: each row of the batch takes the head output of a random source example.
    random_state : int, numpy Generator or None
        Seeds the resample draws (None: seed 0).

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> ids = tok(["a b c"], return_tensors="pt").input_ids
    >>> with ablate_heads(model, {0: [0, 3]}, method="zero"):
    ...     logits = model(ids).logits
    """
    methods = ("zero", "mean", "resample")
    if method not in methods:
        raise ConfigError(
            f"The 'method' argument of ablate_heads must be one of {list(methods)}. Got {method!r} instead."
            + did_you_mean(str(method), methods)
        )
    table = _normalise_heads(unwrap(model), heads)
    edits: list[Edit] = []
    gen = torch.Generator().manual_seed(as_seed(random_state) if random_state is not None else 0)
    for layer, hs in table.items():
        site = f"blocks.{layer}.head_out"
        if method == "zero":
            edits.append(Edit(site, None, "zero", positions, hs))
        elif method == "mean":
            if means is None:
                raise ConfigError("ablate_heads(method='mean') needs 'means' (see trustlab.llm.head_means).")
            edits.append(Edit(site, _per_layer(means, layer, "means").float(), "replace", positions, hs))
        else:
            if source is None:
                raise ConfigError(
                    "ablate_heads(method='resample') needs 'source' head outputs [N, n_heads, d_head]."
                )
            src = _per_layer(source, layer, "source").float()

            def draw(act: Any, src: Any = src) -> Any:
                idx = torch.randint(src.shape[0], (act.shape[0],), generator=gen)
                return src[idx].to(act)[:, None]

            edits.append(Edit(site, draw, "replace", positions, hs))
    return Trace(model, (), edit=edits)
