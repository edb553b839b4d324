"""Piece-wise distillation: teacher signals per step, mask-based input selection, gplearn per signal."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.methods.featkd._symbolic import (
    SymbolicFeature,
    expression_nodes,
    feat_complexity,
    numpy_code,
    program_to_sympy,
    simplify_expression,
)

__all__ = ["TeacherSignal", "teacher_signals", "select_inputs", "GPSettings", "distil_signal", "fidelity"]


@dataclass(frozen=True)
class TeacherSignal:
    """One distillation target: step ``k``, unit ``j`` (``-1`` for a per-step contribution to ``target``)."""

    step: int
    unit: int
    target: int
    values: np.ndarray


def teacher_signals(D: np.ndarray, W: np.ndarray, choice: str) -> list[TeacherSignal]:
    """Choice A (``"step_outputs"``): every unit of every step, ``d_k(x)_j`` (shared by all targets).
    Choice B (``"step_contributions"``): ``c_{k,m}(x) = W_m · d_k(x)`` per step and target."""
    if choice == "step_outputs":
        return [TeacherSignal(k, j, -1, D[k, :, j]) for k in range(D.shape[0]) for j in range(D.shape[2])]
    return [TeacherSignal(k, -1, m, D[k] @ W[m]) for k in range(D.shape[0]) for m in range(W.shape[0])]


def select_inputs(mean_masks: np.ndarray, threshold: float, min_inputs: int) -> list[tuple[int, ...]]:
    """Per step, the inputs whose mean mask exceeds ``threshold``; at least the top ``min_inputs`` (an
    all-zero mask falls back to them too)."""
    out = []
    for m in mean_masks:
        order = np.argsort(-m, kind="stable")
        chosen = set(np.flatnonzero(m > threshold).tolist()) | set(order[:min_inputs].tolist())
        out.append(tuple(sorted(int(j) for j in chosen)))
    return out


@dataclass(frozen=True)
class GPSettings:
    """The gplearn ``SymbolicRegressor`` settings used for every distillation target."""

    population_size: int = 500
    generations: int = 15
    parsimony_coefficient: float = 0.005
    function_set: tuple[str, ...] = ("add", "sub", "mul", "div", "sqrt", "log", "sin", "cos")
    init_depth: tuple[int, int] = (2, 4)
    max_samples: float = 1.0
    max_feature_nodes: int = 40


def fidelity(values: np.ndarray, target: np.ndarray) -> float:
    """R² of the best affine map of ``values`` to ``target`` (the squared Pearson correlation)."""
    if not (np.isfinite(values).all() and values.std() > 1e-12 and target.std() > 1e-12):
        return 0.0
    return float(np.corrcoef(values, target)[0, 1] ** 2)


def distil_signal(X: np.ndarray, signal: TeacherSignal, inputs: tuple[int, ...], gp: GPSettings, seed: int,
                  threshold: float) -> tuple[SymbolicFeature | None, str]:
    """Fit gplearn on ``(X[:, inputs], signal)``, simplify with sympy and measure the result.

    Returns ``(feature, "kept")`` or ``(None, reason)`` with reason one of ``"constant"``, ``"too large"``,
    ``"not finite"``, ``"low fidelity"``. gplearn's fitness is the Pearson correlation (the ridge head takes
    care of scale and offset). It evolves all ``gp.generations`` unless a program correlates perfectly.
    """
    from trustlab.core.optional import require

    genetic = require("gplearn.genetic", extra="symbolic", purpose="FEAT-KD's symbolic distillation")
    sp = require("sympy", extra="symbolic")
    reg = genetic.SymbolicRegressor(
        population_size=gp.population_size, generations=gp.generations, metric="pearson",
        # gplearn's default stopping_criteria (0.0) is for error metrics: with a greater-is-better metric such
        # as Pearson it ends the run after the first generation (any |r| >= 0). 1.0 stops only at a perfect fit.
        stopping_criteria=1.0,
        parsimony_coefficient=gp.parsimony_coefficient, function_set=gp.function_set, init_depth=gp.init_depth,
        max_samples=gp.max_samples, n_jobs=1, verbose=0, random_state=int(seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        reg.fit(X[:, list(inputs)], signal.values)
    symbols = [sp.Symbol(f"x{j}") for j in inputs]
    expr = simplify_expression(program_to_sympy(reg._program, symbols))
    if not expr.free_symbols:
        return None, "constant"
    nodes = expression_nodes(expr)
    if nodes > gp.max_feature_nodes:
        return None, "too large"
    variables = tuple(sorted(int(s.name[1:]) for s in expr.free_symbols))
    feat = SymbolicFeature(text=str(expr), code=numpy_code(expr), variables=variables, step=signal.step,
                           unit=signal.unit, fidelity=0.0, nodes=nodes, complexity=feat_complexity(expr),
                           inputs=tuple(inputs), low=0.0, high=0.0, mean=0.0, target=signal.target)
    values = feat.raw(X)
    if not np.isfinite(values).all() or values.std() <= 1e-12:
        return None, "not finite" if not np.isfinite(values).all() else "constant"
    fid = fidelity(values, signal.values)
    if fid < threshold:
        return None, "low fidelity"
    return SymbolicFeature(**{**_fields(feat), "fidelity": fid, "low": float(values.min()),
                              "high": float(values.max()), "mean": float(values.mean())}), "kept"


def _fields(feat: SymbolicFeature) -> dict[str, Any]:
    return {k: v for k, v in feat.__dict__.items() if k != "_compiled"}
