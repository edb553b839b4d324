"""The final-verb machinery shared by the role classes of :mod:`trustlab.core.roles`.

``_public_verb`` runs a role's public verb inside the method's scope, and ``_TabularInputs`` is the default
input handling of the tabular roles. That a subclass cannot override a public verb is checked at class
creation by :meth:`trustlab.core.base.Method.__init_subclass__` (from each role's ``_final_verbs``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from trustlab.core.base import Method
from trustlab.core.seeding import isolated_global_rng
from trustlab.core.threads import preserve_torch_threads
from trustlab.core.validation import check_array, check_n_features

__all__: list[str] = []


def _public_verb(*, begin: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Run a role's public verb inside the method's scope (:meth:`Method._verb_scope` when ``begin``:
    parameters validated, local generator made, global RNG seeded and restored; otherwise only global
    RNG state and torch threads are restored)."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(self: Method, *args: Any, **kwargs: Any) -> Any:
            if begin:
                with self._verb_scope():
                    return fn(self, *args, **kwargs)
            with isolated_global_rng(None), preserve_torch_threads():
                return fn(self, *args, **kwargs)

        return wrapper

    return deco


class _TabularInputs:
    """Default input handling: numeric 2-d arrays, feature count and names remembered at fit."""

    _X_ndim: ClassVar[int | tuple[int, ...]] = 2

    def _validate_X(self, X: Any, *, reset: bool) -> Any:
        names = getattr(X, "columns", None)
        arr = check_array(X, owner=type(self).__name__, ndim=self._X_ndim)
        if reset:
            self.n_features_in_ = arr.shape[1] if arr.ndim >= 2 else 1
            if names is not None and all(isinstance(c, str) for c in names):
                self.feature_names_in_ = np.asarray(list(names), dtype=object)
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        else:
            check_n_features(self, arr)
        return arr
