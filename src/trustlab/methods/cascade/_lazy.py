"""The pruned search of one cascade-routing step, run for all the queries of a run-set at once.

This is the engine's path when the pruning lemma is on and the supermodel values are not cached (new queries,
or more of them than one dense array holds). For the queries whose run-set is ``R``, the candidates of ``R``
(``Space.cands``) are walked in the paper's breadth-first order, a chunk of queries at a time:

- a candidate's value is computed only for the queries for which its parent survived the lemma, as the running
  maximum of its parent's samples and the new model's (one ``maximum`` and one sum over the samples per query
  and candidate); the lemma ``q(M) - q(parent) - lam * c_new >= 0`` then decides which queries its children see;
- **submodularity skip**: ``q`` is a sample mean of a maximum, so the gain of adding model ``j`` to ``P`` is at
  most its gain on ``P``'s parent ``Q``: ``q(P + j) - q(P) <= q(Q + j) - q(Q)``. Where ``Q + j`` (the
  candidate's "uncle", evaluated one level earlier) failed the lemma by more than a rounding margin, ``P + j``
  fails it too, so it is dropped without computing its value (the per-query search computes it, then drops
  it: the decisions are the same). The margin (``_SKIP_TOL`` of the values' scale, against rounding errors of
  about 1e-15) makes the skip exact in floating point;
- the trade-offs of the surviving candidates go into one ``(queries, candidates)`` array per chunk and the pick
  is :func:`pick_best` (largest trade-off, then the cheapest, then the first in the search order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from trustlab.methods.cascade._engine import Engine, Space

__all__ = ["pruned_step", "pick_best", "LAZY_ROWS"]

#: queries per chunk (bounds the (models, queries, samples) array of a chunk and the running maxima it keeps)
LAZY_ROWS = 1024
#: margin of the submodularity skip, relative to the scale of the values (their rounding errors are ~1e-15)
_SKIP_TOL = 1e-9
_NEG = -np.inf


def pick_best(tau: np.ndarray, C: np.ndarray, gen: np.ndarray | None = None) -> np.ndarray:
    """Per row, the column with the largest trade-off ``tau`` (``-inf`` = not a candidate); ties go to the
    smallest cost ``C``, then to the smallest generation order ``gen`` (the column order when None)."""
    tie = tau == tau.max(axis=1, keepdims=True)
    tie &= C == np.where(tie, C, np.inf).min(axis=1, keepdims=True)
    if gen is None:
        return tie.argmax(axis=1)
    return np.where(tie, gen, np.iinfo(np.int32).max).argmin(axis=1)


@dataclass(frozen=True)
class _Tree:
    """The search tree of one run-set, per candidate (breadth-first order): its parent, the model it adds
    (-1 for the run-set itself), its uncles (``P - i + j`` for a candidate ``P + j`` and each model ``i`` added to
    ``P``, when ``P - i`` is not empty), whether it is some candidate's uncle, whether it has children and the
    position of its last child."""

    parent: np.ndarray
    added: np.ndarray
    uncles: tuple[np.ndarray, ...]
    is_uncle: np.ndarray
    has_child: np.ndarray
    last_child: np.ndarray


def _tree(space: Space, s: int) -> _Tree:
    """The tree of state ``s`` (cached on the space)."""
    if s not in space.trees:
        cols, par = space.cands[s], space.cand_parents[s]
        n, root = len(cols), int(space.masks[s])
        added = space.added[s, cols].astype(np.int64)
        if root:
            added[0] = -1
        masks = space.masks[cols]
        pos = {int(m): c for c, m in enumerate(masks)}
        uncles: list[np.ndarray] = []
        for c in range(n):
            p, found = int(par[c]), []
            if p >= 0:
                extra = int(masks[p]) & ~root
                for i in range(space.k):
                    q = int(masks[p]) & ~(1 << i)
                    if extra >> i & 1 and q:
                        u = pos.get(q | (1 << int(added[c])), -1)
                        if u >= 0 and par[u] >= 0 and int(masks[par[u]]) == q:  # the uncle's test is against q
                            found.append(u)
            uncles.append(np.array(found, dtype=np.int64))
        is_uncle = np.zeros(n, dtype=bool)
        for u in uncles:
            is_uncle[u] = True
        last = np.full(n, -1, dtype=np.int64)
        kids = np.flatnonzero(par >= 0)
        np.maximum.at(last, par[kids], kids)
        space.trees[s] = _Tree(par, added, tuple(uncles), is_uncle, last >= 0, last)
    return space.trees[s]


def pruned_step(engine: Engine, space: Space, rows: np.ndarray, states: np.ndarray, lam: float) -> np.ndarray:
    """The column each query of ``rows`` (run-sets: the columns ``states``) picks at this step."""
    C = engine.cost_table(space)
    pick = np.empty(len(rows), dtype=np.int64)
    for s in np.unique(states):
        g = np.flatnonzero(states == s)
        t, W = _tree(space, int(s)), engine.W(int(space.masks[s]))
        # W's column of every model repeated for each query of a chunk: (k, rows * S), built once per run-set
        tiled = None if W is None else np.tile(np.ascontiguousarray(W.T), (1, min(len(g), LAZY_ROWS)))
        for lo in range(0, len(g), LAZY_ROWS):
            sel = g[lo : lo + LAZY_ROWS]
            pick[sel] = space.cands[s][_walk(engine, space, int(s), t, rows[sel], W, tiled, C, lam)]
    return pick


def _root(space: Space, col: int, t: _Tree, c: int, mu: np.ndarray, X: np.ndarray | None, S: int
          ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """(value, running maximum, value for the skip) of a root candidate (a single model or the run-set) for
    every query; a single model's value is its mean exactly, the skip uses its sample mean."""
    members = np.flatnonzero(space.bits[col])
    if X is None:
        val = mu[:, members].max(axis=1)
        return val, None, val
    if len(members) == 1:
        m = int(members[0])
        run = X[m] if t.has_child[c] else None
        return mu[:, m], run, (mu[:, m] if run is None else np.add.reduce(run, axis=1) / S)
    run = X[members].max(axis=0)
    val = np.add.reduce(run, axis=1) / S
    return val, run, val


_Node = tuple[np.ndarray | None, np.ndarray | None, np.ndarray, np.ndarray]  # rows (None: all), max, value, skip value


def _child(t: _Tree, c: int, node: _Node, doom: np.ndarray | None, X: np.ndarray | None, mu: np.ndarray,
           chat: np.ndarray, lam: float, tol: float) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray] | None:
    """Candidate ``c`` for the queries its parent ``node`` kept: (queries that keep it, their running maxima
    when ``c`` has children, their values), None when the skip or the lemma drops it for all of them."""
    idx, prun, pval, pbval = node
    m, us = int(t.added[c]), t.uncles[c]
    if us.size and doom is not None:  # the submodularity skip
        d = doom[us[0]] if us.size == 1 else doom[us].any(axis=0)
        d = d if idx is None else d[idx]
        if d.any():
            if t.is_uncle[c]:
                doom[c, d if idx is None else idx[d]] = True
            d = ~d
            idx = np.flatnonzero(d) if idx is None else idx[d]
            if not idx.size:
                return None
            prun, pval, pbval = None if prun is None else prun[d], pval[d], pbval[d]
    sel = slice(None) if idx is None else idx
    if X is None:
        run, val = None, np.maximum(pval, mu[sel, m])
    else:
        run = np.maximum(X[m], prun) if idx is None else X[m][idx]
        if idx is not None:
            np.maximum(run, prun, out=run)
        val = np.add.reduce(run, axis=1) / X.shape[2]
    lc = lam * chat[sel, m]
    if doom is not None and t.is_uncle[c]:  # fails the lemma by more than the margin: so does every P + m below
        gone = val - pbval - lc < -tol * (1.0 + np.abs(lc))
        if gone.any():
            doom[c, gone if idx is None else idx[gone]] = True
    keep = val - pval - lc >= 0
    if not keep.all():
        idx = np.flatnonzero(keep) if idx is None else idx[keep]
        val = val[keep]
        run = run[keep] if run is not None and t.has_child[c] else None
    return idx, run, val


def _walk(engine: Engine, space: Space, s: int, t: _Tree, grow: np.ndarray, W: np.ndarray | None,
          tiled: np.ndarray | None, C: np.ndarray, lam: float) -> np.ndarray:
    """Positions (in ``space.cands[s]``) of the best candidate of each query of one chunk."""
    est, cols = engine.est, space.cands[s]
    mu, chat, n = est.mean_for(int(space.masks[s]), grow), est.cost[grow], len(grow)
    S, X = 1, None
    if W is not None and tiled is not None:  # (k, rows, S): each model's samples mu + W[:, m] for every query
        S = W.shape[0]
        X = np.repeat(np.ascontiguousarray(mu.T).ravel(), S)  # one contiguous sum (a broadcast costs more)
        X += tiled[:, : n * S].ravel()
        X = X.reshape(-1, n, S)
    tol = _SKIP_TOL * (1.0 + float(np.abs(mu).max()) + (0.0 if W is None else float(np.abs(W).max())))
    tau = np.full((n, len(cols)), _NEG)
    cost = np.zeros((n, len(cols)))
    doom = np.zeros((len(cols), n), dtype=bool) if t.is_uncle.any() else None  # per candidate: doomed queries
    live: dict[int, _Node] = {}
    for c in range(len(cols)):
        p = int(t.parent[c])
        if p < 0:
            idx = None
            val, run, bval = _root(space, int(cols[c]), t, c, mu, X, S)
        elif p not in live:
            continue  # the parent was pruned for every query of the chunk
        else:
            node = live[p]
            if t.last_child[p] == c:
                del live[p]
            out = _child(t, c, node, doom, X, mu, chat, lam, tol)
            if out is None:
                continue
            idx, run, val = out
            bval = val
        sel = slice(None) if idx is None else idx
        cc = C[grow if idx is None else grow[idx], cols[c]]
        tau[sel, c] = val - lam * cc
        cost[sel, c] = cc
        if t.has_child[c] and (idx is None or idx.size):
            live[c] = (idx, run, val, bval)
    return pick_best(tau, cost)
