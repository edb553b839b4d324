"""The per-query reference of cascade routing: the paper's breadth-first search, one query at a time.

This is the algorithm as the official ``CascadeRouter._predict_model`` runs it (candidates expanded in
rank order, the pruning lemma, the beam, ties to the cheapest supermodel), with the official code's bugs
fixed: samples scaled by the standard deviation, the cheapest not-yet-run member of the best supermodel
runs next, an answer is always chosen among models that ran. It loops in Python per query and per step,
and is what the vectorised :class:`~trustlab.methods.cascade._engine.Engine` is checked against (tests)
and timed against (``benchmarks/cascade.py``): both must make identical decisions.
"""

from __future__ import annotations

import numpy as np

from trustlab.methods.cascade._engine import Trajectory
from trustlab.methods.cascade._estimates import QualityEstimates, cholesky_factor

__all__ = ["reference_decisions"]


def _search(mu: np.ndarray, x: np.ndarray | None, chat: np.ndarray, run: list[int], lam: float, rank: np.ndarray,
            opts: dict) -> list[int]:
    """Best supermodel (as a sorted list of models) for one query whose models ``run`` have run."""
    k, depth = len(mu), opts["depth"]
    frontier = [(sorted(run), [], 0.0, 0.0)]
    best: tuple[float, float, int, list[int]] | None = None
    evaluated, level = 0, 0
    while frontier and (not opts["greedy"] or level <= 1):
        nxt = []
        for run_m, added, q_parent, _ in frontier:
            members = run_m + added
            if members:
                cost = 0.0
                for j in range(k):
                    cost += chat[j] * (j in members)
                if len(members) == 1 or x is None:
                    q = float(mu[members].max())
                else:
                    q = float(x[:, members].max(axis=1).mean())
            else:
                cost, q = 0.0, -1e8
            if added and opts["prune"] and opts["mode"] != "cascade" and len(members) > 1:
                if q - q_parent - lam * chat[added[-1]] < 0:
                    continue
            tau = q - lam * cost
            if members:
                if best is None or tau > best[0] or (tau == best[0] and cost < best[1]):
                    best = (tau, cost, evaluated, members)
                evaluated += 1
            top = max((int(rank[j]) for j in members), default=-1)
            last = int(rank[added[-1]]) if added else -1
            if opts["mode"] == "cascade":
                poss = [int(np.flatnonzero(rank == top + 1)[0])] if top + 1 < k else []
            else:
                poss = [int(j) for j in np.argsort(rank, kind="stable") if int(j) not in members
                        and int(rank[j]) > last and not (opts["force_order"] and members and int(rank[j]) <= top)]
            for j in poss:
                if len(members) + 1 <= depth:
                    nxt.append((run_m, added + [j], q, tau))
            if opts["top_k"] is not None:
                nxt = sorted(nxt, key=lambda t: -t[3])[: opts["top_k"]]
        frontier, level = nxt, level + 1
    assert best is not None
    return sorted(best[3])


def reference_decisions(est: QualityEstimates, samples: np.ndarray | None, lambdas: tuple[float | None, ...], *,
                        depth: int, rank: np.ndarray, mode: str = "cr", force_order: bool = False,
                        greedy: bool = False, top_k: int | None = None, prune: bool = True,
                        correlated: bool = True) -> Trajectory:
    """Cascade-routing decisions for every query of ``est``, one query and one step at a time."""
    n, k = est.n, est.k
    opts = {"depth": depth, "mode": mode, "force_order": force_order, "greedy": greedy, "top_k": top_k,
            "prune": prune}
    W: dict[int, np.ndarray | None] = {}
    masks = np.zeros(n, dtype=np.int64)
    order = np.full((n, k), -1, dtype=np.int64)
    answer = np.zeros(n, dtype=np.int64)
    stop_at = min(depth, next((i for i, v in enumerate(lambdas) if v is None), len(lambdas)))
    for i in range(n):
        run: list[int] = []
        mask = 0
        for step in range(stop_at):
            mu = est.mean_rows(np.array([mask]), np.array([i]))[0]
            if mask not in W:
                cov = est.cov_for(mask)
                if cov is None or samples is None:
                    W[mask] = None
                else:
                    W[mask] = samples @ cholesky_factor(cov if correlated else np.diag(np.diag(cov))).T
            x = None if W[mask] is None else mu[None, :] + W[mask]
            best = _search(mu, x, est.cost[i], run, float(lambdas[step]), rank, opts)
            new = [j for j in best if j not in run]
            if not new:
                break
            if mode == "cascade" or force_order:
                j = min(new, key=lambda m: int(rank[m]))
            else:
                j = min(new, key=lambda m: (est.cost[i, m], m))
            run.append(j)
            mask |= 1 << j
            order[i, step] = j
        masks[i] = mask
        post = est.mean_rows(np.array([mask]), np.array([i]))[0]
        answer[i] = max(run, key=lambda m: (post[m], -m))
    return Trajectory(masks, order, answer)
