"""Explanation metrics through whole sklearn pipelines: SHAP share, rank and direction per input feature.

* Pipelines made only of per-feature steps (imputer, scaler) and column selection are explained on the
  final estimator in the transformed space: TreeExplainer (path-dependent) for forests and boosting,
  LinearExplainer (interventional, background masker) for logistic regression, the model-agnostic
  PermutationExplainer for SVC and kNN. Per-feature bijections leave SHAP values unchanged, and a
  feature removed by selection gets phi = 0.
* Pipelines with a mixing step (PCA, polynomial features) are explained on the **original** inputs
  with the PermutationExplainer on the whole pipeline.
* Outputs are normalised to ``(n, p, C')``: binary models give one output (the positive class or its
  log-odds); multiclass models keep every class and importance sums ``|phi|`` over classes.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

__all__ = ["explain_pipeline", "shares_and_ranks", "normalise_shap"]

_MIXING = ("pca", "poly")


def normalise_shap(values: Any) -> np.ndarray:
    """SHAP output of any shap version/model as ``(n, p, C')``; a binary two-column output keeps class 1.

    Old shap returns a list of ``(n, p)`` arrays (one per class), new shap a ``(n, p, C)`` array or a
    ``(n, p)`` array for single-output models.
    """
    if isinstance(values, list):
        values = np.stack([np.asarray(v, dtype=float) for v in values], axis=-1)
    v = np.asarray(getattr(values, "values", values), dtype=float)
    if v.ndim == 2:
        return v[:, :, None]
    if v.ndim == 3:
        return v[:, :, 1:2] if v.shape[2] == 2 else v
    raise ValueError(f"unexpected SHAP output shape {v.shape}")


def _output_fn(model: Any, n_classes: int) -> Any:
    """The model output the permutation explainer attributes (positive class for binary problems)."""
    if hasattr(model, "predict_proba") and not hasattr(model, "gamma_mult"):
        if n_classes == 2:
            return lambda Z: model.predict_proba(Z)[:, 1]
        return model.predict_proba
    return model.decision_function


def _permutation(fn: Any, bg: np.ndarray, Z: np.ndarray, seed: int) -> np.ndarray:
    import shap

    masker = shap.maskers.Independent(bg, max_samples=len(bg))
    explainer = shap.PermutationExplainer(fn, masker, seed=seed)
    out = explainer(Z, max_evals=2 * Z.shape[1] + 1, silent=True)
    return normalise_shap(out.values)


def _tree(model: Any, Z: np.ndarray, flags: dict[str, Any]) -> np.ndarray:
    import shap

    explainer = shap.TreeExplainer(model)
    try:
        vals = explainer.shap_values(Z, check_additivity=True)
    except Exception as exc:  # noqa: BLE001 - shap raises a bare Exception for additivity failures
        if "dditivity" not in str(exc):
            raise
        warnings.warn(f"SHAP additivity check failed ({str(exc)[:80]}...); recomputed with "
                      "check_additivity=False and flagged in the trial log.", RuntimeWarning, stacklevel=3)
        flags["additivity_ok"] = False
        vals = explainer.shap_values(Z, check_additivity=False)
    return normalise_shap(vals)


def explain_pipeline(pipe: Any, X_bg: np.ndarray, X_ex: np.ndarray, *, n_classes: int, seed: int = 0) -> dict[str, Any]:
    """Attributions of a fitted pipeline on ``X_ex``, mapped back to the original input features.

    Returns
    -------
    dict
        ``phi`` ``(n, p, C')`` attributions in original-feature order (0 for dropped features),
        ``explainer`` (``"tree"``, ``"linear"``, ``"permutation"`` or ``"permutation-pipeline"``),
        ``additivity_ok`` (False when shap's additivity check failed and was turned off).
    """
    flags: dict[str, Any] = {"additivity_ok": True}
    p = X_ex.shape[1]
    names = [n for n, _ in pipe.steps]
    if any(n in _MIXING for n in names):
        phi = _permutation(_output_fn(pipe, n_classes), X_bg, X_ex, seed)
        return {"phi": phi, "explainer": "permutation-pipeline", **flags}
    idx = np.arange(p)
    Zb, Ze = X_bg, X_ex
    for _, step in pipe.steps[:-1]:
        Zb, Ze = step.transform(Zb), step.transform(Ze)
        if hasattr(step, "get_support"):
            idx = idx[step.get_support()]
    model = pipe.steps[-1][1]
    kind = type(model).__name__
    if kind in ("RandomForestClassifier", "ExtraTreesClassifier", "HistGradientBoostingClassifier"):
        sub, explainer = _tree(model, Ze, flags), "tree"
    elif kind == "LogisticRegression":
        import shap

        masker = shap.maskers.Independent(Zb, max_samples=len(Zb))
        sub, explainer = normalise_shap(shap.LinearExplainer(model, masker)(Ze).values), "linear"
    else:
        sub, explainer = _permutation(_output_fn(model, n_classes), Zb, Ze, seed), "permutation"
    phi = np.zeros((X_ex.shape[0], p, sub.shape[2]))
    phi[:, idx, :] = sub
    return {"phi": phi, "explainer": explainer, **flags}


def shares_and_ranks(phi: np.ndarray, X_ex: np.ndarray) -> dict[str, np.ndarray]:
    """Per feature: share ``E_f = mean_i sum_c |phi| / sum_g (...)``, rank (1 = most important) and
    direction (Pearson correlation of ``x_f`` with the positive-class ``phi_f``; 0 when constant)."""
    imp = np.abs(phi).sum(axis=2).mean(axis=0)
    total = imp.sum()
    share = imp / total if total > 0 else np.zeros_like(imp)
    rank = np.array([1 + int(np.sum(share > s)) for s in share])
    pos = phi[:, :, -1]
    direction = np.zeros(phi.shape[1])
    for j in range(phi.shape[1]):
        a, b = X_ex[:, j], pos[:, j]
        if a.std() > 0 and b.std() > 0:
            direction[j] = float(np.corrcoef(a, b)[0, 1])
    return {"share": share, "rank": rank, "direction": direction}
