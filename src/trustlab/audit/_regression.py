"""The audit's checks for a regressor (``AuditInputs.task == "regression"``): the regression analogue of each
classification check, in the same units of judgement (docs/audit.md, "Regression"):

* label issues: rows whose out-of-fold residual (refits of the user's model) lies more than ``residual_z`` robust
  standard deviations from the median residual; cleanlab's regression label-quality scores on the same out-of-fold
  predictions are reported beside them (the overlap of the two sets), as the KNN-Shapley rule is for classifiers;
* membership: reference models on complementary halves of the rows (as for RMIA) and the difficulty-calibrated
  loss attack (Watson et al. 2022: the log ratio of the reference models' squared error on a row, from the
  references that did not train on it, to the model's own), beside the plain loss-threshold attack;
* multiplicity: ``n_models`` refits (seeds and bootstraps); a held-out row is ambiguous when the refits' predictions
  span more than ``range_tol`` standard deviations of the held-out target;
* calibration of residuals: the mean target against the mean prediction in ``n_bins`` quantile bins of the
  prediction, as a share of the target's standard deviation, against the same statistic when the targets are
  redrawn as prediction + a resampled (centred) residual, i.e. from a calibrated model with the same errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.audit._common import bar_hist, cap_rows, outcome
from trustlab.audit._report import CheckOutcome, figure_png

__all__ = ["label_issues", "membership_attacks", "multiplicity", "calibration"]


def _scale(y: np.ndarray) -> float:
    sd = float(np.std(y))
    return sd if sd > 0 else 1.0


def label_issues(a: Any, R: np.ndarray, y: np.ndarray, is_test: np.ndarray, s: dict[str, Any]
                 ) -> tuple[np.ndarray, np.ndarray, str, float]:
    """Residual outliers among out-of-fold predictions (at most ``label_rows`` rows); returns the issue mask, the
    mask of rows checked, a note and the Jaccard overlap with cleanlab's lowest-quality rows (as many of them)."""
    from cleanlab.regression.rank import get_label_quality_scores
    from sklearn.base import clone
    from sklearn.model_selection import KFold, cross_val_predict

    checked = np.zeros(len(y), bool)
    if a.estimator is None:
        idx = np.flatnonzero(is_test)
        pred, note = a.predict(R[idx]), "the model cannot be refitted: its own predictions on the held-out rows"
    else:
        idx, note = cap_rows(len(y), int(s["label_rows"]), a.seed, salt=1)
        folds = max(2, min(int(s["cv"]), len(idx) // 2))
        cv = KFold(folds, shuffle=True, random_state=a.seed % 2**31)
        pred = cross_val_predict(clone(a.estimator), R[idx], y[idx], cv=cv)
        note = f"{folds}-fold out-of-fold predictions of refits of the model" + (f"; {note}" if note else "")
    checked[idx] = True
    pred = np.asarray(pred, dtype=np.float64)
    resid = y[idx] - pred
    mad = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
    z = np.abs(resid - np.median(resid)) / max(mad, 1e-12 * _scale(y))
    issues = np.zeros(len(y), bool)
    issues[idx] = z > float(s["residual_z"])
    k = int(issues.sum())
    quality = get_label_quality_scores(y[idx], pred)
    low = np.zeros(len(y), bool)
    low[idx[np.argsort(quality, kind="stable")[:k]]] = True
    union = int((issues | low).sum())
    return issues, checked, note, (int((issues & low).sum()) / union if union else 1.0)


def membership_attacks(a: Any, X: np.ndarray, y: np.ndarray, s: dict[str, Any]) -> tuple[dict[str, np.ndarray], int]:
    """Scores (higher = more likely a training row) of the calibrated-loss and loss-threshold attacks on the pool
    ``X, y``, and the number of reference models."""
    from sklearn.base import clone

    from trustlab.methods.amun._evaluate import _half_masks

    masks = _half_masks(len(X), max(2, int(s["n_reference"])), a.seed)
    err = (a.predict(X) - y) ** 2
    eps = 1e-12 * _scale(y) ** 2
    out_err = np.zeros(len(y))
    for i, m in enumerate(masks):
        ref = clone(a.estimator).set_params(random_state=a.seed * 1000 + i).fit(X[m], y[m])
        out_err += np.where(m, 0.0, (np.asarray(ref.predict(X), dtype=np.float64) - y) ** 2)
    out_err /= np.maximum((~np.stack(masks)).sum(0), 1)
    return {"calibrated_loss": np.log(out_err + eps) - np.log(err + eps), "threshold_loss": -err}, len(masks)


def multiplicity(a: Any, s: dict[str, Any]) -> CheckOutcome:
    """Refits of the regressor (seeds, and bootstraps when ``bootstrap``): the share of held-out rows whose
    predictions span more than ``range_tol`` target standard deviations."""
    from sklearn.base import clone
    from sklearn.metrics import r2_score

    tr, tr_note = cap_rows(len(a.y_train), int(s["max_train_rows"]), a.seed, salt=4)
    te, te_note = cap_rows(len(a.y_test), int(s["max_test_rows"]), a.seed, salt=5)
    rng = np.random.default_rng([a.seed, 4])
    preds = []
    for i in range(int(s["n_models"])):
        rows = tr[rng.integers(0, len(tr), len(tr))] if s["bootstrap"] else tr
        model = clone(a.estimator).set_params(random_state=a.seed * 1000 + i).fit(a.R_train[rows], a.y_train[rows])
        preds.append(np.asarray(model.predict(a.R_test[te]), dtype=np.float64))
    P, y = np.stack(preds), a.y_test[te]
    scale = _scale(y)
    span = (P.max(0) - P.min(0)) / scale
    ambiguous = span > float(s["range_tol"])
    arb = float(ambiguous.mean())
    r2s = [float(r2_score(y, p)) for p in P]
    headline = (f"{arb:.1%} of held-out predictions span more than {s['range_tol']} target standard deviations over "
                f"{len(P)} refits ({'seeds and bootstraps' if s['bootstrap'] else 'seeds'}); held-out R^2 "
                f"{min(r2s):.3f} to {max(r2s):.3f}")
    fig = bar_hist(span, ambiguous, "range of the refits' predictions (target standard deviations); red: ambiguous",
                   "held-out rows")
    return outcome("multiplicity", "flag" if arb > s["max_arbitrariness"] else "ok", headline, settings=s,
                   metrics={"arbitrariness": arb, "mean_prediction_std": float(P.std(0).mean() / scale),
                            "unstable_points": int(ambiguous.sum()), "accuracy_spread": max(r2s) - min(r2s),
                            "range_tol_to_flag": float(np.quantile(span, 1 - float(s["max_arbitrariness"])))},
                   rows={"ambiguous": sorted(a.test_rows[te][ambiguous].tolist())},
                   details=[f"refit held-out R^2: {[round(r, 3) for r in r2s]}; every refit kept (no Rashomon filter "
                            "for regression)"] + [f"training rows {n}" for n in (tr_note,) if n]
                   + [f"held-out rows {n}" for n in (te_note,) if n], plots={"consistency": figure_png(fig)})


def _binned_gap(pred: np.ndarray, y: np.ndarray, edges: np.ndarray) -> tuple[float, np.ndarray]:
    b = np.clip(np.searchsorted(edges, pred, side="right") - 1, 0, len(edges) - 2)
    n = np.bincount(b, minlength=len(edges) - 1)
    gap = np.abs(np.bincount(b, y, len(n)) - np.bincount(b, pred, len(n)))
    return float(gap.sum() / max(n.sum(), 1)), b


def calibration(a: Any, s: dict[str, Any]) -> CheckOutcome:
    """Calibration of the residuals on the held-out rows (module docstring); ``info`` unless ``max_ece`` is set."""
    from matplotlib.figure import Figure

    pred, y = a.predict(a.R_test), a.y_test
    scale = _scale(y)
    edges = np.unique(np.quantile(pred, np.linspace(0, 1, int(s["n_bins"]) + 1)))
    if len(edges) < 2:
        edges = np.array([pred.min(), pred.max() + 1e-12])
    gap, b = _binned_gap(pred, y, edges)
    ece = gap / scale
    resid = y - pred
    centred = resid - resid.mean()
    rng = np.random.default_rng([a.seed, 8])
    null = np.array([_binned_gap(pred, pred + rng.choice(centred, len(y)), edges)[0] / scale
                     for _ in range(int(s["n_null"]))])
    null95 = float(np.quantile(null, 0.95))
    slope = float(np.polyfit(pred, y, 1)[0]) if np.ptp(pred) > 0 else float("nan")
    bias = float(resid.mean() / scale)
    beyond = ece > max(null95, float(s["min_ece"]))
    flagged = beyond and s["max_ece"] is not None and ece > float(s["max_ece"])
    fig = Figure(figsize=(4.8, 3.6), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    n = np.bincount(b, minlength=len(edges) - 1)
    used = np.flatnonzero(n)
    ax.plot(np.bincount(b, pred, len(n))[used] / n[used], np.bincount(b, y, len(n))[used] / n[used], "o-",
            label="model")
    lo, hi = float(min(pred.min(), y.min())), float(max(pred.max(), y.max()))
    ax.plot([lo, hi], [lo, hi], color="#888", ls=":", label="calibrated")
    ax.set_xlabel("mean prediction (quantile bin)")
    ax.set_ylabel("mean target")
    ax.legend(fontsize=8)
    headline = (f"binned calibration error {ece:.3f} target standard deviations ({'>' if beyond else '<='} "
                f"max(calibrated-model 95th percentile {null95:.3f}, {s['min_ece']}): "
                f"{'miscalibrated' if beyond else 'consistent with calibrated'}); slope {slope:.2f}, mean residual "
                f"{bias:+.3f} sd on {len(y)} held-out rows" + ("" if s["max_ece"] is not None else
                                                               "; reported, not gated (set calibration.max_ece to flag)"))
    status = "flag" if flagged else ("ok" if not beyond or s["max_ece"] is not None else "info")
    return outcome("calibration", status, headline, settings=s,
                   metrics={"calibration_ece": ece, "calibration_ece_null95": null95, "calibration_slope": slope,
                            "residual_bias": bias},
                   details=[f"{len(edges) - 1} quantile bins of the prediction; the null: {s['n_null']} redraws of the "
                            "targets as prediction + a resampled centred residual"],
                   plots={"reliability": figure_png(fig)})
