"""Baselines on the same data, each returning a :class:`BaselineFit` sized by the same node rule.

* ``fit_gplearn_on_y``: gplearn ``SymbolicRegressor`` trained directly on (standardized) y, the GP-only
  stand-in for FEAT; with ``time_budget_s`` it evolves one generation at a time (warm start) until the
  budget is spent, for comparisons at equal wall time.
* ``fit_symbolic_transformer_ridge``: gplearn ``SymbolicTransformer`` features + ridge, the FEAT-like GP
  (a linear model over GP features).
* ``fit_ridge``, ``fit_gbm`` (shallow gradient boosting, for reference) and ``teacher_baseline`` (the
  FEAT-KD model's own TabNet teacher, "TabNet alone").

A linear head over ``k`` expressions counts ``sum(nodes) + 3k + 1`` nodes (coefficient, product and sum
per term, plus the intercept), the rule FEATKDRegressor's ``complexity_.n_nodes`` uses.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval, Satisfies
from trustlab.core.seeding import derive_seed
from trustlab.methods.featkd._symbolic import (
    expression_nodes,
    feat_complexity,
    program_to_sympy,
    simplify_expression,
)

__all__ = ["BaselineFit", "fit_gplearn_on_y", "fit_symbolic_transformer_ridge", "fit_ridge", "fit_gbm",
           "teacher_baseline", "r2_per_target"]

_X = [ArrayLike(ndim=2, min_len=4)]
_Y = [ArrayLike(ndim=(1, 2), min_len=4)]
_FUNCS = ("add", "sub", "mul", "div", "sqrt", "log", "sin", "cos")


@dataclass(frozen=True)
class BaselineFit:
    """A fitted baseline: ``predict(X)``, its size (``n_nodes`` for formulas and trees, ``n_parameters``
    for networks), feature count, fit time and the formula text where there is one."""

    name: str
    predict: Callable[[np.ndarray], np.ndarray]
    time_s: float
    n_nodes: int | None = None
    n_parameters: int | None = None
    n_features: int = 0
    feat_complexity: int | None = None
    formula: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    @validate_args(X=[ArrayLike(ndim=2)], y=[ArrayLike(ndim=(1, 2))])
    def score(self, X: Any, y: Any) -> float:
        """Mean R² over targets."""
        return float(np.mean(r2_per_target(np.asarray(y, dtype=float), self.predict(np.asarray(X, dtype=float)))))


@validate_args(y_true=_Y, y_pred=_Y)
def r2_per_target(y_true: Any, y_pred: Any) -> np.ndarray:
    """R² of each target column (a 1-d ``y`` is one target)."""
    from sklearn.metrics import r2_score

    Y, P = np.asarray(y_true, float).reshape(len(y_true), -1), np.asarray(y_pred, float).reshape(len(y_pred), -1)
    return np.array([r2_score(Y[:, m], P[:, m]) for m in range(Y.shape[1])])


def _columns(y: Any) -> tuple[np.ndarray, bool]:
    Y = np.asarray(y, dtype=float)
    return Y.reshape(len(Y), -1), Y.ndim == 1


def _reshape(cols: list[np.ndarray], single: bool) -> np.ndarray:
    out = np.column_stack(cols)
    return out[:, 0] if single else out


def _size(programs: list[Any], n_inputs: int) -> tuple[int, int, list[str]]:
    import sympy as sp

    syms = [sp.Symbol(f"x{j}") for j in range(n_inputs)]
    exprs = [simplify_expression(program_to_sympy(p, syms)) for p in programs]
    return (sum(expression_nodes(e) for e in exprs), sum(feat_complexity(e) for e in exprs),
            [str(e) for e in exprs])


def _gp(kind: str, **kw: Any) -> Any:
    from trustlab.core.optional import require

    genetic = require("gplearn.genetic", extra="symbolic", purpose="the gplearn baselines")
    return getattr(genetic, kind)(n_jobs=1, verbose=0, **kw)


@validate_args(X=_X, y=_Y, time_budget_s=[Interval("real", 0, None, closed="neither"), None],
               population_size=[Interval(int, 10, None)], generations=[Interval(int, 1, None)],
               max_generations=[Interval(int, 1, None)], parsimony_coefficient=[Interval("real", 0, None)],
               random_state=["random_state"])
def fit_gplearn_on_y(X: Any, y: Any, *, time_budget_s: float | None = None, population_size: int = 1000,
                     generations: int = 20, max_generations: int = 1000, parsimony_coefficient: float = 0.001,
                     random_state: Any = None) -> BaselineFit:
    """gplearn ``SymbolicRegressor`` on each standardized target (the formula is ``mean + sd * g(x)``).

    Without ``time_budget_s`` it runs ``generations`` generations; with it, it adds one generation at a
    time (warm start) until the wall time reaches the budget (split evenly over targets) or
    ``max_generations``.
    """
    X, (Y, single) = np.asarray(X, dtype=float), _columns(y)
    t0 = time.perf_counter()
    regs, gens = [], []
    for m in range(Y.shape[1]):
        mu, sd = Y[:, m].mean(), Y[:, m].std() or 1.0
        reg = _gp("SymbolicRegressor", population_size=population_size, generations=1, function_set=_FUNCS,
                  parsimony_coefficient=parsimony_coefficient, init_depth=(2, 4), metric="mse",
                  warm_start=time_budget_s is not None,
                  random_state=derive_seed(random_state if random_state is not None else 0, "gp-on-y", m))
        ys = (Y[:, m] - mu) / sd
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if time_budget_s is None:
                reg.set_params(generations=generations).fit(X, ys)
            else:
                start, g = time.perf_counter(), 1
                reg.fit(X, ys)
                while time.perf_counter() - start < time_budget_s / Y.shape[1] and g < max_generations:
                    g += 1
                    reg.set_params(generations=g).fit(X, ys)
        regs.append((reg, mu, sd))
        gens.append(int(reg.generations))
    dt = time.perf_counter() - t0
    nodes, cx, texts = _size([r._program for r, _, _ in regs], X.shape[1])

    def predict(Z: np.ndarray) -> np.ndarray:
        return _reshape([mu + sd * r.predict(np.asarray(Z, dtype=float)) for r, mu, sd in regs], single)

    return BaselineFit("gplearn on y", predict, dt, n_nodes=nodes + 4 * len(regs), n_features=len(regs),
                       feat_complexity=cx, formula=" ; ".join(texts), info={"generations": gens})


@validate_args(X=_X, y=_Y, n_components=[Interval(int, 1, None)], population_size=[Interval(int, 10, None)],
               generations=[Interval(int, 1, None)], parsimony_coefficient=[Interval("real", 0, None)],
               random_state=["random_state"])
def fit_symbolic_transformer_ridge(X: Any, y: Any, *, n_components: int = 10, population_size: int = 1000,
                                   generations: int = 20, parsimony_coefficient: float = 0.001,
                                   random_state: Any = None) -> BaselineFit:
    """FEAT-like GP: a gplearn ``SymbolicTransformer`` (Pearson fitness) per target, then ridge (inner-CV
    alpha) on its components."""
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, (Y, single) = np.asarray(X, dtype=float), _columns(y)
    t0 = time.perf_counter()
    parts = []
    for m in range(Y.shape[1]):
        st = _gp("SymbolicTransformer", population_size=population_size, generations=generations,
                 n_components=n_components, hall_of_fame=min(population_size, 5 * n_components),
                 function_set=_FUNCS, parsimony_coefficient=parsimony_coefficient, init_depth=(2, 4),
                 metric="pearson", random_state=derive_seed(random_state if random_state is not None else 0,
                                                            "st", m))
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            F = st.fit(X, Y[:, m]).transform(X)
            head = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-6, 3, 19))).fit(F, Y[:, m])
        parts.append((st, head))
    dt = time.perf_counter() - t0
    nodes, cx, texts = _size([p for st, _ in parts for p in st._best_programs], X.shape[1])
    k = sum(len(st._best_programs) for st, _ in parts)

    def predict(Z: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return _reshape([h.predict(s.transform(np.asarray(Z, dtype=float))) for s, h in parts], single)

    return BaselineFit("SymbolicTransformer + ridge", predict, dt, n_nodes=nodes + 3 * k + len(parts),
                       n_features=k, feat_complexity=cx, formula=" ; ".join(texts))


@validate_args(X=_X, y=_Y)
def fit_ridge(X: Any, y: Any) -> BaselineFit:
    """Ridge on the standardized inputs (inner-CV alpha); ``p`` inputs count ``p + 3p + 1`` nodes."""
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, Y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    t0 = time.perf_counter()
    model = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-6, 3, 19))).fit(X, Y)
    p, k = X.shape[1], (1 if Y.ndim == 1 else Y.shape[1])
    return BaselineFit("ridge", model.predict, time.perf_counter() - t0, n_nodes=k * (4 * p + 1), n_features=p)


@validate_args(X=_X, y=_Y, max_depth=[Interval(int, 1, None)], n_estimators=[Interval(int, 1, None)],
               random_state=["random_state"])
def fit_gbm(X: Any, y: Any, *, max_depth: int = 3, n_estimators: int = 100, random_state: Any = None) -> BaselineFit:
    """A shallow gradient-boosting regressor for reference (one per target); size = tree nodes."""
    from sklearn.ensemble import GradientBoostingRegressor

    X, (Y, single) = np.asarray(X, dtype=float), _columns(y)
    t0 = time.perf_counter()
    seed = derive_seed(random_state if random_state is not None else 0, "gbm")
    models = [GradientBoostingRegressor(max_depth=max_depth, n_estimators=n_estimators, random_state=seed)
              .fit(X, Y[:, m]) for m in range(Y.shape[1])]
    nodes = sum(int(t.tree_.node_count) for g in models for t in g.estimators_.ravel())
    return BaselineFit("GBM (depth 3)", lambda Z: _reshape([g.predict(Z) for g in models], single),
                       time.perf_counter() - t0, n_nodes=nodes, n_features=X.shape[1])


@validate_args(model=[Satisfies(lambda m: hasattr(m, "features_") and hasattr(m, "teacher_"),
                                "a fitted FEATKDRegressor", invalid=[None, "model", 3])])
def teacher_baseline(model: Any) -> BaselineFit:
    """"TabNet alone": the fitted FEATKDRegressor's own teacher (refit nothing), on the original y scale."""
    from trustlab.core.exceptions import InputError

    teacher = getattr(model, "teacher_", None)
    if teacher is None:
        raise InputError("The 'model' argument of teacher_baseline must be a FEATKDRegressor fitted with "
                         "keep_teacher=True.")
    single = model._y_ndim == 1

    def predict(Z: np.ndarray) -> np.ndarray:
        Zs = ((np.asarray(Z, dtype=float) - model.x_mean_) / model.x_scale_).astype(np.float32)
        out = teacher.predict(Zs).astype(np.float64) * model.y_scale_ + model.y_mean_
        return out[:, 0] if single else out

    t = model.distillation_report_.times.get("teacher_s", 0.0)
    return BaselineFit("TabNet (teacher)", predict, t, n_parameters=model.teacher_parameters_,
                       n_features=model.n_features_in_)
