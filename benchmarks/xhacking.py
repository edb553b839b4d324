"""Benchmark: cost of one X-hacking trial (fit + SHAP) per explainer path on breast_cancer.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/xhacking.py [--n-background 30] [--n-explain 30]``
(harness options: ``--json PATH``, ``--no-docs``, ``--render-only``). Prints seconds per trial for the tree,
linear, permutation (model) and permutation (whole pipeline) paths; each trial is timed once (``bench.once``), as
the search runs it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import _harness  # noqa: E402

NAME = "xhacking"
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
NOTES = """One trial is one pipeline fit plus its SHAP attribution of the explained rows with the explainer the
search picks for that pipeline (tree SHAP for forests and boosting, the linear explainer for a bare linear model,
permutation SHAP otherwise, on the whole pipeline when a transform precedes the model). The explanation budget
(`n_background`, `n_explain`) sets the permutation paths' cost; the tree and linear paths barely depend on it.
The SVC path dominates the cost of a search in the standard space (permutation SHAP over its kernel decision
function on 30 features). History: the pre-harness run in docs/papers/xhacking.md (under the CPU lock) measured
0.348 s (RF), 0.080 s (HGB), 0.014 s (LR), 7.821 s (SVC), 0.362 s (kNN) and 0.090 s (PCA+LR) per trial."""


def run(bench: _harness.Bench, args: Any) -> None:
    from trustlab.data.tabular import load_tabular
    from trustlab.methods.xhacking import EvalSettings, SearchContext

    ds = load_tabular("breast_cancer")
    ctx = SearchContext(ds.X, ds.y, EvalSettings(n_background=args.n_background, n_explain=args.n_explain))
    print(f"breast_cancer, {args.n_background} background rows, {args.n_explain} explained rows")
    rows = {}
    for name, cfg in CASES.items():
        rec, wall = bench.once(name, lambda cfg=cfg: ctx.evaluate({**BASE, **cfg, "seed": 1}))
        rows[name] = {"seconds": wall, "score": float(rec["score"]), "explainer": str(rec["explainer"])}
        print(f"{name:32s} {wall:6.3f} s/trial  score={rec['score']:.3f}  via {rec['explainer']}", flush=True)
    bench.put(trials=rows, rows=len(ds.y))


def render(result: dict[str, Any]) -> str:
    p, v = result["params"], result["values"]
    lines = ["## X-hacking trial cost (`xhacking`)", "",
             f"`benchmarks/xhacking.py`: one X-hacking trial (fit + SHAP) per explainer path on breast_cancer "
             f"({v['rows']} rows), {p['n_background']} background / {p['n_explain']} explained rows, each trial "
             "timed once.", "", "| pipeline | seconds per trial | score | explainer |", "|---|---:|---:|---|"]
    lines += [f"| {k} | {r['seconds']:.3f} | {r['score']:.3f} | `{r['explainer']}` |" for k, r in v["trials"].items()]
    return "\n".join(lines + ["", NOTES, "", _harness.setting_line(result)])


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--n-background", type=int, default=30)
    ap.add_argument("--n-explain", type=int, default=30)
    a = ap.parse_args()
    _harness.main(NAME, a, lambda b: run(b, a), render)
