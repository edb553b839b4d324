"""SPLIT, LicketySPLIT and the greedy baseline as scikit-learn classifiers."""

from __future__ import annotations

import time
import warnings
from typing import Any, ClassVar

from trustlab.core.constraints import Interval, Options
from trustlab.core.exceptions import ConvergenceWarning
from trustlab.methods.split._base import SparseTreeBase, check_lookahead
from trustlab.methods.split._binarizer import ThresholdGuessBinarizer
from trustlab.methods.split._engine import Engine, SearchTimeout
from trustlab.methods.split._search import LookaheadSolver, greedy_tree, lickety_tree
from trustlab.methods.split._tree import TreeNode

__all__ = ["SPLITClassifier", "LicketySPLITClassifier", "GreedyTreeClassifier"]


class SPLITClassifier(SparseTreeBase):
    """SPLIT: an optimal prefix of depth ``lookahead_depth`` under greedy completions, then each prefix
    leaf refilled (optimally or greedily).

    Minimises ``R(t) = mistakes / n + reg * leaves`` over trees of depth ``<= depth_budget``. The
    lookahead DP treats every node at depth ``lookahead_depth`` as a frontier valued by the greedy
    (information-gain) completion of the remaining depth ``d - d_l + 1``; the best prefix found that way
    then has each leaf replaced by the optimal subtree of depth ``d - d_l + 1`` (``refill='optimal'``,
    the reference code's default) or by the greedy one. ``lookahead_depth == depth_budget`` is the exact
    solver (the optimum of the objective under the depth budget).

    Depth convention (GOSDT's): a lone leaf has depth 1, so ``depth_budget=5`` allows 4 levels of splits
    (scikit-learn's ``max_depth=4``).

    Parameters
    ----------
    depth_budget : int, default=5
        ``d``: maximum tree depth (a lone leaf has depth 1).
    lookahead_depth : int, default=2
        ``d_l``: depth of the optimised prefix (1 <= d_l <= d). ``d_l = 1`` means no lookahead (the
        root is refilled: exact or greedy tree, with a warning); ``d_l = d`` is the exact solver.
    reg : float, default=0.01
        ``lambda``: penalty per leaf. Not clamped to ``1/n`` (the reference passes
        ``allow_small_reg=True``).
    time_limit : float or None, default=60
        Seconds for the whole search and refill. When the refill runs out, the remaining leaves are
        refilled greedily; when the prefix search runs out, the greedy tree is returned. Both are
        recorded in ``fit_info_`` and raise a ``ConvergenceWarning``.
    refill : {"optimal", "greedy"}, default="optimal"
        How prefix leaves are completed after the search.
    completion : {"greedy", "exact_last"}, default="greedy"
        How frontier nodes are completed during the search. ``"greedy"``: the paper's ``Greedy(S, k)``
        (information gain at every level, as the reference code). ``"exact_last"``: the same, but the last
        split level of each completion is the best single split on the objective (what the C++
        ``licketysplit`` package does); never worse, about the same cost.
    binarize : "auto" or bool, default="auto"
        ``"auto"``: binary (0/1) ``X`` is used as is and any other ``X`` is binarized by threshold
        guessing fitted on the training data; ``True``: always binarize; ``False``: refuse non-binary
        ``X`` with an ``InputError``.
    binarizer : ThresholdGuessBinarizer or None, default=None
        Binarizer to clone and fit; None means ``ThresholdGuessBinarizer(n_estimators=50, max_depth=1,
        random_state=random_state)`` (SPLIT's settings, without column elimination).
    random_state : int, RandomState instance or None, default=None
        Seed of the default binarizer (the search itself is deterministic).

    Attributes
    ----------
    tree_ : TreeNode
        The fitted tree over the binary features (``left`` = feature true).
    objective_ : float
        Training objective ``R`` of ``tree_``.
    n_leaves_, depth_ : int
    classes_ : ndarray
    binarizer_ : ThresholdGuessBinarizer or None
    binary_feature_names_ : list of str
    fit_info_ : dict
        ``prefix_objective`` (the DP value: prefix with greedy completions), ``search_time_s``,
        ``refill_time_s``, ``refill_timed_out``, ``search_timed_out``, ``n_refilled_optimally`` and more.

    References
    ----------
    Babbar, McTavish, Rudin, Seltzer. "Near-Optimal Decision Trees in a SPLIT Second", ICML 2025
    (PMLR 267:2114-2175). Official code: https://github.com/VarunBabbar/SPLIT-ICML

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> clf = SPLITClassifier(depth_budget=4, lookahead_depth=2, reg=0.01, random_state=0).fit(X, y)
    >>> clf.n_leaves_ <= 8
    True
    """

    _constraints: ClassVar[dict[str, list[Any]]] = {
        **SparseTreeBase._common_constraints,
        "lookahead_depth": [Interval(int, 1, 64)],
        "time_limit": [Interval(float, 0, None, closed="neither"), None],
        "refill": [Options(["optimal", "greedy"])],
        "completion": [Options(["greedy", "exact_last"])],
    }

    def __init__(self, *, depth_budget: int = 5, lookahead_depth: int = 2, reg: float = 0.01,
                 time_limit: float | None = 60, refill: str = "optimal", completion: str = "greedy",
                 binarize: Any = "auto", binarizer: ThresholdGuessBinarizer | None = None,
                 random_state: Any = None) -> None:
        self.depth_budget = depth_budget
        self.lookahead_depth = lookahead_depth
        self.reg = reg
        self.time_limit = time_limit
        self.refill = refill
        self.completion = completion
        self.binarize = binarize
        self.binarizer = binarizer
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [
            {"depth_budget": 3, "lookahead_depth": 2, "reg": 0.02},
            {"depth_budget": 3, "lookahead_depth": 3, "reg": 0.01, "refill": "greedy", "time_limit": 5.0},
            {"depth_budget": 4, "lookahead_depth": 2, "reg": 0.01, "completion": "exact_last"},
        ]

    def _check_combination(self) -> None:
        check_lookahead(type(self).__name__, int(self.depth_budget), int(self.lookahead_depth))

    def _grow(self, eng: Engine, deadline: float | None) -> tuple[TreeNode, dict[str, Any]]:
        d, dl = int(self.depth_budget), int(self.lookahead_depth)
        g = d - dl + 1
        info: dict[str, Any] = {"lookahead_depth": dl, "frontier_depth": g, "refill": self.refill,
                                "exact": dl == d, "search_timed_out": False, "refill_timed_out": False}
        eng.deadline = deadline
        t0 = time.perf_counter()
        solver = LookaheadSolver(eng, frontier_depth=g)
        try:
            value, tree, leaves = solver.prefix(eng.root, dl)
        except SearchTimeout:
            info.update(search_timed_out=True, search_time_s=time.perf_counter() - t0, refill_time_s=0.0,
                        prefix_objective=None, fallback="greedy", n_refilled_optimally=0)
            return self._greedy_fallback(eng, "prefix search"), info
        info.update(search_time_s=time.perf_counter() - t0, prefix_objective=value / eng.n,
                    nodes_expanded=solver.expanded, memo_size=len(solver.memo))
        t1 = time.perf_counter()
        if self.refill == "greedy":
            eng.deadline = None  # the greedy refill is cheap; the limit is for the searches
        done = 0
        exact = LookaheadSolver(eng, frontier_depth=1)
        for node, C, _ in leaves:
            if g <= 1:
                continue  # exact mode: the prefix leaves are final
            sub = None
            if self.refill == "optimal" and not info["refill_timed_out"]:
                try:
                    _, sub = exact.tree(C, g)
                    done += 1
                except SearchTimeout:
                    info["refill_timed_out"] = True
                    eng.deadline = None
            if sub is None:
                sub = greedy_tree(eng, C, g)
            node.feature, node.left, node.right = sub.feature, sub.left, sub.right
        if info["refill_timed_out"]:
            warnings.warn(f"{type(self).__name__}: the optimal refill hit time_limit={self.time_limit} s; "
                          f"{len(leaves) - done} prefix leaves were refilled greedily (see fit_info_).",
                          ConvergenceWarning, stacklevel=4)
        info.update(refill_time_s=time.perf_counter() - t1, n_prefix_leaves=len(leaves),
                    n_refilled_optimally=done, fallback=None)
        return tree, info


class LicketySPLITClassifier(SparseTreeBase):
    """LicketySPLIT: recursive one-step lookahead with greedy completions (polynomial time).

    At each node the split that minimises the sum of the greedy completions (depth ``b - 1``) of its
    two children is chosen, unless a leaf is better; then the same rule runs in each child with one
    less level of budget. Guarantee: ``R(LicketySPLIT) <= R(Greedy)`` with the same depth budget.

    Parameters
    ----------
    depth_budget : int, default=5
        Maximum depth (a lone leaf has depth 1).
    reg : float, default=0.01
        Penalty per leaf.
    completion : {"greedy", "exact_last"}, default="greedy"
        Greedy completions as in the paper, or with their last split level chosen exactly (the C++
        ``licketysplit`` package's variant; with it, depth budget 3 is solved exactly).
    binarize, binarizer, random_state
        As in :class:`SPLITClassifier`.

    Attributes
    ----------
    tree_, objective_, n_leaves_, depth_, classes_, binarizer_, binary_feature_names_, fit_info_
        As in :class:`SPLITClassifier`.

    References
    ----------
    Babbar et al., ICML 2025 (Algorithm "LicketySPLIT"); https://github.com/VarunBabbar/SPLIT-ICML

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> LicketySPLITClassifier(depth_budget=4, random_state=0).fit(X, y).score(X, y) > 0.9
    True
    """

    _constraints: ClassVar[dict[str, list[Any]]] = {
        **SparseTreeBase._common_constraints,
        "completion": [Options(["greedy", "exact_last"])],
    }

    def __init__(self, *, depth_budget: int = 5, reg: float = 0.01, completion: str = "greedy",
                 binarize: Any = "auto", binarizer: ThresholdGuessBinarizer | None = None,
                 random_state: Any = None) -> None:
        self.depth_budget = depth_budget
        self.reg = reg
        self.completion = completion
        self.binarize = binarize
        self.binarizer = binarizer
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"depth_budget": 3, "reg": 0.02}, {"depth_budget": 4, "reg": 0.005, "completion": "exact_last"}]

    def _grow(self, eng: Engine, deadline: float | None) -> tuple[TreeNode, dict[str, Any]]:
        t0 = time.perf_counter()
        tree = lickety_tree(eng, eng.root, int(self.depth_budget))
        return tree, {"search_time_s": time.perf_counter() - t0}


class GreedyTreeClassifier(SparseTreeBase):
    """The greedy baseline ``Greedy(D, d, lambda)``: information-gain splits to the depth budget,
    pruned bottom-up wherever a subtree does not beat a leaf on ``R = mistakes / n + reg * leaves``.

    Parameters
    ----------
    depth_budget : int, default=5
        Maximum depth (a lone leaf has depth 1).
    reg : float, default=0.01
        Penalty per leaf used by the pruning.
    binarize, binarizer, random_state
        As in :class:`SPLITClassifier`.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> GreedyTreeClassifier(depth_budget=3, random_state=0).fit(X, y).depth_ <= 3
    True
    """

    _constraints: ClassVar[dict[str, list[Any]]] = dict(SparseTreeBase._common_constraints)

    def __init__(self, *, depth_budget: int = 5, reg: float = 0.01, binarize: Any = "auto",
                 binarizer: ThresholdGuessBinarizer | None = None, random_state: Any = None) -> None:
        self.depth_budget = depth_budget
        self.reg = reg
        self.binarize = binarize
        self.binarizer = binarizer
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"depth_budget": 3, "reg": 0.02}]

    def _grow(self, eng: Engine, deadline: float | None) -> tuple[TreeNode, dict[str, Any]]:
        t0 = time.perf_counter()
        tree = greedy_tree(eng, eng.root, int(self.depth_budget))
        return tree, {"search_time_s": time.perf_counter() - t0}
