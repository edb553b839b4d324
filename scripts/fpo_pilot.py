"""Pilot for experiment ``fpo`` under issue 47: preference pairs without a length shortcut (seed 100, not reported).

The rule, written before this script first ran (2026-12-07):

Candidates, in this order, each with ``rambling_fraction = 0`` and ``match_length = True`` (every rejected
response is a wrong answer of the chosen answer's character count) and the default sizes (400 pairs, 80 held
out, facts disjoint):

    A  tasks = arithmetic, capitals, units, one_word
    B  tasks = arithmetic, units
    C  tasks = arithmetic

1. For every candidate (and, for reference, the pre-issue-47 data: all four tasks, 40 % rambling rejects, no
   length matching) build the data with seed 100 and measure how often the base model (SmolLM2-135M-Instruct,
   adapters off) ranks the chosen response above the rejected one on the held-out pairs, by summed and by
   per-token log-probability. A candidate passes this step when both are <= 0.65 (premise pre-no-shortcut).
2. Walk the passing candidates in order: train DPO with the default config (LoRA r 8 on the top 4 blocks,
   40 steps x 8 pairs, lr 2e-4, 4 warm-up steps, beta 0.1, seed 100) and measure its held-out accuracy (summed
   implicit-reward margin > 0). The first candidate with accuracy in [0.65, 0.95] (premise pre-dpo-learns) is
   the setting of the default run; the walk stops there.
3. If none qualifies, walk the passing candidates again with 80 steps (the only other knob tried); the first
   that qualifies is chosen with steps = 80.
4. If still none qualifies, no 2-core setting in this grid makes both premises hold: the default run uses the
   passing candidate with the highest step-2 accuracy (its claims will be VOID) and the docs show this grid.

Writes ``docs/papers/fpo_files/pilot_issue47.json``. Run: ``OMP_WAIT_POLICY=PASSIVE .venv/bin/python
scripts/fpo_pilot.py`` (1 thread, ~10 min).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

SEED = 100
OUT = Path(__file__).resolve().parents[1] / "docs" / "papers" / "fpo_files" / "pilot_issue47.json"
CANDIDATES = {"A": ("arithmetic", "capitals", "units", "one_word"), "B": ("arithmetic", "units"), "C": ("arithmetic",)}
SHORTCUT_MAX, LEARN = 0.65, (0.65, 0.95)


def _cfg(tasks: tuple[str, ...], matched: bool = True, steps: int = 40) -> Any:
    from trustlab.experiments.fpo import Config

    return Config(seeds=(SEED,), tasks=tasks, rambling_fraction=0.0 if matched else 0.4, match_length=matched,
                  steps=steps, n_gen=0)


def _base(model: Any, tok: Any, cfg: Any) -> tuple[dict[str, float], dict[str, Any]]:
    from trustlab.experiments import _fpo_jobs as J
    from trustlab.llm import PolicyForward, ReferenceCache

    d = J.data(cfg, tok)
    ref = ReferenceCache.compute(PolicyForward(model, d["held"].sequences))
    return J.base_ranking(ref, d["held"].n_pairs), d


def _dpo(model: Any, d: dict[str, Any], cfg: Any) -> dict[str, float]:
    from trustlab.llm import PolicyForward, PreferenceObjective, ReferenceCache, preference_accuracy, train

    fwd, fwd_h = PolicyForward(model, d["pairs"].sequences), PolicyForward(model, d["held"].sequences)
    obj = PreferenceObjective(fwd, d["pairs"], loss="dpo", beta=cfg.beta, reference=ReferenceCache.compute(fwd))
    hist = train(model, obj, steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr, warmup_steps=cfg.warmup_steps,
                 random_state=SEED)
    ref_h = ReferenceCache.compute(fwd_h)
    acc = preference_accuracy(fwd_h, d["held"], reference=ref_h, beta=cfg.beta).accuracy
    acc_n = preference_accuracy(fwd_h, d["held"], reference=ref_h, beta=cfg.beta, length_normalized=True).accuracy
    return {"steps": cfg.steps, "accuracy": acc, "accuracy_norm": acc_n, "loss_last3": sum(hist.loss[-3:]) / 3}


def main() -> None:
    import torch

    from trustlab.experiments import _fpo_jobs as J
    from trustlab.llm import add_lora, reset_lora

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    base_cfg = _cfg(CANDIDATES["A"])
    model, tok = J.load(base_cfg)
    pol = add_lora(model, layers=base_cfg.lora_layers, r=base_cfg.lora_r, alpha=base_cfg.lora_alpha,
                   random_state=SEED)
    out: dict[str, Any] = {"seed": SEED, "rule": __doc__.split("The rule,")[1].split("Writes")[0].strip(), "rows": {}}
    ref_rank, _ = _base(pol, tok, _cfg(CANDIDATES["A"], matched=False))
    out["rows"]["pre-issue-47 data"] = {"tasks": list(CANDIDATES["A"]), "base": ref_rank}
    data = {}
    for name, tasks in CANDIDATES.items():
        rank, data[name] = _base(pol, tok, _cfg(tasks))
        out["rows"][name] = {"tasks": list(tasks), "base": rank,
                             "passes_base": max(rank["summed"], rank["normalised"]) <= SHORTCUT_MAX, "dpo": []}
        print(name, rank, flush=True)
    chosen = None
    for steps in (40, 80):
        for name in CANDIDATES:
            row = out["rows"][name]
            if chosen or not row["passes_base"]:
                continue
            reset_lora(pol, SEED)
            res = _dpo(pol, data[name], _cfg(CANDIDATES[name], steps=steps))
            row["dpo"].append(res)
            print(name, res, flush=True)
            if LEARN[0] <= res["accuracy"] <= LEARN[1]:
                chosen = {"candidate": name, "steps": steps}
        if chosen:
            break
    if chosen is None:
        tried = [(r["dpo"][0]["accuracy"], n) for n, r in out["rows"].items() if r.get("dpo")]
        chosen = {"candidate": max(tried)[1], "steps": 40, "premises_hold": False} if tried else None
    out["chosen"] = chosen
    out["wall_s"] = time.perf_counter() - t0
    out["threads"] = torch.get_num_threads()
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print("chosen:", chosen, f"({out['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
