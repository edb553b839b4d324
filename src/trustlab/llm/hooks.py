"""Tracing and editing the real HF model with plain forward / forward-pre hooks.

:func:`trace` captures canonical sites (see :mod:`trustlab.llm.sites`), applies edits, and can stop the
forward after the last needed block. Every hook is removed when the ``with`` block exits, also when the
forward raises. Helpers built on it live in ``trustlab.llm._interventions`` (:func:`run_with_cache`,
:func:`patch_activations`, :func:`ablate_heads`) and ``trustlab.llm._patching`` (:func:`patch_all_heads`);
import them from ``trustlab.llm``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import Boolean, InstanceOf, Interval, Options
from trustlab.core.exceptions import ConfigError, InputError, UnknownNameError, did_you_mean
from trustlab.core.optional import require
from trustlab.llm._argrules import EDITS
from trustlab.llm._edits import Edit, _EditSpec, _normalise_edits
from trustlab.llm.rules import LanguageModel, TorchModule
from trustlab.llm.sites import Site, arch_spec, dims, get_module, resolve_sites, unwrap

_MODULE = TorchModule()

torch = require("torch", purpose="trustlab.llm hooks")

__all__ = ["Edit", "trace", "active_hooks"]

class _StopForward(Exception):
    """Raised by the stop hook; caught by the owning Trace."""

    def __init__(self, owner: Trace) -> None:
        super().__init__("forward stopped by trustlab.llm.trace")
        self.owner = owner


class Trace(contextlib.AbstractContextManager):
    """Hooks on ``model`` that capture and edit sites; use through :func:`trace`.

    Captured tensors are read with ``tr[site]`` after the forward (the value after any edit at that
    site; ``head_out`` as ``[B, T, n_heads, d_head]``). When several forwards run inside the block (e.g.
    ``generate``), each capture holds the last one.
    """

    def __init__(
        self,
        model: Any,
        sites: str | Sequence[str] = (),
        edit: Any = None,
        stop_after: int | str | None = None,
        detach: bool = True,
    ) -> None:
        self.model = model
        inner = unwrap(model)
        arch_spec(inner)
        d = dims(inner)
        self._n_heads, self._d_head = d.n_heads, d.d_head
        self.sites = resolve_sites(inner, sites)
        self._edits: dict[str, list[_EditSpec]] = {}
        edit_sites = {}
        for name, e in _normalise_edits(edit):
            site = resolve_sites(inner, name)[0]
            if not site.editable:
                raise ConfigError(
                    f"The site {name!r} is capture-only; editing it would not change the forward. "
                    "Edit the neighbouring residual or branch site instead."
                )
            self._edits.setdefault(name, []).append(_EditSpec(e, site, d.n_heads, inner))
            edit_sites[name] = site
        self._all_sites = {s.name: s for s in self.sites} | edit_sites
        self._capture = {s.name for s in self.sites}
        self.detach = detach
        self._stop_path = self._stop_target(inner, stop_after, d.n_layers)
        self._inner = inner
        self._handles: list[Any] = []
        self._store: dict[str, Any] = {}
        self.stopped = False

    def _stop_target(self, inner: Any, stop_after: Any, n_layers: int) -> str | None:
        spec = arch_spec(inner)
        sites = list(self._all_sites.values())
        if stop_after is None:
            return None
        if stop_after == "auto":
            if not sites or any(s.kind == "logits" for s in sites):
                return None
            layers = [s.layer for s in sites if s.layer is not None]
            if not layers:
                return spec.embed_site
            return f"{spec.layers}.{max(layers)}"  # for the last block this still skips norm and head
        if isinstance(stop_after, bool) or not isinstance(stop_after, int | np.integer):
            raise ConfigError(
                f"The 'stop_after' argument of trace must be None, 'auto' or a block index in [0, {n_layers - 1}]."
                f" Got {stop_after!r} instead."
            )
        if not 0 <= int(stop_after) < n_layers:
            raise InputError(
                f"The 'stop_after' argument of trace must be a block index in [0, {n_layers - 1}]. "
                f"Got {stop_after} instead."
            )
        late = [s.name for s in sites if s.kind == "logits" or (s.layer is not None and s.layer > stop_after)]
        if late:
            raise ConfigError(
                f"The sites {late} lie after block stop_after={stop_after}, so they would never be reached. "
                "Raise stop_after or use stop_after='auto'."
            )
        return f"{spec.layers}.{int(stop_after)}"

    # ---------------------------------------------------------------------------------------- hooks
    def _edit(self, name: str, act: Any, edits: list[_EditSpec], capture: bool, head_view: bool) -> Any:
        """Apply a site's edits in order and capture the result: the step every kind of hook shares."""
        new = act
        for e in edits:
            new = e(new, head_view)
        if capture:
            self._store[name] = new.detach() if (self.detach and new is not None) else new
        return new

    def _fwd_hook(self, site: Site) -> Callable[..., Any]:
        edits = self._edits.get(site.name, [])
        capture = site.name in self._capture
        index = site.index

        if site.kind == "logits":
            return self._logits_hook(site, edits, capture)

        def hook(module: Any, args: Any, output: Any) -> Any:
            is_tuple = isinstance(output, tuple)
            i = (index or 0) if is_tuple else None
            act = output[i] if is_tuple else output
            new = self._edit(site.name, act, edits, capture, False)
            if new is act:
                return None
            return (*output[:i], new, *output[i + 1 :]) if is_tuple else new

        hook._trustlab_hook = True  # type: ignore[attr-defined]
        return hook

    def _logits_hook(self, site: Site, edits: list[_EditSpec], capture: bool) -> Callable[..., Any]:
        def hook(module: Any, args: Any, output: Any) -> Any:
            as_attr = hasattr(output, "logits")
            act = output.logits if as_attr else (output[0] if isinstance(output, tuple) else output)
            new = self._edit(site.name, act, edits, capture, False)
            if new is act:
                return None
            if as_attr:
                output.logits = new
                return output
            return (new, *output[1:]) if isinstance(output, tuple) else new

        hook._trustlab_hook = True  # type: ignore[attr-defined]
        return hook

    def _pre_hook(self, site: Site) -> Callable[..., Any]:
        edits = self._edits.get(site.name, [])
        capture = site.name in self._capture
        head_view = site.kind == "head_out"
        n_heads, d_head = self._n_heads, self._d_head

        def hook(module: Any, args: Any, kwargs: Any) -> Any:
            in_args = len(args) > 0
            act = args[0] if in_args else kwargs.get("hidden_states", kwargs.get("input"))
            view = act.unflatten(-1, (n_heads, d_head)) if head_view else act
            new = self._edit(site.name, view, edits, capture, head_view)
            if new is view:
                return None
            flat = new.flatten(-2) if head_view else new
            if in_args:
                return (flat, *args[1:]), kwargs
            key = "hidden_states" if "hidden_states" in kwargs else "input"
            return args, {**kwargs, key: flat}

        hook._trustlab_hook = True  # type: ignore[attr-defined]
        return hook

    def _make_stop_hook(self) -> Callable[..., Any]:
        def stop(module: Any, args: Any, output: Any) -> None:
            raise _StopForward(self)

        stop._trustlab_hook = True  # type: ignore[attr-defined]
        return stop

    def __enter__(self) -> Trace:
        self._store.clear()
        self.stopped = False
        try:
            for site in self._all_sites.values():
                module = get_module(self._inner, site.module_path)
                if site.hook == "pre":
                    h = module.register_forward_pre_hook(self._pre_hook(site), with_kwargs=True)
                else:
                    h = module.register_forward_hook(self._fwd_hook(site))
                self._handles.append(h)
            if self._stop_path is not None:
                module = get_module(self._inner, self._stop_path)
                self._handles.append(module.register_forward_hook(self._make_stop_hook()))
        except BaseException:
            self._remove()
            raise
        return self

    def _remove(self) -> None:
        while self._handles:
            self._handles.pop().remove()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self._remove()
        if isinstance(exc, _StopForward) and exc.owner is self:
            self.stopped = True
            return True
        return False

    # ---------------------------------------------------------------------------------------- access
    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Call the model inside the trace; returns its output, or None when the forward was stopped."""
        if not self._handles:
            raise ConfigError("Trace.run must be called inside the 'with trace(...)' block.")
        try:
            return self.model(*args, **kwargs)
        except _StopForward as exc:
            if exc.owner is not self:
                raise
            self.stopped = True
            return None

    def __getitem__(self, site: str) -> Any:
        if site not in self._capture:
            raise UnknownNameError(
                f"The site {site!r} was not requested in this trace.{did_you_mean(site, sorted(self._capture))} "
                f"Requested: {sorted(self._capture)}."
            )
        if site not in self._store:
            raise UnknownNameError(
                f"The site {site!r} was not reached: run the model inside the 'with' block "
                "(a stop_after before it also skips it)."
            )
        value = self._store[site]
        if value is None:
            raise ConfigError(
                f"The site {site!r} captured nothing: attention weights need "
                "load_model(..., attn_implementation='eager')."
            )
        return value

    def __contains__(self, site: object) -> bool:
        return site in self._store

    @property
    def captured(self) -> dict[str, Any]:
        """All captured tensors by site name."""
        return dict(self._store)


@validate_args(model=[LanguageModel()], sites=[InstanceOf(str), SequenceOf(InstanceOf(str), min_len=0)],
               edit=[EDITS, None], stop_after=[Interval(int, 0, None), Options(("auto",)), None], detach=[Boolean()])
def trace(
    model: Any,
    sites: str | Sequence[str] = (),
    edit: Any = None,
    stop_after: int | str | None = None,
    *,
    detach: bool = True,
) -> Trace:
    """Capture and edit canonical sites during forwards of ``model`` (a context manager).

    Parameters
    ----------
    model : causal LM
        A supported HF causal LM (or a PEFT wrapper around one).
    sites : str or sequence of str
        Sites to capture, e.g. ``["blocks.3.resid_post", "blocks.3.head_out"]``.
    edit : Edit, sequence of Edit, or mapping site -> (Edit | callable | value), optional
        Interventions applied during the forward; a callable gets the activation and returns the new one.
    stop_after : int, "auto" or None
        Stop the forward after this block (the model call then raises inside the ``with`` block, which
        the context manager swallows, so make it the block's last statement or use ``tr.run(...)``).
        ``"auto"``: after the last block any site needs.
    detach : bool, default=True
        Store captured tensors detached (False keeps them in the autograd graph).

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> ids = tok(["The cat sat"], return_tensors="pt").input_ids
    >>> with trace(model, ["blocks.0.head_out"], stop_after="auto") as tr:
    ...     out = tr.run(ids)
    >>> out is None, tuple(tr["blocks.0.head_out"].shape[-2:])
    (True, (9, 8))
    """
    return Trace(model, sites, edit=edit, stop_after=stop_after, detach=detach)


@validate_args(model=[_MODULE], trustlab_only=[Boolean()])
def active_hooks(model: Any, *, trustlab_only: bool = True) -> int:
    """Number of hooks registered anywhere in ``model`` (by default only those trustlab.llm installed).

    transformers installs its own output-capturing hooks on first forward; ``trustlab_only=False``
    counts those too (compare counts before and after instead of expecting 0).

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> active_hooks(tiny_random_llama()[0])
    0
    """
    total = 0
    for m in model.modules():
        for attr in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"):
            for fn in (getattr(m, attr, None) or {}).values():
                total += 1 if not trustlab_only or getattr(fn, "_trustlab_hook", False) else 0
    return total
