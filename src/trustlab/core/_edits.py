"""The model-edit role: ``ModelEdit.apply`` returns an :class:`EditHandle` whose ``restore()`` undoes it.

Imported and exported by :mod:`trustlab.core.roles`, the one place roles are imported from.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, ClassVar

from trustlab.core._verbs import _public_verb
from trustlab.core.arguments import HasMethods, validate_args
from trustlab.core.base import Method
from trustlab.core.constraints import Satisfies
from trustlab.core.exceptions import UnsupportedModelError

__all__ = ["EditHandle", "EditInfo", "ModelEdit"]


@dataclass
class EditInfo:
    """What a model edit did, filled by ``ModelEdit.apply`` (subclass it to add a method's own fields).

    ``changed_params``: names of state-dict entries whose values differ from before the edit (empty for
    hook-only edits); ``n_hooks``: hooks the edit registered; ``wall_time_s``: time spent in ``_apply``.
    """

    method: str = ""
    changed_params: tuple[str, ...] = ()
    n_hooks: int = 0
    wall_time_s: float = 0.0


class EditHandle:
    """Returned by ``ModelEdit.apply``: ``restore()`` gives back the exact original weights and removes
    every hook the edit registered. Also a context manager. ``info`` is the edit's :class:`EditInfo`."""

    def __init__(self, model: Any, snapshot: dict[str, Any] | None, info: EditInfo | None = None) -> None:
        self.model = model
        self._snapshot = snapshot
        self._hooks: list[Any] = []
        self.info: EditInfo = info if info is not None else EditInfo()
        self.restored = False

    @validate_args(hook_handle=[HasMethods("remove", what="a torch hook handle")])
    def add_hook(self, hook_handle: Any) -> Any:
        """Register a torch hook handle so that ``restore`` removes it."""
        self._hooks.append(hook_handle)
        return hook_handle

    @property
    def n_hooks(self) -> int:
        return len(self._hooks)

    def changed_params(self) -> tuple[str, ...]:
        """Names of state-dict entries that differ from the snapshot (empty without a snapshot)."""
        if self._snapshot is None:
            return ()
        import torch

        current = self.model.state_dict()
        return tuple(k for k, v in self._snapshot.items() if k in current and not torch.equal(current[k], v))

    def restore(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        if self._snapshot is not None and not self.restored:
            import torch

            with torch.no_grad():
                current = self.model.state_dict()
                for name, saved in self._snapshot.items():
                    current[name].copy_(saved)
        self.restored = True

    def __enter__(self) -> EditHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.restore()


def _is_torch_module(value: Any) -> bool:
    torch = sys.modules.get("torch")  # a torch module exists only once torch is imported
    return torch is not None and isinstance(value, torch.nn.Module)


class ModelEdit(Method):
    """Model-edit role: ``apply(model, ...) -> EditHandle``; ``handle.restore()`` undoes it exactly.

    Implement ``_apply(model, handle, ...)``; register hooks with ``handle.add_hook`` and record what was
    done on ``handle.info`` (an instance of ``_info_class``, a :class:`EditInfo` dataclass). If ``_apply``
    raises, the model is restored and every hook removed before the error propagates.
    Set ``_modifies_weights = False`` for hook-only edits (no weight snapshot is taken).
    """

    _is_role = True
    _final_verbs = ("apply",)
    _modifies_weights: ClassVar[bool] = True
    _info_class: ClassVar[type[EditInfo]] = EditInfo
    tags: ClassVar[dict[str, Any]] = {"role": "model_edit", "requires": ("torch",)}

    @validate_args(model=[Satisfies(_is_torch_module, "a torch.nn.Module", invalid=[None, "model"])],
                   _enforced_by_body=True)
    @_public_verb(begin=True)
    def apply(self, model: Any, *args: Any, **kwargs: Any) -> EditHandle:
        import time

        import torch

        if not isinstance(model, torch.nn.Module):
            raise UnsupportedModelError(
                f"The 'model' argument of {type(self).__name__}.apply must be a torch.nn.Module. "
                f"Got {type(model).__name__} instead."
            )
        snapshot = None
        if self._modifies_weights:
            snapshot = {k: v.detach().clone() for k, v in model.state_dict().items()}
        handle = EditHandle(model, snapshot, self._info_class(method=type(self).__name__))
        t0 = time.perf_counter()
        try:
            self._apply(model, handle, *args, **kwargs)
        except BaseException:
            handle.restore()
            raise
        handle.info.wall_time_s = time.perf_counter() - t0
        handle.info.n_hooks = handle.n_hooks
        handle.info.changed_params = handle.changed_params()
        return handle

    def _apply(self, model: Any, handle: EditHandle, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError  # pragma: no cover - abstract
