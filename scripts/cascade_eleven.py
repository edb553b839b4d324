"""The paper's 11-model setting on the synthetic protocol (issue 41): too heavy for default mode, so a script.

Runs the five policies of experiment ``cascade`` (linear, routing, threshold cascade, optimal cascade, cascade
routing with the paper's ``max_depth=5``: 1,024 supermodels) on an 11-model table from the B1-tasks generator
(the experiment's settings: 5 task types, task_skill 3, cost ratio 1.5, so the costs span 1.5^10 = 58x, close to
the 5-model B1's 81x), 2000 queries, the paper's 5 % / 95 % split, the RouterBench noise levels; AUC x100.
Writes ``docs/papers/cascade_files/eleven.json`` and renders the table into ``docs/papers/cascade.md`` between
the ``cascade:eleven`` markers.

    OMP_NUM_THREADS=1 python scripts/cascade_eleven.py            # seeds 0-2 at low noise, seed 0 at medium/high
    python scripts/cascade_eleven.py --render-only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "papers" / "cascade_files" / "eleven.json"
PAGE = ROOT / "docs" / "papers" / "cascade.md"
BEGIN, END = "<!-- cascade:eleven:begin -->", "<!-- cascade:eleven:end -->"
NAMES = ("linear", "routing", "threshold cascade", "optimal cascade", "cascade routing")


def run_one(noise: str, seed: int, n: int) -> dict:
    from sklearn.model_selection import train_test_split

    from trustlab.experiments import cascade as X
    from trustlab.methods.cascade import SyntheticNoiseEstimator, synthetic_table
    from trustlab.results.result import Result

    cfg = X.Config()
    table = synthetic_table(n, 11, n_tasks=cfg.b1t_tasks, task_skill=cfg.b1t_task_skill,
                            cost_ratio=cfg.b1t_cost_ratio, random_state=seed)
    est = SyntheticNoiseEstimator(noise=noise, random_state=seed).estimate(table)
    tr, te = (np.sort(i) for i in train_test_split(np.arange(n), test_size=cfg.b1_test_size, random_state=seed))
    t0 = time.perf_counter()
    out = X._evaluate(X._policies(cfg, seed=seed, allow_in_sample=True), est.subset(tr), est.subset(te), cfg,
                      Result(experiment="cascade", mode="", config={}), {}, record=False)
    cr = out["policies"]["cascade routing"]
    return {"noise": noise, "seed": seed, "auc": {k: float(v) for k, v in out["auc"].items()},
            "n_budgets": len(out["budgets"]), "supermodels": int(cr.space_.U), "max_depth": int(cr.space_.depth),
            "wall_s": round(time.perf_counter() - t0, 1)}


def render(data: dict) -> str:
    rows = data["runs"]
    lines = [f"11 models (`scripts/cascade_eleven.py`, code at {data['commit']}, {data['threads']} thread(s), "
             f"{sum(r['wall_s'] for r in rows):.0f} s in all): AUC x100 per run, cascade routing with max_depth "
             f"{rows[0]['max_depth']} ({rows[0]['supermodels']} supermodels), {rows[0]['n_budgets']} budgets.", "",
             "| noise | seed | " + " | ".join(NAMES) + " | CR - optimal cascade | CR - routing |",
             "|---|---|" + "---:|" * (len(NAMES) + 2)]
    for r in rows:
        a = r["auc"]
        lines.append(f"| {r['noise']} | {r['seed']} | " + " | ".join(f"{a[k]:.2f}" for k in NAMES)
                     + f" | {a['cascade routing'] - a['optimal cascade']:+.2f} | {a['cascade routing'] - a['routing']:+.2f} |")
    low = [r["auc"] for r in rows if r["noise"] == "low"]
    if low:
        m = {k: float(np.mean([a[k] for a in low])) for k in NAMES}
        lines.append(f"| low | mean of {len(low)} | " + " | ".join(f"{m[k]:.2f}" for k in NAMES)
                     + f" | {m['cascade routing'] - m['optimal cascade']:+.2f} | {m['cascade routing'] - m['routing']:+.2f} |")
    return "\n".join(lines)


def write_page(data: dict) -> None:
    text = PAGE.read_text()
    if BEGIN not in text:
        raise SystemExit(f"{PAGE} has no {BEGIN} marker")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    PAGE.write_text(head + BEGIN + "\n" + render(data) + "\n" + END + tail)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument("--n", type=int, default=2000)
    args = ap.parse_args()
    if not args.render_only:
        jobs = [("low", 0), ("low", 1), ("low", 2), ("medium", 0), ("high", 0)]
        runs = []
        for noise, seed in jobs:
            runs.append(run_one(noise, seed, args.n))
            print(json.dumps(runs[-1]), flush=True)
        commit = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True,
                                cwd=ROOT).stdout.strip()
        data = {"runs": runs, "commit": commit, "n_queries": args.n, "python": platform.python_version(),
                "threads": os.environ.get("OMP_NUM_THREADS", "unset")}
        tmp = OUT.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(OUT)
    write_page(json.loads(OUT.read_text()))


if __name__ == "__main__":
    main()
