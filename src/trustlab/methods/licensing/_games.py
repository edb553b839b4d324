"""Solvers of a :class:`~trustlab.methods.licensing._utilities.Game`: exact Shapley (<= 12 players, all
coalitions once, cached by bitmask), MSR Banzhaf, TMC Shapley with standard errors, leave-one-out."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Interval, RandomStateRule
from trustlab.core.exceptions import InputError
from trustlab.core.seeding import check_random_state
from trustlab.methods.licensing._utilities import Game, KNNUtility

__all__ = ["GameValues", "exact_shapley", "msr_banzhaf", "tmc_shapley", "loo_values", "MAX_EXACT_PLAYERS"]

#: the exact game evaluates 2**P coalitions; 12 players = 4096 (the issue's limit)
MAX_EXACT_PLAYERS = 12


@dataclass
class GameValues:
    """Values of a game's players. ``se``: Monte-Carlo standard errors (None for exact methods);
    ``efficient``: whether the method's values sum to ``v(N) - v(empty)`` by definition;
    ``efficiency_residual = sum(values) - (v_full - v_empty)``."""

    method: str
    values: np.ndarray
    se: np.ndarray | None
    v_full: float
    v_empty: float
    efficient: bool
    n_evaluations: int
    sum_se: float | None = None

    @property
    def efficiency_residual(self) -> float:
        return float(np.sum(self.values) - (self.v_full - self.v_empty))


def _tiny_game() -> Game:
    X = np.array([[0.0], [0.1], [1.0], [1.1], [2.0], [2.1]])
    y = np.array([0, 0, 1, 1, 0, 1])
    return KNNUtility(k=1).game(X, y, X[[0, 2, 4]], y[[0, 2, 4]], players=np.array([0, 0, 1, 1, 2, 2]))


def _all_masks(p: int) -> np.ndarray:
    ints = np.arange(2**p, dtype=np.int64)
    return ((ints[:, None] >> np.arange(p)) & 1).astype(bool)


@validate_args(game=[Game], max_players=[Interval(int, 1, 20)], _example=lambda: {"game": _tiny_game()})
def exact_shapley(game: Game, *, max_players: int = MAX_EXACT_PLAYERS) -> GameValues:
    """Exact Shapley values ``phi_c = sum_{S not containing c} |S|!(P-|S|-1)!/P! (v(S+c) - v(S))``.

    All ``2**P`` coalitions are evaluated once (``v`` is stored as an array indexed by bitmask), then
    combined in O(P 2**P). Raises InputError above ``max_players`` (default 12): use
    :func:`msr_banzhaf` or :func:`tmc_shapley` for more players.

    Examples
    --------
    >>> res = exact_shapley(_tiny_game())
    >>> abs(res.efficiency_residual) < 1e-12
    True
    """
    p = game.n_players
    if p > max_players:
        raise InputError(f"The exact game has {p} players; exact_shapley evaluates 2**players coalitions and "
                         f"accepts at most max_players={max_players}. Use method='owner_banzhaf_msr' "
                         "(msr_banzhaf) or method='tmc_shapley' (tmc_shapley) for more owners.")
    masks = _all_masks(p)
    v = game.values(masks)  # v[b] = v(coalition with bitmask b)
    ints = np.arange(2**p, dtype=np.int64)
    size = masks.sum(axis=1)
    w = np.array([math.factorial(s) * math.factorial(p - s - 1) / math.factorial(p) if s < p else 0.0
                  for s in range(p + 1)])
    phi = np.empty(p)
    for c in range(p):
        without = ints[(ints >> c) & 1 == 0]
        phi[c] = float(np.sum(w[size[without]] * (v[without | (1 << c)] - v[without])))
    return GameValues("exact_shapley", phi, None, float(v[-1]), float(v[0]), True, game.n_evaluations)


@validate_args(game=[Game], n_samples=[Interval(int, 2, None)], random_state=[RandomStateRule()],
               _example=lambda: {"game": _tiny_game()})
def msr_banzhaf(game: Game, n_samples: int = 1000, random_state: Any = None) -> GameValues:
    """Maximum-sample-reuse Banzhaf values (Wang & Jia, AISTATS 2023).

    Draw ``n_samples`` coalitions with every player included independently with probability 1/2;
    ``beta_i = mean_{j: i in S_j} v(S_j) - mean_{j: i not in S_j} v(S_j)``, every sample reused for all
    players. Banzhaf values are **not efficient**: they do not sum to ``v(N) - v(empty)``, so a payout
    normalises them. ``se`` is the standard error of each difference of means.

    Examples
    --------
    >>> res = msr_banzhaf(_tiny_game(), n_samples=64, random_state=0)
    >>> res.efficient, res.values.shape
    (False, (3,))
    """
    rng = check_random_state(random_state)
    masks = rng.random((n_samples, game.n_players)) < 0.5
    v = game.values(masks)
    vals, se = np.zeros(game.n_players), np.zeros(game.n_players)
    for i in range(game.n_players):
        a, b = v[masks[:, i]], v[~masks[:, i]]
        if len(a) == 0 or len(b) == 0:
            vals[i], se[i] = np.nan, np.inf
            continue
        vals[i] = a.mean() - b.mean()
        se[i] = math.sqrt((a.var(ddof=1) / len(a) if len(a) > 1 else 0.0) + (b.var(ddof=1) / len(b) if len(b) > 1 else 0.0))
    return GameValues("msr_banzhaf", vals, se, game.v_full, game.v_empty, False, game.n_evaluations)


@validate_args(game=[Game], n_permutations=[Interval(int, 2, None)], tol=[Interval(float, 0, 1)],
               random_state=[RandomStateRule()], _example=lambda: {"game": _tiny_game()})
def tmc_shapley(game: Game, n_permutations: int = 200, tol: float = 0.0, random_state: Any = None
                ) -> GameValues:
    """Truncated Monte-Carlo Shapley (Ghorbani & Zou 2019) with standard errors.

    For each random permutation, players are added in order and credited ``v(pi_<=k) - v(pi_<k)``; once
    ``|v(N) - v(pi_<=k)| < tol * |v(N)|`` the remaining marginals are 0 (truncation). ``values`` is the
    mean over permutations and ``se`` its standard error. Without truncation (``tol=0``) every
    permutation's marginals sum exactly to ``v(N) - v(empty)``; ``sum_se`` is the standard error of the
    per-permutation total (0 then), against which the efficiency residual is judged. For the KNN utility
    without truncation the prefixes come from one incremental pass per permutation
    (``prefix_marginals``; the same permutations, equal values to rounding), which makes hundreds of
    players affordable.

    Examples
    --------
    >>> res = tmc_shapley(_tiny_game(), n_permutations=20, random_state=0)
    >>> abs(res.efficiency_residual) < 1e-12
    True
    """
    rng = check_random_state(random_state)
    p = game.n_players
    v_full, v_empty = game.v_full, game.v_empty
    marg = np.zeros((n_permutations, p))
    if tol == 0 and hasattr(game, "prefix_marginals"):  # the KNN game: incremental prefixes, same permutations
        perms = np.array([rng.permutation(p) for _ in range(n_permutations)], dtype=np.int64).reshape(n_permutations, p)
        step = max(1, int(2e6 // max(1, game._cand.size)))
        for s in range(0, n_permutations, step):
            marg[s:s + step] = game.prefix_marginals(perms[s:s + step])
        return _tmc_result(game, marg, tol, v_full, v_empty)
    for t in range(n_permutations):
        perm = rng.permutation(p)
        mask = np.zeros(p, dtype=bool)
        prev = v_empty
        for player in perm:
            if tol > 0 and abs(v_full - prev) < tol * abs(v_full):
                break
            mask[player] = True
            cur = float(game.values(mask[None, :])[0])
            marg[t, player] = cur - prev
            prev = cur
    return _tmc_result(game, marg, tol, v_full, v_empty)


def _tmc_result(game: Game, marg: np.ndarray, tol: float, v_full: float, v_empty: float) -> GameValues:
    n = len(marg)
    se = marg.std(axis=0, ddof=1) / math.sqrt(n)
    sum_se = float(marg.sum(axis=1).std(ddof=1) / math.sqrt(n))
    return GameValues("tmc_shapley", marg.mean(axis=0), se, v_full, v_empty, tol == 0, game.n_evaluations,
                      sum_se=sum_se)


@validate_args(game=[Game], _example=lambda: {"game": _tiny_game()})
def loo_values(game: Game) -> GameValues:
    """Leave-one-out values ``v(N) - v(N minus i)`` (not efficient).

    Examples
    --------
    >>> loo_values(_tiny_game()).values.shape
    (3,)
    """
    p = game.n_players
    masks = ~np.eye(p, dtype=bool)
    v = game.values(masks)
    return GameValues("loo", game.v_full - v, None, game.v_full, game.v_empty, False, game.n_evaluations)
