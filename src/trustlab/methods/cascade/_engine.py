"""The vectorised decision engine: candidate supermodels, cached supermodel values, one step for all queries.

``Space`` lists, for every decision state ``R`` (the set of models already run), the candidate supermodels
``M`` (``M`` contains ``R``, ``|M| <= max_depth``) in the breadth-first order of the paper's search, with
each candidate's parent (``M`` minus the model added last) and that model. Every mask of at most
``max_depth`` models is one column of a fixed universe, so one step of the policy is a handful of numpy
operations on ``(n_queries, n_columns)`` arrays: values, costs, the pruning lemma as a mask, the beam, the
tie-broken arg-max and the next model to run. ``Engine`` holds one set of estimates, the Sobol samples
and the caches: supermodel values are computed once per (run-set, query) and reused by every lambda the
search tries.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.exceptions import ConfigError, TrustlabError
from trustlab.methods.cascade._estimates import (
    QualityEstimates,
    cholesky_factor,
    mask_bits,
    supermodel_values,
)
from trustlab.methods.cascade._lazy import pick_best, pruned_step

__all__ = ["Space", "Engine", "Trajectory", "select_answer", "set_costs", "max_columns", "space_bytes"]

#: bytes per (state, column) pair of a Space's tables (valid: bool, parent/added/gen: int32)
_PAIR_BYTES = 13
#: the share of the machine's available memory a Space's tables may take (the supermodel cap grows with memory)
_MEMORY_SHARE = 0.25


def _available_bytes() -> int:
    """Available physical memory (``os.sysconf``; 8 GiB where the platform does not say)."""
    import os

    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


def space_bytes(k: int, depth: int) -> int:
    """Memory of the ``(U, U)`` tables of a Space over ``k`` models with ``max_depth=depth``."""
    from math import comb

    u = sum(comb(k, i) for i in range(min(depth, k) + 1))
    return _PAIR_BYTES * u * u


def max_columns() -> int:
    """The largest universe of supermodels whose tables fit in ``_MEMORY_SHARE`` of the available memory."""
    return int((_MEMORY_SHARE * _available_bytes() / _PAIR_BYTES) ** 0.5)
#: a policy keeps all its supermodel values in one array when they fit in this many floats
_DENSE_FLOATS = 30_000_000
_NEG = -np.inf


def set_costs(chat: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """``(n, n_masks)``: the summed cost estimates of each mask, added model by model in index order (so the
    per-query reference gets bit-identical sums). Each mask's sum is that of the mask without its last model
    plus that model's cost (the same additions in the same order), memoised, so a mask costs one addition."""
    chat_t = np.ascontiguousarray(chat.T)
    masks = bits.astype(np.int64) @ (np.int64(1) << np.arange(bits.shape[1], dtype=np.int64))
    memo: dict[int, np.ndarray] = {0: np.zeros(chat.shape[0])}

    def total(m: int) -> np.ndarray:
        if m not in memo:
            top = m.bit_length() - 1
            rest = m & ~(1 << top)
            memo[m] = chat_t[top].copy() if rest == 0 else total(rest) + chat_t[top]
        return memo[m]

    out = np.empty((bits.shape[0], chat.shape[0]))
    for c, m in enumerate(masks.tolist()):
        out[c] = total(m)
    return out.T


class Space:
    """Candidate supermodels per decision state for one policy configuration.

    ``rank[j]`` is model ``j``'s position in the cost order (ties by index); ``mode`` is ``"cr"`` (cascade
    routing) or ``"cascade"`` (prefixes of the cost order only). ``force_order`` allows only models ranked
    after every model run so far; ``greedy`` looks one model ahead.
    """

    def __init__(self, k: int, depth: int, rank: np.ndarray, *, mode: str = "cr", force_order: bool = False,
                 greedy: bool = False) -> None:
        from math import comb

        n_cols, cap = sum(comb(k, i) for i in range(depth + 1)), max_columns()
        if n_cols > cap:
            fits = max((d for d in range(1, depth) if sum(comb(k, i) for i in range(d + 1)) <= cap), default=None)
            hint = f"set max_depth <= {fits}" if fits else "use fewer models"
            raise ConfigError(f"The 'max_depth' of a policy over {k} models must keep its supermodels within memory: "
                              f"max_depth={depth} gives {n_cols} supermodels, whose decision tables need "
                              f"{space_bytes(k, depth) / 2**30:.1f} GiB, more than {_MEMORY_SHARE:.0%} of the "
                              f"available memory ({_available_bytes() / 2**30:.1f} GiB, at most {cap} supermodels); "
                              f"{hint}.")
        self.k, self.depth, self.mode, self.force_order = k, depth, mode, force_order
        self.rank = np.asarray(rank, dtype=np.int64)
        self.by_rank = np.argsort(self.rank, kind="stable")
        masks = [m for m in range(2**k) if bin(m).count("1") <= depth]
        def key(m: int) -> tuple[int, list[int]]:
            return bin(m).count("1"), sorted(int(self.rank[j]) for j in range(k) if m >> j & 1)

        self.masks = np.array(sorted(masks, key=key), dtype=np.int64)
        self.U = len(self.masks)
        self.col = np.full(2**k, -1, dtype=np.int64)
        self.col[self.masks] = np.arange(self.U)
        self.bits = mask_bits(self.masks, k)
        self.pop = self.bits.sum(axis=1)
        self.valid = np.zeros((self.U, self.U), dtype=bool)
        self.parent = np.full((self.U, self.U), -1, dtype=np.int32)
        self.added = np.zeros((self.U, self.U), dtype=np.int32)
        self.gen = np.full((self.U, self.U), np.iinfo(np.int32).max, dtype=np.int32)
        self.cands: dict[int, np.ndarray] = {}
        self.trees: dict[int, Any] = {}  # per state, the search tree the pruned step walks (filled on first use)
        self.cand_parents: dict[int, np.ndarray] = {}
        for s in range(self.U):
            if self.pop[s] < depth:
                self._expand(s, force_order, greedy)

    def _children(self, m: int, last: int, force_order: bool) -> list[int]:
        members = [j for j in range(self.k) if m >> j & 1]
        top = max((int(self.rank[j]) for j in members), default=-1)
        if self.mode == "cascade":
            return [int(self.by_rank[top + 1])] if top + 1 < self.k else []
        out = []
        for j in self.by_rank:
            r = int(self.rank[j])
            if m >> int(j) & 1 or r <= last or (force_order and members and r <= top):
                continue
            out.append(int(j))
        return out

    def _expand(self, s: int, force_order: bool, greedy: bool) -> None:
        """Breadth-first generation of the candidates of state ``s`` (duplicates prevented by adding only
        models ranked after the last one added)."""
        root = int(self.masks[s])
        order: list[int] = [s] if root else []
        parents: list[int] = [-1] if root else []
        level = [(root, -1)]
        while level:
            nxt = []
            for m, last in level:
                if greedy and m != root:
                    continue
                for j in self._children(m, last, force_order):
                    child = m | (1 << j)
                    c = int(self.col[child])
                    if c < 0:  # more than max_depth models
                        continue
                    self.parent[s, c] = int(self.col[m]) if m else -1
                    self.added[s, c] = j
                    order.append(c)
                    parents.append(int(self.col[m]) if m else -1)
                    nxt.append((child, int(self.rank[j])))
            level = nxt
        cols = np.array(order, dtype=np.int64)
        self.valid[s, cols] = True
        self.gen[s, cols] = np.arange(len(cols))
        self.cands[s] = cols
        pos = {c: i for i, c in enumerate(order)}
        self.cand_parents[s] = np.array([pos.get(p, -1) for p in parents], dtype=np.int64)


class Trajectory:
    """Per-query outcome of a policy run: final run-set masks, run order (-1 padded) and answer model."""

    def __init__(self, masks: np.ndarray, order: np.ndarray, answer: np.ndarray) -> None:
        self.masks, self.order, self.answer = masks, order, answer

    def run(self, k: int) -> np.ndarray:
        return mask_bits(self.masks, k)


def select_answer(est: QualityEstimates, masks: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The run model with the highest post-hoc estimate (lowest index on ties). Every query must have run
    at least one model (the official ``select_answer`` indexed an empty list here)."""
    if (masks == 0).any():
        raise TrustlabError("select_answer: a query ran no model; every policy runs at least one (this is a bug).")
    mu = est.mean_rows(masks, rows)
    return np.where(mask_bits(masks, est.k), mu, _NEG).argmax(axis=1)


class Engine:
    """One set of estimates with the Sobol samples and the caches a policy needs on it."""

    def __init__(self, est: QualityEstimates, samples: np.ndarray | None, *, correlated: bool = True,
                 cache: bool = True) -> None:
        self.est, self.samples, self.correlated, self.cache = est, samples, correlated, cache
        self._W: dict[int, np.ndarray | None] = {}
        self._values: dict[Any, np.ndarray] = {}
        self._costs: dict[int, np.ndarray] = {}

    def W(self, mask: int) -> np.ndarray | None:
        """``Z L^T`` for run-set ``mask`` (None without uncertainty)."""
        if mask not in self._W:
            cov = self.est.cov_for(mask)
            if cov is None or self.samples is None:
                self._W[mask] = None
            else:
                cov = cov if self.correlated else np.diag(np.diag(cov))
                self._W[mask] = self.samples @ cholesky_factor(cov).T
        return self._W[mask]

    def values(self, mask: int, masks: np.ndarray, parents: np.ndarray, rows: np.ndarray, key: Any) -> np.ndarray:
        """``(len(rows), len(masks))`` supermodel values given run-set ``mask``; cached for all rows by ``key``."""
        if self.cache:
            if key not in self._values:
                self._values[key] = supermodel_values(self.est.mean_for(mask), self.W(mask), masks, parents)
            return self._values[key][rows]
        return supermodel_values(self.est.mean_for(mask, rows), self.W(mask), masks, parents)

    def cost_table(self, space: Space) -> np.ndarray:
        """``(n, U)`` summed cost estimates of every column of ``space`` for every row (cached)."""
        key = id(space)
        if key not in self._costs:
            self._costs[key] = set_costs(self.est.cost, space.bits)
        return self._costs[key]

    def costs(self, space: Space, rows: np.ndarray) -> np.ndarray:
        """``(len(rows), U)`` summed cost estimates of every column of ``space``."""
        return self.cost_table(space)[rows]

    # -------------------------------------------------------------------------- cascade routing
    def _dense_ok(self, space: Space) -> bool:
        """Whether every state's values for every row fit in one cached array (the tuning rows' case)."""
        n_states = int((space.pop < space.depth).sum())
        return self.cache and self.est.n * space.U * n_states <= _DENSE_FLOATS

    def _state_values(self, space: Space, rows: np.ndarray, states: np.ndarray) -> np.ndarray:
        """``(len(rows), U)`` supermodel values of every candidate of each row's state (NaN elsewhere):
        from the cached array of all (state, row) values when it fits, else computed for these rows."""
        key = ("dense", id(space))
        if self._dense_ok(space):
            if key not in self._values:
                n_states = int((space.pop < space.depth).sum())
                dense = np.full((n_states, self.est.n, space.U), np.nan)
                for s in range(n_states):  # states are the first columns (sorted by size)
                    m = int(space.masks[s])
                    dense[s][:, space.cands[s]] = supermodel_values(self.est.mean_for(m), self.W(m),
                                                                    space.masks[space.cands[s]], space.cand_parents[s])
                self._values[key] = dense
            return self._values[key][states, rows]
        V = np.full((len(rows), space.U), np.nan)
        for s in np.unique(states):
            g = np.flatnonzero(states == s)
            m = int(space.masks[s])
            V[np.ix_(g, space.cands[s])] = supermodel_values(self.est.mean_for(m, rows[g]), self.W(m),
                                                             space.masks[space.cands[s]], space.cand_parents[s])
        return V

    def cr_step(self, space: Space, rows: np.ndarray, states: np.ndarray, lam: float, *, prune: bool,
                top_k: int | None) -> tuple[np.ndarray, np.ndarray]:
        """One decision for ``rows`` whose run-sets are the columns ``states`` (all of the same size):
        returns (stop, next model to run)."""
        lazy = prune and space.mode != "cascade" and top_k is None and not self._dense_ok(space)
        if lazy:
            pick = pruned_step(self, space, rows, states, lam)
        else:
            V, C = self._state_values(space, rows, states), self.costs(space, rows)
            tau = V - lam * C
            j = int(space.pop[states[0]])
            if top_k is not None:
                alive = self._beam(space, rows, states, V, tau, space.valid[states], lam, j, prune, top_k)
            elif prune and space.mode != "cascade":
                alive = self._prune(space, rows, states, V, space.valid[states], lam, j)
            else:
                alive = space.valid[states]
            pick = pick_best(np.where(alive, tau, _NEG), C, space.gen[states])
        stop = pick == states
        new = space.bits[pick] & ~space.bits[states]
        if space.mode == "cascade" or space.force_order:  # a fixed order runs the next model in that order
            nxt = np.where(new, space.rank[None, :], space.k).argmin(axis=1)
        else:  # the cheapest not-yet-run member of the best supermodel (the official argmin was always 0)
            nxt = np.where(new, self.est.cost[rows], np.inf).argmin(axis=1)
        return stop, nxt

    def _gain_ok(self, space: Space, rows: np.ndarray, states: np.ndarray, V: np.ndarray, lam: float
                 ) -> tuple[np.ndarray, np.ndarray]:
        """The lemma's test for every column, ``q(M) - q(parent) - lam * c_m >= 0`` (True where the parent is
        the empty root, i.e. for single models), and the parent columns (0 where there is none)."""
        par = space.parent[states]
        has = par >= 0
        safe = np.where(has, par, 0)
        added = space.added[states]
        gain = V - np.take_along_axis(V, safe, axis=1) - lam * np.take_along_axis(self.est.cost[rows], added, axis=1)
        return ~has | (gain >= 0), safe

    def _prune(self, space: Space, rows: np.ndarray, states: np.ndarray, V: np.ndarray, alive: np.ndarray,
               lam: float, j: int) -> np.ndarray:
        """The pruning lemma: a candidate whose last model does not pay for itself is dropped with its whole
        subtree (children of dropped nodes are dropped level by level)."""
        ok, safe = self._gain_ok(space, rows, states, V, lam)
        alive = alive & ok
        for level in range(2, space.depth - j + 1):
            cols = np.flatnonzero(space.pop == j + level)
            alive[:, cols] &= np.take_along_axis(alive, safe[:, cols], axis=1)
        return alive

    def _beam(self, space: Space, rows: np.ndarray, states: np.ndarray, V: np.ndarray, tau: np.ndarray,
              alive: np.ndarray, lam: float, j: int, prune: bool, top_k: int) -> np.ndarray:
        """Level by level: keep the ``top_k`` children of surviving parents ranked by the parent's trade-off
        (generation order on ties), then apply the lemma to them (as the official search does)."""
        alive = alive.copy()
        ok_gain, safe = self._gain_ok(space, rows, states, V, lam)
        has = space.parent[states] >= 0
        root_tau = tau[np.arange(len(rows)), states] if j > 0 else np.full(len(rows), -1e8)
        gen = space.gen[states]
        for level in range(1, space.depth - j + 1):
            cols = np.flatnonzero(space.pop == j + level)
            if not cols.size:
                break
            h, sp = has[:, cols], safe[:, cols]
            ok = alive[:, cols] & np.where(h, np.take_along_axis(alive, sp, axis=1), True)
            ptau = np.where(h, np.take_along_axis(tau, sp, axis=1), root_tau[:, None])
            order = np.lexsort((np.where(ok, gen[:, cols], np.iinfo(np.int32).max), np.where(ok, -ptau, np.inf)),
                               axis=1)
            ranks = np.empty_like(order)
            np.put_along_axis(ranks, order, np.broadcast_to(np.arange(cols.size), order.shape), axis=1)
            ok &= ranks < top_k
            if prune and space.mode != "cascade":
                ok &= ok_gain[:, cols]
            alive[:, cols] = ok
        return alive

    def run_cr(self, space: Space, lambdas: tuple[float | None, ...], rows: np.ndarray, *, prune: bool,
               top_k: int | None) -> Trajectory:
        """The full policy: step ``j`` uses ``lambdas[j]``; a None (or ``max_depth``) stops."""
        n, k = len(rows), self.est.k
        masks = np.zeros(n, dtype=np.int64)
        order = np.full((n, k), -1, dtype=np.int64)
        active = np.ones(n, dtype=bool)
        depth = min(space.depth, next((i for i, v in enumerate(lambdas) if v is None), len(lambdas)))
        if depth < 1:
            raise ConfigError("A cascade needs at least one lambda that is not None (it must run one model).")
        for step in range(depth):
            idx = np.flatnonzero(active)
            if not idx.size:
                break
            stop, nxt = self.cr_step(space, rows[idx], space.col[masks[idx]], float(lambdas[step]), prune=prune,
                                     top_k=top_k)
            active[idx[stop]] = False
            go = idx[~stop]
            masks[go] |= np.left_shift(1, nxt[~stop])
            order[go, step] = nxt[~stop]
        return Trajectory(masks, order, select_answer(self.est, masks, rows))
