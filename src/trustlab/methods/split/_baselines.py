"""Baselines through the real packages (extra ``trees``): GOSDT, the C++ ``licketysplit``, TreeFARMS, and
scikit-learn's CART tuned to the regularised objective.

Every wrapper takes a binary matrix, labels encoded ``0..k-1``, the leaf penalty ``reg`` and the depth
budget in GOSDT's convention (a lone leaf has depth 1) and returns a :class:`BaselineFit` whose
``objective`` is re-scored by us on the training data (``mistakes / n + reg * leaves``), whatever the
package reports. The C++ packages print to the process's stdout; the wrappers silence it at the file
descriptor level.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval
from trustlab.core.optional import require
from trustlab.core.seeding import as_seed
from trustlab.core.validation import check_consistent_length
from trustlab.methods.split._tree import TreeNode, tree_from_dict, tree_objective

__all__ = ["BaselineFit", "fit_gosdt", "fit_licketysplit_package", "fit_treefarms", "fit_cart", "silence_output"]


@dataclass
class BaselineFit:
    """What a baseline produced: the tree (over the given binary columns) and its numbers."""

    name: str
    tree: TreeNode
    objective: float
    time_s: float
    converged: bool = True
    lower_bound: float | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_leaves(self) -> int:
        return self.tree.n_leaves

    @validate_args(Xb=[ArrayLike(ndim=2, dtype="integer", low=0, high=1)])
    def predict(self, Xb: np.ndarray) -> np.ndarray:
        """Encoded class predictions on a binary matrix."""
        return self.tree.predict(np.asarray(Xb))


@contextlib.contextmanager
def silence_output() -> Iterator[None]:
    """Send file descriptors 1 and 2 to /dev/null (C++ extensions print there directly)."""
    for s in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            s.flush()
    try:
        saved = [os.dup(1), os.dup(2)]
    except OSError:  # no real descriptors (embedded interpreter): nothing to silence
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        with contextlib.redirect_stdout(open(os.devnull, "w")) as fh:  # noqa: SIM115
            try:
                yield
            finally:
                fh.close()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


#: the argument rules every baseline wrapper shares (binary matrix, encoded labels, objective settings)
_XB = [ArrayLike(ndim=2, dtype="integer", low=0, high=1)]
_Y = [ArrayLike(ndim=1, dtype="integer", low=0)]
_REG = [Interval(float, 0, None)]
_DEPTH = [Interval(int, 1, 64)]


def _prep(Xb: Any, y: Any) -> tuple[np.ndarray, np.ndarray, int]:
    Xb = np.asarray(Xb).astype(bool)
    y = np.asarray(y, dtype=np.int64)
    check_consistent_length("a SPLIT baseline", Xb=Xb, y=y)
    return Xb, y, int(y.max()) + 1 if y.size else 0


@validate_args(Xb=_XB, y=_Y, reg=_REG, depth_budget=_DEPTH, time_limit=[Interval(float, 0, None, closed="neither"), None])
def fit_gosdt(Xb: Any, y: Any, *, reg: float, depth_budget: int, time_limit: float | None = None) -> BaselineFit:
    """GOSDT (``gosdt`` package) as the exact oracle: fit only (its ``predict`` breaks on scikit-learn
    >= 1.8), tree read from ``result_.model``. ``converged`` is False on a timeout: then ``objective`` is
    the incumbent's and ``lower_bound`` GOSDT's proven lower bound."""
    gosdt = require("gosdt", purpose="the GOSDT baseline")
    Xb, y, k = _prep(Xb, y)
    clf = gosdt.GOSDTClassifier(regularization=float(reg), allow_small_reg=True, depth_budget=int(depth_budget) - 1,
                                time_limit=None if time_limit is None else max(1, int(round(time_limit))),
                                verbose=False)
    t0 = time.perf_counter()
    with silence_output():
        clf.fit(Xb.astype(np.uint8), y)
    dt = time.perf_counter() - t0
    res = clf.result_
    status = getattr(res.status, "name", str(res.status))
    model = json.loads(res.model)
    tree = tree_from_dict(model[0], Xb, y, k)
    return BaselineFit("GOSDT", tree, tree_objective(tree, Xb, y, reg), dt, converged=status == "CONVERGED",
                       lower_bound=float(res.lowerbound),
                       info={"status": status, "upper_bound": float(res.upperbound), "graph_size": int(res.graph_size)})


@validate_args(Xb=_XB, y=_Y, reg=_REG, depth_budget=_DEPTH, lookahead_k=[Interval(int, 1, None)])
def fit_licketysplit_package(Xb: Any, y: Any, *, reg: float, depth_budget: int, lookahead_k: int = 1) -> BaselineFit:
    """The C++ ``licketysplit`` package (``LicketySPLITClassifier``); it counts split levels, so it gets
    ``depth_budget - 1``."""
    ls = require("licketysplit", purpose="the C++ LicketySPLIT baseline")
    Xb, y, k = _prep(Xb, y)
    clf = ls.LicketySPLITClassifier(lambda_leaf=float(reg), depth_budget=int(depth_budget) - 1,
                                    lookahead_k=int(lookahead_k))
    X8 = np.ascontiguousarray(Xb.astype(np.uint8))
    t0 = time.perf_counter()
    with silence_output():
        clf.fit(X8, y)
    dt = time.perf_counter() - t0
    paths, _ = clf.get_tree_paths()
    tree = _tree_from_paths([list(map(int, p)) for p in paths], Xb, y, k)
    return BaselineFit(f"licketysplit(k={lookahead_k})", tree, tree_objective(tree, Xb, y, reg), dt,
                       info={"package_objective": float(clf.objective_) / len(y)})


def _tree_from_paths(paths: list[list[int]], Xb: np.ndarray, y: np.ndarray, k: int) -> TreeNode:
    """Rebuild a tree from signed root-to-leaf paths (+(j+1): feature j true, -(j+1): false)."""

    def build(ps: list[list[int]], idx: np.ndarray) -> TreeNode:
        counts = np.bincount(y[idx], minlength=k)
        if len(ps) == 1 and not ps[0]:
            return TreeNode(counts=counts)
        f = abs(ps[0][0]) - 1
        left = [p[1:] for p in ps if p[0] > 0]
        right = [p[1:] for p in ps if p[0] < 0]
        go = Xb[idx, f]
        return TreeNode(counts=counts, feature=f, left=build(left, idx[go]), right=build(right, idx[~go]))

    return build(paths, np.arange(len(y)))


@validate_args(Xb=_XB, y=_Y, reg=_REG, depth_budget=_DEPTH, rashomon_mult=[Interval(float, 0, None)],
               max_trees=[Interval(int, 1, None)])
def fit_treefarms(Xb: Any, y: Any, *, reg: float, depth_budget: int, rashomon_mult: float,
                  max_trees: int = 100_000) -> BaselineFit:
    """TreeFARMS (exact Rashomon set, ``theta = (1 + rashomon_mult) L*``). ``info["canonical"]`` holds
    every tree's canonical string (see :meth:`TreeNode.canonical`) when the set has at most
    ``max_trees`` trees; ``info["n_trees"]`` its size."""
    tf = require("treefarms", purpose="the TreeFARMS baseline")
    import pandas as pd

    Xb, y, k = _prep(Xb, y)
    cols = [f"f{j}" for j in range(Xb.shape[1])]
    df = pd.DataFrame(Xb.astype(np.uint8), columns=cols)
    config = {"regularization": float(reg), "rashomon_bound_multiplier": float(rashomon_mult),
              "depth_budget": int(depth_budget), "verbose": False}
    model = tf.TREEFARMS(config)
    t0 = time.perf_counter()
    with silence_output():
        model.fit(df, pd.Series(y, name="class"))
    dt = time.perf_counter() - t0
    count = int(model.get_tree_count())
    ms = model.model_set
    canon, objectives = [], []
    best = None
    if count <= max_trees:
        for i in range(count):
            raw = ms.get_tree_at_idx_raw(i)
            t = tree_from_dict(raw, Xb, y, k)
            canon.append(t.canonical())
            objectives.append(tree_objective(t, Xb, y, reg))
            if best is None or objectives[-1] < best[0]:
                best = (objectives[-1], t)
    if best is None:
        raw = ms.get_tree_at_idx_raw(0)
        t = tree_from_dict(raw, Xb, y, k)
        best = (tree_objective(t, Xb, y, reg), t)
    return BaselineFit("TreeFARMS", best[1], best[0], dt,
                       info={"n_trees": count, "canonical": canon, "objectives": objectives, "timeout": model.timeout})


@validate_args(Xb=_XB, y=_Y, reg=_REG, depth_budget=_DEPTH, random_state=["random_state"])
def fit_cart(Xb: Any, y: Any, *, reg: float, depth_budget: int, random_state: Any = 0) -> BaselineFit:
    """scikit-learn CART with ``max_depth = depth_budget - 1``, pruned by the ``ccp_alpha`` of its
    cost-complexity path that minimises ``R = mistakes / n + reg * leaves`` on the training data."""
    from sklearn.tree import DecisionTreeClassifier

    Xb, y, k = _prep(Xb, y)
    random_state = as_seed(random_state)  # one int for every tree of the path (a Generator is drawn once)
    t0 = time.perf_counter()
    X = Xb.astype(np.float64)
    base = DecisionTreeClassifier(max_depth=max(1, int(depth_budget) - 1), random_state=random_state)
    path = base.cost_complexity_pruning_path(X, y)
    best = None
    for alpha in np.unique(path.ccp_alphas):
        clf = DecisionTreeClassifier(max_depth=max(1, int(depth_budget) - 1), random_state=random_state,
                                     ccp_alpha=float(max(alpha, 0.0))).fit(X, y)
        tree = _tree_from_sklearn(clf, Xb, y, k)
        r = tree_objective(tree, Xb, y, reg)
        if best is None or r < best[0] - 1e-12:
            best = (r, tree, float(alpha))
    dt = time.perf_counter() - t0
    assert best is not None
    return BaselineFit("CART", best[1], best[0], dt, info={"ccp_alpha": best[2], "n_alphas": len(path.ccp_alphas)})


def _tree_from_sklearn(clf: Any, Xb: np.ndarray, y: np.ndarray, k: int) -> TreeNode:
    t = clf.tree_

    def build(node: int, idx: np.ndarray) -> TreeNode:
        counts = np.bincount(y[idx], minlength=k)
        if t.children_left[node] < 0:
            return TreeNode(counts=counts)
        f = int(t.feature[node])
        go = Xb[idx, f]  # sklearn's left child is x <= 0.5, i.e. the feature-false side
        return TreeNode(counts=counts, feature=f, left=build(int(t.children_right[node]), idx[go]),
                        right=build(int(t.children_left[node]), idx[~go]))

    return build(0, np.arange(len(y)))
