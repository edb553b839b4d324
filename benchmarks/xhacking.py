"""Benchmark: cost of one X-hacking trial (fit + SHAP) per explainer path on breast_cancer.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/xhacking.py``.
Prints seconds per trial for the tree, linear, permutation (model) and permutation (whole pipeline) paths.
"""

from __future__ import annotations

import time

from trustlab.data.tabular import load_tabular
from trustlab.methods.xhacking import EvalSettings, SearchContext

BASE = {"imputer": "mean", "scaler": "standard", "selector": "none", "transform": "none"}
CASES = {
    "tree (RF 100)": {"model": "rf", "rf_n": 100, "rf_depth": 8, "rf_max_features": 0.3, "rf_leaf": 1},
    "tree (HGB 100)": {"model": "hgb", "hgb_lr": 0.1, "hgb_depth": 4, "hgb_l2": 0.1, "hgb_iter": 100},
    "linear (LR)": {"model": "lr", "lr_C": 1.0, "lr_penalty": "l2"},
    "permutation (SVC)": {"model": "svc", "svc_C": 1.0, "svc_gamma": 1.0},
    "permutation (kNN)": {"model": "knn", "knn_k": 10, "knn_weights": "uniform"},
    "permutation-pipeline (PCA+LR)": {"model": "lr", "lr_C": 1.0, "lr_penalty": "l2", "transform": "pca",
                                      "pca_keep": 0.5},
}


def main(n_background: int = 30, n_explain: int = 30) -> None:
    ds = load_tabular("breast_cancer")
    ctx = SearchContext(ds.X, ds.y, EvalSettings(n_background=n_background, n_explain=n_explain))
    print(f"breast_cancer, {n_background} background rows, {n_explain} explained rows")
    for name, cfg in CASES.items():
        t = time.perf_counter()
        rec = ctx.evaluate({**BASE, **cfg, "seed": 1})
        print(f"{name:32s} {time.perf_counter() - t:6.3f} s/trial  score={rec['score']:.3f}  via {rec['explainer']}")


if __name__ == "__main__":
    main()
