"""Argument rules for tensors, positions, head selections and row indices of ``trustlab.llm`` (issue 43).

Every predicate is a few type and shape tests, without copying a tensor off its device, so the rules cost
next to nothing on the functions that run every training step (``gather_logprobs``, ``head_logits``,
``replay_blocks``). Methods called every step and not wrapped at all check their row indices with
:func:`_row_indices`, one numpy pass.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from trustlab.core.constraints import NO_EXAMPLE, Satisfies, short_repr
from trustlab.core.exceptions import InputError

__all__: list[str] = []


def _torch() -> Any:
    return sys.modules.get("torch")


def _is_tensor(v: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(v, torch.Tensor)


def _is_index(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool | np.bool_)


def _int_or_bool_array(v: Any) -> bool:
    """An integer or bool numpy array or torch tensor (not float, not complex)."""
    if _is_tensor(v):
        return not (v.is_floating_point() or v.is_complex())
    return isinstance(v, np.ndarray) and v.dtype.kind in "biu"


def _int_array(v: Any) -> bool:
    """An integer numpy array or torch tensor (not bool, float or complex)."""
    return _int_or_bool_array(v) and str(v.dtype) not in ("bool", "torch.bool")


class _Data(Satisfies):
    """A data rule: its errors are :class:`InputError` (bad data), not ConfigError (a bad setting)."""

    error_class = InputError


class _TensorRule(_Data):
    """A data rule whose valid example is a torch tensor made on demand (torch is imported lazily)."""

    def __init__(self, predicate: Any, description: str, invalid: list[Any], shape: tuple[int, ...],
                 dtype: str = "float32") -> None:
        super().__init__(predicate, description, invalid=invalid)
        self.shape, self.dtype = shape, dtype

    def valid_example(self) -> Any:
        try:
            import torch
        except ImportError:
            return NO_EXAMPLE
        return torch.zeros(self.shape, dtype=getattr(torch, self.dtype))


def _float_tensor(ndims: tuple[int, ...] | None) -> Any:
    def ok(v: Any) -> bool:
        return _is_tensor(v) and v.is_floating_point() and (ndims is None or v.ndim in ndims)

    return ok


#: hidden states ``[batch, seq, d]``: a floating-point torch tensor with 3 dimensions
HIDDEN = _TensorRule(_float_tensor((3,)), "a floating-point torch tensor of hidden states [batch, seq, d]",
                     invalid=[None, "hidden", np.zeros((2, 2, 2))], shape=(1, 2, 16))
#: hidden states of any leading shape ``[..., d]`` (a floating-point torch tensor)
HIDDEN_ANY = _TensorRule(_float_tensor(None), "a floating-point torch tensor of hidden states [..., d]",
                         invalid=[None, "hidden", np.zeros((2, 16))], shape=(2, 16))
#: an attention mask ``[batch, seq]`` as a torch tensor (0/1, bool or float)
MASK_TENSOR = _TensorRule(lambda v: _is_tensor(v) and v.ndim == 2, "a torch tensor [batch, seq] (an attention mask)",
                          invalid=[None, "mask", np.ones((1, 2))], shape=(1, 2), dtype="long")
#: position ids ``[batch, seq]`` (or ``[seq]``) as a torch tensor
POSITION_IDS = _TensorRule(lambda v: _is_tensor(v) and v.ndim in (1, 2) and _int_array(v),
                           "a torch tensor of position ids [batch, seq]", invalid=[None, "positions", [0, 1]],
                           shape=(1, 2), dtype="long")


def _is_model_inputs(v: Any) -> bool:
    return isinstance(v, Mapping) or (_is_tensor(v) and _int_array(v) and v.ndim in (1, 2))


#: what a model call takes: an integer tensor of token ids or a mapping of keyword inputs (a BatchEncoding)
MODEL_INPUTS = _Data(_is_model_inputs, "an integer torch tensor of token ids [batch, seq] or a mapping of model "
                         "inputs (e.g. a tokenizer's BatchEncoding)", invalid=[None, "a cat", np.zeros((1, 2))], valid={})


def _is_edit_positions(v: Any) -> bool:
    if _is_index(v) or isinstance(v, slice | range):
        return True
    if _is_tensor(v) or isinstance(v, np.ndarray):
        return _int_or_bool_array(v)
    return isinstance(v, list | tuple) and all(_is_index(p) for p in v)


#: positions of an edit (see :class:`trustlab.llm.Edit`); None is listed by the caller
EDIT_POSITIONS = Satisfies(_is_edit_positions, "an int, a sequence of ints, a slice, a bool mask [batch, seq] or an "
                           "int tensor [batch] of positions", invalid=["last", 1.5, [0.5]])


def _is_row_masks(v: Any) -> bool:
    if _is_tensor(v) or isinstance(v, np.ndarray):
        return v.ndim == 2
    return (isinstance(v, list | tuple) and len(v) > 0
            and all(_is_tensor(r) or isinstance(r, np.ndarray | list | tuple) for r in v))


#: per-input token masks for ``collect``: a 2-d array or a list of 1-d rows, one per input
ROW_MASKS = Satisfies(_is_row_masks, "a bool mask (a 2-d array, or a list of 1-d bool rows, one per input)",
                      invalid=[3, [1, 2], None])


def _is_head_list(hs: Any) -> bool:
    return _is_index(hs) or (not isinstance(hs, str | bytes) and all(_is_index(h) for h in hs))


def _is_heads(v: Any) -> bool:
    if isinstance(v, Mapping):
        return all(_is_head_list(hs) for hs in v.values())
    if isinstance(v, Iterator):  # a generator: its items are checked when it is read
        return True
    return (isinstance(v, list | tuple | set | frozenset)
            and all(isinstance(p, list | tuple) and len(p) == 2 for p in v))


#: heads to ablate: a mapping layer -> head(s), or (layer, head) pairs (the indices are checked by the body)
HEADS = Satisfies(_is_heads, "a mapping layer -> head(s) or a collection of (layer, head) pairs",
                  invalid=[3, "heads", [1, 2]], valid={})


def _ndim(v: Any) -> int | None:
    if _is_tensor(v) or isinstance(v, np.ndarray):
        return int(v.ndim)
    try:
        arr = np.asarray(v)
    except Exception:  # noqa: BLE001 - ragged: not an array
        return None
    return int(arr.ndim) if arr.dtype.kind in "biuf" else None


def per_layer_values(ndim: int, what: str) -> _Data:
    """Head values per layer: an array with ``ndim`` dimensions or a mapping layer -> array."""

    def ok(v: Any) -> bool:
        if isinstance(v, Mapping):
            return all(_ndim(x) == ndim - 1 for x in v.values())
        return not isinstance(v, str) and _ndim(v) == ndim

    return _Data(ok, what, invalid=["means", 3, np.zeros(2)])


def _is_float_array(v: Any, ndim: int) -> bool:
    if _is_tensor(v):
        return v.is_floating_point() and v.ndim == ndim
    return isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.ndim == ndim


#: clean head outputs [n_layers, n_heads, d_head] (a float array or tensor)
HEAD_OUTPUTS = _Data(lambda v: _is_float_array(v, 3), "a float array of head outputs [n_layers, n_heads, d_head]",
                         invalid=[None, "clean", np.zeros(2)])


def _is_id_sequences(v: Any) -> bool:
    if _is_tensor(v) or isinstance(v, np.ndarray):
        return _int_array(v)
    return isinstance(v, list | tuple) and all(not isinstance(s, str | bytes) and hasattr(s, "__len__") for s in v)


#: token ids as a list of id sequences or an integer array/tensor (the range is checked against the model)
ID_SEQUENCES = _Data(_is_id_sequences, "a list of token-id sequences or an integer array of ids",
                         invalid=[None, "ids", 3], valid=[[1, 2]])


def _is_edits(v: Any) -> bool:
    from trustlab.llm._edits import Edit

    if isinstance(v, Edit | Mapping | Iterator):  # an iterator's items are checked when the trace starts
        return True
    return isinstance(v, list | tuple) and all(isinstance(e, Edit) for e in v)


#: what ``trace`` applies: an Edit, a sequence of Edits or a mapping site -> (Edit | callable | value)
EDITS = Satisfies(_is_edits, "an Edit, a sequence of Edits, or a mapping site -> (Edit | callable | value)",
                  invalid=["not an edit", 3, [3]])


def _is_betas(v: Any) -> bool:
    return (not isinstance(v, str | bytes) and len(v) == 2
            and all(isinstance(b, numbers.Real) and not isinstance(b, bool) and 0 <= float(b) < 1 for b in v))


#: AdamW's (beta1, beta2): two floats in [0, 1)
BETAS = Satisfies(_is_betas, "a pair (beta1, beta2) of floats in [0, 1)", invalid=[0.9, (0.9,), (0.9, 1.0), "betas"],
                  valid=(0.9, 0.999))


def _is_indices(v: Any) -> bool:
    if _is_index(v):
        return True
    if _is_tensor(v) or isinstance(v, np.ndarray):
        return _int_array(v)
    return isinstance(v, list | tuple | range) and all(_is_index(i) for i in v)


#: row indices: an int, a list of ints or an integer array/tensor (the range is checked by the body)
ROWS = Satisfies(_is_indices, "row indices (an int, a list of ints or an integer array)", invalid=[None, 1.5, [0.5]],
                 valid=[0])


def _row_indices(rows: Any, n: int, *, owner: str, name: str = "rows", allow_empty: bool = False) -> np.ndarray:
    """``rows`` as a flat int64 array of indices in ``[0, n)``, else InputError with the template message.

    For the methods called every training step, which check their rows here rather than through a
    ``validate_args`` wrapper (one numpy pass; floats and bools are refused instead of cast).
    """
    idx = np.asarray(rows.cpu() if _is_tensor(rows) else rows)
    ok = idx.dtype.kind in "iu" or (idx.size == 0 and idx.dtype.kind == "f")
    idx = idx.astype(np.int64, copy=False).reshape(-1) if ok else idx
    if not ok or (idx.size == 0 and not allow_empty) or (idx.size and (idx.min() < 0 or idx.max() >= n)):
        raise InputError(f"The '{name}' argument of {owner} must be integer indices in [0, {n - 1}]. "
                         f"Got {short_repr(rows)} instead.")
    return idx
