"""Cooperative games over players (owners, or single points): reusable utilities with a coalition cache.

A utility (``KNNUtility``, ``LogisticAccuracy``, ``NaiveBayesLogLikelihood``) is bound to data with
``utility.game(X, y, X_val, y_val, players)``, where ``players[i]`` is the player (0..P-1) that owns
training point ``i``. The resulting :class:`Game` evaluates coalitions given as boolean masks of shape
(M, P): ``v(S)`` is the utility of a model fitted on the union of the points of the players in ``S``.
Values are cached by the coalition's bitmask bytes, so repeated coalitions (TMC, Banzhaf, LOO) cost
nothing. ``v(empty)`` is defined explicitly for every utility (see each class).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import AnyValue, Interval, validate_value
from trustlab.core.exceptions import InputError
from trustlab.methods.licensing._knn import check_knn_inputs, neighbour_order

__all__ = ["Game", "KNNUtility", "LogisticAccuracy", "NaiveBayesLogLikelihood"]


class Game:
    """A cooperative game over ``n_players`` players with a cached ``values(masks)``."""

    name = "game"

    def __init__(self, n_players: int, params: dict[str, Any]) -> None:
        self.n_players = int(n_players)
        self.params = params
        self._cache: dict[bytes, float] = {}
        self.n_evaluations = 0

    def _evaluate(self, masks: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    @validate_args(masks=[AnyValue("(M, P) or (P,) 0/1 masks; the body converts them to bool and checks the "
                                   "column count (InputError): tmc_shapley calls it per step, so no wrapper")])
    def values(self, masks: Any) -> np.ndarray:
        """``v(S)`` for each row of the (M, P) boolean ``masks`` (cached by bitmask)."""
        masks = np.atleast_2d(np.asarray(masks, dtype=bool))
        if masks.shape[1] != self.n_players:
            raise InputError(f"The 'masks' argument of {type(self).__name__}.values must have {self.n_players} "
                             f"columns (one per player). Got shape {masks.shape}.")
        keys = [bytes(r) for r in np.packbits(masks, axis=1)]
        todo = [i for i, key in enumerate(keys) if key not in self._cache]
        if todo:
            uniq = list(dict.fromkeys(keys[i] for i in todo))
            first = {key: i for i, key in reversed(list(enumerate(keys)))}
            vals = self._evaluate(masks[[first[key] for key in uniq]])
            self.n_evaluations += len(uniq)
            self._cache.update(zip(uniq, (float(v) for v in vals)))
        return np.array([self._cache[key] for key in keys], dtype=np.float64)

    @property
    def v_empty(self) -> float:
        return float(self.values(np.zeros((1, self.n_players), dtype=bool))[0])

    @property
    def v_full(self) -> float:
        return float(self.values(np.ones((1, self.n_players), dtype=bool))[0])


def _players(players: Any, n: int, owner: str) -> tuple[np.ndarray, int]:
    p = np.asarray(players)
    if p.shape != (n,) or p.dtype.kind not in "iu" or (n and p.min() < 0):
        raise InputError(f"The 'players' argument of {owner} must be {n} integer player indices >= 0. "
                         f"Got shape {p.shape}, dtype {p.dtype}.")
    return p.astype(np.int64), int(p.max()) + 1 if n else 0


#: the rules of every utility's ``game(X, y, X_val, y_val, players)``
_GAME_ARGS = {"X": [ArrayLike(ndim=2)], "y": [ArrayLike(ndim=1, dtype="any")], "X_val": [ArrayLike(ndim=2)],
              "y_val": [ArrayLike(ndim=1, dtype="any")], "players": [ArrayLike(ndim=1, dtype="integer", low=0)]}


class _KNNGame(Game):
    name = "knn"

    def __init__(self, X: Any, y: Any, X_val: Any, y_val: Any, players: Any, k: int) -> None:
        X, y, X_val, yv, _ = check_knn_inputs(X, y, X_val, y_val, k, "KNNUtility.game")
        p, n_players = _players(players, len(X), "KNNUtility.game")
        super().__init__(n_players, {"k": k})
        self.k = k
        lmax = min(len(X), n_players * k)
        self._cand = np.full((len(X_val), lmax), n_players, dtype=np.int64)  # padding player = n_players
        self._match = np.zeros((len(X_val), lmax), dtype=bool)
        pos = np.arange(len(X))[None, :]
        for rows, order in neighbour_order(X, X_val, y):
            ps = p[order]
            srt = np.argsort(ps, axis=1, kind="stable")  # groups each player's points, in rank order
            ps_sorted = np.take_along_axis(ps, srt, 1)
            new = np.ones_like(ps_sorted, dtype=bool)
            new[:, 1:] = ps_sorted[:, 1:] != ps_sorted[:, :-1]
            start = np.maximum.accumulate(np.where(new, pos, 0), axis=1)
            occ = np.empty_like(srt)
            np.put_along_axis(occ, srt, pos - start, 1)
            keep = occ < k  # only a player's k nearest points can ever be among the k nearest of S
            idx = np.argsort(~keep, axis=1, kind="stable")[:, :lmax]
            valid = np.take_along_axis(keep, idx, 1)
            self._cand[rows] = np.where(valid, np.take_along_axis(ps, idx, 1), n_players)
            self._match[rows] = valid & (y[np.take_along_axis(order, idx, 1)] == yv[rows, None])

    def _evaluate(self, masks: np.ndarray) -> np.ndarray:
        ext = np.concatenate([masks, np.zeros((len(masks), 1), dtype=bool)], axis=1)
        v, length = self._cand.shape
        chunk = max(1, int(4e6 // max(1, v * length)))
        out = np.empty(len(masks))
        for s in range(0, len(masks), chunk):
            ins = ext[s:s + chunk][:, self._cand]  # (m, V, L)
            top = ins & (np.cumsum(ins, axis=2, dtype=np.int32) <= self.k)
            out[s:s + chunk] = (top & self._match[None]).sum(axis=(1, 2)) / (self.k * v)
        return out

    def prefix_marginals(self, perms: np.ndarray) -> np.ndarray:
        """Marginals ``v(pi_<=t) - v(pi_<t)`` of every player along each permutation (rows of ``perms``), credited
        to the player: one incremental pass per permutation instead of one evaluation per prefix.

        Candidate ``j`` of a validation row (rank order) is among the k nearest of the prefix from the step its
        player arrives, ``a_j``, until the step the k-th earlier candidate arrives, ``T_j``; so it adds
        ``match_j / (k V)`` at ``a_j`` and removes it at ``T_j`` (when ``a_j < T_j``)."""
        perms = np.atleast_2d(np.asarray(perms, dtype=np.int64))
        b, p = perms.shape
        v, length = self._cand.shape
        rank = np.full((b, p + 1), p, dtype=np.int64)  # the padding player never arrives
        np.put_along_axis(rank, perms, np.broadcast_to(np.arange(p), (b, p)), 1)
        arr = rank[:, self._cand].reshape(b * v, length)  # arrival step of each candidate, (B*V, L)
        match = np.broadcast_to(self._match[None], (b, v, length)).reshape(b * v, length)
        buf = np.full((b * v, self.k), p, dtype=np.int64)  # the k earliest arrivals among earlier candidates
        counts = np.zeros((b * v, p + 2))
        rows = np.arange(b * v)
        for j in range(length):
            a, t = arr[:, j], buf[:, -1]
            live = match[:, j] & (a < t)
            np.add.at(counts, (rows[live], a[live]), 1.0)
            np.add.at(counts, (rows[live], t[live]), -1.0)
            ins = a < t
            if ins.any():
                buf[ins] = np.sort(np.concatenate([buf[ins, :-1], a[ins, None]], axis=1), axis=1)
        per_step = counts[:, :p].reshape(b, v, p).sum(axis=1) / (self.k * v)  # (B, steps)
        marg = np.zeros((b, p))
        np.put_along_axis(marg, perms, per_step, 1)
        return marg


class KNNUtility:
    """``v(S) = mean_v (1/k) #{correct labels among the k nearest points of S}``; ``v(empty) = 0``.

    The same utility as :func:`~trustlab.methods.licensing.knn_shapley` (same distance, ties by index).
    Only each player's ``k`` nearest points can be among the ``k`` nearest of a coalition, so a
    coalition costs O(V * P * k), not O(V * N).
    """

    def __init__(self, k: int = 5) -> None:
        validate_value("KNNUtility", "k", k, [Interval(int, 1, None)])
        self.k = k

    @validate_args(**_GAME_ARGS)
    def game(self, X: Any, y: Any, X_val: Any, y_val: Any, players: Any) -> Game:
        return _KNNGame(X, y, X_val, y_val, players, self.k)

    def __repr__(self) -> str:
        return f"KNNUtility(k={self.k})"


class _LogisticGame(Game):
    name = "logreg_acc"

    def __init__(self, X: Any, y: Any, X_val: Any, y_val: Any, players: Any, C: float, max_iter: int) -> None:
        X, y, X_val, yv, _ = check_knn_inputs(X, y, X_val, y_val, 1, "LogisticAccuracy.game")
        self._p, n_players = _players(players, len(X), "LogisticAccuracy.game")
        super().__init__(n_players, {"C": C, "max_iter": max_iter})
        mu, sd = X.mean(axis=0), X.std(axis=0)
        sd[sd == 0] = 1.0  # a fixed scaling from the whole training pool, the same for every coalition
        self._X, self._Xv, self._y, self._yv = (X - mu) / sd, (X_val - mu) / sd, y, yv
        self._majority = int(np.bincount(y).argmax())
        self.C, self.max_iter = C, max_iter
        self.n_not_converged = 0

    def _one(self, mask: np.ndarray) -> float:
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression

        sel = mask[self._p]
        ys = self._y[sel]
        if not sel.any():
            return float(np.mean(self._yv == self._majority))
        if len(np.unique(ys)) == 1:
            return float(np.mean(self._yv == ys[0]))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            model = LogisticRegression(C=self.C, max_iter=self.max_iter).fit(self._X[sel], ys)
        self.n_not_converged += any(issubclass(w.category, ConvergenceWarning) for w in caught)
        return float(np.mean(model.predict(self._Xv) == self._yv))

    def _evaluate(self, masks: np.ndarray) -> np.ndarray:
        return np.array([self._one(m) for m in masks])


class LogisticAccuracy:
    """Validation accuracy of an L2 logistic regression fitted on the coalition's points.

    Features are standardised with the whole training pool's mean and scale (fixed for every coalition).
    A single-class coalition predicts its class. ``v(empty)`` is the accuracy of always predicting the
    pool's majority class (the prior a buyer would use without any data).
    """

    def __init__(self, C: float = 1.0, max_iter: int = 300) -> None:
        validate_value("LogisticAccuracy", "C", C, [Interval(float, 0, None, closed="neither")])
        validate_value("LogisticAccuracy", "max_iter", max_iter, [Interval(int, 1, None)])
        self.C, self.max_iter = C, max_iter

    @validate_args(**_GAME_ARGS)
    def game(self, X: Any, y: Any, X_val: Any, y_val: Any, players: Any) -> Game:
        return _LogisticGame(X, y, X_val, y_val, players, self.C, self.max_iter)

    def __repr__(self) -> str:
        return f"LogisticAccuracy(C={self.C}, max_iter={self.max_iter})"


class _NaiveBayesGame(Game):
    name = "loglik"

    def __init__(self, X: Any, y: Any, X_val: Any, y_val: Any, players: Any, alpha: float,
                 threshold: float | None) -> None:
        X, y, X_val, yv, classes = check_knn_inputs(X, y, X_val, y_val, 1, "NaiveBayesLogLikelihood.game")
        p, n_players = _players(players, len(X), "NaiveBayesLogLikelihood.game")
        thr = float(X.mean()) if threshold is None else float(threshold)
        super().__init__(n_players, {"alpha": alpha, "threshold": thr})
        xb = (X > thr).astype(np.float64)
        self._xv = (X_val > thr).astype(np.float64)
        self._yv, self.alpha, self.n_classes = yv, alpha, len(classes)
        onehot = np.eye(self.n_classes)[y]
        # additive per-player counts: n[p, c] and n1[p, c, j]
        self._n = np.zeros((n_players, self.n_classes))
        np.add.at(self._n, p, onehot)
        self._n1 = np.zeros((n_players, self.n_classes, X.shape[1]))
        np.add.at(self._n1, p, onehot[:, :, None] * xb[:, None, :])

    def _evaluate(self, masks: np.ndarray) -> np.ndarray:
        a, c = self.alpha, self.n_classes
        m = masks.astype(np.float64)
        out = np.empty(len(masks))
        for s in range(0, len(m), 256):
            n = m[s:s + 256] @ self._n  # (M, C)
            n1 = np.einsum("mp,pcj->mcj", m[s:s + 256], self._n1)
            log_prior = np.log((n + a) / (n.sum(axis=1, keepdims=True) + a * c))
            theta = (n1 + a) / (n[:, :, None] + 2 * a)
            lt, l1t = np.log(theta), np.log1p(-theta)
            # log p(x, y) for each validation item under its own label
            ll = (np.einsum("mcj,vj->mcv", lt - l1t, self._xv) + l1t.sum(axis=2)[:, :, None]
                  + log_prior[:, :, None])
            out[s:s + 256] = ll[:, self._yv, np.arange(len(self._yv))].mean(axis=1)
        return out


class NaiveBayesLogLikelihood:
    """The SRS-style utility: mean log-likelihood ``log p_S(x, y)`` of the reference (validation) items
    under a class-conditional Bernoulli naive Bayes on binarised features (``x > threshold``; default
    the pool's mean feature value) with Laplace smoothing ``alpha``, fitted on the coalition's points.

    With the smoothing, ``v(empty) = -log(n_classes) - d log 2`` (the uniform prior), which is finite.
    Counts are additive over players, so a coalition costs O(C * d) after one pass over the data.
    """

    def __init__(self, alpha: float = 1.0, threshold: float | None = None) -> None:
        validate_value("NaiveBayesLogLikelihood", "alpha", alpha, [Interval(float, 0, None, closed="neither")])
        if threshold is not None:
            validate_value("NaiveBayesLogLikelihood", "threshold", threshold, [Interval("real", None, None)])
        self.alpha, self.threshold = alpha, threshold

    @validate_args(**_GAME_ARGS)
    def game(self, X: Any, y: Any, X_val: Any, y_val: Any, players: Any) -> Game:
        return _NaiveBayesGame(X, y, X_val, y_val, players, self.alpha, self.threshold)

    def __repr__(self) -> str:
        return f"NaiveBayesLogLikelihood(alpha={self.alpha}, threshold={self.threshold})"
