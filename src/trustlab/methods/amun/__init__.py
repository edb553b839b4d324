"""AMUN (ICML 2025): machine unlearning by fine-tuning on adversarial examples, with a real MIA evaluator.

Ebrahimpour-Boroojeny, Sundaram, Chandrasekaran, "Not All Wrong is Bad: Using Adversarial Examples for
Unlearning" (arXiv:2503.00917). Light to import: torch loads only when a name below is used.

* :func:`adversarial_set` -- Algorithm 1 (PGD-L2 with per-sample eps doubling, cached); :func:`choose_eps_init`.
* :class:`AMUN` and the baselines :class:`Retrain`, :class:`FineTune`, :class:`GradientAscent`,
  :class:`RandomLabel`, :class:`BoundaryShrink`, :class:`SalUn`, :class:`L1Sparse` -- ModelEdits:
  ``handle = M(...).apply(model, forget_idx, data)``; ``handle.restore()`` gives back the original weights.
* :class:`UnlearningData` -- the pool, its train/test split and input box; :func:`sgd_train`.
* Evaluation: :func:`fit_reference_models` (:func:`fit_reference_estimators` for scikit-learn classifiers), :func:`rmia_scores` (online RMIA), :func:`threshold_scores`,
  :func:`svc_mia`, :func:`mia_auc`, :func:`evaluate_unlearning` (UA/RA/TA/AUC as :class:`UnlearningMetrics`)
  and :func:`avg_gap`.
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "AMUN": "_methods", "Retrain": "_methods", "FineTune": "_methods", "GradientAscent": "_methods",
    "RandomLabel": "_methods", "BoundaryShrink": "_methods", "SalUn": "_methods", "L1Sparse": "_methods",
    "Unlearner": "_methods",
    "adversarial_set": "_adversarial", "choose_eps_init": "_adversarial",
    "UnlearningData": "_data", "SGDSpec": "_data", "sgd_train": "_data", "UnlearningDivergedError": "_data",
    "fit_reference_models": "_evaluate", "fit_reference_estimators": "_evaluate",
    "rmia_scores": "_evaluate", "mia_auc": "_evaluate", "threshold_scores": "_evaluate", "svc_mia": "_evaluate",
    "evaluate_unlearning": "_evaluate", "UnlearningMetrics": "_evaluate", "avg_gap": "_evaluate",
    "SmallSampleWarning": "_evaluate",
}

__all__ = sorted(_LAZY)
METHODS.register_exports(__name__, _LAZY, ["AMUN", "Retrain", "FineTune", "GradientAscent", "RandomLabel",
                                          "BoundaryShrink", "SalUn", "L1Sparse"], paper="amun", role="model_edit")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
