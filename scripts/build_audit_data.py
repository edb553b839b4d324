"""Build the two example tables of ``trustlab audit`` (``src/trustlab/data/_files/audit/``).

Deterministic (numpy ``default_rng(SEED)``); running it again rewrites identical files.

* ``clean.csv``: 600 rows, features ``f0..f5`` (standard normal, 4 decimals) and a binary target ``y``.
  ``y = 1[(f0 + f1 + f2) / sqrt(3) > 0]``; rows with ``|(f0 + f1 + f2) / sqrt(3)| < 0.5`` are dropped, so the
  classes have a margin and no label is noisy. ``f3..f5`` are noise features. Three features carry the signal
  together (none alone: a one-split tree on one feature is far below a model on all of them).
* ``planted.csv``: the same generator (other rows) plus the three planted problems, listed in
  ``provenance.json`` with their row numbers:
  - **duplicates**: 18 exact copies and 12 near copies (every feature moved by 2e-4 or 3e-4) of earlier rows,
    appended and then shuffled in;
  - **label noise**: the label of 30 randomly chosen original rows flipped;
  - **a leaky feature** ``leak``: the *true* (pre-noise) label plus N(0, 0.15) noise, the way a field recorded
    after the outcome leaks it.

    python scripts/build_audit_data.py [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

SEED = 20250730
N_ROWS = 600
N_FEATURES = 6
MARGIN = 0.5
N_FLIP, N_EXACT, N_NEAR = 30, 18, 12
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "src" / "trustlab" / "data" / "_files" / "audit"


def _rows(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows with the margin rule (rejection sampling) and their true labels."""
    out = np.empty((0, N_FEATURES))
    while len(out) < n:
        X = rng.normal(size=(2 * n, N_FEATURES))
        s = X[:, :3].sum(1) / np.sqrt(3)
        out = np.vstack([out, X[np.abs(s) >= MARGIN]])
    X = np.round(out[:n], 4)
    return X, (X[:, :3].sum(1) > 0).astype(int)


def _write(path: Path, header: list[str], rows: np.ndarray) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        for r in rows:
            w.writerow([f"{v:.4f}" for v in r[:-1]] + [str(int(r[-1]))])


def build(out: Path) -> dict:
    rng = np.random.default_rng(SEED)
    names = [f"f{j}" for j in range(N_FEATURES)]
    X, y = _rows(rng, N_ROWS)
    _write(out / "clean.csv", [*names, "y"], np.column_stack([X, y]))

    X, y_true = _rows(rng, N_ROWS)
    y = y_true.copy()
    flip = np.sort(rng.choice(N_ROWS, N_FLIP, replace=False))
    y[flip] = 1 - y[flip]
    leak = np.round(y_true + rng.normal(0, 0.15, N_ROWS), 4)
    table = np.column_stack([X, leak, y])
    src_exact = rng.choice(N_ROWS, N_EXACT, replace=False)
    src_near = rng.choice(np.setdiff1d(np.arange(N_ROWS), src_exact), N_NEAR, replace=False)
    near = table[src_near].copy()
    step = rng.choice([-3e-4, -2e-4, 2e-4, 3e-4], near[:, :-1].shape)  # survives rounding to 4 decimals
    near[:, :-1] = np.round(near[:, :-1] + step, 4)
    full = np.vstack([table, table[src_exact], near])
    kind = np.array(["orig"] * N_ROWS + ["exact"] * N_EXACT + ["near"] * N_NEAR)
    source = np.r_[np.arange(N_ROWS), src_exact, src_near]
    order = rng.permutation(len(full))
    full, kind, source = full[order], kind[order], source[order]
    pos = np.empty(len(order), int)
    pos[order] = np.arange(len(order))  # pos[old index] -> new row number
    _write(out / "planted.csv", [*names, "leak", "y"], full)
    prov = {
        "generator": "scripts/build_audit_data.py", "seed": SEED, "license": "CC0 (synthetic, written for trustlab)",
        "clean.csv": {"rows": N_ROWS, "features": names, "target": "y",
                      "rule": "y = 1[(f0+f1+f2)/sqrt(3) > 0], |(f0+f1+f2)/sqrt(3)| >= 0.5; f3..f5 noise"},
        "planted.csv": {
            "rows": int(len(full)), "features": [*names, "leak"], "target": "y",
            "flipped_rows": sorted(int(pos[i]) for i in flip),
            "exact_duplicate_rows": sorted(int(r) for r in np.flatnonzero(kind == "exact")),
            "near_duplicate_rows": sorted(int(r) for r in np.flatnonzero(kind == "near")),
            "duplicate_of": {str(int(r)): int(pos[source[r]]) for r in np.flatnonzero(kind != "orig")},
            "leaky_feature": "leak", "leak_rule": "true label + N(0, 0.15)",
        },
    }
    (out / "provenance.json").write_text(json.dumps(prov, indent=1) + "\n", encoding="utf-8")
    return prov


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    prov = build(args.out)
    print(f"wrote clean.csv ({prov['clean.csv']['rows']} rows) and planted.csv ({prov['planted.csv']['rows']} rows) "
          f"to {args.out}")


if __name__ == "__main__":
    main()
