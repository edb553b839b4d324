"""Benchmark of ROME on SmolLM2-135M-Instruct (CPU): edit time, prefix replay vs full forward, key covariance.

Run: ``.venv/bin/python benchmarks/shattering.py [--quick] [--layer 8]`` (``--json PATH`` / ``--no-docs`` /
``--render-only``: the harness's options). Prints the ratios and replaces the "Shattering" section of
``docs/benchmarks.md``. Every comparison is a same-run ratio of medians (the machine is shared, so absolute
seconds drift); the three variants alternate edit by edit (ABBA). Issue 20's target: <= 30 s per ROME edit on
2 cores with the covariance cached, and the v* optimisation cheaper with the shared prefix replay than with a
full forward per step.
"""

from __future__ import annotations

from trustlab.core.seeding import set_runtime_env

set_runtime_env()  # before torch: no busy-waiting on 2 shared cores, offline, no telemetry

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness  # noqa: E402

NAME = "shattering"
PREFIXES = ("{}", "Because of this, {}", "I think {}", "Here is a fact: {}", "You know, {}")
EDITS = (("March", "June"), ("September", "December"), ("June", "August"))
PRE, FULL, COV = ("ROME, prefix replay, C = I", "ROME, full forward per step, C = I",
                  "ROME, prefix replay, cached C (pydoc text)")


def _edit(model, tok, sh, layer: int, steps: int, replay: str, stats, i: int, per_step: list[float]) -> float:
    """Wall seconds of the ``i``-th edit's apply (restored after); its seconds per v* step go to ``per_step``."""
    m, new = EDITS[i % len(EDITS)]
    req = sh.text_request(tok, [p.format("The month after {} is") for p in PREFIXES], m, new, kl_prompts=["{} is a"])
    ed = sh.ROME(layer=layer, v_steps=steps, early_stop=0.0, replay=replay, mom2_adjustment=stats is not None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        h = ed.apply(model, req, stats=stats)
        wall = time.perf_counter() - t
    per_step.append(wall / max(len(h.info.loss_trace), 1))
    h.restore()
    return wall


def run(bench: _harness.Bench) -> None:
    import pydoc_data.topics as topics

    import torch

    from trustlab.llm import load_model
    from trustlab.methods import shattering as sh

    p = bench.result["params"]
    (model, tok), load_s = bench.once("model load", lambda: load_model("smollm2-135m-instruct"))
    steps, reps = (5, 1) if p["quick"] else (20, 3)
    text = " ".join(topics.topics.values())
    ids = tok(text[: 40_000 if not p["quick"] else 8_000], add_special_tokens=False)["input_ids"]
    chunks = [ids[i:i + 128] for i in range(0, len(ids) - 128, 128)]
    stats, _ = bench.once("key covariance", lambda: sh.key_covariance(model, p["layer"], chunks, batch_size=8))
    per_step: dict[str, list[float]] = {k: [] for k in (PRE, FULL, COV)}
    count = dict.fromkeys(per_step, 0)

    def variant(name: str, replay: str, st) -> Any:
        def fn() -> float:
            count[name] += 1
            return _edit(model, tok, sh, p["layer"], steps, replay, st, count[name] - 1, per_step[name])
        return fn

    bench.rounds({PRE: variant(PRE, "prefix", None), FULL: variant(FULL, "full", None),
                  COV: variant(COV, "prefix", stats)}, rounds=reps, key="edit")
    bench.put(per_step=per_step, v_steps=steps, edits=reps, torch_threads=torch.get_num_threads(),
              cov_tokens=int(stats.n_samples), cov_condition=float(stats.condition))
    med = {k: statistics.median(v) for k, v in per_step.items()}
    bench.print_ratio("full forward / prefix replay, seconds per v* step", _harness.ratio(med[FULL], med[PRE]))


def render(r: dict[str, Any]) -> str:
    v, t = r["values"], r["timings"]
    step = {k: statistics.median(x) for k, x in v["per_step"].items()}
    edit = {k: x["wall"] for k, x in t["edit"].items()}
    slowest = max(edit.values())
    lines = ["## Shattering (issue 20)", "",
             f"`python benchmarks/shattering.py{' --quick' if r['params']['quick'] else ''}`: SmolLM2-135M-Instruct, "
             f"ROME at `model.layers.{r['params']['layer']}.mlp.down_proj`, {v['v_steps']} v* steps on 5 prompts + 1 "
             f"KL prompt, {v['torch_threads']} torch thread(s), median of {v['edits']} edit(s) per variant (variants "
             f"alternating); model load {t['model load']['once']['wall']:.1f} s. Seconds per step include the edit's "
             f"fixed costs (keys, KL reference, final check) divided by the steps, so they overstate a step.", "",
             "| variant | seconds per edit | seconds per v* step |", "|---|---|---|"]
    lines += [f"| {k} | {edit[k]:.2f} | {step[k]:.3f} |" for k in (PRE, FULL, COV)]
    lines += ["", f"Key covariance from {v['cov_tokens']} tokens of CPython's `pydoc_data.topics` (computed once, then "
              f"cached by the caller): {t['key covariance']['once']['wall']:.1f} s; condition number "
              f"{v['cov_condition']:.3g}.",
              f"Prefix replay vs full forward per v* step: **{step[FULL] / step[PRE]:.2f}x** cheaper. Edit time target "
              f"<= 30 s: **{'met' if slowest <= 30 else 'not met'}** (slowest variant {slowest:.1f} s).",
              "", _harness.setting_line(r), "", NOTES]
    return "\n".join(lines)


NOTES = """Reading it: the edit is at block 8 of 30, so prefix replay saves at most 22/30 of a forward per v* step,
and the edit's fixed costs dilute it further.

History (before the harness): `python benchmarks/shattering.py --quick` (1 CPU slot, 1 torch thread, loaded shared
2-core machine, 2026-12-01; the full setting, 20 steps x 3 edits, was not run then: the CPU slots were held by other
jobs for most of that session), 5 v* steps, one edit per variant: prefix replay, C = I 5.93 s per edit (1.185 s per
step); full forward per step, C = I 6.17 s (1.235 s); prefix replay, cached C 5.17 s (1.034 s). Prefix replay vs a
full forward per v* step: 1.04x. Edit time target <= 30 s per edit: met. In the default experiment (20 v* steps,
prefix replay, no covariance) the 12 month edits took a median of 9.4 s each (5.3-15.1 s), measured by
`EditInfo.wall_time_s`."""


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--layer", type=int, default=8)
    ap.add_argument("--write", action="store_true", help=argparse.SUPPRESS)  # the old opt-in; docs are written by default
    _harness.main(NAME, ap.parse_args(), run, render)
