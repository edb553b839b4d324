"""Pilot for experiment ``wmattack`` under issue 47: how much DPO moves the paraphraser (seed 100, not reported).

The rule, written before this script first ran (2026-12-07):

Every candidate runs the experiment in default mode with seed 100 (its own prompts, keys, training texts,
candidates and pairs; the stage cache shares them between candidates) at pilot sizes: 48 training texts x 4
candidate paraphrases (as in the default run), 32 provider-key texts, 32 unwatermarked texts, 4 surrogate-eval
and 4 Unigram texts, adapter ratio 1 only. Everything else is the default config. Candidates, walked in this
order (increasing training), and the walk stops at the first that qualifies:

    A  steps = 24, lr = 5e-4
    B  steps = 24, lr = 1e-3
    C  steps = 48, lr = 1e-3

A candidate qualifies when, on the 32 pilot texts,
  (i)   the tuned paraphraser's output differs from the untuned one's (same sampling seed) on >= 90 % of texts
        (the premise ``pre-para-moved`` needs 80 %; 10 points of margin for 32 texts),
  (ii)  its mean MiniLM cosine to the source is >= the untuned paraphraser's - 0.05 (no collapse: the
        issue-27 exploration at 48 steps, lr 2e-3 collapsed to cosine 0.36), and
  (iii) its held-out DPO preference accuracy is >= 0.6 (it learned the preference, not noise).
The first qualifying candidate's (steps, lr) is the default run's. If none qualifies, the default run uses the
candidate with the largest (i) among those meeting (ii) (A if none meets (ii)); its premise may then fail and
the docs show this grid.

Writes ``docs/papers/wmattack_files/pilot_issue47.json``. Run: ``OMP_WAIT_POLICY=PASSIVE .venv/bin/python
scripts/wmattack_pilot.py`` (2 threads, ~20-30 min).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

SEED = 100
OUT = Path(__file__).resolve().parents[1] / "docs" / "papers" / "wmattack_files" / "pilot_issue47.json"
CANDIDATES = {"A": (24, 5e-4), "B": (24, 1e-3), "C": (48, 1e-3)}
SIZES = ("n_eval=32", "n_null=32", "n_surrogate_eval=4", "n_unigram=4", "ratios=1.0")
MOVED, COS_DROP, ACC = 0.90, 0.05, 0.6


def _one(steps: int, lr: float) -> dict[str, Any]:
    from trustlab.experiments.runner import run_experiment

    t0 = time.perf_counter()
    res, _ = run_experiment("wmattack", "default", seeds=[SEED], overrides=[*SIZES, f"steps={steps}", f"lr={lr}"],
                            out_dir=None, show_progress=False)
    df = res.to_frame()

    def val(method: str, dataset: str, metric: str) -> float:
        sub = df[(df["method"] == method) & (df["dataset"] == dataset) & (df["metric"] == metric)]
        return float(sub["value"].mean())

    row = {"steps": steps, "lr": lr, "wall_s": round(time.perf_counter() - t0, 1),
           "changed": val("paraphrase_dpo", "eval", "changed_vs_base"),
           "cos_dpo": val("paraphrase_dpo", "eval", "cosine"), "cos_base": val("paraphrase_base", "eval", "cosine"),
           "held_acc": val("paraphrase_dpo", "pairs", "held_acc"),
           "held_margin": val("paraphrase_dpo", "pairs", "held_margin"),
           "loss_last": val("paraphrase_dpo", "pairs", "loss_last"),
           "evasion_dpo": val("paraphrase_dpo", "eval", "evasion"),
           "evasion_base": val("paraphrase_base", "eval", "evasion"),
           "joint_dpo": val("paraphrase_dpo", "eval", "joint"), "joint_base": val("paraphrase_base", "eval", "joint"),
           "pairs": res.summary.get("pairs", {}).get("pairs"), "timing_s": res.summary.get("timing_s")}
    row["ok_moved"] = row["changed"] >= MOVED
    row["ok_cos"] = row["cos_dpo"] >= row["cos_base"] - COS_DROP
    row["ok_acc"] = row["held_acc"] >= ACC
    row["qualifies"] = bool(row["ok_moved"] and row["ok_cos"] and row["ok_acc"])
    return row


def main() -> None:
    grid: dict[str, Any] = {}
    chosen = None
    for name, (steps, lr) in CANDIDATES.items():
        grid[name] = _one(steps, lr)
        print(name, json.dumps({k: v for k, v in grid[name].items() if k != "timing_s"}), flush=True)
        if grid[name]["qualifies"]:
            chosen = name
            break
    how = "first qualifying candidate"
    if chosen is None:
        ok = [n for n, r in grid.items() if r["ok_cos"]]
        chosen = max(ok, key=lambda n: grid[n]["changed"]) if ok else "A"
        how = "none qualified: largest change among the non-collapsed (A if none)"
    out = {"rule": __doc__, "seed": SEED, "sizes": SIZES, "grid": grid, "chosen": chosen, "how": how,
           "steps": CANDIDATES[chosen][0], "lr": CANDIDATES[chosen][1]}
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print("chosen", chosen, CANDIDATES[chosen], how)


if __name__ == "__main__":
    main()
