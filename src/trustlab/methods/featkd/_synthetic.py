"""Synthetic formula tasks with known ground truth (single and multi-target sharing sub-expressions)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Interval, Options

__all__ = ["FORMULA_TASKS", "FormulaTask", "make_formula_task"]

_Fn = Callable[[np.ndarray], np.ndarray]
#: name -> (ground-truth formulas as sympy-readable text with their numpy forms, number of inputs)
FORMULA_TASKS: dict[str, tuple[tuple[tuple[str, _Fn], ...], int]] = {
    "product_sine": ((("x0*x1 + sin(x2)", lambda X: X[:, 0] * X[:, 1] + np.sin(X[:, 2])),), 8),
    "ratio": ((("x0**2/(1 + x1**2) + 0.5*x3", lambda X: X[:, 0] ** 2 / (1 + X[:, 1] ** 2) + 0.5 * X[:, 3]),), 8),
    "shared": ((("x0*x1 + sin(x2)", lambda X: X[:, 0] * X[:, 1] + np.sin(X[:, 2])),
                ("x0*x1 - 0.5*x3**2", lambda X: X[:, 0] * X[:, 1] - 0.5 * X[:, 3] ** 2),
                ("sin(x2) + 0.5*x3**2", lambda X: np.sin(X[:, 2]) + 0.5 * X[:, 3] ** 2)), 8),
}


@dataclass(frozen=True)
class FormulaTask:
    """Inputs ``X`` (uniform on [-2, 2]), targets ``y`` (1-d for one formula, else one column each) and the
    ground truth as text (``truth``), with ``noise`` the Gaussian noise's sd relative to each target's sd."""

    name: str
    X: np.ndarray
    y: np.ndarray
    truth: tuple[str, ...]
    noise: float
    feature_names: tuple[str, ...]

    def truth_expressions(self) -> list[Any]:
        """The ground truth as sympy expressions in ``x0, x1, ...``."""
        import sympy as sp

        syms = {f"x{j}": sp.Symbol(f"x{j}") for j in range(self.X.shape[1])}
        return [sp.sympify(t, locals=syms) for t in self.truth]

    def truth_terms(self) -> list[Any]:
        """The distinct additive terms of the ground truth, stripped of their coefficients."""
        import sympy as sp

        out: list[Any] = []
        for e in self.truth_expressions():
            for term in sp.Add.make_args(sp.expand(e)):
                core = term.as_coeff_Mul()[1]
                if core not in out:
                    out.append(core)
        return out


@validate_args(name=[Options(sorted(FORMULA_TASKS))], n_samples=[Interval(int, 10, None)],
               noise=[Interval("real", 0, None)], n_targets=[Interval(int, 1, 3), None],
               random_state=["random_state"])
def make_formula_task(name: str, n_samples: int = 2000, *, noise: float = 0.05, n_targets: int | None = None,
                      random_state: Any = None) -> FormulaTask:
    """Draw a synthetic formula task: ``product_sine`` (``x0*x1 + sin(x2)``), ``ratio``
    (``x0**2/(1 + x1**2) + 0.5*x3``) or the multi-target ``shared`` (up to 3 targets sharing ``x0*x1``,
    ``sin(x2)`` and ``x3**2``); 8 inputs, of which the formulas use 3-4.

    Examples
    --------
    >>> task = make_formula_task("product_sine", 100, random_state=0)
    >>> task.X.shape, task.y.shape
    ((100, 8), (100,))
    """
    from trustlab.core.exceptions import ConfigError
    from trustlab.core.seeding import check_random_state

    formulas, p = FORMULA_TASKS[name]
    k = len(formulas) if n_targets is None else n_targets
    if k > len(formulas):
        raise ConfigError(f"The 'n_targets' argument of make_formula_task must be at most {len(formulas)} for "
                          f"'{name}'. Got {n_targets} instead.")
    rng = check_random_state(random_state)
    X = rng.uniform(-2.0, 2.0, size=(n_samples, p))
    cols = []
    for _, fn in formulas[:k]:
        clean = fn(X)
        cols.append(clean + noise * clean.std() * rng.normal(size=n_samples))
    y = cols[0] if k == 1 else np.column_stack(cols)
    return FormulaTask(name, X, y, tuple(t for t, _ in formulas[:k]), float(noise),
                       tuple(f"x{j}" for j in range(p)))
