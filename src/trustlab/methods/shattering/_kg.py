"""The paper's synthetic world: entities on several independent random cyclic orders.

Each order ``o`` (named I, II, III, ...) is a random cyclic permutation of the same ``n_entities``
entities. For every order there are ``2 * max_hops`` relations: the k-hop clockwise (``I_C2``) and
anticlockwise (``I_A2``) neighbour, so every relation sub-graph is a disjoint union of cycles and facts are
structurally tied. Held out from training are *logical-inference* facts: a fraction of anticlockwise facts
whose clockwise inverse stays in training (``x I_A1 -> y`` follows from ``y I_C1 -> x``).

Tokens: entity ``x`` is token ``x``; relation ``r`` is token ``n_entities + r``. Training data are
random walks alternating entity and relation tokens over training facts (``x0 r0 x1 r1 x2 ...``), with
optional two-relation compositions (``x r1 r2 z``, ``z = r2(r1(x))``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import AnyValue, Interval, Options, RandomStateRule
from trustlab.core.exceptions import InputError, UnknownNameError, did_you_mean
from trustlab.core.hashing import content_hash
from trustlab.core.seeding import check_random_state

__all__ = ["CyclicKG"]

_ROMAN = ("I", "II", "III", "IV", "V", "VI", "VII", "VIII")


@validate_args(o=[Interval(int, 0, len(_ROMAN) - 1)])
def order_name(o: int) -> str:
    """Roman name of order ``o`` (0 -> "I")."""
    return _ROMAN[o]


#: relation_spec checks a relation index against n_relations itself (InputError); it runs once per relation
#: inside facts() and the constructor, so no wrapper
_BODY_R = "a relation index, checked by relation_spec against n_relations (InputError naming 'r')"


@dataclass(frozen=True)
class Fact:
    """One fact ``relation(subject) = answer`` (entity ids and a relation index)."""

    subject: int
    relation: int
    answer: int


@dataclass
class CyclicKG:
    """Structured knowledge graph of ``n_orders`` random cyclic orders over ``n_entities`` entities.

    Parameters
    ----------
    n_entities : int, default=64
    n_orders : int, default=3
    max_hops : int, default=4
        Relations are the k-hop clockwise / anticlockwise neighbours for k in 1..max_hops.
    holdout : float, default=0.15
        Fraction of anticlockwise facts held out from training (logical-inference test set).
    seed : int, default=0
        The orders and the held-out set are a deterministic function of the seed.

    Example
    -------
    >>> kg = CyclicKG(n_entities=16, seed=0)
    >>> x = 3
    >>> kg.answer(kg.answer(x, kg.relation("I_A2")), kg.relation("I_C2")) == x
    True
    """

    n_entities: int = 64
    n_orders: int = 3
    max_hops: int = 4
    holdout: float = 0.15
    seed: int = 0
    orders: np.ndarray = field(init=False, repr=False)
    positions: np.ndarray = field(init=False, repr=False)
    relation_names: list[str] = field(init=False, repr=False)
    table: np.ndarray = field(init=False, repr=False)
    train_mask: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name, lo, hi in (("max_hops", 1, None), ("n_orders", 1, len(_ROMAN)), ("seed", 0, None),
                             ("n_entities", 2 * int(self.max_hops) + 2, None)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < lo or (hi is not None and v > hi):
                raise InputError(f"The '{name}' argument of CyclicKG must be an int in [{lo}, "
                                 f"{'inf' if hi is None else hi}]. Got {v!r} instead.")
        if isinstance(self.holdout, bool) or not isinstance(self.holdout, float | int) or not 0 <= self.holdout < 1:
            raise InputError(f"The 'holdout' argument of CyclicKG must be a float in [0, 1). Got {self.holdout!r} "
                             "instead.")
        rng = np.random.default_rng(self.seed)
        n, k = int(self.n_entities), int(self.max_hops)
        self.orders = np.stack([rng.permutation(n) for _ in range(self.n_orders)])
        self.positions = np.argsort(self.orders, axis=1)
        self.relation_names = [f"{order_name(o)}_{d}{h}" for o in range(self.n_orders) for d in "CA"
                               for h in range(1, k + 1)]
        table = np.empty((n, self.n_relations), dtype=np.int64)
        for r in range(self.n_relations):
            o, sign, hops = self.relation_spec(r)
            table[:, r] = self.orders[o][(self.positions[o] + sign * hops) % n]
        self.table = table
        mask = np.ones((n, self.n_relations), dtype=bool)
        anti = [r for r in range(self.n_relations) if self.relation_spec(r)[1] < 0]
        cells = np.array([(x, r) for x in range(n) for r in anti])
        n_out = int(round(self.holdout * len(cells)))
        out = cells[rng.choice(len(cells), size=n_out, replace=False)] if n_out else np.zeros((0, 2), int)
        mask[out[:, 0], out[:, 1]] = False
        self.train_mask = mask

    # ---- structure ---------------------------------------------------------------------------------------
    @property
    def n_relations(self) -> int:
        return 2 * int(self.max_hops) * int(self.n_orders)

    @property
    def vocab_size(self) -> int:
        return int(self.n_entities) + self.n_relations

    @validate_args(r=[AnyValue(_BODY_R)])
    def relation_spec(self, r: int) -> tuple[int, int, int]:
        """(order, sign, hops) of relation index ``r``: sign +1 clockwise, -1 anticlockwise."""
        if isinstance(r, bool) or not isinstance(r, int | np.integer) or not 0 <= r < self.n_relations:
            raise InputError(f"The 'r' argument of CyclicKG.relation_spec must be a relation index in "
                             f"[0, {self.n_relations - 1}]. Got {r!r} instead.")
        per = 2 * int(self.max_hops)
        o, rest = divmod(int(r), per)
        sign = 1 if rest < self.max_hops else -1
        return o, sign, rest % int(self.max_hops) + 1

    @validate_args(name=[str])
    def relation(self, name: str) -> int:
        """Index of a relation by name (``"I_C1"``)."""
        if name not in self.relation_names:
            raise UnknownNameError(f"Unknown relation {name!r}.{did_you_mean(str(name), self.relation_names)}")
        return self.relation_names.index(name)

    @validate_args(r=[AnyValue(_BODY_R)])
    def inverse(self, r: int) -> int:
        """The relation that undoes ``r`` (``I_C2`` <-> ``I_A2``)."""
        o, sign, hops = self.relation_spec(r)
        return o * 2 * int(self.max_hops) + (0 if sign < 0 else int(self.max_hops)) + hops - 1

    @validate_args(x=[AnyValue("the value checked: the body raises InputError naming the caller's argument")],
                   name=[str], owner=[str])
    def check_entity(self, x: Any, name: str = "entity", owner: str = "CyclicKG") -> int:
        """Return ``x`` as an int entity id, or raise naming the argument."""
        if isinstance(x, bool) or not isinstance(x, int | np.integer) or not 0 <= x < self.n_entities:
            raise InputError(f"The '{name}' argument of {owner} must be an entity id in [0, {self.n_entities - 1}] "
                             f"(entities are not in the vocabulary otherwise). Got {x!r} instead.")
        return int(x)

    @validate_args(x=[AnyValue("checked by check_entity against n_entities (InputError naming 'x')")],
                   r=[AnyValue(_BODY_R)])
    def answer(self, x: int, r: int) -> int:
        """``r(x)``: the entity the relation maps ``x`` to."""
        self.relation_spec(r)
        return int(self.table[self.check_entity(x, "x", "CyclicKG.answer"), r])

    @validate_args(order=[Interval(int, 0, None)], a=[ArrayLike(ndim=None, dtype="integer", low=0)],
                   b=[ArrayLike(ndim=None, dtype="integer", low=0)],
                   _example=lambda: {"order": 0, "a": 0, "b": 1})
    def cyclic_distance(self, order: int, a: Any, b: Any) -> np.ndarray:
        """Shortest distance on cycle ``order`` between entities ``a`` and ``b`` (broadcasts)."""
        n = int(self.n_entities)
        d = np.abs(self.positions[order][np.asarray(a)] - self.positions[order][np.asarray(b)]) % n
        return np.minimum(d, n - d)

    @validate_args(order=[Interval(int, 0, None)])
    def distance_matrix(self, order: int) -> np.ndarray:
        """(n, n) cyclic distances between all entities on one order."""
        idx = np.arange(self.n_entities)
        return self.cyclic_distance(order, idx[:, None], idx[None, :])

    @validate_args(order=[Interval(int, 0, None)], x=[Interval(int, 0, None)], steps=[Interval(int, None, None)])
    def shifted(self, order: int, x: int, steps: int) -> int:
        """The entity ``steps`` positions clockwise of ``x`` on ``order``."""
        n = int(self.n_entities)
        return int(self.orders[order][(self.positions[order][x] + steps) % n])

    @validate_args(split=[Options(["train", "heldout", "all"])],
                   orders=[None, SequenceOf(Interval(int, 0, None), min_len=0), ArrayLike(ndim=1, dtype="integer", low=0)])
    def facts(self, split: str = "train", orders: Any = None) -> np.ndarray:
        """(m, 3) int array of (subject, relation, answer): ``split`` "train", "heldout" or "all"."""
        if split not in ("train", "heldout", "all"):
            raise InputError(f"The 'split' argument of CyclicKG.facts must be one of 'train', 'heldout', 'all'. "
                             f"Got {split!r} instead.")
        sel = {"train": self.train_mask, "heldout": ~self.train_mask,
               "all": np.ones_like(self.train_mask)}[split].copy()
        if orders is not None:
            keep = np.array([self.relation_spec(r)[0] in set(orders) for r in range(self.n_relations)])
            sel &= keep[None, :]
        x, r = np.nonzero(sel)
        return np.stack([x, r, self.table[x, r]], axis=1)

    def fingerprint(self) -> str:
        """Content hash of the graph (orders, held-out set)."""
        return content_hash(self.orders, self.train_mask, int(self.max_hops))

    # ---- sequences ---------------------------------------------------------------------------------------
    def _random_allowed(self, cur: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        scores = rng.random((len(cur), self.n_relations)) * self.train_mask[cur]
        return scores.argmax(axis=1)

    @validate_args(n=[Interval(int, 1, None)], length=[Interval(int, 3, None)],
                   composition=[Interval(float, 0, 1, closed="both")], random_state=[RandomStateRule()],
                   _example=lambda: {"self": CyclicKG(16), "n": 2, "length": 9, "composition": 0.0,
                                     "random_state": 0})
    def walks(self, n: int, length: int = 16, composition: float = 0.0, random_state: Any = 0
              ) -> tuple[np.ndarray, np.ndarray]:
        """``n`` random walks over training facts: (tokens ``(n, length)``, entity-target mask ``(n, length)``).

        ``mask[i, t]`` is True where token ``t`` is an entity that follows a relation token (the positions a
        model is trained to predict). With probability ``composition`` a step emits two relation tokens and
        then the two-hop answer (both facts are training facts).
        """
        rng = check_random_state(random_state, owner="CyclicKG.walks")
        tok = np.empty((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=bool)
        cur = rng.integers(0, self.n_entities, size=n)
        tok[:, 0] = cur
        t = np.ones(n, dtype=np.int64)
        rows = np.arange(n)
        after_rel = np.zeros(n, dtype=bool)  # the last token was a relation whose answer is not yet emitted
        n_e = int(self.n_entities)
        while (t < length).any():
            active = t < length
            r = self._random_allowed(cur, rng)
            a = rows[active]
            tok[a, t[a]] = n_e + r[a]
            cur = np.where(active, self.table[cur, r], cur)
            t = t + active
            compose = (rng.random(n) < composition) & ~after_rel & (t + 1 < length)
            ent = active & ~compose & (t < length)
            e = rows[ent]
            tok[e, t[e]] = cur[e]
            mask[e, t[e]] = True
            t = t + ent
            after_rel = active & compose
        return tok, mask

    @validate_args(entities=[ArrayLike(ndim=(0, 1), dtype="integer", low=0)], length=[Interval(int, 0, None)],
                   random_state=[RandomStateRule()],
                   _example=lambda: {"self": CyclicKG(16), "entities": 3, "length": 2, "random_state": 0})
    def contexts(self, entities: Any, length: int, random_state: Any = 0) -> np.ndarray:
        """Backward walks of ``length`` hops ending in each entity: ``(len(entities), 2 * length + 1)`` tokens."""
        rng = check_random_state(random_state, owner="CyclicKG.contexts")
        cur = np.atleast_1d(np.asarray(entities, dtype=np.int64)).copy()
        out = [cur.copy()]
        for _ in range(int(length)):
            # choose r with a training fact (prev, r, cur): prev = inverse(r)(cur)
            inv = np.array([self.inverse(r) for r in range(self.n_relations)])
            prev_all = self.table[cur][:, inv]  # (m, R): prev for each r
            ok = self.train_mask[prev_all, np.arange(self.n_relations)[None, :]]
            r = (rng.random(ok.shape) * ok).argmax(axis=1)
            prev = prev_all[np.arange(len(cur)), r]
            out = [prev.copy(), int(self.n_entities) + r] + out
            cur = prev
        return np.stack(out, axis=1)
