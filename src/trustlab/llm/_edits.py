"""What an edit is: :class:`Edit` (site, value, mode, positions, heads), validated into ``_EditSpec`` hooks.

:func:`trustlab.llm.trace` (in :mod:`trustlab.llm.hooks`) applies them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.exceptions import ConfigError, InputError, did_you_mean
from trustlab.core.optional import require
from trustlab.llm.sites import Site, check_head

torch = require("torch", purpose="trustlab.llm hooks")

__all__ = ["Edit"]

_MODES = ("replace", "add", "scale", "zero")


@dataclass(frozen=True)
class Edit:
    """An intervention at one site.

    Parameters
    ----------
    site : str
        Canonical site name (``blocks.{i}.head_out`` for per-head edits).
    value : tensor, float, callable or None
        The new value (``replace``), the addend (``add``) or the factor (``scale``); broadcast against the
        activation (``[B, T, d]``, or ``[B, T, n_heads, d_head]`` for ``head_out``). A callable receives
        the activation and returns the value. Unused for ``zero``.
    mode : {"replace", "add", "scale", "zero"}, default="replace"
    positions : int, sequence of int, slice, bool tensor [B, T], int tensor [B], or None
        Sequence positions to edit (None: all). An int tensor of shape ``[B]`` gives one position per row
        (e.g. :func:`~trustlab.llm.last_positions`); plain ints index the padded sequence.
    heads : int or sequence of int, optional
        Heads to edit (``head_out`` only; None: all heads).

    Example
    -------
    >>> Edit("blocks.0.head_out", mode="zero", heads=[1, 2], positions=-1).mode
    'zero'
    """

    site: str
    value: Any = None
    mode: str = "replace"
    positions: Any = None
    heads: int | Sequence[int] | None = None


def _position_mask(positions: Any, batch: int, seq: int, device: Any) -> Any:
    """Bool mask [B, T] of the positions to edit (None when all positions are edited)."""
    if positions is None:
        return None
    if isinstance(positions, np.ndarray):
        positions = torch.from_numpy(positions)
    if isinstance(positions, torch.Tensor):
        if positions.dtype == torch.bool:
            if tuple(positions.shape) != (batch, seq):
                raise InputError(
                    f"A boolean 'positions' mask must have shape [batch, seq] = [{batch}, {seq}]. "
                    f"Got {list(positions.shape)} instead."
                )
            return positions.to(device)
        if positions.ndim == 1 and positions.shape[0] == batch and not positions.is_floating_point():
            pos = positions.to(device=device, dtype=torch.long)
            pos = torch.where(pos < 0, pos + seq, pos)
            if bool(((pos < 0) | (pos >= seq)).any()):
                raise InputError(
                    f"Per-row 'positions' must be in [-{seq}, {seq - 1}] for a sequence of {seq}. "
                    f"Got {positions.tolist()} instead."
                )
            mask = torch.zeros(batch, seq, dtype=torch.bool, device=device)
            mask[torch.arange(batch, device=device), pos] = True
            return mask
        positions = positions.tolist()
    mask = torch.zeros(batch, seq, dtype=torch.bool, device=device)
    if isinstance(positions, slice):
        mask[:, positions] = True
        return mask
    items = [positions] if isinstance(positions, int | np.integer) else list(positions)
    for p in items:
        if isinstance(p, bool) or not isinstance(p, int | np.integer) or not -seq <= int(p) < seq:
            raise InputError(
                f"Edit positions must be ints in [-{seq}, {seq - 1}] for a sequence of {seq} tokens. "
                f"Got {p!r} instead."
            )
        mask[:, int(p)] = True
    return mask


class _EditSpec:
    """A validated edit bound to a site."""

    def __init__(self, edit: Edit | Callable[[Any], Any], site: Site, n_heads: int, model: Any) -> None:
        self.fn = None
        if callable(edit) and not isinstance(edit, Edit):
            self.fn = edit
            return
        if edit.mode not in _MODES:
            raise ConfigError(
                f"The 'mode' of an Edit must be one of {list(_MODES)}. Got {edit.mode!r} instead."
                + did_you_mean(str(edit.mode), _MODES)
            )
        if edit.mode != "zero" and edit.value is None:
            raise ConfigError(f"An Edit with mode={edit.mode!r} needs a 'value'. Got None instead.")
        self.heads = None
        if edit.heads is not None:
            if site.kind != "head_out":
                raise ConfigError(
                    f"'heads' can only be given for 'head_out' sites. Got heads={edit.heads!r} for {site.name!r}."
                )
            heads = [edit.heads] if isinstance(edit.heads, int | np.integer) else list(edit.heads)
            self.heads = [
                check_head(model, h, owner=f"head index of the edit at {site.name!r}") for h in heads
            ]
        self.mode, self.value, self.positions = edit.mode, edit.value, edit.positions

    def __call__(self, act: Any, head_view: bool) -> Any:
        if self.fn is not None:
            new = self.fn(act)
            if not isinstance(new, torch.Tensor) or new.shape != act.shape:
                got = tuple(new.shape) if isinstance(new, torch.Tensor) else type(new).__name__
                raise InputError(
                    f"An edit function must return a tensor of the activation's shape {tuple(act.shape)}. "
                    f"Got {got} instead."
                )
            return new
        batch, seq = act.shape[0], act.shape[1]
        pos = _position_mask(self.positions, batch, seq, act.device)
        mask = None
        if pos is not None:
            mask = pos[:, :, None, None] if head_view else pos[:, :, None]
        if self.heads is not None:
            hm = torch.zeros(act.shape[-2], dtype=torch.bool, device=act.device)
            hm[self.heads] = True
            hm = hm[:, None]
            mask = hm if mask is None else mask & hm
        if self.mode == "zero":
            return act.masked_fill(mask, 0.0) if mask is not None else torch.zeros_like(act)
        value = self.value(act) if callable(self.value) else self.value
        value = torch.as_tensor(value, dtype=act.dtype, device=act.device)
        try:
            shape = torch.broadcast_shapes(value.shape, act.shape)
        except RuntimeError:
            shape = None
        if shape != act.shape:
            raise InputError(
                f"An edit value of shape {tuple(value.shape)} does not broadcast to the activation shape "
                f"{tuple(act.shape)}."
            )
        if self.mode == "replace":
            return torch.where(mask, value, act) if mask is not None else value.expand_as(act).clone()
        if self.mode == "add":
            return act + (torch.where(mask, value, torch.zeros_like(value)) if mask is not None else value)
        return act * (torch.where(mask, value, torch.ones_like(value)) if mask is not None else value)


def _normalise_edits(edit: Any) -> list[tuple[str, Any]]:
    if edit is None:
        return []
    if isinstance(edit, Edit):
        return [(edit.site, edit)]
    if isinstance(edit, Mapping):
        out = []
        for site, e in edit.items():
            if isinstance(e, Edit):
                if e.site != site:
                    raise ConfigError(f"An Edit stored under {site!r} targets {e.site!r}; use the same site.")
                out.append((site, e))
            elif callable(e):
                out.append((site, e))
            else:
                out.append((site, Edit(site, e, "replace")))
        return out
    if isinstance(edit, Iterable) and not isinstance(edit, str):
        items = list(edit)
        if all(isinstance(e, Edit) for e in items):
            return [(e.site, e) for e in items]
    raise ConfigError(
        "The 'edit' argument of trace must be an Edit, a sequence of Edits, or a mapping site -> "
        f"(Edit | callable | value). Got {type(edit).__name__} instead."
    )
