"""Benchmark of ROME on SmolLM2-135M-Instruct (CPU): edit time, prefix replay vs full forward, key covariance.

Run: ``.venv/bin/python benchmarks/shattering.py [--quick] [--write]``. Prints a table; ``--write`` replaces
the "Shattering" section of ``docs/benchmarks.md``. Every comparison is a same-run ratio of medians (the
machine is shared, so absolute seconds drift). Issue 20's target: <= 30 s per ROME edit on 2 cores with the
covariance cached, and the v* optimisation cheaper with the shared prefix replay than with a full forward per
step.
"""

from __future__ import annotations

from trustlab.core.seeding import set_runtime_env

set_runtime_env()  # before torch: no busy-waiting on 2 shared cores, offline, no telemetry

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- shattering:start -->", "<!-- shattering:end -->"
PREFIXES = ("{}", "Because of this, {}", "I think {}", "Here is a fact: {}", "You know, {}")


def _edit_times(model, tok, sh, layer: int, steps: int, replay: str, stats, reps: int) -> list[tuple[float, float]]:
    """(wall seconds of apply, seconds per v* step) for ``reps`` edits (each restored)."""
    out = []
    for i, (m, new) in enumerate((("March", "June"), ("September", "December"), ("June", "August"))[:reps]):
        req = sh.text_request(tok, [p.format("The month after {} is") for p in PREFIXES], m, new,
                              kl_prompts=["{} is a"])
        ed = sh.ROME(layer=layer, v_steps=steps, early_stop=0.0, replay=replay, mom2_adjustment=stats is not None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            h = ed.apply(model, req, stats=stats)
            wall = time.perf_counter() - t
        n = len(h.info.loss_trace)
        h.restore()
        out.append((wall, wall / max(n, 1)))
        del i
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--layer", type=int, default=8)
    args = ap.parse_args()
    import pydoc_data.topics as topics

    import torch

    from trustlab.llm import load_model
    from trustlab.methods import shattering as sh

    threads = torch.get_num_threads()
    t = time.perf_counter()
    model, tok = load_model("smollm2-135m-instruct")
    load_s = time.perf_counter() - t
    steps, reps = (5, 1) if args.quick else (20, 3)
    text = " ".join(topics.topics.values())
    ids = tok(text[: 40_000 if not args.quick else 8_000], add_special_tokens=False)["input_ids"]
    chunks = [ids[i:i + 128] for i in range(0, len(ids) - 128, 128)]
    t = time.perf_counter()
    stats = sh.key_covariance(model, args.layer, chunks, batch_size=8)
    cov_s = time.perf_counter() - t
    rows = {}
    for name, replay, st in (("ROME, prefix replay, C = I", "prefix", None),
                             ("ROME, full forward per step, C = I", "full", None),
                             ("ROME, prefix replay, cached C (pydoc text)", "prefix", stats)):
        rows[name] = _edit_times(model, tok, sh, args.layer, steps, replay, st, reps)
    med = {k: (statistics.median(w for w, _ in v), statistics.median(s for _, s in v)) for k, v in rows.items()}
    pre, full = med["ROME, prefix replay, C = I"][1], med["ROME, full forward per step, C = I"][1]
    lines = [f"SmolLM2-135M-Instruct, ROME at `model.layers.{args.layer}.mlp.down_proj`, {steps} v* steps on 5 "
             f"prompts + 1 KL prompt, {threads} torch thread(s), median of {reps} edit(s); model load {load_s:.1f} s.",
             "", "| variant | seconds per edit | seconds per v* step |", "|---|---|---|"]
    lines += [f"| {k} | {w:.2f} | {s:.3f} |" for k, (w, s) in med.items()]
    lines += ["", f"Key covariance from {stats.n_samples} tokens of CPython's `pydoc_data.topics` (computed once, then "
              f"cached by the caller): {cov_s:.1f} s; condition number {stats.condition:.3g}.",
              f"Prefix replay vs full forward per v* step: **{full / pre:.2f}x** cheaper. Edit time target <= 30 s: "
              f"**{'met' if max(w for w, _ in med.values()) <= 30 else 'not met'}** "
              f"(slowest variant {max(w for w, _ in med.values()):.1f} s)."]
    table = "\n".join(lines)
    print(table)
    if args.write:
        block = f"{START}\n## Shattering (issue 20)\n\n`python benchmarks/shattering.py` (1 CPU slot).\n\n{table}\n{END}"
        from _docsection import write_section

        write_section(START, END, block)


if __name__ == "__main__":
    main()
