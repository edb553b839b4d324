"""SelectionTable: per-query, per-model answers, quality and cost, validated once.

One row per query, one column per model. ``quality[i, j]`` is how good model ``j``'s answer to query ``i``
is (0/1 correctness, or a score), ``cost[i, j]`` what running it costs (>= 0, any unit), ``answers[i, j]``
the model's raw output (a class-probability vector, a string, or a dict with ``answer`` / ``text`` /
``logprobs``), ``features`` optional per-query numbers (e.g. a benchmark one-hot). Every policy runs on a
table, so precomputed RouterBench-style data, the live pools and a user's CSV plug in unchanged.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval, RandomStateRule, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.hashing import content_hash
from trustlab.core.seeding import check_random_state

__all__ = ["SelectionTable", "synthetic_table"]

#: a model must not be listed twice; the models of a table are at most this many (2^k run-sets)
MAX_MODELS = 16


def _is_rows(v: Any) -> bool:
    a = np.asarray(v)
    return a.ndim == 1 and a.dtype.kind in "biu"


#: the ``rows`` of ``subset``: what ``np.arange(n)[np.asarray(rows)]`` takes (indices or a boolean mask)
ROWS = Satisfies(_is_rows, "row indices (a 1-d array of ints) or a boolean mask over the rows", [None, "rows", [0.5]],
                 valid=[0])
_MODELS = Satisfies(lambda v: isinstance(v, list | tuple) and len(v) > 0
                    and all(isinstance(m, str) or (isinstance(m, int | np.integer) and not isinstance(m, bool))
                            for m in v),
                    "a non-empty list of model names (str) or column indices (int)", ["gpt", [], [1.5]], valid=[0])


def _float_matrix(value: Any, name: str, shape: tuple[int, int] | None) -> np.ndarray:
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"The '{name}' argument of SelectionTable must be a numeric (n_queries, n_models) "
                         f"array. Could not convert it: {exc}") from exc
    if arr.ndim != 2:
        raise InputError(f"The '{name}' argument of SelectionTable must be a 2-d (n_queries, n_models) array. "
                         f"Got shape {arr.shape} instead.")
    if shape is not None and arr.shape != shape:
        raise InputError(f"The '{name}' argument of SelectionTable must have shape {shape} like 'quality'. "
                         f"Got {arr.shape} instead.")
    return arr


def _missing_message(arr: np.ndarray, models: Sequence[str], what: str) -> str:
    bad = ~np.isfinite(arr)
    per = {models[j]: int(bad[:, j].sum()) for j in range(arr.shape[1]) if bad[:, j].any()}
    first = np.argwhere(bad)[0]
    return (f"The '{what}' table has {int(bad.sum())} missing (NaN) or infinite entries: {per} "
            f"(first at query {int(first[0])}, model {models[int(first[1])]!r}). Every model needs a value for "
            "every query; drop the incomplete rows (on_missing='drop' in load_selection_table / "
            "load_routerbench) or fill them.")


@dataclass(eq=False)
class SelectionTable:
    """Per-query, per-model quality, cost, answers and query features for routing and cascading.

    Parameters
    ----------
    quality : array (n_queries, n_models) or None
        Ground-truth quality of each model's answer (None for unlabelled queries that are only routed).
        Must be finite; values outside [0, 1] are allowed (scores) but warn.
    cost : array (n_queries, n_models) or None
        Cost of running each model on each query, finite and >= 0 (None when unknown).
    models : sequence of str, optional
        Model names (default ``m0, m1, ...``), distinct.
    queries : sequence, optional
        Query ids or texts (default ``0..n-1``).
    answers : array (n_queries, n_models) of objects, optional
        Raw outputs; ``None`` marks a missing answer. A model with no answer at all is refused.
    features : array (n_queries, n_features), optional
        Per-query numeric features available before any model runs.
    name : str
        A label for reports.

    Raises
    ------
    InputError
        Mismatched shapes, negative or non-finite costs, missing (NaN) qualities, a model without answers.

    Examples
    --------
    >>> t = SelectionTable(quality=[[0, 1], [1, 1]], cost=[[1, 3], [1, 3]], models=["small", "large"])
    >>> t.n_queries, t.models
    (2, ('small', 'large'))
    """

    quality: Any = None
    cost: Any = None
    models: Sequence[str] | None = None
    queries: Any = None
    answers: Any = None
    features: Any = None
    name: str = ""
    _hash: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.quality is None and self.cost is None and self.answers is None:
            raise InputError("SelectionTable needs at least one of 'quality', 'cost' or 'answers'.")
        ref = self.quality if self.quality is not None else (self.cost if self.cost is not None else self.answers)
        shape = np.shape(ref)
        if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
            raise InputError(f"SelectionTable tables must be 2-d (n_queries >= 1, n_models >= 1). Got shape {shape}.")
        n, k = shape
        if k > MAX_MODELS:
            raise InputError(f"SelectionTable supports at most {MAX_MODELS} models (run-sets grow as 2^k). Got {k}.")
        self.models = tuple(str(m) for m in (self.models if self.models is not None else [f"m{j}" for j in range(k)]))
        if len(self.models) != k or len(set(self.models)) != k:
            raise InputError(f"The 'models' argument of SelectionTable must name {k} distinct models. "
                             f"Got {list(self.models)} instead.")
        if self.quality is not None:
            self.quality = _float_matrix(self.quality, "quality", (n, k))
            if not np.isfinite(self.quality).all():
                raise InputError(_missing_message(self.quality, self.models, "quality"))
            if self.quality.min() < 0 or self.quality.max() > 1:
                warnings.warn(f"SelectionTable quality has values outside [0, 1] (min {self.quality.min():.4g}, "
                              f"max {self.quality.max():.4g}); AUCs are then not 'average accuracy' and the "
                              "threshold cascade and classification estimator need [0, 1].", UserWarning,
                              stacklevel=3)
        if self.cost is not None:
            self.cost = _float_matrix(self.cost, "cost", (n, k))
            if not np.isfinite(self.cost).all():
                raise InputError(_missing_message(self.cost, self.models, "cost"))
            if (self.cost < 0).any():
                i, j = np.argwhere(self.cost < 0)[0]
                raise InputError(f"The 'cost' argument of SelectionTable must be >= 0. Got {self.cost[i, j]!r} "
                                 f"for query {int(i)}, model {self.models[int(j)]!r}.")
        if self.answers is not None:
            self.answers = self._check_answers(self.answers, n, k)
        self.queries = np.asarray(list(range(n)) if self.queries is None else list(self.queries), dtype=object)
        if self.queries.shape != (n,):
            raise InputError(f"The 'queries' argument of SelectionTable must have {n} entries. "
                             f"Got {self.queries.shape[0]} instead.")
        if self.features is not None:
            f = np.array(self.features, dtype=np.float64)
            f = f.reshape(n, -1) if f.ndim == 1 else f
            if f.ndim != 2 or f.shape[0] != n or not np.isfinite(f).all():
                raise InputError(f"The 'features' argument of SelectionTable must be a finite (n_queries={n}, "
                                 f"n_features) array. Got shape {f.shape}.")
            self.features = f

    def _check_answers(self, answers: Any, n: int, k: int) -> np.ndarray:
        arr = np.empty((n, k), dtype=object)
        rows = list(answers)
        if len(rows) != n or any(len(r) != k for r in rows):
            raise InputError(f"The 'answers' argument of SelectionTable must be {n} rows of {k} answers.")
        for i, r in enumerate(rows):
            for j, a in enumerate(r):
                arr[i, j] = a
        none = np.vectorize(lambda a: a is None, otypes=[bool])(arr)
        empty = [self.models[j] for j in range(k) if none[:, j].all()]
        if empty:
            raise InputError(f"Model(s) {empty} have no answers at all in the SelectionTable; drop them "
                             "(SelectionTable.select_models) or provide their answers.")
        return arr

    # ------------------------------------------------------------------------------------ views
    @property
    def n_queries(self) -> int:
        return int(len(self.queries))

    def __len__(self) -> int:
        return self.n_queries

    @property
    def n_models(self) -> int:
        return len(self.models)

    def mean_quality(self) -> np.ndarray:
        """Per-model mean quality (needs ``quality``)."""
        self.require("quality")
        return self.quality.mean(axis=0)

    def mean_cost(self) -> np.ndarray:
        """Per-model mean cost (needs ``cost``)."""
        self.require("cost")
        return self.cost.mean(axis=0)

    def require(self, *what: str) -> None:
        """Raise InputError unless the table has every named field (quality, cost, answers, features)."""
        missing = [w for w in what if getattr(self, w) is None]
        if missing:
            raise InputError(f"This SelectionTable{' ' + repr(self.name) if self.name else ''} has no {missing}; "
                             f"the operation needs {list(what)}.")

    @validate_args(rows=[ROWS])
    def subset(self, rows: Any) -> SelectionTable:
        """The table restricted to ``rows`` (indices or a boolean mask), in that order."""
        idx = np.arange(self.n_queries)[np.asarray(rows)]

        def pick(a: Any) -> Any:
            return None if a is None else a[idx]

        return SelectionTable(quality=pick(self.quality), cost=pick(self.cost), models=self.models,
                              queries=self.queries[idx], answers=pick(self.answers), features=pick(self.features),
                              name=self.name)

    @validate_args(models=[_MODELS])
    def select_models(self, models: Sequence[str | int]) -> SelectionTable:
        """The table restricted to ``models`` (names or column indices), in that order."""
        cols = [self.models.index(m) if isinstance(m, str) else int(m) for m in models]

        def pick(a: Any) -> Any:
            return None if a is None else a[:, cols]

        return SelectionTable(quality=pick(self.quality), cost=pick(self.cost),
                              models=[self.models[c] for c in cols], queries=self.queries,
                              answers=pick(self.answers), features=self.features, name=self.name)

    @validate_args(test_size=[Interval("real", 0, 1, closed="neither"), Interval(int, 1, None)],
                   random_state=["random_state"])
    def split(self, test_size: float = 0.5, *, random_state: Any = None) -> tuple[SelectionTable, SelectionTable]:
        """A random (train, test) split of the rows (``sklearn.model_selection.train_test_split``)."""
        from sklearn.model_selection import train_test_split

        tr, te = train_test_split(np.arange(self.n_queries), test_size=test_size,
                                  random_state=None if random_state is None else
                                  int(check_random_state(random_state).integers(2**31)))
        return self.subset(np.sort(tr)), self.subset(np.sort(te))

    def content_hash(self) -> str:
        """SHA-256 of the table's contents (cache key)."""
        if self._hash is None:
            ans = None if self.answers is None else list(self.answers.ravel())
            self._hash = content_hash({"q": self.quality, "c": self.cost, "m": list(self.models),
                                       "queries": [str(q) for q in self.queries], "a": ans, "f": self.features})
        return self._hash

    def row_keys(self) -> np.ndarray:
        """One hash per row (query id, answers, features): marks rows an estimator was fitted on."""
        out = np.empty(self.n_queries, dtype=object)
        for i in range(self.n_queries):
            ans = None if self.answers is None else list(self.answers[i])
            feats = None if self.features is None else self.features[i]
            q = None if self.quality is None else self.quality[i]
            out[i] = content_hash(str(self.queries[i]), ans, feats, q)[:24]
        return out

    def __repr__(self) -> str:
        has = [w for w in ("quality", "cost", "answers", "features") if getattr(self, w) is not None]
        return (f"SelectionTable({self.name + ': ' if self.name else ''}{self.n_queries} queries x "
                f"{self.n_models} models {list(self.models)}; {', '.join(has)})")


def _default_skills(n_models: int) -> np.ndarray:
    return np.linspace(-0.25, 1.75, n_models)


@validate_args(n_queries=[Interval(int, 2, None)], n_models=[Interval(int, 1, MAX_MODELS)],
               cost_ratio=[Interval("real", 1, None)], base_cost=[Interval("real", 0, None, closed="neither")],
               skills=[None, ArrayLike(ndim=1)], noise=[Interval("real", 0, None)],
               cost_spread=[Interval("real", 0, None)], n_tasks=[Interval(int, 1, None)],
               task_skill=[Interval("real", 0, None)], random_state=[RandomStateRule()])
def synthetic_table(n_queries: int = 2000, n_models: int = 5, *, cost_ratio: float = 3.0, base_cost: float = 1e-4,
                    skills: Any = None, noise: float = 1.0, cost_spread: float = 0.3, n_tasks: int = 1,
                    task_skill: float = 0.0, random_state: Any = None) -> SelectionTable:
    """A synthetic RouterBench-like table (the spec's B1 generator).

    Query ``i`` has a latent difficulty ``d_i ~ N(0, 1)``; model ``j`` a skill ``a_j`` (default evenly spaced
    in [-0.25, 1.75], so mean accuracies run from about 0.45 to 0.8); correctness
    ``q_ij ~ Bernoulli(sigmoid(a_j - d_i + eps_ij))`` with ``eps_ij ~ N(0, noise^2)`` (the per-query,
    per-model part a router can exploit). Costs are geometric: ``base_cost * cost_ratio^j`` times a per-query
    length factor ``exp(N(0, cost_spread^2))`` shared by all models (longer prompts cost more everywhere), in
    dollar-like units so RouterBench's cost-noise levels apply unchanged.

    **Task-specific skills** (``n_tasks = T > 1``, the "B1-tasks" generator): query ``i`` also has a task type
    ``t_i`` drawn uniformly from ``T`` types, and model ``j`` is a specialist of type ``j mod T``: its logit
    gains ``task_skill * (1[t_i = j mod T] - 1/T)`` (zero on average over types, so its mean skill stays
    ``a_j``). Each query then has two latent factors (difficulty and type) and the models' strengths are no
    longer ordered like their costs. The type's one-hot is the table's ``features``. The extra draws come after
    the others, so ``n_tasks=1`` gives the plain table for the same seed.

    Examples
    --------
    >>> t = synthetic_table(100, 3, random_state=0)
    >>> t.quality.shape, bool((t.mean_cost()[1:] > t.mean_cost()[:-1]).all())
    ((100, 3), True)
    """
    rng = check_random_state(random_state)
    a = _default_skills(n_models) if skills is None else np.asarray(skills, dtype=float)
    if a.shape != (n_models,):
        raise InputError(f"The 'skills' argument of synthetic_table must have n_models={n_models} entries. "
                         f"Got {a.shape[0]} instead.")
    d = rng.normal(size=(n_queries, 1))
    eps = rng.normal(scale=noise, size=(n_queries, n_models))
    logit = a[None, :] - d + eps
    u = rng.random((n_queries, n_models))
    length = np.exp(rng.normal(scale=cost_spread, size=(n_queries, 1)))
    features = None
    if n_tasks > 1:
        task = rng.integers(0, n_tasks, size=n_queries)
        special = task[:, None] == np.arange(n_models)[None, :] % n_tasks
        logit = logit + task_skill * (special - 1.0 / n_tasks)
        features = np.eye(n_tasks)[task]
    quality = (u < 1.0 / (1.0 + np.exp(-logit))).astype(float)
    cost = base_cost * cost_ratio ** np.arange(n_models)[None, :] * length
    tag = f", {n_tasks} task types" if n_tasks > 1 else ""
    return SelectionTable(quality=quality, cost=cost, models=[f"model{j}" for j in range(n_models)],
                          queries=[f"q{i}" for i in range(n_queries)], features=features,
                          name=f"synthetic({n_models} models{tag})")
