"""Symbolic expressions: gplearn programs to sympy, simplification, size metrics, numpy code, recovery.

One canonical operator tree serves both size metrics, so every method (FEAT-KD's features, gplearn on y,
the SymbolicTransformer's components) is measured by the same rule:

* **nodes**: operators and leaves of the expression written with binary ``+ - * /`` and unary functions
  (``x0*x1 + sin(x2)`` has 6 nodes; ``x0 - x1`` has 3);
* **FEAT complexity**: FEAT's recursive rule ``C(n) = w_n * (1 + sum of the children's C)`` with FEAT's
  operator weights (``+ -`` 1, ``* /`` 2, ``sqrt`` and ``^2`` 2, ``^3 sin cos tanh`` 3, ``exp log ^`` 4,
  variables and constants 1; read from cavalab/feat ``src/pop/op``; ``abs`` and ``neg`` get 1).

gplearn's protected operators are written as their unprotected math with the protection kept where it is
exact: ``sqrt(x) -> sqrt(|x|)``, ``log(x) -> log(|x|)``; protected division becomes plain division.
Where the protection would have fired (a denominator or log argument within 0.001 of 0) the numpy code can
overflow: :meth:`SymbolicFeature.evaluate` guards it (non-finite values and values far outside the
training range are clipped) and reports how many values it touched.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Interval, Satisfies

__all__ = ["program_to_sympy", "simplify_expression", "expression_nodes", "feat_complexity",
           "numpy_code", "SymbolicFeature", "GuardReport", "is_equivalent", "term_recovered"]

#: FEAT's operator weights (cavalab/feat src/pop/op/*/n_*.cc, the ``complexity`` member)
FEAT_WEIGHTS = {"+": 1, "-": 1, "*": 2, "/": 2, "sqrt": 2, "^2": 2, "^3": 3, "sin": 3, "cos": 3, "tan": 3,
                "tanh": 3, "exp": 4, "log": 4, "^": 4, "abs": 1, "neg": 1, "var": 1, "const": 1}
_UNARY = {"sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh", "exp": "exp", "log": "log", "Abs": "abs"}
#: the rule of every expression argument (sympy objects; text is parsed by the caller)
_EXPR = [Satisfies(lambda e: hasattr(e, "free_symbols") and type(e).__module__.startswith("sympy"),
                   "a sympy expression", invalid=[None, "x0 + 1", 3.5])]
#: a guarded feature may leave its training range by this many training spans before it is clipped
GUARD_SPAN = 1.0


def _sympy() -> Any:
    from trustlab.core.optional import require

    return require("sympy", extra="symbolic", purpose="FEAT-KD's symbolic features")


def program_to_sympy(program: Any, symbols: list[Any]) -> Any:
    """A gplearn ``_Program`` (or its ``program`` list in prefix order) as a sympy expression."""
    sp = _sympy()
    tokens = list(getattr(program, "program", program))
    ops = {
        "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "div": lambda a, b: a / b, "sqrt": lambda a: sp.sqrt(sp.Abs(a)), "log": lambda a: sp.log(sp.Abs(a)),
        "sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "neg": lambda a: -a, "inv": lambda a: 1 / a,
        "abs": sp.Abs,
    }
    pos = 0

    def parse() -> Any:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        name = getattr(tok, "name", None)
        if name is not None:
            if name not in ops:
                raise ValueError(f"gplearn function '{name}' has no symbolic form here; use {sorted(ops)}.")
            args = [parse() for _ in range(tok.arity)]
            return ops[name](*args)
        if isinstance(tok, int | np.integer):
            return symbols[int(tok)]
        return sp.Float(float(tok))

    return parse()


def simplify_expression(expr: Any, *, max_nodes: int = 80) -> Any:
    """sympy's ``simplify`` (never returning a longer expression); skipped above ``max_nodes`` nodes."""
    sp = _sympy()
    if expression_nodes(expr) > max_nodes:
        return expr
    out = sp.simplify(expr, ratio=1.0)
    return out if expression_nodes(out) <= expression_nodes(expr) else expr


# -------------------------------------------------------------------------------- the operator tree
def _tree(e: Any) -> tuple[Any, ...]:
    """``(op, *children)`` with binary + - * / and unary functions; leaves are ('var',) / ('const',)."""
    sp = _sympy()
    if e.is_Symbol:
        return ("var",)
    if e.is_Number or e.is_NumberSymbol:
        return ("neg", ("const",)) if e.is_negative else ("const",)
    if e.is_Add:
        pos = [a for a in e.args if not a.could_extract_minus_sign()]
        neg = [-a for a in e.args if a.could_extract_minus_sign()]
        out = _tree(pos[0]) if pos else ("neg", _tree(neg.pop(0)))
        for a in pos[1:]:
            out = ("+", out, _tree(a))
        for a in neg:
            out = ("-", out, _tree(a))
        return out
    if e.is_Mul:
        coeff, rest = e.as_coeff_Mul()
        if coeff.is_negative:
            return ("neg", _tree(-e))
        num, den = [], []
        for f in sp.Mul.make_args(rest):
            if f.is_Pow and f.exp.is_Number and f.exp.is_negative:
                den.append(f.base ** (-f.exp))
            else:
                num.append(f)
        parts = ([("const",)] if coeff != 1 else []) + [_tree(f) for f in num]
        top = parts[0] if parts else ("const",)
        for p in parts[1:]:
            top = ("*", top, p)
        if not den:
            return top
        bottom = _tree(den[0])
        for f in den[1:]:
            bottom = ("*", bottom, _tree(f))
        return ("/", top, bottom)
    if e.is_Pow:
        b, x = e.base, e.exp
        if x == 2:
            return ("^2", _tree(b))
        if x == 3:
            return ("^3", _tree(b))
        if x == sp.Rational(1, 2):
            return ("sqrt", _tree(b))
        if x.is_Number and x.is_negative:
            return ("/", ("const",), _tree(b ** (-x)))
        return ("^", _tree(b), _tree(x))
    name = type(e).__name__
    if name in _UNARY and len(e.args) == 1:
        return (_UNARY[name], _tree(e.args[0]))
    return (name, *[_tree(a) for a in e.args])


def _count(t: tuple[Any, ...]) -> int:
    return 1 + sum(_count(c) for c in t[1:])


def _feat(t: tuple[Any, ...]) -> int:
    return FEAT_WEIGHTS.get(t[0], 2) * (1 + sum(_feat(c) for c in t[1:])) if len(t) > 1 else FEAT_WEIGHTS[t[0]]


@validate_args(expr=_EXPR)
def expression_nodes(expr: Any) -> int:
    """Nodes of ``expr`` written with binary + - * / and unary functions (see the module docstring)."""
    return _count(_tree(expr))


@validate_args(expr=_EXPR)
def feat_complexity(expr: Any) -> int:
    """FEAT's recursive complexity of ``expr`` (FEAT's operator weights; see the module docstring)."""
    return _feat(_tree(expr))


def numpy_code(expr: Any) -> str:
    """Python source of ``expr`` using only ``numpy`` (and ``abs``); variables keep their sympy names."""
    from sympy.printing.numpy import NumPyPrinter

    return NumPyPrinter({"fully_qualified_modules": True}).doprint(expr)


_NAMESPACE = {"numpy": np, "abs": np.abs, "functools": functools, "__builtins__": {}}


@dataclass(frozen=True)
class GuardReport:
    """What the guard did on one evaluation: values that were not finite, and values it clipped."""

    n_values: int
    n_nonfinite: int
    n_clipped: int

    @property
    def touched(self) -> int:
        return self.n_nonfinite + self.n_clipped


@dataclass(frozen=True)
class SymbolicFeature:
    """One distilled feature: the expression (as text and numpy code), where it came from and its size.

    ``step``/``unit``: the TabNet step and output unit it distils (``unit = -1`` for a per-step contribution,
    with ``target`` its target index); ``inputs``: the input columns the step's mask selected; ``fidelity``:
    R² of the best affine map of the feature to the teacher signal on the training rows; ``low``/``high``/
    ``mean``: the feature's range and mean on the training rows (the guard's reference).
    """

    text: str
    code: str
    variables: tuple[int, ...]
    step: int
    unit: int
    fidelity: float
    nodes: int
    complexity: int
    inputs: tuple[int, ...]
    low: float
    high: float
    mean: float
    target: int = -1
    _compiled: Any = field(default=None, compare=False, repr=False)

    def expression(self) -> Any:
        """The feature as a sympy expression in ``x0, x1, ...`` (needs sympy)."""
        return _sympy().sympify(self.text, locals={f"x{j}": _sympy().Symbol(f"x{j}") for j in self.variables})

    @takes_any(X="the float matrix of the search (hot path: every candidate feature is evaluated on it)")
    def raw(self, X: np.ndarray) -> np.ndarray:
        """The expression evaluated on ``X`` with numpy only (no guard; may hold inf or NaN)."""
        code = self._compiled
        if code is None:
            code = compile(self.code, "<featkd feature>", "eval")
            object.__setattr__(self, "_compiled", code)
        env = {**_NAMESPACE, **{f"x{j}": X[:, j] for j in self.variables}}
        with np.errstate(all="ignore"):
            out = eval(code, env)  # noqa: S307 - our own generated numpy code, names restricted
        return np.broadcast_to(np.asarray(out, dtype=np.float64), (len(X),)).copy()

    @takes_any(X="the float matrix the regressor's _validate_X checked (hot path, as raw)")
    def evaluate(self, X: np.ndarray) -> tuple[np.ndarray, GuardReport]:
        """Guarded values: NaN -> the training mean, +-inf and values beyond ``GUARD_SPAN`` training spans
        outside the training range -> the nearest bound."""
        v = self.raw(X)
        span = max(self.high - self.low, 1e-12)
        lo, hi = self.low - GUARD_SPAN * span, self.high + GUARD_SPAN * span
        bad = ~np.isfinite(v)
        v[np.isnan(v)] = self.mean
        clipped = int((((v < lo) | (v > hi)) & ~bad).sum())
        return np.clip(v, lo, hi), GuardReport(len(v), int(bad.sum()), clipped)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_compiled"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, v)


# -------------------------------------------------------------------------------- recovery checks
def _rounded(expr: Any, decimals: int) -> Any:
    sp = _sympy()
    reps = {f: sp.nsimplify(round(float(f), decimals)) for f in expr.atoms(sp.Float)}
    return sp.expand(expr.xreplace(reps))


def _two_expressions(a: str, b: str) -> Any:
    return lambda: {a: _sympy().Symbol("x0") + 1, b: _sympy().Symbol("x0")}


@validate_args(_two_expressions("model", "truth"), model=_EXPR, truth=_EXPR, decimals=[Interval(int, 0, 12)])
def is_equivalent(model: Any, truth: Any, *, decimals: int = 1) -> bool:
    """Whether ``model`` equals ``truth`` once every constant of ``model`` is rounded to ``decimals``
    decimals (sympy: the simplified difference is 0)."""
    sp = _sympy()
    return bool(sp.simplify(_rounded(model, decimals) - sp.expand(truth)) == 0)


@validate_args(_two_expressions("feature", "term"), feature=_EXPR, term=_EXPR, decimals=[Interval(int, 0, 12)],
               rel=[Interval("real", 0, 1, closed="right")])
def term_recovered(feature: Any, term: Any, *, decimals: int = 1, rel: float = 0.05) -> bool:
    """Whether ``feature`` is ``a * term + b``: its non-constant terms whose coefficient is at least ``rel``
    of the largest, with constants inside them rounded to ``decimals`` decimals, are exactly ``term``
    (itself stripped of its coefficient)."""
    sp = _sympy()
    target = sp.expand(term).as_coeff_Mul()[1] if sp.expand(term).is_Mul else sp.expand(term)
    parts = sp.expand(feature).as_coefficients_dict()
    parts = {t: c for t, c in parts.items() if t != 1}
    if not parts:
        return False
    big = max(abs(float(c)) for c in parts.values())
    kept = [t for t, c in parts.items() if abs(float(c)) >= rel * big]
    if len(kept) != 1:
        return False
    return bool(sp.simplify(_rounded(kept[0], decimals) - target) == 0)
