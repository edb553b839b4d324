"""Shared plumbing of the sparse-tree estimators: binarization, column reduction, prediction, export."""

from __future__ import annotations

import time
import warnings
from typing import Any, ClassVar

import numpy as np
from sklearn.base import clone

from trustlab.core.arguments import validate_args
from trustlab.core.base import PaperInfo
from trustlab.core.constraints import AnyValue, InstanceOf, Interval, Options
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.roles import Predictor
from trustlab.core.validation import check_array, check_classification_targets, check_is_fitted
from trustlab.methods.split._binarizer import ThresholdGuessBinarizer, reduce_columns
from trustlab.methods.split._engine import Engine, SearchTimeout
from trustlab.methods.split._paper import PAPER
from trustlab.methods.split._search import greedy_tree
from trustlab.methods.split._tree import TreeNode

__all__ = ["SPLIT_PAPER", "SparseTreeBase", "is_binary"]

SPLIT_PAPER = PAPER


def is_binary(X: np.ndarray) -> bool:
    """True when every entry of ``X`` is 0 or 1."""
    return bool(((X == 0) | (X == 1)).all())


class SparseTreeBase(Predictor):
    """Base of the estimators: turns ``X`` into binary columns, builds an :class:`Engine`, calls
    ``_grow`` and stores the tree. Subclasses implement ``_grow(eng, deadline) -> (TreeNode, info)``."""

    paper: ClassVar[PaperInfo] = SPLIT_PAPER
    tags: ClassVar[dict[str, Any]] = {"role": "predictor", "requires": (), "stochastic": False}
    _common_constraints: ClassVar[dict[str, list[Any]]] = {
        "depth_budget": [Interval(int, 1, 64)],
        "reg": [Interval(float, 0, None)],
        "binarize": [Options(["auto"]), "boolean"],
        "binarizer": [InstanceOf(ThresholdGuessBinarizer), None],
        "random_state": ["random_state"],
    }

    # -- binarization ---------------------------------------------------------------------------------
    def _validate_X(self, X: Any, *, reset: bool) -> Any:
        names = getattr(X, "columns", None)
        arr = super()._validate_X(X, reset=reset)
        check_array(arr, owner=type(self).__name__, ndim=None, allow_complex=False)
        fitted = getattr(self, "feature_names_in_", None)
        if not reset and fitted is not None and names is not None:
            got = [str(c) for c in names]
            if got != [str(c) for c in fitted]:
                diff = [f"{a!r}->{b!r}" for a, b in zip(fitted, got) if str(a) != b][:3]
                raise InputError(
                    f"The 'X' argument of {type(self).__name__} has feature names that differ from those seen in "
                    f"fit (first differences: {', '.join(diff) or 'order'}). Pass the columns in the fitted order."
                )
        return arr

    def _binarize_fit(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        names = getattr(self, "feature_names_in_", None)
        names = [str(c) for c in names] if names is not None else [f"x{j}" for j in range(X.shape[1])]
        binary = is_binary(X)
        if self.binarize is False and not binary:
            bad = np.nonzero(~((X == 0) | (X == 1)).all(0))[0]
            raise InputError(
                f"The 'X' argument of {type(self).__name__} must hold only 0/1 values because binarize=False. "
                f"Got non-binary values in column(s) {bad[:5].tolist()}{' ...' if bad.size > 5 else ''}. "
                "Set binarize='auto' (or True), or binarize the training data first with "
                "ThresholdGuessBinarizer fitted on the training split."
            )
        if self.binarize is True or (self.binarize == "auto" and not binary):
            enc = (clone(self.binarizer) if self.binarizer is not None
                   else ThresholdGuessBinarizer(random_state=self.random_state))
            enc.fit(X, y)
            self.binarizer_ = enc
            self.binary_feature_names_ = [str(s) for s in enc.get_feature_names_out(names)]
            return enc.transform(X).astype(bool)
        self.binarizer_ = None
        self.binary_feature_names_ = names
        return X.astype(bool)

    def _binary(self, X: np.ndarray) -> np.ndarray:
        if self.binarizer_ is not None:
            return self.binarizer_.transform(X).astype(bool)
        if not is_binary(X):
            raise InputError(
                f"The 'X' argument of {type(self).__name__} must hold only 0/1 values: the model was fitted on "
                "binary features without a binarizer. Binarize X the way the training data was binarized."
            )
        return X.astype(bool)

    # -- fit ------------------------------------------------------------------------------------------
    def _check_common(self) -> None:
        if self.reg >= 0.5:
            warnings.warn(f"{type(self).__name__}: reg={self.reg} >= 0.5 makes every split cost more than it "
                          "can gain; the tree will be a single leaf.", UserWarning, stacklevel=4)

    def _fit(self, X: np.ndarray, y: np.ndarray, **fit_params: Any) -> None:
        if fit_params:
            raise InputError(f"{type(self).__name__}.fit takes no extra arguments. Got {sorted(fit_params)}.")
        check_classification_targets(self.classes_, owner=type(self).__name__)
        self._check_common()
        self._check_combination()
        t0 = time.perf_counter()
        Xb = self._binarize_fit(X, y)
        t_bin = time.perf_counter() - t0
        cols = reduce_columns(Xb)
        self.n_binary_features_ = int(Xb.shape[1])
        self.search_columns_ = cols
        eng = Engine(Xb[:, cols], y, len(self.classes_), self.reg,
                     exact_last=getattr(self, "completion", "greedy") == "exact_last")
        time_limit = getattr(self, "time_limit", None)
        deadline = None if time_limit is None else time.perf_counter() + float(time_limit)
        t1 = time.perf_counter()
        tree, info = self._grow(eng, deadline)
        eng.deadline = None
        self.tree_ = _remap(tree, cols)
        n = len(y)
        self.objective_ = float(self.tree_.mistakes / n + self.reg * self.tree_.n_leaves)
        self.n_leaves_ = int(self.tree_.n_leaves)
        self.depth_ = int(self.tree_.depth)
        info = {"binarize_time_s": t_bin, "search_columns": int(len(cols)),
                "fit_time_s": time.perf_counter() - t1, **info}
        self.fit_info_ = info

    def _check_combination(self) -> None:
        """Rules that involve several parameters (checked before any work)."""

    def _grow(self, eng: Engine, deadline: float | None) -> tuple[TreeNode, dict[str, Any]]:
        raise NotImplementedError  # pragma: no cover - abstract

    def _greedy_fallback(self, eng: Engine, what: str) -> TreeNode:
        from trustlab.core.exceptions import ConvergenceWarning

        warnings.warn(f"{type(self).__name__}: the {what} hit time_limit={getattr(self, 'time_limit', None)} s; "
                      "fell back to the greedy tree (see fit_info_).", ConvergenceWarning, stacklevel=5)
        eng.deadline = None
        return greedy_tree(eng, eng.root, self.depth_budget)

    # -- predict --------------------------------------------------------------------------------------
    def _predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self.tree_.predict_proba(self._binary(X))

    @validate_args(decimals=[Interval(int, 0, None)])
    def export_text(self, *, decimals: int = 3) -> str:
        """The fitted tree as indented text, with feature names (binarized ``"name <= t"`` columns
        when a binarizer was used) and the original class labels."""
        check_is_fitted(self, "tree_")
        return self.tree_.export_text(self.binary_feature_names_, list(self.classes_), decimals=decimals)

    @validate_args(X=[AnyValue("checked by the estimator's _validate_X (InputError naming X)")])
    def transform_binary(self, X: Any) -> np.ndarray:
        """The binary matrix the tree reads (after the fitted binarizer, if any)."""
        check_is_fitted(self, "tree_")
        X = self._validate_X(X, reset=False)
        return self._binary(X)


def _remap(node: TreeNode, cols: np.ndarray) -> TreeNode:
    if node.is_leaf:
        return node
    return TreeNode(counts=node.counts, feature=int(cols[node.feature]), left=_remap(node.left, cols),
                    right=_remap(node.right, cols))


def check_lookahead(owner: str, depth_budget: int, lookahead_depth: int) -> None:
    """Refuse a lookahead deeper than the tree; warn that lookahead 1 means "no lookahead"."""
    if lookahead_depth > depth_budget:
        raise ConfigError(
            f"The 'lookahead_depth' parameter of {owner} must be <= depth_budget ({depth_budget}). Got "
            f"{lookahead_depth} instead. Use lookahead_depth=depth_budget for the exact solver."
        )
    if lookahead_depth == 1 and depth_budget > 1:
        warnings.warn(
            f"{owner}: lookahead_depth=1 means no lookahead (depth 1 is just the root): the root is refilled, "
            "so the result is the exact optimum (refill='optimal') or the greedy tree (refill='greedy').",
            UserWarning, stacklevel=5,
        )


__all__ += ["check_lookahead", "reduce_columns", "SearchTimeout"]
