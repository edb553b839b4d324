"""Formula export of a fitted FEATKDRegressor: plain text, LaTeX, and standalone numpy source."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.exceptions import InputError
from trustlab.methods.featkd._symbolic import GUARD_SPAN

__all__ = ["export_text", "to_latex", "export_numpy", "formulas"]


def _names(model: Any, feature_names: Any) -> list[str]:
    p = model.n_features_in_
    if feature_names is None:
        names = getattr(model, "feature_names_in_", None)
        return [str(n) for n in names] if names is not None else [f"x{j}" for j in range(p)]
    names = [str(n) for n in feature_names]
    if len(names) != p:
        raise InputError(f"The 'feature_names' argument of export_text/to_latex must have {p} names. "
                         f"Got {len(names)} instead.")
    return names


def _rename(expr: Any, names: list[str]) -> Any:
    import sympy as sp

    return expr.xreplace({sp.Symbol(f"x{j}"): sp.Symbol(names[j]) for j in range(len(names))})


def _heads(model: Any) -> tuple[np.ndarray, np.ndarray]:
    return np.atleast_2d(model.coef_), np.atleast_1d(model.intercept_)


def _target_names(model: Any) -> list[str]:
    return ["y"] if model._y_ndim == 1 else [f"y{m}" for m in range(model.n_outputs_)]


def _origin(f: Any) -> str:
    who = f"unit {f.unit}" if f.unit >= 0 else f"contribution to target {f.target}"
    return f"step {f.step}, {who}, fidelity {f.fidelity:.3f}, {f.nodes} nodes"


def export_text(model: Any, *, precision: int = 4, feature_names: Any = None) -> str:
    import sympy as sp

    names = _names(model, feature_names)
    C, b = _heads(model)
    lines = []
    for name, coef, b0 in zip(_target_names(model), C, b):
        terms = " ".join(f"{'+' if c >= 0 else '-'} {abs(c):.{precision}g}*f{i + 1}" for i, c in enumerate(coef))
        lines.append(f"{name} = {b0:.{precision}g} {terms}")
    for i, f in enumerate(model.features_):
        expr = sp.N(_rename(f.expression(), names), precision)
        lines.append(f"  f{i + 1} = {expr}    [{_origin(f)}]")
    return "\n".join(lines)


def formulas(model: Any) -> list[Any]:
    import sympy as sp

    C, b = _heads(model)
    feats = [f.expression() for f in model.features_]
    return [sp.Float(b0) + sum((sp.Float(c) * e for c, e in zip(coef, feats)), sp.Integer(0)) for coef, b0 in zip(C, b)]


def to_latex(model: Any, *, precision: int = 4, feature_names: Any = None) -> str:
    import sympy as sp

    names = _names(model, feature_names)
    C, b = _heads(model)
    feats = [_rename(f.expression(), names) for f in model.features_]
    rows = []
    for name, coef, b0 in zip(_target_names(model), C, b):
        formula = sp.Add(sp.Float(b0), *[sp.Float(c) * e for c, e in zip(coef, feats)], evaluate=False)
        rows.append(f"\\hat{{{name}}} = " + sp.latex(sp.N(formula, precision)))
    return " \\\\\n".join(rows)


def export_numpy(model: Any) -> str:
    C, b = _heads(model)
    p = model.n_features_in_
    out = ['"""A FEAT-KD formula exported by trustlab: predict(X) needs only numpy."""', "import functools",
           "", "import numpy", "", "", "def predict(X):",
           "    X = numpy.asarray(X, dtype=numpy.float64)",
           f"    if X.ndim != 2 or X.shape[1] != {p}:",
           f"        raise ValueError('X must be a 2-d array with {p} columns')",
           "    n = len(X)"]
    used = sorted({j for f in model.features_ for j in f.variables})
    out += [f"    x{j} = X[:, {j}]" for j in used]
    out.append("    cols = []")
    out.append("    with numpy.errstate(all='ignore'):")
    for f in model.features_:
        span = max(f.high - f.low, 1e-12)
        lo, hi = f.low - GUARD_SPAN * span, f.high + GUARD_SPAN * span
        out += [f"        v = numpy.broadcast_to(numpy.asarray({f.code}, dtype=numpy.float64), (n,)).copy()",
                f"        v[numpy.isnan(v)] = {f.mean!r}",
                f"        cols.append(numpy.clip(v, {lo!r}, {hi!r}))"]
    out += ["    F = numpy.column_stack(cols)",
            f"    coef = numpy.array({[[float(c) for c in row] for row in C]!r})",
            f"    intercept = numpy.array({[float(v) for v in b]!r})",
            "    out = F @ coef.T + intercept",
            "    return out[:, 0]" if model._y_ndim == 1 else "    return out", ""]
    return "\n".join(out)
