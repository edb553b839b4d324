"""Benchmark: training-step time of a ReFT intervention at a late block (replay) vs layer 0 (full backward),
and the trainable-parameter count of each arm vs LoRA (issue 26, "Performance").

Run: ``OMP_NUM_THREADS=1 python benchmarks/dint.py [--steps 6] [--train-steps 0]`` (``--json PATH`` (``--out`` is
its old name) / ``--no-docs`` / ``--render-only``: the harness's options). Writes the "D-Intervention" section
of ``docs/benchmarks.md``.

Setting: SmolLM2-135M-Instruct, ArithLite prompts (chat template), batch 8, rank 8 at f4+l4. Timed: the median
optimizer step of ``fit_intervention`` (after one warm-up step) for LoReFT and D-ReFT at layer 0 and at block
27, and of LoRA r=8 on q_proj/v_proj of every block (peft via ``trustlab.llm.add_lora``, the PEFT reference)
with the same trainer. With ``--train-steps N`` each arm also trains N steps and reports its exact match on
100 test problems, so the parameter counts can be read at the accuracy each reaches. Each arm's numbers are
also written, as it finishes, to ``<json>.partial.json`` (a run cut short keeps them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness  # noqa: E402

NAME = "dint"
ARMS = (("loreft@27", "LoReFT @ block 27 (replay of 3 blocks)"),
        ("dreft@27", "D-ReFT @ block 27 (replay, official clamp, mean inference)"),
        ("loreft@0", "LoReFT @ layer 0 (full backward)"), ("dreft@0", "D-ReFT @ layer 0 (full backward)"),
        ("lora_qv_all_r8", "LoRA r=8, q/v of all 30 blocks (full backward)"))


def _lora(model, tok, train, test, steps, train_steps):
    from trustlab.llm import SFTObjective, add_lora
    from trustlab.llm import train as train_fn
    from trustlab.methods.dint import InterventionEvaluator, tokenize_task

    peft = add_lora(model, layers="all", modules=["q_proj", "v_proj"], r=8, alpha=16, random_state=0)
    obj = SFTObjective(peft, tokenize_task(model, train, tok), replay=None)
    h = train_fn(peft, obj, steps=steps + 1, batch_size=8, lr=4e-4, random_state=0)
    out = {"n_params": h.n_trainable, "step_s": h.median_step_time(1)}
    if train_steps:
        train_fn(peft, obj, steps=train_steps, batch_size=8, lr=4e-4, random_state=1)
        out["accuracy"] = InterventionEvaluator(peft, tok, replay=False).accuracy(test)[0]
    peft.unload()
    return out


def _partial(bench: _harness.Bench, json_path: str | None) -> None:
    """What has been measured so far, beside the final JSON."""
    from trustlab.core.files import atomic_write_text, to_jsonable

    path = Path(json_path) if json_path else _harness.RESULTS / f"{NAME}.json"
    atomic_write_text(path.with_suffix(".partial.json"), json.dumps(to_jsonable(bench.result), indent=1))


def run(bench: _harness.Bench, json_path: str | None = None) -> None:
    from trustlab.llm import load_model
    from trustlab.methods.dint import DReFT, InterventionEvaluator, LoReFT, arith_lite, fit_intervention

    p = bench.result["params"]
    (model, tok), _ = bench.once("model load", load_model)
    train, test = arith_lite(64, random_state=0), arith_lite(100, split="test", random_state=1000)
    ev = InterventionEvaluator(model, tok, batch_size=25)
    arms: dict[str, dict[str, Any]] = {}
    bench.put(arms=arms)
    if p["train_steps"]:
        bench.put(zero_shot_accuracy=ev.accuracy(test)[0])
        print("zero-shot accuracy", bench.result["values"]["zero_shot_accuracy"], flush=True)
    for name, cls, layer in (("loreft@27", LoReFT, 27), ("dreft@27", DReFT, 27), ("loreft@0", LoReFT, 0),
                             ("dreft@0", DReFT, 0)):
        iv = cls(layer=layer, rank=8, random_state=0)
        fit, wall = bench.once(f"fit {name}", lambda iv=iv: fit_intervention(model, iv, train, tok,
                                                                             steps=p["steps"] + 1, batch_size=8, lr=3e-3))
        rec = {"n_params": fit.n_params, "step_s": fit.history.median_step_time(1), "fit_wall_s": wall}
        if p["train_steps"]:
            fit_intervention(model, iv, train, tok, steps=p["train_steps"], batch_size=8, lr=3e-3, random_state=1)
            rec["accuracy"] = ev.accuracy(test, iv, inference="mean" if cls is DReFT else None)[0]
        arms[name] = rec
        print(name, rec, flush=True)
        _partial(bench, json_path)
    arms["lora_qv_all_r8"] = _lora(model, tok, train, test, p["steps"], p["train_steps"])
    print("lora_qv_all_r8", arms["lora_qv_all_r8"], flush=True)
    for kind in ("loreft", "dreft"):
        bench.print_ratio(f"step time layer 0 / block 27 ({kind})",
                          arms[f"{kind}@0"]["step_s"] / arms[f"{kind}@27"]["step_s"])
    bench.print_ratio("trainable params LoRA / LoReFT", arms["lora_qv_all_r8"]["n_params"] / arms["loreft@0"]["n_params"])


def render(r: dict[str, Any]) -> str:
    v, p = r["values"], r["params"]
    a = v["arms"]
    acc = bool(p["train_steps"])
    pct = (lambda x: f"{100 * x:.0f} %") if acc else (lambda x: "-")
    head = f"exact match after {p['steps'] + 1} + {p['train_steps']} steps" if acc else "exact match (not trained)"
    lines = ["## D-Intervention (issue 26)", "",
             "`benchmarks/dint.py`: training-step time of LoReFT / D-ReFT at block 27 with top-3 replay vs at layer 0 "
             "with the full backward, and the trainable-parameter count of each arm vs LoRA r=8 on q_proj/v_proj of "
             "every block (peft, lr 4e-4)" + (", each arm then trained further and scored on 100 ArithLite test "
                                              "problems (exact match)" if acc else "")
             + f". SmolLM2-135M-Instruct, 64 training prompts, batch 8, rank 8 at f4+l4, lr 3e-3, median of "
             f"{p['steps']} timed steps after one warm-up step (`--steps {p['steps']} --train-steps "
             f"{p['train_steps']}`).", "",
             f"| arm | trainable params | median step (s) | {head} |", "|---|---|---|---|"]
    if acc:
        lines.append(f"| zero-shot | 0 | - | {pct(v['zero_shot_accuracy'])} |")
    lines += [f"| {label} | {a[k]['n_params']:,} | {a[k]['step_s']:.2f} | {pct(a[k]['accuracy']) if acc else '-'} |"
              for k, label in ARMS]
    lo, dr = a["loreft@0"]["step_s"] / a["loreft@27"]["step_s"], a["dreft@0"]["step_s"] / a["dreft@27"]["step_s"]
    lora_p = a["lora_qv_all_r8"]["n_params"] / a["loreft@0"]["n_params"]
    lines += ["", f"Ratios: step time layer 0 / block 27 **{lo:.1f}x** (LoReFT) and **{dr:.1f}x** (D-ReFT); LoRA has "
              f"**{lora_p:.0f}x** LoReFT's parameters ({a['lora_qv_all_r8']['n_params']:,} / "
              f"{a['loreft@0']['n_params']:,} = {lora_p:.2f}).", "", _harness.setting_line(r), "", NOTES]
    return "\n".join(lines)


NOTES = """Parameter counts: LoReFT 2·d·r + r, D-ReFT 3·d·r + 2r (d = 576, r = 8), LoRA 30 · 8 · (576 + 576 + 576 +
192) = 460,800 (50x LoReFT's 9,224).

History (before the harness). Measured 2026-12-01 18:43-18:56 UTC, git f874900, one CPU slot at 1 thread on the
shared, loaded 2-core machine: `OMP_NUM_THREADS=1 bash -c 'date -u; exec timeout 840 python benchmarks/dint.py --steps 6
--train-steps 20 --out benchmarks/results/dint.json'` (about 13 min in the slot). Median step / exact match after 7 +
20 steps: zero-shot 0 %; LoReFT @ block 27 0.47 s / 3 %; D-ReFT @ block 27 0.44 s / 3 %; LoReFT @ layer 0 4.13 s /
3 %; D-ReFT @ layer 0 4.91 s / 3 %; LoRA r=8 q/v of all blocks 4.29 s / 3 %. Ratios: step time layer 0 / block 27
8.7x (LoReFT) and 11.2x (D-ReFT); LoRA has 50x LoReFT's parameters and a step as slow as a layer-0 intervention.
"At equal accuracy" cannot be read off at this scale: every trained arm solved 3 of 100 problems (ArithLite is at
SmolLM2-135M's floor; see docs/papers/dint.md).

An earlier run in the same session with `--train-steps 40` (18:16, same command otherwise) was stopped by its
900 s timeout during the LoRA arm; the four intervention arms it finished gave median steps 0.42 s / 0.51 s
(LoReFT / D-ReFT at block 27) and 3.68 s / 4.43 s (layer 0), i.e. 8.7x both, and exact match after 7 + 40
steps of 2 %, 3 %, 4 %, 4 %. Before that, a three-step probe outside the CPU slots (batch 8 ArithLite prompts of
~62 tokens, 1 thread, a heavily loaded machine, 2026-12-01; the script had been written but not run in its session
because both slots were held by other sessions' jobs from 14:42 to at least 15:40 UTC) gave layer 0 about 5-10 s per
step and block 27 with replay about 0.9-1.1 s per step (roughly 5-10x; steps [10.4, 9.1, 5.2] s vs
[1.65, 0.88, 1.09] s); LoRA's accuracy at equal steps was not measured then."""


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--train-steps", type=int, default=0)
    ap.add_argument("--out", dest="json", default=None, help="old name of --json")
    args = ap.parse_args()
    _harness.main(NAME, args, lambda bench: run(bench, args.json), render)
