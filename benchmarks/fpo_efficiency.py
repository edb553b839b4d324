"""Benchmark: FPO's efficiency claims (spec section 5.1, the experiment's former C1a / C1b; issue 47).

Run (nothing else training on the machine): ``OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/fpo_efficiency.py
[--steps 5] [--rounds 2]`` (``--json PATH`` / ``--no-docs`` / ``--render-only``: the harness's options).

Every method trains in its own fresh (spawned) process, 1 thread: SmolLM2-135M-Instruct, the experiment's
default pairs (``trustlab.experiments.fpo.Config``), LoRA r 8 on q/k/v/o of **all** 30 blocks (the regime
where the reference costs what it costs: no prefix replay), the same 16 pairs, batch 4, the same batch order
(``random_state=0``) and the same number of steps: 1 warm-up step then ``--steps`` timed steps, whose median
is the step time. Offline caches (FPO: reference log-probs and pooled SAE features; DPO: reference log-probs)
are built before the timed steps. Memory is the peak RSS (VmHWM) of the process minus that of a process that
only loads the model, the data and the LoRA. Rounds alternate the method order (ABBA); each figure is the
median over rounds. The pre-registered thresholds (spec 5.1, unchanged): FPO's step time <= 1.15x SimPO's and
<= 0.8x TDPO-2's (C1a); FPO's peak-RSS increase <= 1.1x SimPO's and <= 0.8x TDPO-2's (C1b).
"""

from __future__ import annotations

from trustlab.core.seeding import set_runtime_env

set_runtime_env()  # before torch: no busy-waiting on 2 shared cores, offline, no telemetry

import statistics  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness  # noqa: E402

NAME = "fpo_efficiency"
METHODS = ("baseline", "simpo", "tdpo2", "fpo", "dpo", "dpo_online")
C1A, C1B = (1.15, 0.8), (1.1, 0.8)


def _child(method: str, steps: int, pairs_n: int = 16, batch: int = 4) -> float:
    """In a fresh process: load, LoRA on all layers, the method's caches, then 1 + ``steps`` identical steps."""
    import torch

    from trustlab.experiments import _fpo_jobs as J
    from trustlab.experiments.fpo import Config
    from trustlab.llm import PolicyForward, ReferenceCache, add_lora, tokenize_preferences, train
    from trustlab.methods import fpo

    torch.set_num_threads(1)
    cfg = Config()
    model, tok = J.load(cfg)
    st: dict[str, Any] = {"tok": tok, **J.data(cfg, tok)}
    d = st["train_d"].subset(list(range(pairs_n)))
    pairs = tokenize_preferences(tok, d.prompts, d.chosen, d.rejected, system=cfg.system)
    pol = add_lora(model, layers="all", r=cfg.lora_r, alpha=cfg.lora_alpha, random_state=0)
    fwd = PolicyForward(pol, pairs.sequences)
    if method == "baseline":
        return 0.0
    ref = feats = None
    if method in ("fpo", "dpo"):
        ref = ReferenceCache.compute(fwd)
    if method == "fpo":
        st["sae"], _ = fpo.train_sae(fpo.collect_activations(fwd), width=cfg.sae_width, k=cfg.sae_k, steps=20,
                                     random_state=0)  # its quality does not change the step's cost
        feats = fpo.FeatureCache.compute(fwd, st["sae"])
    obj = J.objective(method, cfg, st, fwd, pairs, ref, feats)
    hist = train(pol, obj, steps=steps + 1, batch_size=batch, lr=cfg.lr, random_state=0)
    return hist.median_step_time(1)


def run(bench: _harness.Bench) -> None:
    from trustlab.llm import measure_peak_rss

    p = bench.result["params"]
    per: dict[str, dict[str, list[float]]] = {m: {"step_s": [], "peak_mb": []} for m in METHODS}
    for i in range(p["rounds"]):
        for m in METHODS if i % 2 == 0 else METHODS[::-1]:
            r = measure_peak_rss(_child, m, p["steps"])
            per[m]["step_s"].append(float(r.value))
            per[m]["peak_mb"].append(float(r.peak_mb))
            print(f"round {i} {m}: step {r.value:.3f} s, peak {r.peak_mb:.0f} MB", flush=True)
    base = statistics.median(per["baseline"]["peak_mb"])
    out = {m: {"step_s": statistics.median(v["step_s"]), "rss_increase_mb": statistics.median(v["peak_mb"]) - base,
               "runs": v} for m, v in per.items() if m != "baseline"}
    f, s, t = (out[m] for m in ("fpo", "simpo", "tdpo2"))
    c1a = (f["step_s"] / s["step_s"], f["step_s"] / t["step_s"])
    c1b = (f["rss_increase_mb"] / s["rss_increase_mb"], f["rss_increase_mb"] / t["rss_increase_mb"])
    bench.put(methods=out, baseline_peak_mb=base, c1a=c1a, c1b=c1b,
              c1a_met=c1a[0] <= C1A[0] and c1a[1] <= C1A[1], c1b_met=c1b[0] <= C1B[0] and c1b[1] <= C1B[1])
    bench.print_ratio("FPO / SimPO step time", c1a[0], f"<= {C1A[0]}", c1a[0] <= C1A[0])
    bench.print_ratio("FPO / TDPO-2 step time", c1a[1], f"<= {C1A[1]}", c1a[1] <= C1A[1])
    bench.print_ratio("FPO / SimPO peak-RSS increase", c1b[0], f"<= {C1B[0]}", c1b[0] <= C1B[0])
    bench.print_ratio("FPO / TDPO-2 peak-RSS increase", c1b[1], f"<= {C1B[1]}", c1b[1] <= C1B[1])


def render(r: dict[str, Any]) -> str:
    p, v = r["params"], r["values"]
    ms = v["methods"]
    verdict = lambda ok: "**met**" if ok else "**MISSED**"  # noqa: E731
    lines = ["## FPO efficiency vs SimPO, TDPO-2 and DPO (issue 47: the spec's C1a / C1b)", "",
             "`benchmarks/fpo_efficiency.py`: every method in its own fresh process (1 thread), SmolLM2-135M-Instruct, "
             "LoRA r 8 on q/k/v/o of all 30 blocks, the same 16 length-matched pairs, batch 4, the same batch order; "
             f"1 warm-up step then {p['steps']} timed steps (median), {p['rounds']} alternating rounds (median). "
             "Memory: peak RSS minus that of a process that only loads model, data and LoRA "
             f"({v['baseline_peak_mb']:.0f} MB).", "",
             "| method | median step (s) | peak-RSS increase (MB) | step / FPO's |", "|---|---|---|---|"]
    fs = ms["fpo"]["step_s"]
    lines += [f"| {m} | {ms[m]['step_s']:.3f} | {ms[m]['rss_increase_mb']:.0f} | {ms[m]['step_s'] / fs:.2f}x |"
              for m in METHODS if m in ms]
    a, b = v["c1a"], v["c1b"]
    lines += ["", f"C1a (time): FPO/SimPO {a[0]:.3f}x (<= {C1A[0]}), FPO/TDPO-2 {a[1]:.3f}x (<= {C1A[1]}): "
              f"{verdict(v['c1a_met'])}. C1b (memory): FPO/SimPO {b[0]:.3f}x (<= {C1B[0]}), FPO/TDPO-2 {b[1]:.3f}x "
              f"(<= {C1B[1]}): {verdict(v['c1b_met'])}.", "", _harness.setting_line(r)]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    _harness.main(NAME, ap.parse_args(), run, render)
