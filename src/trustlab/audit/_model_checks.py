"""Checks users of Deepchecks, Evidently, Giskard and fairlearn expect: calibration of the model's probabilities,
train/test drift and overlap, and subgroup performance / fairness slices (fairlearn's ``MetricFrame``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.audit._common import cap_rows, outcome, skip
from trustlab.audit._report import CheckOutcome, figure_png

__all__ = ["calibration", "drift", "fairness"]


def _ece(conf: np.ndarray, correct: np.ndarray, n_bins: int) -> float:
    """Expected calibration error over equal-width confidence bins (weighted |accuracy - confidence|)."""
    b = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    tot = np.bincount(b, minlength=n_bins)
    gap = np.abs(np.bincount(b, correct, n_bins) - np.bincount(b, conf, n_bins))
    return float(gap.sum() / max(tot.sum(), 1))


def calibration(a: Any, s: dict[str, Any]) -> CheckOutcome:
    """Top-label reliability of the held-out probabilities: ECE, Brier score and a reliability diagram. Miscalibrated
    when the ECE exceeds ``min_ece`` *and* the 95th percentile of ECEs of the same probabilities with labels redrawn
    from them (consistency resampling: what a perfectly calibrated model would show on this many rows); that is
    ``info`` by default and a flag only when ``max_ece`` is set and exceeded (docs/audit.md: forests are
    miscalibrated on every clean reference table)."""
    if a.task == "regression":
        from trustlab.audit._regression import calibration as residual_calibration

        return residual_calibration(a, s)
    from matplotlib.figure import Figure
    from sklearn.metrics import brier_score_loss

    P = a.proba(a.R_test)
    conf, pred = P.max(1), P.argmax(1)
    correct = (pred == a.y_test).astype(float)
    n_bins = int(s["n_bins"])
    ece = _ece(conf, correct, n_bins)
    rng = np.random.default_rng([a.seed, 8])
    null = np.array([_ece(conf, (rng.random(len(conf)) < conf).astype(float), n_bins) for _ in range(int(s["n_null"]))])
    null95 = float(np.quantile(null, 0.95))
    labels = np.arange(P.shape[1])
    brier = float(brier_score_loss(a.y_test, P[:, 1], labels=labels) if P.shape[1] == 2 else
                  brier_score_loss(a.y_test, P, labels=labels))
    beyond = ece > max(null95, float(s["min_ece"]))  # more miscalibrated than a calibrated model's sampling noise
    flagged = beyond and s["max_ece"] is not None and ece > float(s["max_ece"])
    fig = Figure(figsize=(4.8, 3.6), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    b = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    used = np.flatnonzero(np.bincount(b, minlength=n_bins))
    ax.plot(np.bincount(b, conf, n_bins)[used] / np.bincount(b, minlength=n_bins)[used],
            np.bincount(b, correct, n_bins)[used] / np.bincount(b, minlength=n_bins)[used], "o-", label="model")
    ax.plot([0, 1], [0, 1], color="#888", ls=":", label="calibrated")
    ax.set_xlabel("confidence (top-label probability)")
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=8)
    headline = (f"ECE {ece:.3f} ({'>' if beyond else '<='} max(perfect-calibration 95th percentile {null95:.3f}, "
                f"{s['min_ece']}): {'miscalibrated' if beyond else 'consistent with calibrated'}); Brier {brier:.3f} on "
                f"{len(conf)} held-out rows" + ("" if s["max_ece"] is not None else
                                                "; reported, not gated (set calibration.max_ece to flag)"))
    status = "flag" if flagged else ("ok" if not beyond or s["max_ece"] is not None else "info")
    return outcome("calibration", status, headline, settings=s,
                   metrics={"calibration_ece": ece, "calibration_ece_null95": null95, "brier_score": brier},
                   details=[f"{n_bins} equal-width bins of the top-label probability; the null: {s['n_null']} label "
                            "draws from the model's own probabilities"], plots={"reliability": figure_png(fig)})


def _feature_drift(a: Any) -> list[tuple[str, str, float, float]]:
    """Per table column: (name, test, statistic, p-value): Kolmogorov-Smirnov for numbers, chi-square on the
    category counts (missing as a category) for categoricals."""
    from scipy.stats import chi2_contingency, ks_2samp

    out = []
    for j, (col, kind) in enumerate(zip(a.schema.columns, a.schema.kinds)):
        u, v = a.R_train[:, j], a.R_test[:, j]
        if kind == "numeric":
            res = ks_2samp(u, v)
            out.append((col, "KS", float(res.statistic), float(res.pvalue)))
        else:
            cats = np.unique(np.r_[u, v])
            table = np.array([[np.sum(u == c) for c in cats], [np.sum(v == c) for c in cats]])
            if table.shape[1] < 2:
                continue
            chi, p, _, _ = chi2_contingency(table)
            out.append((col, "chi2", float(chi), float(p)))
    return out


def drift(a: Any, s: dict[str, Any]) -> CheckOutcome:
    """Train vs held-out rows: per-feature tests (Bonferroni over the columns) and a domain classifier (a gradient-
    boosted tree telling held-out from training rows, out-of-fold, on at most ``max_rows`` rows). Flags when the
    domain classifier's AUC exceeds ``max_domain_auc``; the overlap is the share of held-out rows it places outside
    the training rows' support (out-of-fold odds of 'held-out', relative to the split's, above ``support_odds``)."""
    from matplotlib.figure import Figure
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    tests = _feature_drift(a)
    alpha = float(s["alpha"]) / max(len(tests), 1)
    drifted = [t for t in tests if t[3] < alpha]
    X = np.vstack([a.X_train, a.X_test])
    d = np.r_[np.zeros(len(a.y_train), int), np.ones(len(a.y_test), int)]
    pick, note = cap_rows(len(d), int(s["max_rows"]), a.seed, salt=9)
    clf = HistGradientBoostingClassifier(max_iter=100, random_state=a.seed % 2**31)
    cv = StratifiedKFold(5, shuffle=True, random_state=a.seed % 2**31)
    p = cross_val_predict(clf, X[pick], d[pick], cv=cv, method="predict_proba")[:, 1]
    auc = float(roc_auc_score(d[pick], p))
    prior = d[pick].mean()
    odds = (p / (1 - p + 1e-12)) / (prior / (1 - prior))  # odds of 'held-out' relative to the split's own odds
    outside = float(np.mean(odds[d[pick] == 1] > float(s["support_odds"])))
    flagged = auc > float(s["max_domain_auc"])
    fig = Figure(figsize=(6.4, 0.6 + 0.22 * max(len(tests), 1)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.barh([t[0] for t in tests], [-np.log10(max(t[3], 1e-300)) for t in tests],
            color=["#c62828" if t in drifted else "#90a4ae" for t in tests])
    ax.axvline(-np.log10(alpha), color="k", ls="--", label=f"Bonferroni {s['alpha']}")
    ax.set_xlabel("-log10 p (train vs held-out)")
    ax.invert_yaxis()
    ax.legend(fontsize=8)
    headline = (f"domain classifier AUC {auc:.3f} ({'>' if flagged else '<='} {s['max_domain_auc']}); "
                f"{len(drifted)} of {len(tests)} feature(s) differ (Bonferroni {s['alpha']}); {outside:.1%} of held-out "
                "rows outside the training support")
    return outcome("drift", "flag" if flagged else "ok", headline, settings=s,
                   metrics={"domain_auc": auc, "drifted_features": len(drifted), "test_outside_support": outside},
                   details=[f"{n} ({t}): statistic {st:.3g}, p {pv:.2g}" for n, t, st, pv in drifted][:20]
                   + ([note] if note else []), plots={"feature_tests": figure_png(fig)})


def fairness(a: Any, s: dict[str, Any]) -> CheckOutcome:
    """Per group of each sensitive column (``--sensitive``): accuracy, error, selection rate (binary) with 95 %
    bootstrap intervals (fairlearn ``MetricFrame``), and the demographic-parity and equalised-odds differences.
    Flags when the lower end of the interval of a difference exceeds ``max_difference``."""
    if not a.sensitive:
        return skip("fairness", "no sensitive column given (--sensitive COL, Python: sensitive=[...])", s)
    if a.task == "regression":
        return skip("fairness", "fairness slices (selection rate, equalised odds) are defined for classifiers; "
                    "per-group errors of a regressor are not implemented yet", s)
    from trustlab.audit._fairness import fairness_slices

    return fairness_slices(a, s)
