"""FEAT-KD: concise symbolic features distilled from a TabNet teacher (Fong & Motani, ICML 2025).

No official code exists; the pipeline follows the paper as reconstructed in the spec (every unverifiable
point is a documented choice). Public objects:

* :class:`FEATKDRegressor` (Regressor role): TabNet teacher (pytorch-tabnet) -> per-step teacher signals
  (step outputs, or per-step contributions) -> mask-restricted gplearn distillation -> sympy -> fidelity
  filter -> one ridge head per target on the shared features; ``predict`` needs only numpy;
* :class:`SymbolicFeature`, :class:`Complexity`, :class:`FormulaGuardWarning`;
* baselines (:mod:`._baselines`): :func:`fit_gplearn_on_y` (equal-wall-time option),
  :func:`fit_symbolic_transformer_ridge`, :func:`fit_ridge`, :func:`fit_gbm`, :func:`teacher_baseline`,
  :class:`BaselineFit`, :func:`r2_per_target`;
* synthetic ground truth: :func:`make_formula_task`, :class:`FormulaTask`;
  :func:`is_equivalent`, :func:`term_recovered`; sizes :func:`expression_nodes`, :func:`feat_complexity`.

Needs the ``symbolic`` extra (``pip install 'trustlab[symbolic]'``).
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    **dict.fromkeys(("FEATKDRegressor", "Complexity", "FormulaGuardWarning"), "_regressor"),
    **dict.fromkeys(("SymbolicFeature", "is_equivalent", "term_recovered", "expression_nodes", "feat_complexity"), "_symbolic"),
    **dict.fromkeys(("BaselineFit", "fit_gplearn_on_y", "fit_symbolic_transformer_ridge", "fit_ridge", "fit_gbm", "teacher_baseline", "r2_per_target"), "_baselines"),
    **dict.fromkeys(("FormulaTask", "make_formula_task"), "_synthetic"),
}
__all__ = sorted(_LAZY)
METHODS.register_exports(__name__, _LAZY, ["FEATKDRegressor"], paper="featkd", role="regressor")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
