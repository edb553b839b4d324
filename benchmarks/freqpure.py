"""FreqPure speed: purification images/s of FreqPure vs DiffPure at equal steps, and the cost per image of
PGD-EOT through the purifier (full gradient, surrogate process, BPDA).

Standalone: ``python benchmarks/freqpure.py [--repeats 3] [--threads 1]`` (harness options: ``--json PATH``,
``--no-docs``, ``--render-only``). DiffPure and the two FreqPure variants run alternately (medians of ``--repeats``
after a warm-up); each attack is timed once. Target (issue 18): FreqPure <= 1.2x DiffPure's time at equal steps
(the FFT work is small). FreqPure's default reference is recomputed at every reverse step (one more network call
per step, as the released code does), so it is measured both that way and with one reference per round
(``reference_refresh="round"``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import _harness  # noqa: E402

NAME = "freqpure"
N_IMAGES = 64
NOTES = """**The 1.2x target is missed** with the released code's reference at every step: it recomputes the
one-step-denoised reference at every reverse step, one extra network call per step, so FreqPure's default costs
about 2x DiffPure by construction (not the FFT). With one reference per round (`reference_refresh="round"`) the
FFT guidance (two FFTs and an inverse per step) costs about a third of a network call of this tiny UNet; with a
CIFAR- or ImageNet-sized UNet it would be a far smaller share.

History (pre-harness script, `--repeats 3 --threads 2`, 2026-12-01, timings not alternating): t* 300 / 10 steps:
DiffPure 138.1 img/s, FreqPure 54.5 (2.53x) and 91.6 per round (1.51x); t* 50 / 5 steps: 207.8, 112.2 (1.85x),
184.3 (1.13x). Attacks (ms per image per step x EOT sample), DiffPure / FreqPure: full-gradient 21.0 / 37.8,
surrogate 4.9 / 10.2, BPDA 11.2 / 20.3."""


def purification(bench: _harness.Bench, X: np.ndarray, repeats: int) -> list[dict]:
    from trustlab.methods.freqpure import DiffPure, FreqPure

    rows = []
    for t_star, steps in ((300, 10), (50, 5)):
        kw = {"t_star": t_star, "steps": steps, "rounds": 1, "random_state": 0}
        t = bench.compare({
            "diffpure": lambda kw=kw: DiffPure(**kw).transform(X),
            "freqpure_step": lambda kw=kw: FreqPure(r_amp=1.5, r_phase=1.5, votes=1, **kw).transform(X),
            "freqpure_round": lambda kw=kw: FreqPure(r_amp=1.5, r_phase=1.5, votes=1, reference_refresh="round",
                                                     **kw).transform(X)}, repeat=repeats,
            key=f"purification t*={t_star} steps={steps}")
        t_d, t_fs, t_fr = (t[k]["wall"] for k in ("diffpure", "freqpure_step", "freqpure_round"))
        rows.append(dict(t_star=t_star, steps=steps, diffpure_img_s=len(X) / t_d, freqpure_step_img_s=len(X) / t_fs,
                         freqpure_round_img_s=len(X) / t_fr, ratio_step=t_fs / t_d, ratio_round=t_fr / t_d))
    return rows


def attacks(bench: _harness.Bench, X: np.ndarray, y: np.ndarray) -> list[dict]:
    from trustlab.methods.freqpure import BPDAEOT, PGDEOT, DiffPure, FreqPure, SurrogatePGDEOT
    from trustlab.methods.freqpure._attacks import _tiny_classifier

    clf = _tiny_classifier()
    rows = []
    sched = {"t_star": (20, 50), "steps": (5, 5), "rounds": (1, 1), "votes": 1}
    for name, pur in (("DiffPure", DiffPure(**sched)), ("FreqPure", FreqPure(r_amp=1.5, r_phase=1.5, **sched))):
        for atk in (PGDEOT(classifier=clf, purifier=pur, steps=2, eot=1, random_state=0),
                    SurrogatePGDEOT(classifier=clf, purifier=pur, steps=2, eot=1, random_state=0),
                    BPDAEOT(classifier=clf, purifier=pur, steps=2, eot=1, random_state=0)):
            _, wall = bench.once(f"{name} {type(atk).__name__}", lambda atk=atk: atk.generate((X, y), 0.1))
            rows.append(dict(defence=name, attack=type(atk).__name__, ms_per_image_per_step_eot=1e3 * wall / len(X) / 2))
    return rows


def run(bench: _harness.Bench, repeats: int, threads: int) -> None:
    from trustlab.methods.freqpure import digits16_split

    _, _, Xte, yte = digits16_split(0)
    X, y = Xte[:N_IMAGES], yte[:N_IMAGES]
    with _harness.threads(threads):
        pur = purification(bench, X, repeats)
        att = attacks(bench, X, y)
    bench.put(purification=pur, attacks=att, threads=threads, n_images=N_IMAGES)
    print(f"purification of {N_IMAGES} 16x16 digits ({threads} thread(s), median of {repeats}):")
    print(f"{'t*':>4} {'steps':>5} {'DiffPure img/s':>15} {'FreqPure img/s':>15} {'ratio':>6} "
          f"{'FreqPure/round img/s':>21} {'ratio':>6}")
    for r in pur:
        print(f"{r['t_star']:>4} {r['steps']:>5} {r['diffpure_img_s']:>15.1f} {r['freqpure_step_img_s']:>15.1f} "
              f"{r['ratio_step']:>6.2f} {r['freqpure_round_img_s']:>21.1f} {r['ratio_round']:>6.2f}")
    print("attack cost, schedule (20, 5) + (50, 5), ms per image per (step x EOT sample):")
    for r in att:
        print(f"  {r['defence']:>8} {r['attack']:>16} {r['ms_per_image_per_step_eot']:>8.1f}")
    worst, worst_step = max(r["ratio_round"] for r in pur), max(r["ratio_step"] for r in pur)
    bench.print_ratio("FreqPure / DiffPure, one reference per round (worst)", worst, "<= 1.2x", worst <= 1.2)
    bench.print_ratio("FreqPure / DiffPure, reference every step (the released code, worst)", worst_step, "<= 1.2x",
                      worst_step <= 1.2)


def render(result: dict[str, Any]) -> str:
    p, v = result["params"], result["values"]
    lines = ["## FreqPure", "",
             f"`benchmarks/freqpure.py --repeats {p['repeats']} --threads {p['threads']}` ({v['n_images']} test digits "
             f"16x16, the shipped 127k-parameter DDPM, medians of {p['repeats']} after a warm-up, the three purifiers "
             "alternating). Target (issue 18): FreqPure <= 1.2x DiffPure's time at equal steps.", "",
             "| t*, steps | DiffPure img/s | FreqPure img/s (reference every step, the released code) | ratio | "
             "FreqPure img/s (one reference per round) | ratio |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['t_star']}, {r['steps']} | {r['diffpure_img_s']:.1f} | {r['freqpure_step_img_s']:.1f} | "
              f"{r['ratio_step']:.2f}x | {r['freqpure_round_img_s']:.1f} | {r['ratio_round']:.2f}x |"
              for r in v["purification"]]
    worst, worst_step = max(r["ratio_round"] for r in v["purification"]), max(r["ratio_step"] for r in v["purification"])
    lines += ["", f"Worst ratio: reference every step {worst_step:.2f}x (target: "
              f"{'met' if worst_step <= 1.2 else 'missed'}), one reference per round {worst:.2f}x ("
              f"{'met' if worst <= 1.2 else 'missed'}).", "",
              "Attack cost, multi-round schedule (20, 5) + (50, 5), ms per image per (PGD step x EOT sample), each "
              "attack timed once:", "", "| defence | full-gradient PGD-EOT | surrogate PGD-EOT (50, 1) | BPDA-EOT |",
              "|---|---:|---:|---:|"]
    by = {(r["defence"], r["attack"]): r["ms_per_image_per_step_eot"] for r in v["attacks"]}
    for d in dict.fromkeys(r["defence"] for r in v["attacks"]):
        lines.append(f"| {d} | {by[(d, 'PGDEOT')]:.1f} | {by[(d, 'SurrogatePGDEOT')]:.1f} | {by[(d, 'BPDAEOT')]:.1f} |")
    return "\n".join(lines + ["", NOTES, "", _harness.setting_line(result)])


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    _harness.main(NAME, a, lambda b: run(b, a.repeats, a.threads), render)
