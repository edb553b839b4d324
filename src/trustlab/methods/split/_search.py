"""Tree searches on the bit-packed engine: greedy, the lookahead DP (SPLIT / exact) and LicketySPLIT.

The lookahead DP (paper Algorithm 2, official ``Task::Task``) optimises trees of depth budget ``b`` in
which every node whose remaining budget is 1 is a *frontier* node valued by a rule instead of being a
plain leaf: ``Greedy(S, g)`` for SPLIT (``g = d - d_l + 1``), the leaf itself for the exact solver
(``g = 1``). Nodes with budget <= ``batch_budget`` are solved exhaustively in one vectorised batch
(all features of all nodes at once); above that a memoised depth-first branch-and-bound runs, with the
equivalent-points / leaf-support bounds, children ordered by their greedy upper bounds and pruned
against the incumbent.
"""

from __future__ import annotations

import numpy as np

from trustlab.methods.split._engine import TOL, Engine
from trustlab.methods.split._tree import TreeNode

__all__ = ["LookaheadSolver", "greedy_tree", "lickety_tree", "leaf_node"]

#: frontier rows a batch may create at once (bounds the memory of one vectorised level)
_MAX_BATCH_ROWS = 1 << 16


def leaf_node(eng: Engine, C: np.ndarray) -> TreeNode:
    return TreeNode(counts=eng.class_counts(C)[0])


def greedy_tree(eng: Engine, C: np.ndarray, depth: int) -> TreeNode:
    """``Greedy(S, depth)`` as a tree: information-gain splits, pruned where splitting does not pay
    (the last level chosen exactly when the engine's ``exact_last`` is set)."""
    tot = eng.class_counts(C)
    node = TreeNode(counts=tot[0])
    if depth <= 1:
        return node
    if depth == 2 and eng.exact_last:
        best, jj = eng.best_leaf_split(C)
        if best[0] < eng.leaf_values(tot)[0] - TOL:
            A, B = eng.children(np.atleast_2d(C), np.array([0]), jj[:1])
            return TreeNode(counts=tot[0], feature=int(jj[0]), left=leaf_node(eng, A[0]), right=leaf_node(eng, B[0]))
        return node
    j, ok = eng.best_gain(C[None] if C.ndim == 1 else C, tot)
    if not ok[0]:
        return node
    A, B = eng.children(np.atleast_2d(C), np.array([0]), j[:1])
    kv = eng.greedy_values(np.concatenate([A, B]), depth - 1)
    if kv[0] + kv[1] < eng.leaf_values(tot)[0] - TOL:
        return TreeNode(counts=tot[0], feature=int(j[0]), left=greedy_tree(eng, A[0], depth - 1),
                        right=greedy_tree(eng, B[0], depth - 1))
    return node


def _valid_children(eng: Engine, C: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features that split ``C`` into two non-empty sides, and those children."""
    C2 = np.atleast_2d(C)
    nL = eng.left_sizes(C2)[0]
    N = int(np.bitwise_count(C2[0]).sum())
    feats = np.nonzero((nL > 0) & (nL < N))[0]
    A, B = eng.children(C2, np.zeros(len(feats), dtype=np.int64), feats)
    return feats, A, B


def lickety_tree(eng: Engine, C: np.ndarray, budget: int) -> TreeNode:
    """LicketySPLIT (paper Algorithm 3): at each node pick the split minimising the sum of greedy
    completions of depth ``budget - 1`` on both sides (or stay a leaf), then recurse in each child."""
    tot = eng.class_counts(C)
    node = TreeNode(counts=tot[0])
    if budget <= 1:
        return node
    eng.check_time()
    feats, A, B = _valid_children(eng, C)
    if feats.size == 0:
        return node
    kv = eng.greedy_values(np.concatenate([A, B]), budget - 1)
    split = kv[: feats.size] + kv[feats.size:]
    i = int(np.argmin(split))
    if split[i] < eng.leaf_values(tot)[0] - TOL:
        return TreeNode(counts=tot[0], feature=int(feats[i]), left=lickety_tree(eng, A[i], budget - 1),
                        right=lickety_tree(eng, B[i], budget - 1))
    return node


class LookaheadSolver:
    """Optimal trees of a depth budget whose budget-1 nodes are valued by ``Greedy(S, frontier_depth)``.

    ``frontier_depth = 1`` makes frontier nodes plain leaves: the exact solver (GOSDT's objective under
    a depth budget). Values are in the engine's mistake units.
    """

    def __init__(self, eng: Engine, frontier_depth: int = 1, batch_budget: int = 3) -> None:
        self.eng = eng
        self.g = int(frontier_depth)
        self.batch_budget = int(batch_budget)
        #: key -> (lower bound, exact value or None, chosen feature or None)
        self.memo: dict[bytes, tuple[float, float | None, int | None]] = {}
        self.expanded = 0

    # -- frontier and batch levels -----------------------------------------------------------------
    def frontier(self, C: np.ndarray) -> np.ndarray:
        if self.g > 1:
            return self.eng.greedy_values(C, self.g)
        return self.eng.leaf_values(self.eng.class_counts(C))

    def batch(self, C: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact values and chosen features (-1 = leaf) of many nodes of budget ``b`` at once."""
        eng = self.eng
        C = np.atleast_2d(C)
        m = len(C)
        if m == 0:
            return np.zeros(0), np.zeros(0, dtype=np.int64)
        U, inv = eng.dedup(C)
        if b <= 1:
            return self.frontier(U)[inv], np.full(m, -1, dtype=np.int64)
        if len(U) < m:
            v, ch = self.batch(U, b)
            return v[inv], ch[inv]
        eng.check_time()
        tot = eng.class_counts(C)
        leaf = eng.leaf_values(tot)
        if eng.p == 0:  # no non-constant binary column: nothing can split, every node is a leaf
            return leaf, np.full(m, -1, dtype=np.int64)
        if b == 2 and self.g == 1:
            best, j = eng.best_leaf_split(C)
            use = best < leaf - TOL
            return np.where(use, best, leaf), np.where(use, j, -1)
        split = np.full((m, eng.p), np.inf)
        nL = eng.left_sizes(C)
        valid = (nL > 0) & (nL < tot.sum(1)[:, None])
        per_row = (2 * eng.p) ** (b - 1)
        step = max(1, _MAX_BATCH_ROWS // max(1, per_row))
        for s in range(0, m, step):
            rows, feats = np.nonzero(valid[s:s + step])
            if rows.size == 0:
                continue
            A, B = eng.children(C, rows + s, feats)
            kv, _ = self.batch(np.concatenate([A, B]), b - 1)
            split[rows + s, feats] = kv[: rows.size] + kv[rows.size:]
        j = np.argmin(split, axis=1)
        best = split[np.arange(m), j]
        use = best < leaf - TOL
        return np.where(use, best, leaf), np.where(use, j, -1)

    # -- memoised branch and bound ------------------------------------------------------------------
    @staticmethod
    def _key(C: np.ndarray, b: int) -> bytes:
        return C.tobytes() + bytes((b,))

    def _batch_memo(self, C: np.ndarray, b: int) -> np.ndarray:
        """Exact values of rows of budget ``b <= batch_budget``, reusing and filling the memo."""
        keys = [self._key(c, b) for c in C]
        vals = np.empty(len(C))
        missing = []
        for i, key in enumerate(keys):
            ent = self.memo.get(key)
            if ent is not None and ent[1] is not None:
                vals[i] = ent[1]
            else:
                missing.append(i)
        if missing:
            v, ch = self.batch(C[missing], b)
            for i, vi, ci in zip(missing, v, ch):
                vals[i] = vi
                self.memo[keys[i]] = (float(vi), float(vi), int(ci))
        return vals

    def _lower(self, C: np.ndarray, b: int) -> np.ndarray:
        """Lower bounds: min(leaf, equivalent-points loss + 2 lambda), or the memo's when tighter."""
        eng = self.eng
        leaf = eng.leaf_values(eng.class_counts(C))
        lb = np.minimum(leaf, eng.min_loss(C) + 2 * eng.lam_n)
        for i, c in enumerate(C):
            ent = self.memo.get(self._key(c, b))
            if ent is not None:
                lb[i] = max(lb[i], ent[1] if ent[1] is not None else ent[0])
        return lb

    def solve(self, C: np.ndarray, b: int, cap: float = np.inf) -> tuple[float, bool]:
        """Value of the best tree on capture ``C`` with budget ``b``.

        Returns ``(value, True)`` when the optimum is below ``cap``; otherwise ``(lower_bound, False)``
        with ``lower_bound >= cap`` (the node cannot improve on ``cap``).
        """
        eng = self.eng
        if b <= self.batch_budget:
            return float(self._batch_memo(C[None], b)[0]), True
        key = self._key(C, b)
        ent = self.memo.get(key)
        if ent is not None:
            if ent[1] is not None:
                return ent[1], True
            if ent[0] >= cap:
                return ent[0], False
        eng.check_time()
        self.expanded += 1
        tot = eng.class_counts(C)
        leaf = float(eng.leaf_values(tot)[0])
        ml = float(eng.min_loss(C)[0])
        if leaf - ml <= eng.lam_n + TOL:  # no split can pay for its extra leaf (incremental accuracy)
            self.memo[key] = (leaf, leaf, -1)
            return leaf, True
        lb0 = min(leaf, ml + 2 * eng.lam_n)
        if ent is not None:
            lb0 = max(lb0, ent[0])
        if lb0 >= cap:
            self.memo[key] = (lb0, None, None)
            return lb0, False
        feats, A, B = _valid_children(eng, C)
        best, best_j = leaf, -1
        if feats.size and b - 1 <= self.batch_budget:
            kv = self._batch_memo(np.concatenate([A, B]), b - 1)
            split = kv[: feats.size] + kv[feats.size:]
            i = int(np.argmin(split))
            if split[i] < leaf - TOL:
                best, best_j = float(split[i]), int(feats[i])
        elif feats.size:
            lbA, lbB = self._lower(A, b - 1), self._lower(B, b - 1)
            ub = eng.greedy_values(np.concatenate([A, B]), b - 1)
            order = np.argsort(ub[: feats.size] + ub[feats.size:], kind="stable")
            for i in order:
                T = min(best, cap)
                if lbA[i] + lbB[i] >= T - TOL:
                    continue
                vA, eA = self.solve(A[i], b - 1, T - lbB[i])
                if not eA or vA + lbB[i] >= T - TOL:
                    continue
                vB, eB = self.solve(B[i], b - 1, T - vA)
                if eB and vA + vB < best - TOL:
                    best, best_j = vA + vB, int(feats[i])
        if best < cap:
            self.memo[key] = (best, best, best_j)
            return best, True
        self.memo[key] = (cap, None, None)
        return cap, False

    # -- trees ----------------------------------------------------------------------------------------
    def choice(self, C: np.ndarray, b: int) -> int:
        ent = self.memo.get(self._key(C, b))
        if ent is not None and ent[1] is not None and ent[2] is not None:
            return int(ent[2])
        if b <= self.batch_budget:
            return int(self.batch(C[None], b)[1][0])
        self.solve(C, b)  # cap = inf: the result is exact and its choice is memoised
        return int(self.memo[self._key(C, b)][2])  # type: ignore[arg-type]

    def prefix(self, C: np.ndarray, b: int) -> tuple[float, TreeNode, list[tuple[TreeNode, np.ndarray, int]]]:
        """Solve and return ``(value, tree, leaves)``; ``leaves`` lists ``(leaf node, capture, budget
        left at that leaf)`` so a caller can refill them (frontier leaves have budget 1)."""
        value, _ = self.solve(C, b)
        leaves: list[tuple[TreeNode, np.ndarray, int]] = []

        def build(c: np.ndarray, bb: int) -> TreeNode:
            counts = self.eng.class_counts(c)[0]
            j = self.choice(c, bb) if bb > 1 else -1
            if j < 0:
                node = TreeNode(counts=counts)
                leaves.append((node, c, bb))
                return node
            xj = self.eng.X[j]
            return TreeNode(counts=counts, feature=j, left=build(c & xj, bb - 1), right=build(c & ~xj, bb - 1))

        tree = build(C, b)
        return float(value), tree, leaves

    def tree(self, C: np.ndarray, b: int) -> tuple[float, TreeNode]:
        value, tree, _ = self.prefix(C, b)
        return value, tree
