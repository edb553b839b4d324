"""Role classes: one final public verb set per role (DESIGN section 3).

A paper's method subclasses one role and writes only the private verbs (``_fit``, ``_predict_proba``,
``_transform``, ``_generate``, ``_aggregate``, ``_apply``, ``_audit``, ``_route``...). The public verb
validates parameters and inputs, seeds, calls the private verb and records state.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin

from trustlab.core._edits import EditHandle, EditInfo, ModelEdit
from trustlab.core._verbs import _public_verb, _TabularInputs
from trustlab.core.arguments import AnyValue, ArrayLike, validate_args
from trustlab.core.base import Method
from trustlab.core.constraints import Interval, Satisfies
from trustlab.core.exceptions import InputError, TrustlabError
from trustlab.core.validation import (
    check_array,
    check_consistent_length,
    check_is_fitted,
    check_X_y,
)

#: the inputs of a verb are validated by the role's ``_validate_X`` (or the method's own check), which a method may
#: override for its own input form (images, series, texts), so the declaration is the written decision
_X = [AnyValue("validated by the role's _validate_X (a method may override it for its own input form)")]
_Y = [AnyValue("validated by check_X_y in the verb, whose message names the method")]


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_)


def _is_updates(v: Any) -> bool:
    return isinstance(v, Sequence) and not isinstance(v, str | bytes) and len(v) > 0


__all__ = [
    "Predictor",
    "Regressor",
    "Detector",
    "Purifier",
    "Attack",
    "AttackResult",
    "Aggregator",
    "ModelEdit",
    "EditHandle",
    "EditInfo",
    "Auditor",
    "Router",
    "RouteDecision",
]


class Predictor(_TabularInputs, ClassifierMixin, Method):
    """Classifier role: ``fit(X, y)``, ``predict(X)``, ``predict_proba(X)``.

    Implement ``_fit(X, y)`` and ``_predict_proba(X)``; ``_predict`` defaults to the arg-max class.
    ``y`` is encoded to ``0..n_classes-1`` before ``_fit``; ``classes_`` keeps the original labels.
    Override ``_validate_X`` for non-tabular inputs (dialogues, series).

    A predictor built on another library's estimator base whose public verbs are final too (aeon's
    ``BaseClassifier``: softshape's SoftShapeClassifier and InceptionTimeLite) cannot also be a Predictor
    (one class cannot have two sets of final verbs). Such a class subclasses :class:`Method`, sets
    ``tags["role"] = "predictor"`` (so the common checks run on it), and runs its private ``_fit`` inside
    ``Method._verb_scope`` so that the role's guarantees hold: validated parameters, a local generator,
    global RNGs and torch threads restored.
    """

    _is_role = True
    _final_verbs = ("fit", "predict", "predict_proba")
    tags: ClassVar[dict[str, Any]] = {"role": "predictor"}

    @validate_args(X=_X, y=_Y)
    @_public_verb(begin=True)
    def fit(self, X: Any, y: Any, **fit_params: Any) -> Predictor:
        X = self._validate_X(X, reset=True)
        _, y = check_X_y(np.zeros((len(X), 1)), y, owner=type(self).__name__)
        self.classes_, y_enc = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise InputError(
                f"The 'y' argument of {type(self).__name__} must contain at least 2 classes. "
                f"Got only {self.classes_.tolist()}."
            )
        self._fit(X, y_enc, **fit_params)
        return self

    @validate_args(X=_X)
    @_public_verb(begin=False)
    def predict_proba(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "classes_")
        X = self._validate_X(X, reset=False)
        proba = np.asarray(self._predict_proba(X), dtype=np.float64)
        if proba.shape != (len(X), len(self.classes_)):
            raise TrustlabError(
                f"{type(self).__name__}._predict_proba returned shape {proba.shape}; "
                f"expected {(len(X), len(self.classes_))}."
            )
        return proba

    @validate_args(X=_X)
    @_public_verb(begin=False)
    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "classes_")
        X = self._validate_X(X, reset=False)
        return self.classes_[np.asarray(self._predict(X), dtype=int)]

    def _predict(self, X: Any) -> np.ndarray:
        """Encoded class indices; defaults to the arg-max of ``_predict_proba``."""
        return np.asarray(self._predict_proba(X)).argmax(axis=1)

    def _fit(self, X: Any, y: np.ndarray, **fit_params: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _predict_proba(self, X: Any) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class Regressor(_TabularInputs, RegressorMixin, Method):
    """Regressor role: ``fit(X, y)``, ``predict(X)``; ``score`` is R² (scikit-learn's RegressorMixin).

    ``y`` is numeric and finite, 1-d (one target) or 2-d (one column per target). Implement ``_fit(X, y)``
    (``y`` as given: 1-d or 2-d) and ``_predict(X)``; predictions come back with the shape of ``y``:
    ``(n,)`` for a 1-d ``y``, ``(n, n_outputs_)`` for a 2-d one.
    """

    _is_role = True
    _final_verbs = ("fit", "predict")
    tags: ClassVar[dict[str, Any]] = {"role": "regressor"}

    @validate_args(X=_X, y=_Y)
    @_public_verb(begin=True)
    def fit(self, X: Any, y: Any, **fit_params: Any) -> Regressor:
        owner = type(self).__name__
        X = self._validate_X(X, reset=True)
        y = check_array(y, name="y", owner=owner, ndim=(1, 2))
        check_consistent_length(owner, X=X, y=y)
        self._y_ndim = y.ndim
        self.n_outputs_ = 1 if y.ndim == 1 else y.shape[1]
        self._fit(X, y.astype(np.float64, copy=False), **fit_params)
        return self

    @validate_args(X=_X)
    @_public_verb(begin=False)
    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "n_outputs_")
        X = self._validate_X(X, reset=False)
        out = np.asarray(self._predict(X), dtype=np.float64)
        want = (len(X),) if self._y_ndim == 1 else (len(X), self.n_outputs_)
        if out.shape != want:
            raise TrustlabError(f"{type(self).__name__}._predict returned shape {out.shape}; expected {want}.")
        return out

    def _fit(self, X: Any, y: np.ndarray, **fit_params: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _predict(self, X: Any) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class Detector(_TabularInputs, Method):
    """Detector role: ``fit(X, y=None)``, ``score_samples(X)`` (higher = more suspicious), ``predict(X)``.

    Implement ``_fit`` (which must set ``threshold_``) and ``_score_samples``.
    """

    _is_role = True
    _final_verbs = ("fit", "score_samples", "predict")
    tags: ClassVar[dict[str, Any]] = {"role": "detector"}

    @validate_args(X=_X, y=[AnyValue("passed on to the detector's _fit: unsupervised ones ignore it")])
    @_public_verb(begin=True)
    def fit(self, X: Any, y: Any = None, **fit_params: Any) -> Detector:
        X = self._validate_X(X, reset=True)
        if y is not None:
            X, y = check_X_y(X, y, owner=type(self).__name__, ndim=self._X_ndim)
        self._fit(X, y, **fit_params)
        if not hasattr(self, "threshold_"):
            raise TrustlabError(f"{type(self).__name__}._fit must set 'threshold_'.")
        return self

    @validate_args(X=_X)
    @_public_verb(begin=False)
    def score_samples(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "threshold_")
        X = self._validate_X(X, reset=False)
        return np.asarray(self._score_samples(X), dtype=np.float64).reshape(len(X))

    @validate_args(X=_X)
    @_public_verb(begin=False)
    def predict(self, X: Any) -> np.ndarray:
        """1 for flagged (score above ``threshold_``), 0 otherwise."""
        return (self.score_samples(X) > self.threshold_).astype(int)

    def _fit(self, X: Any, y: Any, **fit_params: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _score_samples(self, X: Any) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class Purifier(_TabularInputs, Method):
    """Purifier role: ``transform(X)`` returns an array of the same shape (and range, see tags)."""

    _is_role = True
    _final_verbs = ("transform",)
    _X_ndim = (2, 3, 4)
    tags: ClassVar[dict[str, Any]] = {"role": "purifier", "input_range": (0.0, 1.0)}

    @validate_args(X=_X)
    @_public_verb(begin=True)
    def transform(self, X: Any) -> np.ndarray:
        X = check_array(X, owner=type(self).__name__, ndim=self._X_ndim)
        out = np.asarray(self._transform(X))
        if out.shape != X.shape:
            raise TrustlabError(f"{type(self).__name__}._transform changed the shape {X.shape} -> {out.shape}.")
        return out

    def _transform(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass
class AttackResult:
    """What an attack produced: ``outputs`` per input, the ``cost`` spent on each (<= ``budget``)."""

    outputs: Any
    budget: float
    cost: np.ndarray
    success: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def success_rate(self) -> float:
        return float(np.mean(self.success)) if len(self.success) else float("nan")


class Attack(Method):
    """Attack role: ``generate(inputs, budget) -> AttackResult``; each input's cost stays within budget."""

    _is_role = True
    _final_verbs = ("generate",)
    tags: ClassVar[dict[str, Any]] = {"role": "attack"}

    @validate_args(inputs=[Satisfies(lambda v: v is not None and (not hasattr(v, "__len__") or len(v) > 0),
                                     "non-empty inputs in the attack's own form (arrays, texts, ...)",
                                     invalid=[None, []])],
                   budget=[Satisfies(lambda v: _is_number(v) and np.isfinite(v) and v >= 0, "a finite number >= 0",
                                     invalid=[-1.0, float("inf"), "1"], valid=1.0)], _enforced_by_body=True)
    @_public_verb(begin=True)
    def generate(self, inputs: Any, budget: float) -> AttackResult:
        if isinstance(budget, bool) or not isinstance(budget, int | float | np.integer | np.floating) \
                or not np.isfinite(budget) or budget < 0:
            raise InputError(
                f"The 'budget' argument of {type(self).__name__}.generate must be a finite number >= 0. "
                f"Got {budget!r} instead."
            )
        if inputs is None or (hasattr(inputs, "__len__") and len(inputs) == 0):
            raise InputError(f"The 'inputs' argument of {type(self).__name__}.generate must be non-empty.")
        result = self._generate(inputs, float(budget))
        cost = np.asarray(result.cost, dtype=float)
        if cost.size and float(cost.max()) > float(budget) + 1e-9:
            raise TrustlabError(
                f"{type(self).__name__} spent {cost.max()} > budget {budget}; this is a bug in the attack."
            )
        return result

    def _generate(self, inputs: Any, budget: float) -> AttackResult:  # pragma: no cover - abstract
        raise NotImplementedError


Update = np.ndarray | Mapping[str, np.ndarray]


class Aggregator(Method):
    """Aggregator role: ``aggregate(updates, weights=None, *, server_round=None, client_ids=None) -> params``.

    ``updates`` is a non-empty sequence of arrays, or of dicts name -> array with the same keys and
    shapes. ``_aggregate`` always receives a list of dicts and normalised weights (summing to 1) and
    returns one dict; the public verb gives back the caller's form.

    ``server_round`` (an int >= 1, Flower's numbering) and ``client_ids`` (one distinct hashable per update)
    are passed on to ``_aggregate`` as keywords when given, for aggregators whose step depends on the round
    (a schedule) or on who sent what (per-client state, error messages naming the client); an aggregator
    that declares no such keyword refuses them.

    Tag ``consensus_fixed_point`` (default True): identical updates aggregate to that update. Set it to
    False only for server-side denoisers that shrink by design (e.g. singular-value thresholding), and say
    why in the class docstring; order invariance is still required.
    """

    _is_role = True
    _final_verbs = ("aggregate",)
    tags: ClassVar[dict[str, Any]] = {"role": "aggregator", "consensus_fixed_point": True}

    @validate_args(updates=[Satisfies(_is_updates, "a non-empty list of arrays or of dicts name -> array",
                                      invalid=[[], "ab", None])],
                   weights=[ArrayLike(ndim=1, low=0), None], server_round=[Interval(int, 1, None), None],
                   client_ids=[Satisfies(lambda v: iter(v) is not None, "an iterable of distinct ids, one per update",
                                         invalid=[3]), None], _enforced_by_body=True)
    @_public_verb(begin=True)
    def aggregate(self, updates: Sequence[Update], weights: Any = None, *, server_round: int | None = None,
                  client_ids: Sequence[Any] | None = None) -> Update:
        owner = type(self).__name__
        if not isinstance(updates, Sequence) or isinstance(updates, str | bytes) or len(updates) == 0:
            raise InputError(f"The 'updates' argument of {owner}.aggregate must be a non-empty list. Got {updates!r}.")
        plain = not isinstance(updates[0], Mapping)
        dicts = [{"": u} if plain else dict(u) for u in updates]
        keys = list(dicts[0])
        ids = list(client_ids) if client_ids is not None and len(client_ids) == len(dicts) else None
        arrays = []
        for i, d in enumerate(dicts):
            who = f"updates[{i}]" + (f" (client {ids[i]!r})" if ids is not None else "")
            if sorted(d) != sorted(keys):
                raise InputError(f"Update {who} of {owner}.aggregate has keys {list(d)}; expected {keys}.")
            kinds = {k: np.asarray(d[k]).dtype for k in keys}
            bad = {k: str(t) for k, t in kinds.items() if t.kind not in "fiu"}  # bool masks are not updates
            if bad:
                raise InputError(f"Update {who} of {owner}.aggregate must hold numbers (float or int arrays). Got "
                                 f"dtypes {bad}.")
            arrays.append({k: check_array(d[k], name=f"{who}[{k!r}]" if k else who, owner=owner, ndim=None)
                           for k in keys})
            for k in keys:
                if arrays[i][k].shape != arrays[0][k].shape:
                    raise InputError(
                        f"Update {who} of {owner}.aggregate has shape {arrays[i][k].shape} for {k!r}; "
                        f"expected {arrays[0][k].shape}."
                    )
        if weights is None:
            w = np.full(len(arrays), 1.0 / len(arrays))
        else:
            w = check_array(weights, name="weights", owner=owner, ndim=1).astype(float)
            check_consistent_length(owner, updates=arrays, weights=w)
            if (w < 0).any() or w.sum() <= 0:
                raise InputError(f"The 'weights' argument of {owner}.aggregate must be >= 0 with a positive sum. Got {w}.")
            w = w / w.sum()
        extra = self._round_arguments(owner, len(arrays), server_round, client_ids)
        out = self._aggregate(arrays, w, **extra)
        return out[""] if plain else out

    def _round_arguments(self, owner: str, n: int, server_round: Any, client_ids: Any) -> dict[str, Any]:
        """Validate ``server_round``/``client_ids``; keep those given, as keywords ``_aggregate`` must declare."""
        from trustlab.core.constraints import Interval, validate_value

        extra: dict[str, Any] = {}
        if server_round is not None:
            validate_value(f"{owner}.aggregate", "server_round", server_round, [Interval(int, 1, None)], noun="argument")
            extra["server_round"] = int(server_round)
        if client_ids is not None:
            ids = list(client_ids)
            dup = next((c for i, c in enumerate(ids) if c in ids[:i]), None)
            if len(ids) != n or dup is not None:
                raise InputError(f"The 'client_ids' argument of {owner}.aggregate must name each of the {n} updates "
                                 f"once. Got {len(ids)} id(s)" + (f"; {dup!r} holds more than once." if dup is not None
                                                                  else " instead."))
            extra["client_ids"] = ids
        refused = [k for k in extra if k not in inspect.signature(self._aggregate).parameters]
        if refused:
            raise InputError(f"{owner}.aggregate does not use {refused}: its step depends on neither the round nor "
                             "the client ids.")
        return extra

    def _aggregate(self, updates: list[dict[str, np.ndarray]], weights: np.ndarray) -> dict[str, np.ndarray]:
        raise NotImplementedError  # pragma: no cover - abstract


class Auditor(Method):
    """Auditor role: ``audit(...) -> report dataclass``."""

    _is_role = True
    _final_verbs = ("audit",)
    tags: ClassVar[dict[str, Any]] = {"role": "auditor"}

    @_public_verb(begin=True)
    def audit(self, *args: Any, **kwargs: Any) -> Any:
        return self._audit(*args, **kwargs)

    def _audit(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError  # pragma: no cover - abstract


@dataclass
class RouteDecision:
    """What a router or cascade did for each query: ``answer`` (n,) the model whose answer is returned,
    ``run`` (n, n_models) which models ran, ``order`` (n, n_models) the run order padded with -1 (None
    when the policy runs one model), ``info`` anything else (tuned lambdas, mixing probability...)."""

    answer: np.ndarray
    run: np.ndarray
    order: np.ndarray | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @validate_args(cost=[ArrayLike(ndim=2)])
    def cost(self, cost: Any) -> np.ndarray:
        """Realised cost per query: the sum of ``cost[i, j]`` over the models run on query ``i``."""
        return (np.asarray(cost, dtype=np.float64) * self.run).sum(axis=1)

    @validate_args(quality=[ArrayLike(ndim=2)])
    def quality(self, quality: Any) -> np.ndarray:
        """Realised quality per query: ``quality[i, answer[i]]``."""
        return np.asarray(quality, dtype=np.float64)[np.arange(len(self.answer)), self.answer]


_QUERIES = [AnyValue("the router's own query form (features, texts or ids), handed to _route")]
_BUDGET = [Interval(float, 0, None)]


class Router(Method):
    """Router role: ``fit(quality, cost)`` on (n_queries, n_models) tables, ``route(queries, budget)``
    returning the chosen model index per query, and ``decide(queries, budget)`` returning a
    :class:`RouteDecision` (which models ran, in which order, and whose answer is returned), which
    cascades need because they may run several models per query.

    Implement ``_route``; a policy that runs several models implements ``_decide`` too (by default
    ``decide`` runs exactly the routed model).
    """

    _is_role = True
    _final_verbs = ("fit", "route", "decide")
    tags: ClassVar[dict[str, Any]] = {"role": "router"}

    @validate_args(quality=[ArrayLike(ndim=2)], cost=[ArrayLike(ndim=2, low=0)], _enforced_by_body=True)
    @_public_verb(begin=True)
    def fit(self, quality: Any, cost: Any, **fit_params: Any) -> Router:
        owner = type(self).__name__
        q = check_array(quality, name="quality", owner=owner)
        c = check_array(cost, name="cost", owner=owner)
        if q.shape != c.shape:
            raise InputError(f"The 'quality' and 'cost' arguments of {owner}.fit must have the same shape. "
                             f"Got {q.shape} and {c.shape}.")
        if (c < 0).any():
            raise InputError(f"The 'cost' argument of {owner}.fit must be >= 0.")
        self.n_models_ = q.shape[1]
        self._fit(q, c, **fit_params)
        return self

    def _check_budget(self, budget: Any, verb: str) -> float:
        if not _is_number(budget) or not budget >= 0:  # NaN too
            raise InputError(f"The 'budget' argument of {type(self).__name__}.{verb} must be a number >= 0. "
                             f"Got {budget!r}.")
        return float(budget)

    @validate_args(queries=_QUERIES, budget=_BUDGET, _enforced_by_body=True)
    @_public_verb(begin=False)
    def route(self, queries: Any, budget: float) -> np.ndarray:
        check_is_fitted(self, "n_models_")
        choice = np.asarray(self._route(queries, self._check_budget(budget, "route")), dtype=int)
        if choice.size and (choice.min() < 0 or choice.max() >= self.n_models_):
            raise TrustlabError(f"{type(self).__name__}._route returned a model index out of range.")
        return choice

    @validate_args(queries=_QUERIES, budget=_BUDGET, _enforced_by_body=True)
    @_public_verb(begin=False)
    def decide(self, queries: Any, budget: float) -> RouteDecision:
        check_is_fitted(self, "n_models_")
        d = self._decide(queries, self._check_budget(budget, "decide"))
        answer = np.asarray(d.answer, dtype=int)
        run = np.asarray(d.run, dtype=bool)
        if run.ndim != 2 or run.shape != (len(answer), self.n_models_):
            raise TrustlabError(f"{type(self).__name__}._decide returned 'run' of shape {run.shape}; expected "
                                f"{(len(answer), self.n_models_)}.")
        if answer.size and (answer.min() < 0 or answer.max() >= self.n_models_
                            or not run[np.arange(len(answer)), answer].all()):
            raise TrustlabError(f"{type(self).__name__}._decide returned an answer from a model that did not run.")
        return RouteDecision(answer, run, d.order, dict(d.info))

    def _fit(self, quality: np.ndarray, cost: np.ndarray, **fit_params: Any) -> None:
        raise NotImplementedError  # pragma: no cover - abstract

    def _route(self, queries: Any, budget: float) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover - abstract

    def _decide(self, queries: Any, budget: float) -> RouteDecision:
        choice = np.asarray(self._route(queries, budget), dtype=int)
        run = np.zeros((len(choice), self.n_models_), dtype=bool)
        run[np.arange(len(choice)), choice] = True
        return RouteDecision(choice, run)


ROLES: dict[str, type[Method]] = {
    "predictor": Predictor,
    "regressor": Regressor,
    "detector": Detector,
    "purifier": Purifier,
    "attack": Attack,
    "aggregator": Aggregator,
    "model_edit": ModelEdit,
    "auditor": Auditor,
    "router": Router,
}
