"""Redundancy of a feature and the synthetic controlled-redundancy generator."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import Interval, Options, validate_value
from trustlab.core.seeding import as_seed
from trustlab.core.validation import check_array

__all__ = ["redundancy", "make_redundant_classification"]

MIN_ROWS = 10  # rows redundancy() needs at the least (and 2 per fold)


@validate_args(X=[ArrayLike(ndim=2)], feature=[Interval(int, 0, None)], estimator=[Options(["ridge", "gbm"])],
               cv=[Interval(int, 2, None)], random_state=["random_state"])
def redundancy(X: Any, feature: int, *, estimator: str = "ridge", cv: int = 5, random_state: Any = 0) -> float:
    """Cross-validated ``R^2_f`` of predicting feature ``f`` from the other features.

    Parameters
    ----------
    X : array-like of shape (n, p)
    feature : int
        Column index of ``f``.
    estimator : {"ridge", "gbm"}
        Ridge regression on standardised inputs (fast, linear redundancy) or histogram gradient boosting
        (non-linear redundancy).
    cv : int
        Folds of the (shuffled, seeded) K-fold.
    random_state : int

    Returns
    -------
    float
        Out-of-fold ``R^2`` (1 = ``f`` is fully reconstructable, <= 0 = not at all). For a binary ``f`` the
        analogue is used: the out-of-fold accuracy of a classifier as a skill score
        ``(acc - majority) / (1 - majority)``.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.random.default_rng(0).normal(size=(200, 1))
    >>> X = np.hstack([z, z + 0.1 * np.random.default_rng(1).normal(size=(200, 1))])
    >>> redundancy(X, 0) > 0.9
    True
    """
    from sklearn.model_selection import KFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    # an out-of-fold R^2 needs >= 2 rows per fold and a few folds' worth of rows (3 rows gave R^2 = -63)
    X = check_array(X, owner="redundancy", allow_complex=False, min_samples=max(MIN_ROWS, 2 * cv))
    validate_value("redundancy", "feature", feature, [Interval(int, 0, X.shape[1] - 1)], noun="argument")
    if X.shape[1] < 2:
        return 0.0
    target = X[:, feature]
    others = np.delete(X, feature, axis=1)
    random_state = as_seed(random_state)
    folds = KFold(n_splits=cv, shuffle=True, random_state=random_state)
    binary = len(np.unique(target)) == 2
    if binary:
        from sklearn.ensemble import HistGradientBoostingClassifier
        from sklearn.linear_model import LogisticRegression

        lab = (target == target.max()).astype(int)
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)) if estimator == "ridge" \
            else HistGradientBoostingClassifier(max_iter=100, random_state=random_state)
        acc = float(np.mean(cross_val_predict(model, others, lab, cv=folds) == lab))
        major = max(lab.mean(), 1 - lab.mean())
        return float((acc - major) / (1 - major)) if major < 1 else 0.0
    if np.std(target) == 0:
        return 1.0
    if estimator == "ridge":
        from sklearn.linear_model import RidgeCV

        model = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13)))
    else:
        from sklearn.ensemble import HistGradientBoostingRegressor

        model = HistGradientBoostingRegressor(max_iter=100, random_state=random_state)
    pred = cross_val_predict(model, others, target, cv=folds)
    return float(1.0 - np.sum((target - pred) ** 2) / np.sum((target - target.mean()) ** 2))


@validate_args(n_samples=[Interval(int, 10, None)], rhos=[SequenceOf(Interval(float, 0, 1), min_len=0)],
               n_independent=[Interval(int, 0, None)], noise=[Interval(float, 0, None)], random_state=["random_state"])
def make_redundant_classification(n_samples: int = 800, rhos: tuple[float, ...] = (0.0, 0.5, 0.8, 0.95),
                                  n_independent: int = 4, noise: float = 0.5,
                                  random_state: Any = 0) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]:
    """Binary data with controlled redundancy: latent factors, tunable copies and independent features.

    For each ``rho_j`` a latent factor ``z_j ~ N(0, 1)`` is observed as the *target* feature
    ``t_j = z_j`` together with a *copy* ``c_j = rho_j z_j + sqrt(1 - rho_j^2) e_j`` (correlation ``rho_j``
    with ``t_j``). ``n_independent`` further informative features ``u_k ~ N(0, 1)`` have no copy. The
    label is ``y = 1[sum_j z_j + sum_k u_k + noise * eps > 0]`` (every informative factor has weight 1),
    so every target is equally important and only its redundancy differs.

    Returns
    -------
    X : ndarray of shape (n_samples, 2 * len(rhos) + n_independent)
        Columns ``t_0, c_0, t_1, c_1, ..., u_0, ...``.
    y : ndarray of int
    info : list of dict
        Per column ``name``, ``role`` ("target", "copy" or "independent") and ``rho``.

    Examples
    --------
    >>> X, y, info = make_redundant_classification(100, rhos=(0.0, 0.9), n_independent=1)
    >>> X.shape, [d["name"] for d in info]
    ((100, 5), ['t0', 'c0', 't1', 'c1', 'u0'])
    """
    from trustlab.core.exceptions import ConfigError
    from trustlab.core.seeding import check_random_state

    if len(rhos) + n_independent == 0:
        raise ConfigError("The 'rhos' and 'n_independent' arguments of make_redundant_classification describe no "
                          "informative feature. Got rhos=() and n_independent=0 instead.")
    rng = check_random_state(random_state)
    cols, info, signal = [], [], np.zeros(n_samples)
    for j, rho in enumerate(rhos):
        z = rng.normal(size=n_samples)
        e = rng.normal(size=n_samples)
        cols += [z, rho * z + np.sqrt(max(0.0, 1 - rho**2)) * e]
        info += [{"name": f"t{j}", "role": "target", "rho": float(rho)},
                 {"name": f"c{j}", "role": "copy", "rho": float(rho)}]
        signal += z
    for k in range(n_independent):
        u = rng.normal(size=n_samples)
        cols.append(u)
        info.append({"name": f"u{k}", "role": "independent", "rho": 0.0})
        signal += u
    y = (signal + noise * rng.normal(size=n_samples) > 0).astype(int)
    return np.column_stack(cols), y, info
