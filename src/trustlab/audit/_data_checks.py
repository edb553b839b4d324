"""The data-quality check: exact, near and conflicting-label duplicates (``methods.licensing.find_duplicates``), label
issues from the model's own out-of-fold probabilities (cleanlab's ``find_label_issues``) and, beside them, the
KNN-Shapley noisy-label rule of ``methods.licensing`` (reported, with its overlap with cleanlab's rows; not gating).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.audit._common import bar_hist, cap_rows, outcome
from trustlab.audit._report import CheckOutcome, figure_png

__all__ = ["data_quality"]


def _duplicates(X: np.ndarray, y: np.ndarray, tol: float) -> dict[str, np.ndarray]:
    """Masks (file order) of exact duplicates (same rounded features and label), near-only duplicates (max-norm
    ``tol`` on standardised features, same label) and rows whose exact features repeat with another label."""
    from sklearn.preprocessing import StandardScaler

    from trustlab.methods.licensing import find_duplicates

    Z = StandardScaler().fit_transform(X)
    exact = find_duplicates(X, y, mode="exact").is_duplicate
    near = find_duplicates(Z, y, mode="near", tol=tol).is_duplicate & ~exact
    leader = find_duplicates(X, np.zeros(len(y), int), mode="exact").leader  # features only, labels ignored
    lo, hi = np.full(len(y), np.iinfo(np.int64).max), np.full(len(y), -1)
    np.minimum.at(lo, leader, y)
    np.maximum.at(hi, leader, y)
    return {"exact": exact, "near": near, "conflict": lo[leader] != hi[leader]}


def _label_issues(a: Any, R: np.ndarray, y: np.ndarray, is_test: np.ndarray, s: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, str]:
    """cleanlab's label issues from out-of-fold probabilities of refits of the user's model (``cv`` folds, at most
    ``label_rows`` rows). A model that cannot be refitted: its own probabilities on the held-out rows only.
    Returns the issue mask, the mask of rows checked and a note for the report."""
    from cleanlab.filter import find_label_issues
    from sklearn.base import clone
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    checked = np.zeros(len(y), bool)
    if a.estimator is None:
        idx, note = np.flatnonzero(is_test), "the model cannot be refitted: its own probabilities on the held-out rows"
        P = a.proba(R[idx])
    else:
        idx, note = cap_rows(len(y), int(s["label_rows"]), a.seed, salt=1)
        n_min = int(np.bincount(y[idx]).min())
        folds = max(2, min(int(s["cv"]), n_min))
        cv = StratifiedKFold(folds, shuffle=True, random_state=a.seed % 2**31)
        P = cross_val_predict(clone(a.estimator), R[idx], y[idx], cv=cv, method="predict_proba")
        note = f"{folds}-fold out-of-fold probabilities of refits of the model" + (f"; {note}" if note else "")
    checked[idx] = True
    issues = np.zeros(len(y), bool)
    issues[idx] = find_label_issues(y[idx], P, filter_by="prune_by_noise_rate", n_jobs=1)  # cleanlab's process pool raised NameError at 20k rows
    return issues, checked, note


def _knn_suspects(Z: np.ndarray, y: np.ndarray, s: dict[str, Any], seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    """The KNN-Shapley rule (``flag_noisy_labels``) on at most ``knn_rows`` rows, each random half valued on the
    other; returns suspects, values (0 for rows not valued) and the subsample note."""
    from sklearn.preprocessing import StandardScaler

    from trustlab.methods.licensing import flag_noisy_labels, knn_shapley

    idx, note = cap_rows(len(y), int(s["knn_rows"]), seed, salt=2)
    Zs, ys = StandardScaler().fit_transform(Z[idx]), y[idx]
    half = np.random.default_rng(seed).permutation(len(ys)) % 2 == 0
    suspect, phi = np.zeros(len(y), bool), np.zeros(len(y))
    for part in (half, ~half):
        if part.sum() <= s["k"] or (~part).sum() == 0:
            continue
        suspect[idx[part]] = flag_noisy_labels(Zs[part], ys[part], Zs[~part], ys[~part], k=int(s["k"]),
                                               quantile=float(s["noise_quantile"]))
        phi[idx[part]] = knn_shapley(Zs[part], ys[part], Zs[~part], ys[~part], k=int(s["k"]))
    return suspect, phi, note


def data_quality(a: Any, s: dict[str, Any]) -> CheckOutcome:
    """Duplicates, conflicting labels and label issues on every row (train and held-out, in file order)."""
    rows = np.r_[a.train_rows, a.test_rows]
    order = np.argsort(rows, kind="stable")  # file order: a duplicate is the later row of its pair in the file
    X, y, rows = np.vstack([a.X_train, a.X_test])[order], np.r_[a.y_train, a.y_test][order], rows[order]
    R = np.vstack([a.R_train, a.R_test])[order]
    is_test = np.r_[np.zeros(len(a.y_train), bool), np.ones(len(a.y_test), bool)][order]
    regression = a.task == "regression"
    codes = np.unique(y, return_inverse=True)[1].reshape(len(y)) if regression else y  # equal targets, equal codes
    dup = _duplicates(X, codes, float(s["near_tol"]))
    if regression:
        from trustlab.audit._regression import label_issues

        issues, checked, note, agree = label_issues(a, R, y, is_test, s)
        knn, phi, knn_note = np.zeros(len(y), bool), np.zeros(len(y)), ""
    else:
        issues, checked, note = _label_issues(a, R, y, is_test, s)
        knn, phi, knn_note = _knn_suspects(X, y, s, a.seed)
    share = float(issues.sum() / max(checked.sum(), 1))
    n_dup, n_conf = int(dup["exact"].sum() + dup["near"].sum()), int(dup["conflict"].sum())
    found = []
    if n_dup:
        found.append(f"{int(dup['exact'].sum())} exact and {int(dup['near'].sum())} near duplicate row(s)")
    if n_conf:
        found.append(f"{n_conf} row(s) repeat the same features with different labels")
    if share > s["max_suspect_share"]:
        found.append(f"{int(issues.sum())} label issue(s) ({share:.1%} > {s['max_suspect_share']:.0%})")
    both = int((issues & knn & checked).sum())
    union = int(((issues | knn) & checked).sum())
    headline = "; ".join(found) if found else (f"no duplicates or conflicting labels; {int(issues.sum())} label "
                                               f"issue(s) ({share:.1%}), within {s['max_suspect_share']:.0%}")
    metrics = {"duplicate_rows": int(dup["exact"].sum()), "near_duplicate_rows": int(dup["near"].sum()),
               "conflicting_label_rows": n_conf, "suspect_labels": int(issues.sum()), "suspect_label_share": share}
    if regression:
        metrics["label_issue_cleanlab_jaccard"] = agree
        details = [f"label issues: out-of-fold residuals beyond {s['residual_z']} robust standard deviations on "
                   f"{int(checked.sum())} rows, {note}",
                   f"cleanlab's regression label quality (get_label_quality_scores, not gating): its "
                   f"{int(issues.sum())} lowest-scored row(s) overlap the residual rule's with Jaccard {agree:.2f}"]
    else:
        metrics |= {"knn_suspect_labels": int(knn.sum()), "label_issue_knn_jaccard": both / union if union else 1.0}
        details = [f"label issues: cleanlab find_label_issues (prune_by_noise_rate) on {int(checked.sum())} rows, "
                   f"{note}", f"KNN-Shapley rule (methods.licensing, not gating): {int(knn.sum())} suspect row(s), {both} "
                   f"of them also cleanlab label issues (Jaccard {metrics['label_issue_knn_jaccard']:.2f})" +
                   (f"; {knn_note}" if knn_note else "")]
    details += [
               f"duplicate rows (0-based data rows): {sorted(rows[dup['exact'] | dup['near']].tolist())[:30]}",
               f"conflicting-label rows: {sorted(rows[dup['conflict']].tolist())[:30]}",
               f"label issues: {sorted(rows[issues].tolist())[:30]}"]
    fig = (bar_hist(y, issues, "target; red: label issues (residual outliers)", "rows") if regression else
           bar_hist(phi, issues, "KNN-Shapley value (each half valued on the other); red: cleanlab label issues", "rows"))
    return outcome("data_quality", "flag" if found else "ok", headline, metrics=metrics, details=details, settings=s,
                   rows={"exact_duplicates": sorted(rows[dup["exact"]].tolist()),
                         "near_duplicates": sorted(rows[dup["near"]].tolist()),
                         "conflicting_labels": sorted(rows[dup["conflict"]].tolist()),
                         "suspect_labels": sorted(rows[issues].tolist()),
                         "knn_suspect_labels": sorted(rows[knn].tolist())},
                   plots={"values": figure_png(fig)})
