"""RESPLIT: a Rashomon set of near-optimal trees, counted first and indexed lazily.

1. The lookahead DP gives ``L*`` (best prefix of depth ``d_l`` under greedy completions); the bound
   is ``theta = (1 + rashomon_mult) L*`` or ``theta = L* + rashomon_add``.
2. Every prefix of depth ``d_l`` whose greedy-completed objective is ``<= theta`` is enumerated
   (children are pruned with their exact lookahead optima, so nothing within the bound is missed).
3. Each *frontier* leaf of a prefix (depth ``d_l``) gets a set of subtrees of depth ``d - d_l + 1``:
   every subtree whose objective is ``<=`` that leaf's greedy completion (``fill="rashomon"``), the
   optimal one (``"optimal"``) or the greedy one (``"greedy"``). Leaves above the frontier stay leaves,
   so each tree has exactly one decomposition and the union over prefixes has no duplicates.
4. The set is the union over prefixes of the cross products of their leaf sets: counted up front,
   refused when larger than ``max_models``, and materialised one tree at a time by mixed-radix
   indexing (:meth:`RESPLIT.tree_at`).

Soundness: each subtree is no worse than the greedy completion it replaces, so every tree has
``R <= prefix objective <= theta``. The set is a subset of the exact Rashomon set with the same
``theta`` (TreeFARMS), not all of it. Objectives are computed in global units throughout (no leaf-wise
regularisation cap, unlike the reference code's ``min(0.1, ...)``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import AnyValue, Interval, Options, validate_value
from trustlab.core.exceptions import BudgetExceededError, ConfigError, InputError
from trustlab.core.validation import check_is_fitted
from trustlab.methods.split._base import SparseTreeBase, check_lookahead
from trustlab.methods.split._binarizer import ThresholdGuessBinarizer
from trustlab.methods.split._engine import TOL, Engine
from trustlab.methods.split._search import LookaheadSolver, _valid_children, greedy_tree
from trustlab.methods.split._tree import TreeNode

__all__ = ["RESPLIT"]

# a prefix is ("F", frontier_index) | ("L", counts) | ("S", feature, left, right, counts)
_Prefix = tuple


class _TooMany(Exception):
    pass


#: a tree index: _check_index checks it against [0, n_trees_ - 1] (the bound the rule cannot know), and
#: objective_at runs once per tree of a set, so no wrapper
_INDEX = "a tree index, checked by _check_index against [0, n_trees_ - 1] (ConfigError naming 'i')"


class RESPLIT(SparseTreeBase):
    """Rashomon set of near-optimal sparse trees from SPLIT prefixes (paper Algorithm "RESPLIT").

    Parameters
    ----------
    depth_budget : int, default=5
        ``d`` (a lone leaf has depth 1).
    lookahead_depth : int, default=3
        ``d_l``: depth of the enumerated prefixes (1 <= d_l <= d).
    reg : float, default=0.01
        ``lambda``: penalty per leaf.
    rashomon_mult : float or None, default=0.01
        ``epsilon`` of ``theta = (1 + epsilon) L*``. Set it to None to use ``rashomon_add``.
    rashomon_add : float or None, default=None
        ``theta = L* + rashomon_add`` (objective units). Exactly one of the two must be set.
    fill : {"rashomon", "optimal", "greedy"}, default="rashomon"
        Subtrees placed in each frontier leaf (see the module notes).
    completion : {"greedy", "exact_last"}, default="greedy"
        Greedy completions used for prefix values and leaf bounds (see :class:`SPLITClassifier`).
    max_models : int, default=100000
        Refuse (``BudgetExceededError``) when the set is larger, before materialising any tree.
    binarize, binarizer, random_state
        As in :class:`SPLITClassifier`.

    Attributes
    ----------
    n_trees_ : int
        Size of the set.
    n_prefixes_ : int
    reference_objective_ : float
        ``L*``, the best prefix's greedy-completed objective.
    rashomon_bound_ : float
        ``theta``.
    min_objective_, max_objective_ : float
        Smallest and largest objective in the set (computed without enumerating).
    tree_ : TreeNode
        The set's best tree (used by ``predict``); ``objective_`` is its objective.
    fit_info_ : dict

    References
    ----------
    Babbar et al., ICML 2025; official code https://github.com/VarunBabbar/SPLIT-ICML (``resplit``).

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> rs = RESPLIT(depth_budget=3, lookahead_depth=2, reg=0.02, rashomon_mult=0.05, random_state=0).fit(X, y)
    >>> rs.max_objective_ <= rs.rashomon_bound_ + 1e-12
    True
    """

    _constraints: ClassVar[dict[str, list[Any]]] = {
        **SparseTreeBase._common_constraints,
        "lookahead_depth": [Interval(int, 1, 64)],
        "rashomon_mult": [Interval(float, 0, None), None],
        "rashomon_add": [Interval(float, 0, None), None],
        "fill": [Options(["rashomon", "optimal", "greedy"])],
        "completion": [Options(["greedy", "exact_last"])],
        "max_models": [Interval(int, 1, None)],
    }

    def __init__(self, *, depth_budget: int = 5, lookahead_depth: int = 3, reg: float = 0.01,
                 rashomon_mult: float | None = 0.01, rashomon_add: float | None = None, fill: str = "rashomon",
                 completion: str = "greedy", max_models: int = 100_000, binarize: Any = "auto",
                 binarizer: ThresholdGuessBinarizer | None = None, random_state: Any = None) -> None:
        self.depth_budget = depth_budget
        self.lookahead_depth = lookahead_depth
        self.reg = reg
        self.rashomon_mult = rashomon_mult
        self.rashomon_add = rashomon_add
        self.fill = fill
        self.completion = completion
        self.max_models = max_models
        self.binarize = binarize
        self.binarizer = binarizer
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [
            {"depth_budget": 3, "lookahead_depth": 2, "reg": 0.02, "rashomon_mult": 0.05},
            {"depth_budget": 3, "lookahead_depth": 2, "reg": 0.02, "rashomon_mult": None, "rashomon_add": 0.01,
             "fill": "greedy"},
        ]

    # -- fit ------------------------------------------------------------------------------------------
    def _check_combination(self) -> None:
        owner = type(self).__name__
        if (self.rashomon_mult is None) == (self.rashomon_add is None):
            raise ConfigError(
                f"Exactly one of the 'rashomon_mult' and 'rashomon_add' parameters of {owner} must be set. "
                f"Got rashomon_mult={self.rashomon_mult!r} and rashomon_add={self.rashomon_add!r} instead."
            )
        check_lookahead(owner, int(self.depth_budget), int(self.lookahead_depth))

    def _grow(self, eng: Engine, deadline: float | None) -> tuple[TreeNode, dict[str, Any]]:
        owner = type(self).__name__
        d, dl = int(self.depth_budget), int(self.lookahead_depth)
        g = d - dl + 1
        t0 = time.perf_counter()
        self._eng, self._g = eng, g
        self._prefix_solver = LookaheadSolver(eng, frontier_depth=g)
        self._exact = LookaheadSolver(eng, frontier_depth=1)
        lstar, _ = self._prefix_solver.solve(eng.root, dl)
        theta = (lstar * (1.0 + self.rashomon_mult) if self.rashomon_mult is not None
                 else lstar + float(self.rashomon_add) * eng.n)
        self._frontiers: list[np.ndarray] = []
        self._frontier_index: dict[bytes, int] = {}
        limit = int(self.max_models)
        try:
            prefixes = self._enum_prefix(eng.root, dl, theta, limit)
            self._leaf_sets = [self._leaf_set(C, limit) for C in self._frontiers]
            for leaf_set in self._leaf_sets:
                if len(leaf_set) > limit:
                    raise _TooMany
        except _TooMany:
            raise BudgetExceededError(
                f"The Rashomon set of {owner} for these data has more than max_models={limit} trees (refused "
                "before enumerating). Raise max_models, or lower rashomon_mult / rashomon_add."
            ) from None
        finally:
            del self._eng, self._prefix_solver, self._exact, self._frontiers, self._frontier_index
        # counts, per-prefix frontier order and objective ranges, without enumerating the products
        self._prefixes: list[tuple[float, _Prefix, list[int], float]] = []
        counts = []
        lo, hi = np.inf, -np.inf
        for value, pre in prefixes:
            fr = _frontiers_of(pre)
            base = value - sum(self._greedy_of[f] for f in fr)  # objective of the non-frontier leaves
            sizes = [len(self._leaf_sets[f]) for f in fr]
            count = int(np.prod(sizes, dtype=object)) if sizes else 1
            if count == 0:
                continue
            self._prefixes.append((value, pre, fr, base))
            counts.append(count)
            lo = min(lo, base + sum(self._leaf_sets[f][0][0] for f in fr))
            hi = max(hi, base + sum(self._leaf_sets[f][-1][0] for f in fr))
        total = int(sum(counts))
        if total > limit:
            raise BudgetExceededError(
                f"The Rashomon set of {owner} for these data has {total} trees, more than max_models={limit} "
                "(refused before enumerating). Raise max_models, or lower rashomon_mult / rashomon_add."
            )
        if total == 0:  # cannot happen: the best prefix and its greedy completions are within theta
            raise InputError(f"{owner} found an empty Rashomon set; this is a bug, please report it.")
        self._offsets = np.concatenate([[0], np.cumsum(np.asarray(counts, dtype=object))]).astype(object)
        n = eng.n
        self.n_trees_ = total
        self.n_prefixes_ = len(self._prefixes)
        self.reference_objective_ = lstar / n
        self.rashomon_bound_ = theta / n
        self.min_objective_ = lo / n
        self.max_objective_ = hi / n
        self._cols_n = n
        best_i = self._best_index()
        tree = self._materialise(best_i)
        info = {"lookahead_depth": dl, "frontier_depth": g, "fill": self.fill, "n_trees": total,
                "n_prefixes": len(self._prefixes), "n_frontier_leaves": len(self._leaf_sets),
                "search_time_s": time.perf_counter() - t0}
        return tree, info

    def _enum(self, C: np.ndarray, b: int, bound: float, limit: int, prefix: bool) -> list[tuple[float, _Prefix]]:
        """Every tree (prefix tree when ``prefix``) on capture ``C`` with budget ``b`` and value <= bound."""
        eng = self._eng
        solver = self._prefix_solver if prefix else self._exact
        if b <= 1:
            if prefix:
                v = float(eng.greedy_values(C[None], self._g)[0])
                if v > bound + TOL:
                    return []
                key = C.tobytes()
                if key not in self._frontier_index:
                    self._frontier_index[key] = len(self._frontiers)
                    self._frontiers.append(C.copy())
                    self._greedy_of.append(v)
                return [(v, ("F", self._frontier_index[key]))]
            v = float(eng.leaf_values(eng.class_counts(C))[0])
            return [(v, ("L", eng.class_counts(C)[0]))] if v <= bound + TOL else []
        tot = eng.class_counts(C)[0]
        out: list[tuple[float, _Prefix]] = []
        leaf = float(eng.leaf_values(tot))
        if leaf <= bound + TOL:
            out.append((leaf, ("L", tot)))
        feats, A, B = _valid_children(eng, C)
        if feats.size:
            opt = np.array([solver.solve(c, b - 1)[0] for c in np.concatenate([A, B])])
            oA, oB = opt[: feats.size], opt[feats.size:]
            for i in np.nonzero(oA + oB <= bound + TOL)[0]:
                left = self._enum(A[i], b - 1, bound - oB[i], limit, prefix)
                right = self._enum(B[i], b - 1, bound - oA[i], limit, prefix)
                for va, sa in left:
                    for vb, sb in right:  # both lists are sorted by value
                        if va + vb > bound + TOL:
                            break
                        out.append((va + vb, ("S", int(feats[i]), sa, sb, tot)))
                if len(out) > limit:
                    raise _TooMany
        out.sort(key=lambda t: t[0])
        return out

    def _enum_prefix(self, C: np.ndarray, b: int, theta: float, limit: int) -> list[tuple[float, _Prefix]]:
        self._greedy_of: list[float] = []
        return self._enum(C, b, theta, limit, prefix=True)

    def _leaf_set(self, C: np.ndarray, limit: int) -> list[tuple[float, TreeNode]]:
        """Subtrees placed in a frontier leaf, sorted by objective (mistake units)."""
        eng, g = self._eng, self._g
        bound = self._greedy_of[self._frontier_index[C.tobytes()]]
        if self.fill == "greedy" or g <= 1:
            t = greedy_tree(eng, C, g)
            return [(float(t.mistakes + eng.lam_n * t.n_leaves), t)]
        if self.fill == "optimal":
            v, t = self._exact.tree(C, g)
            return [(float(v), t)]
        return [(v, _to_tree(s)) for v, s in self._enum(C, g, bound, limit, prefix=False)]

    # -- lazy indexing ---------------------------------------------------------------------------------
    def _locate(self, i: int) -> tuple[int, list[int]]:
        if not 0 <= i < self.n_trees_:
            raise IndexError(f"{type(self).__name__} holds {self.n_trees_} trees; index {i} is out of range.")
        k = int(np.searchsorted(np.asarray(self._offsets[1:], dtype=float), i, side="right"))
        while self._offsets[k + 1] <= i:  # guard float rounding of huge offsets
            k += 1
        while self._offsets[k] > i:
            k -= 1
        rest = i - int(self._offsets[k])
        fr = self._prefixes[k][2]
        digits = []
        for f in reversed(fr):  # mixed radix, last frontier leaf varies fastest
            size = len(self._leaf_sets[f])
            digits.append(rest % size)
            rest //= size
        return k, digits[::-1]

    def _materialise(self, i: int) -> TreeNode:
        k, digits = self._locate(i)
        _, pre, fr, _ = self._prefixes[k]
        chosen = {f: self._leaf_sets[f][dgt][1] for f, dgt in zip(fr, digits)}
        return _to_tree(pre, chosen)

    def _best_index(self) -> int:
        best, best_i = np.inf, 0
        for k, (_, _, fr, base) in enumerate(self._prefixes):
            v = base + sum(self._leaf_sets[f][0][0] for f in fr)
            if v < best - TOL:
                best, best_i = v, int(self._offsets[k])  # digits all 0 = each leaf's best subtree
        return best_i

    def _check_index(self, i: Any, what: str) -> int:
        check_is_fitted(self, "n_trees_")
        validate_value(f"{type(self).__name__}.{what}", "i", i, [Interval(int, 0, self.n_trees_ - 1)], noun="argument")
        return int(i)

    @validate_args(i=[AnyValue(_INDEX)])
    def tree_at(self, i: int) -> TreeNode:
        """The ``i``-th tree of the set (over the binary features; ``left`` = feature true); ``i`` is an int
        in ``[0, n_trees_ - 1]``."""
        from trustlab.methods.split._base import _remap

        return _remap(self._materialise(self._check_index(i, "tree_at")), self.search_columns_)

    @validate_args(i=[AnyValue(_INDEX)])
    def objective_at(self, i: int) -> float:
        """Training objective ``R`` of the ``i``-th tree, without building it."""
        k, digits = self._locate(self._check_index(i, "objective_at"))
        _, _, fr, base = self._prefixes[k]
        return float((base + sum(self._leaf_sets[f][dg][0] for f, dg in zip(fr, digits))) / self._cols_n)

    @validate_args(limit=[Interval(int, 0, None), None])
    def iter_trees(self, limit: int | None = None) -> Iterator[TreeNode]:
        """Trees of the set in index order (at most ``limit``)."""
        check_is_fitted(self, "n_trees_")
        stop = self.n_trees_ if limit is None else min(int(limit), self.n_trees_)
        for i in range(stop):
            yield self.tree_at(i)


def _frontiers_of(pre: _Prefix) -> list[int]:
    if pre[0] == "F":
        return [pre[1]]
    if pre[0] == "L":
        return []
    return _frontiers_of(pre[2]) + _frontiers_of(pre[3])


def _to_tree(pre: _Prefix, chosen: dict[int, TreeNode] | None = None) -> TreeNode:
    if pre[0] == "F":
        return chosen[pre[1]]  # type: ignore[index]
    if pre[0] == "L":
        return TreeNode(counts=pre[1])
    return TreeNode(counts=pre[4], feature=pre[1], left=_to_tree(pre[2], chosen), right=_to_tree(pre[3], chosen))
