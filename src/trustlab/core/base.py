"""The Method base class: the contract every paper's reusable object follows (DESIGN section 3).

* Hyper-parameters are keyword-only ``__init__`` arguments stored unchanged; ``__init__`` does no work.
* ``_constraints`` holds one rule list per parameter; the public verb validates them.
* Public verbs are final: a role class (:mod:`trustlab.core.roles`) defines them once (validate, seed,
  call the private ``_verb``, record state) and a paper module writes only the private part. Overriding
  a public verb in a subclass raises ``TypeError`` at class-creation time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import validate_params
from trustlab.core.hashing import MODULE, _StateDictOwner
from trustlab.core.seeding import check_random_state, isolated_global_rng, spawn_seed
from trustlab.core.threads import preserve_torch_threads

__all__ = ["Method", "PaperInfo", "state_dict_hash"]


@dataclass(frozen=True)
class PaperInfo:
    """Where a method comes from: the paper and the official code that was read."""

    title: str
    venue: str = "ICML 2025"
    arxiv: str | None = None
    repo: str | None = None
    commit: str | None = None

    def cite(self) -> str:
        arx = f", arXiv:{self.arxiv}" if self.arxiv else ""
        return f"{self.title} ({self.venue}{arx})"


class Method(BaseEstimator):
    """Base of every trustlab method object.

    Subclasses set ``paper``, ``tags`` and ``_constraints`` and implement ``_get_test_params``.
    """

    paper: ClassVar[PaperInfo | None] = None
    #: role: one of the roles in trustlab.core.roles; requires: extras needed; stochastic: uses randomness
    tags: ClassVar[dict[str, Any]] = {"role": None, "requires": (), "stochastic": False}
    _constraints: ClassVar[dict[str, list[Any]]] = {}
    #: public verbs defined once by the role class; subclasses must not override them
    _final_verbs: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_is_role", False):
            return
        overridden = [v for v in cls._final_verbs if v in cls.__dict__]
        if overridden:
            raise TypeError(
                f"{cls.__name__} overrides the public verb(s) {overridden}. Public verbs are final: "
                f"implement the private '_{overridden[0]}' instead."
            )

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        """Tiny parameter sets (< 2 s each on 2 cores) used by the common checks."""
        return [{}]

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any] | None:
        """Inputs for the common checks' calls of the public verbs; None uses the role's defaults.

        Keys per role: predictor/detector ``X``, ``y``; purifier ``X``; aggregator ``updates``;
        attack ``inputs``, ``budget``; model_edit ``model`` (a factory or module), ``args``, ``kwargs``,
        ``forward_input``; auditor ``args``, ``kwargs``; router ``quality``, ``cost``, ``queries``, ``budget``.
        """
        return None

    @classmethod
    def get_tags(cls) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            merged.update(getattr(klass, "tags", {}) if isinstance(getattr(klass, "tags", {}), dict) else {})
        return merged

    # -- helpers used by the role classes -------------------------------------------------------
    def _validate_params(self) -> None:
        validate_params(type(self).__name__, self.get_params(deep=False), self._constraints)

    def _begin(self) -> np.random.Generator:
        """Validate parameters and make the method's local generator ``self._rng`` from ``random_state``.

        Nothing global is seeded here: see :meth:`_verb_scope`.
        """
        self._validate_params()
        random_state = getattr(self, "random_state", None)
        if isinstance(random_state, np.random.Generator):
            # like scikit-learn: a passed Generator is advanced, never shared with the method
            self._rng = np.random.default_rng(spawn_seed(random_state))
        else:
            self._rng = check_random_state(random_state, owner=type(self).__name__)
        return self._rng

    @contextlib.contextmanager
    def _verb_scope(self) -> Iterator[np.random.Generator]:
        """What every public verb runs inside: validated parameters, the local generator, and no global
        side effects.

        The global Python/NumPy/torch RNGs are seeded from the method's generator for the duration of
        the verb (so third-party code that draws from them, e.g. torch module initialisation, is
        reproducible under ``random_state``) and restored on exit; torch's thread count is restored too.
        """
        rng = self._begin()
        random_state = getattr(self, "random_state", None)
        if isinstance(random_state, int | np.integer):
            seed = int(random_state)  # the same global seeds as a script calling torch.manual_seed(seed)
        else:  # derived without advancing self._rng, so the method's own draws are unaffected
            seed = int(self._rng.bit_generator.seed_seq.spawn(1)[0].generate_state(1)[0])
        with isolated_global_rng(seed), preserve_torch_threads():
            yield rng

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_rng", None)
        return state


@validate_args(lambda: {"model": _StateDictOwner()}, model=[MODULE])
def state_dict_hash(model: Any) -> str:
    """A SHA-256 over a torch module's state dict (names, dtypes, shapes and exact bytes)."""
    from trustlab.core.hashing import state_dict_hash as _hash

    return _hash(model)
