"""dint pilot (issue 47): the task on which the default run is judged, chosen by a rule on a pilot seed.

Written before the pilot ran. Pilot seed 100 is not an experiment seed (default mode reports seeds 0, 1, 2). On
SmolLM2-135M-Instruct, with the default config's training setting (128 training problems, rank 8 at f4+l4, batch
8, lr 3e-3, 20 steps at layer 0 with full backward, 25 steps at block 27 with replay), for each candidate task
in the issue's order (CommonLite, single-digit sums), and ArithLite (the task registered first) for reference:
zero-shot accuracy and LoReFT's clean accuracy at layer 0 and at block 27 on 100 test problems.

**Rule.** Eligible: zero-shot accuracy in [10 %, 60 %] and LoReFT's gain over zero-shot >= 5 points at layer 0
and at block 27. The default run uses the eligible candidate with the largest layer-0 gain. If none is
eligible at 20/25 steps, the candidates are re-run with 40/50 steps and the rule applied again (the default
run then uses those steps); if still none, the docs show this grid and C1-C3 stay VOID. Nothing here is
reported as a result.

**Stage 2 (written after stage 1 found no eligible task; docs/papers/dint.md says so).** Stage 1 coupled the two
layers: a task was eligible only if LoReFT learned it at layer 0 *and* at block 27, although C1, C2 and C3e rest
on layer 0 only and C3 (and its secondary lines) on block 27 only. At block 27 no candidate moved at any step
count (gains -3 to +5 points), while at layer 0 CommonLite and single-digit sums did (+32, +53). Rule: eligible
= zero-shot in [10 %, 60 %] and LoReFT's layer-0 gain >= 5 points at 20 steps; the default run uses the
eligible candidate with the largest layer-0 gain, at 20/25 steps; the block-27 premise is measured by the
default run on its own seeds and voids C3, C3s and C3m alone when it fails. ``--stage2 FILE`` applies this rule
to stage 1's printed JSON (no training).

    python scripts/dint_pilot.py          # about 10 minutes on 2 cores
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

PILOT_SEED = 100
CANDIDATES = ("common_lite", "digit_sums", "arith_lite")  # the last: reference only (zero-shot 0 % before)
ELIGIBLE = ("common_lite", "digit_sums")
ZS_BAND, MIN_GAIN = (0.10, 0.60), 0.05


def _one(task: str, steps: tuple[int, int]) -> dict[str, float]:
    from trustlab.experiments import _dint_jobs as J
    from trustlab.experiments.dint import Config, _intervention
    from trustlab.methods.dint import fit_intervention

    cfg = Config(task=task, n_test=100, seeds=(PILOT_SEED,), early_steps=steps[0], late_steps=steps[1])
    model, tok, tasks, ev, _ = J.setup(cfg)
    out = {"zero_shot": ev.accuracy(tasks["test"])[0]}
    for layer, n in ((cfg.early_layer, steps[0]), (cfg.late_layer, steps[1])):
        iv = _intervention("loreft", layer, cfg, PILOT_SEED)
        fwd = None if layer == cfg.early_layer else ev.forward(tasks["train"], layer)
        fit_intervention(model, iv, tasks["train"], tok, steps=n, batch_size=cfg.batch_size, lr=cfg.lr,
                         warmup_steps=cfg.warmup_steps, system=cfg.system, random_state=PILOT_SEED, forward=fwd)
        out[f"loreft@{layer}"] = ev.accuracy(tasks["test"], iv)[0]
    return out


def _eligible(row: dict[str, float]) -> bool:
    zs = row["zero_shot"]
    return ZS_BAND[0] <= zs <= ZS_BAND[1] and min(row["loreft@0"], row["loreft@27"]) - zs >= MIN_GAIN


def stage2(grid: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any] | None:
    """Stage 2's rule on stage 1's grid (its 20/25-step rows)."""
    rows = grid["20/25 steps"]
    ok = [t for t in ELIGIBLE if ZS_BAND[0] <= rows[t]["zero_shot"] <= ZS_BAND[1]
          and rows[t]["loreft@0"] - rows[t]["zero_shot"] >= MIN_GAIN]
    if not ok:
        return None
    return {"task": _largest_gain(rows, ok), "early_steps": 20, "late_steps": 25}


def _largest_gain(rows: dict[str, dict[str, float]], tasks: list[str]) -> str:
    """The task with LoReFT's largest layer-0 gain over zero-shot (both stages' tie-break)."""
    return max(tasks, key=lambda t: rows[t]["loreft@0"] - rows[t]["zero_shot"])


def main() -> int:
    from trustlab.core.threads import limit_threads

    if len(sys.argv) == 3 and sys.argv[1] == "--stage2":
        with open(sys.argv[2]) as fh:
            print(json.dumps({"chosen": stage2(json.loads(fh.read().splitlines()[-1])["grid"])}))
        return 0

    with limit_threads(2, import_torch=True):
        return _grid()


def _grid() -> int:
    t0 = time.perf_counter()
    grid: dict[str, dict[str, dict[str, float]]] = {}
    chosen = None
    for steps in ((20, 25), (40, 50)):
        key = f"{steps[0]}/{steps[1]} steps"
        grid[key] = {}
        for task in CANDIDATES if steps == (20, 25) else ELIGIBLE:
            grid[key][task] = row = _one(task, steps)
            print(key, task, {k: round(100 * v, 1) for k, v in row.items()}, flush=True)
        ok = [t for t in ELIGIBLE if _eligible(grid[key][t])]
        if ok:
            chosen = {"task": _largest_gain(grid[key], ok), "early_steps": steps[0], "late_steps": steps[1]}
            break
    print(json.dumps({"grid": grid, "chosen": chosen, "wall_s": round(time.perf_counter() - t0, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
