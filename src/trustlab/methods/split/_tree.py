"""The fitted tree: nodes, prediction, objective, canonical strings and text export.

Convention (GOSDT's): a split node sends samples with ``x[feature] == 1`` to ``left`` and those with
``x[feature] == 0`` to ``right``; a lone leaf has depth 1, so ``depth_budget = d`` allows ``d - 1`` split
levels (scikit-learn's ``max_depth = d - 1``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import InstanceOf, Interval

__all__ = ["TreeNode", "tree_objective", "tree_from_dict"]


#: the binary matrix of a tree's prediction: the estimators' predict (hot path) checks X first
_HOT_XB = "a binary (n, d) matrix; every estimator's predict checks X (_validate_X) before it gets here"
#: optional names, indexed by feature / class index
_NAMES = [None, ArrayLike(ndim=1, dtype="any", finite=False, min_len=0)]


@dataclass(eq=False)
class TreeNode:
    """One node of a binary decision tree over binary features.

    Attributes
    ----------
    counts : ndarray of shape (n_classes,)
        Training samples of each class that reach this node.
    feature : int or None
        Binary feature tested at a split node (``None`` for a leaf).
    left, right : TreeNode or None
        Children for ``x[feature] == 1`` (left) and ``x[feature] == 0`` (right).
    """

    counts: np.ndarray
    feature: int | None = None
    left: TreeNode | None = None
    right: TreeNode | None = None

    @property
    def is_leaf(self) -> bool:
        return self.feature is None

    @property
    def prediction(self) -> int:
        """Majority class (encoded); ties go to the smallest class index."""
        return int(np.argmax(self.counts))

    @property
    def n_samples(self) -> int:
        return int(np.sum(self.counts))

    @property
    def n_leaves(self) -> int:
        return 1 if self.is_leaf else self.left.n_leaves + self.right.n_leaves  # type: ignore[union-attr]

    @property
    def depth(self) -> int:
        """Depth in GOSDT's convention (a lone leaf has depth 1)."""
        return 1 if self.is_leaf else 1 + max(self.left.depth, self.right.depth)  # type: ignore[union-attr]

    @property
    def mistakes(self) -> int:
        """Training mistakes of the subtree (leaves predict their majority class)."""
        if self.is_leaf:
            return int(np.sum(self.counts) - np.max(self.counts))
        return self.left.mistakes + self.right.mistakes  # type: ignore[union-attr]

    def leaves(self) -> Iterator[TreeNode]:
        if self.is_leaf:
            yield self
        else:
            yield from self.left.leaves()  # type: ignore[union-attr]
            yield from self.right.leaves()  # type: ignore[union-attr]

    def features_used(self) -> set[int]:
        if self.is_leaf:
            return set()
        return {int(self.feature)} | self.left.features_used() | self.right.features_used()  # type: ignore

    # -- prediction ------------------------------------------------------------------------------
    @takes_any(Xb=_HOT_XB)
    def apply(self, Xb: np.ndarray) -> np.ndarray:
        """Leaf number (left-to-right order) reached by each row of the binary matrix ``Xb``."""
        out = np.empty(len(Xb), dtype=np.int64)
        counter = [0]

        def walk(node: TreeNode, idx: np.ndarray) -> None:
            if node.is_leaf:
                out[idx] = counter[0]
                counter[0] += 1
                return
            go = Xb[idx, node.feature] != 0
            walk(node.left, idx[go])  # type: ignore[arg-type]
            walk(node.right, idx[~go])  # type: ignore[arg-type]

        walk(self, np.arange(len(Xb)))
        return out

    def leaf_counts(self) -> np.ndarray:
        """Class counts of every leaf, shape (n_leaves, n_classes), in :meth:`apply` order."""
        return np.stack([np.asarray(leaf.counts, dtype=np.float64) for leaf in self.leaves()])

    @takes_any(Xb=_HOT_XB)
    def predict_proba(self, Xb: np.ndarray) -> np.ndarray:
        """Class frequencies of the training samples in each row's leaf."""
        counts = self.leaf_counts()
        proba = counts / np.maximum(counts.sum(1, keepdims=True), 1.0)
        empty = counts.sum(1) == 0
        if empty.any():  # cannot happen for fitted trees (no empty leaves); uniform as a safe default
            proba[empty] = 1.0 / counts.shape[1]
        return proba[self.apply(Xb)]

    @takes_any(Xb=_HOT_XB)
    def predict(self, Xb: np.ndarray) -> np.ndarray:
        preds = np.array([leaf.prediction for leaf in self.leaves()], dtype=np.int64)
        return preds[self.apply(Xb)]

    # -- export ----------------------------------------------------------------------------------
    def canonical(self) -> str:
        """A string that identifies the tree's structure and leaf predictions (for set comparisons)."""
        if self.is_leaf:
            return f"L{self.prediction}"
        return f"({self.feature} {self.left.canonical()} {self.right.canonical()})"  # type: ignore[union-attr]

    def structure(self) -> str:
        """Like :meth:`canonical` without leaf predictions."""
        if self.is_leaf:
            return "L"
        return f"({self.feature} {self.left.structure()} {self.right.structure()})"  # type: ignore[union-attr]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (GOSDT-like keys: ``feature``, ``true``, ``false``, ``prediction``)."""
        if self.is_leaf:
            return {"prediction": self.prediction, "counts": [int(c) for c in self.counts]}
        return {"feature": int(self.feature), "true": self.left.to_dict(),  # type: ignore[union-attr]
                "false": self.right.to_dict()}  # type: ignore[union-attr]

    @validate_args(feature_names=_NAMES, class_names=_NAMES, decimals=[Interval(int, 0, None)])
    def export_text(self, feature_names: Sequence[str] | None = None, class_names: Sequence[Any] | None = None,
                    *, decimals: int = 3) -> str:
        """Indented text rendering of the tree (one line per test and per leaf)."""
        lines: list[str] = []

        def name(j: int) -> str:
            return str(feature_names[j]) if feature_names is not None else f"x{j}"

        def cls(c: int) -> str:
            return str(class_names[c]) if class_names is not None else str(c)

        def walk(node: TreeNode, indent: str) -> None:
            if node.is_leaf:
                total = max(node.n_samples, 1)
                frac = np.max(node.counts) / total
                lines.append(f"{indent}predict {cls(node.prediction)}  "
                             f"(n={node.n_samples}, purity={frac:.{decimals}f})")
                return
            lines.append(f"{indent}if [{name(int(node.feature))}] is true:")
            walk(node.left, indent + "|   ")  # type: ignore[arg-type]
            lines.append(f"{indent}else:  # [{name(int(node.feature))}] is false")
            walk(node.right, indent + "|   ")  # type: ignore[arg-type]

        walk(self, "")
        return "\n".join(lines)


@validate_args(_example=lambda: {"tree": TreeNode(counts=np.array([1, 1]))},
               tree=[InstanceOf(TreeNode)], Xb=[ArrayLike(ndim=2, dtype="integer", low=0, high=1)],
               y=[ArrayLike(ndim=1, dtype="integer", low=0)], reg=[Interval(float, 0, None)])
def tree_objective(tree: TreeNode, Xb: np.ndarray, y: np.ndarray, reg: float) -> float:
    """Global objective ``R = mistakes / n + reg * leaves`` of ``tree`` re-scored on ``(Xb, y)``.

    ``Xb`` is the binary matrix the tree reads and ``y`` the labels encoded ``0..k-1``.
    """
    from trustlab.core.exceptions import InputError

    Xb = np.asarray(Xb)
    if len(Xb) != len(np.asarray(y)):
        raise InputError(f"The 'Xb' and 'y' arguments of tree_objective must have the same number of rows. "
                         f"Got {len(Xb)} and {len(np.asarray(y))}.")
    if tree.features_used() and max(tree.features_used()) >= Xb.shape[1]:
        raise InputError(f"The tree passed to tree_objective tests binary column {max(tree.features_used())}, "
                         f"but 'Xb' has only {Xb.shape[1]} columns.")
    pred = tree.predict(Xb)
    return float(np.mean(pred != np.asarray(y))) + float(reg) * tree.n_leaves


def tree_from_dict(d: dict[str, Any], Xb: np.ndarray, y: np.ndarray, n_classes: int,
                   feature_key: str = "feature", true_key: str = "true", false_key: str = "false",
                   feature_map: Sequence[int] | None = None) -> TreeNode:
    """Rebuild a :class:`TreeNode` from a GOSDT/TreeFARMS-style dict, recounting samples on ``(Xb, y)``."""
    y = np.asarray(y, dtype=np.int64)

    def build(node: dict[str, Any], idx: np.ndarray) -> TreeNode:
        counts = np.bincount(y[idx], minlength=n_classes)
        if feature_key not in node:
            return TreeNode(counts=counts)
        f = int(node[feature_key])
        f = int(feature_map[f]) if feature_map is not None else f
        go = Xb[idx, f] != 0
        return TreeNode(counts=counts, feature=f, left=build(node[true_key], idx[go]),
                        right=build(node[false_key], idx[~go]))

    return build(d, np.arange(len(y)))
