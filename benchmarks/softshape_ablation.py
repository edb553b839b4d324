"""SoftShape ablation (issue 41): which part of SoftShape puts it below its own backbone, InceptionTimeLite?

Run: ``python benchmarks/softshape_ablation.py [--seed 7] [--sets ...] [--variants ...]`` (1 torch thread; under the
CPU lock). ``--render-only`` rewrites the docs table from the committed JSON without fitting anything.

Every fit runs on the P1 split of C4's seven sets (the experiment's ``_load``: GunPoint, ItalyPowerDemand,
ArrowHead, BasicMotions, JapaneseVowels padded to its longest series, and the synthetic two-channel sets
``shape_any_channel`` (the issue's set) and ``shape_channel_pair``), with the experiment's default schedule
(``Config()``: 150 epochs, warm-up 50, patience 30, D = 128) and one switch changed per variant:

- ``soft``: SoftShape as C4 runs it (the experiment's ``_softshape``);
- ``none``: sparsification off (every token kept, no warm-up: the KNOCKOUT);
- ``m/2`` / ``2m``: the shape length m halved (at least 2) / doubled (at most T), stride rule unchanged;
- ``no_moe``: the MoE branch off (it runs only in layer 2 after warm-up);
- ``no_inception``: the token Inception branch off;
- ``lr3e-3``: Adam's learning rate 3e-3 instead of 1e-3 (tests the under-training seen in C4's fits);
- ``InceptionTimeLite``: the backbone as C4 runs it (``_baseline``), and ``ITL lr3e-3`` with the same change.

Scale rule (written before the first fit): one model seed per set, the pilot seed 7, which is not one of the
experiment's reported seeds (0, 1, 2), so any default chosen from this table is not chosen on C4's seed; the data
are C4's (the synthetic sets are drawn from their fixed data seeds whatever the model seed). Every record keeps the
test and training accuracy, the epoch that was selected and the number run, and the fit time. Results are merged
into ``docs/papers/softshape_files/ablation.json`` after every fit (a rerun of one variant replaces its rows), and
the table between ``<!-- softshape-ablation:start -->`` and ``<!-- softshape-ablation:end -->`` of
``docs/papers/softshape.md`` is rendered from that JSON.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import _harness  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
JSON = ROOT / "docs" / "papers" / "softshape_files" / "ablation.json"
DOC = ROOT / "docs" / "papers" / "softshape.md"
START, END = "<!-- softshape-ablation:start -->", "<!-- softshape-ablation:end -->"
SETS = ("GunPoint", "ItalyPowerDemand", "ArrowHead", "BasicMotions", "JapaneseVowels", "shape_any_channel",
        "shape_channel_pair")
#: variant -> (model, overrides); "m" overrides are resolved from the set's default shape length
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "soft": ("softshape", {}),
    "none": ("softshape", {"sparsify": "none"}),
    "m/2": ("softshape", {"m": 0.5}),
    "2m": ("softshape", {"m": 2.0}),
    "no_moe": ("softshape", {"use_moe": False}),
    "no_inception": ("softshape", {"use_inception": False}),
    "lr3e-3": ("softshape", {"lr": 3e-3}),
    "InceptionTimeLite": ("itl", {}),
    "ITL lr3e-3": ("itl", {"lr": 3e-3}),
}
PILOT_SEED = 7


def _default_m(name: str, T: int) -> int:
    from trustlab.methods.softshape import PAPER_SHAPE_SIZES

    return int(PAPER_SHAPE_SIZES.get(name) or max(4, round(0.2 * T)))


def _estimator(cfg: Any, name: str, data: Any, variant: str, seed: int) -> tuple[Any, dict[str, Any]]:
    from trustlab.experiments import softshape as exp

    model, over = VARIANTS[variant]
    over = dict(over)
    pad = exp._pad_for(name, data)
    if model == "itl":
        return exp._baseline("InceptionTimeLite", cfg, seed, **pad, **over), over
    if "m" in over:
        T = pad.get("pad") or int(np.asarray(data[0]).shape[-1])
        over["shape_size"] = int(min(T, max(2, round(over.pop("m") * _default_m(name, T)))))
    return exp._softshape(cfg, name, seed, **pad, **over), over


def _fit(cfg: Any, name: str, data: Any, variant: str, seed: int) -> dict[str, Any]:
    est, over = _estimator(cfg, name, data, variant, seed)
    t0 = time.perf_counter()
    est.fit(data[0], data[1])
    fit_s = time.perf_counter() - t0
    h = est.history_
    rec = {"dataset": name, "variant": variant, "seed": seed, "test_acc": float(np.mean(est.predict(data[2]) == data[3])),
           "train_acc": float(np.mean(est.predict(data[0]) == data[1])), "epochs": h.n_epochs,
           "best_epoch": h.best_epoch, "stopped_early": h.stopped_early, "fit_s": fit_s,
           "min_val_loss": float(np.min(h.val_loss)), "overrides": over}
    if hasattr(est, "shape_size_"):
        rec.update(shape_size=est.shape_size_, stride=est.stride_, n_tokens=est.n_tokens_,
                   routing_collapsed=bool(est.routing_collapsed_))
    return rec


def _merge(rec: dict[str, Any] | None = None, run_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Read the JSON, replace ``rec``'s row (same set, variant, seed) or append ``run_info``, write it back
    (under a lock: two runs of this script may share the file)."""
    import fcntl

    from trustlab.core.files import atomic_write_text

    with open("/tmp/softshape_ablation.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = json.loads(JSON.read_text()) if JSON.exists() else {"records": [], "runs": []}
        if rec is not None:
            key = (rec["dataset"], rec["variant"], rec["seed"])
            result["records"] = [r for r in result["records"]
                                 if (r["dataset"], r["variant"], r["seed"]) != key] + [rec]
        if run_info is not None:
            result["runs"].append(run_info)
        atomic_write_text(JSON, json.dumps(result, indent=1) + "\n")
    return result


def run(seed: int, sets: list[str], variants: list[str]) -> dict[str, Any]:
    import warnings

    from trustlab.experiments import softshape as exp

    cfg = exp.Config()
    start = {**_harness.setting(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    t0 = time.perf_counter()
    with _harness.threads(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = {n: exp._load(n, cfg) for n in sets}
        for variant in variants:
            for name in sets:
                rec = _fit(cfg, name, data[name], variant, seed)
                print(f"{variant:18s} {name:20s} test {rec['test_acc']:.3f} train {rec['train_acc']:.3f} "
                      f"best {rec['best_epoch']}/{rec['epochs']} {rec['fit_s']:.1f} s", flush=True)
                _merge(rec)
    return _merge(run_info={"setting": start, "variants": variants, "sets": sets, "seed": seed,
                           "commit": _harness._git_commit(), "total_s": time.perf_counter() - t0,
                           "schedule": {"epochs": cfg.epochs, "warm_up_epochs": cfg.warm_up_epochs,
                                        "patience": cfg.patience, "d_model": cfg.d_model}})


def render(result: dict[str, Any]) -> str:
    """The markdown table (test accuracy per set and variant, mean over sets, gap to the backbone)."""
    recs = result["records"]
    variants = [v for v in VARIANTS if any(r["variant"] == v for r in recs)]
    sets = [s for s in SETS if any(r["dataset"] == s for r in recs)]
    acc = {(r["dataset"], r["variant"]): r for r in recs}
    lines = ["| data set | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
    for s in sets:
        cells = [f"{acc[(s, v)]['test_acc']:.3f}" if (s, v) in acc else "–" for v in variants]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    means = {v: [acc[(s, v)]["test_acc"] for s in sets if (s, v) in acc] for v in variants}
    full = {v: float(np.mean(m)) for v, m in means.items() if len(m) == len(sets)}
    lines.append("| **mean** | " + " | ".join(f"**{full[v]:.3f}**" if v in full else "–" for v in variants) + " |")
    if "soft" in full:
        lines.append("| mean − soft | " + " | ".join(f"{full[v] - full['soft']:+.3f}" if v in full else "–"
                                                     for v in variants) + " |")
    train = {v: [acc[(s, v)]["train_acc"] for s in sets if (s, v) in acc] for v in variants}
    lines.append("| mean train acc. | " + " | ".join(f"{np.mean(t):.3f}" if len(t) == len(sets) else "–"
                                                   for t in train.values()) + " |")
    capped = {v: sum(acc[(s, v)]["best_epoch"] >= acc[(s, v)]["epochs"] - 5 and not acc[(s, v)]["stopped_early"]
                     for s in sets if (s, v) in acc) for v in variants}
    lines.append("| sets still improving at the cap¹ | " + " | ".join(str(c) for c in capped.values()) + " |")
    fit_s = {v: sum(acc[(s, v)]["fit_s"] for s in sets if (s, v) in acc) for v in variants}
    lines.append("| fit time, all sets (s) | " + " | ".join(f"{t:.0f}" for t in fit_s.values()) + " |")
    lines += _committed_c4(sets)
    runs = result.get("runs", [])
    sched = runs[-1]["schedule"] if runs else {}
    seeds = sorted({r["seed"] for r in recs})
    commits = sorted({r["commit"] for r in runs})
    total = sum(r["total_s"] for r in runs)
    foot = (f"\nP1 test accuracy, model seed {', '.join(map(str, seeds))} (the pilot seed, not a reported one), "
            f"schedule {sched.get('epochs')} epochs / warm-up {sched.get('warm_up_epochs')} / patience "
            f"{sched.get('patience')}, D = {sched.get('d_model')}, 1 torch thread; measured at commit(s) "
            f"{', '.join(commits)}, {total:.0f} s of fitting in {len(runs)} run(s). ¹ the selected epoch is within 5 "
            "of the last one run and early stopping never fired. Generated by `benchmarks/softshape_ablation.py` "
            "from `softshape_files/ablation.json`.")
    return "\n".join(lines) + "\n" + foot


def _committed_c4(sets: list[str]) -> list[str]:
    """C4's seed-0 accuracies (soft / InceptionTimeLite) from the committed default-mode result, for scale."""
    path = JSON.parent / "default.json"
    if not path.exists():
        return []
    recs = json.loads(path.read_text())["records"]
    got = {(r["dataset"], r["method"]): r["value"] for r in recs
           if r.get("protocol") == "P1" and r.get("seed") == 0 and r["method"] in ("soft", "InceptionTimeLite")}
    if not all((s, m) in got for s in sets for m in ("soft", "InceptionTimeLite")):
        return []
    cells = [f"{got[(s, 'soft')]:.3f} / {got[(s, 'InceptionTimeLite')]:.3f}" for s in sets]
    mean = (f"{np.mean([got[(s, 'soft')] for s in sets]):.3f} / "
            f"{np.mean([got[(s, 'InceptionTimeLite')] for s in sets]):.3f}")
    return ["", "C4's committed default run (model seed 0, `default.json`), SoftShape / InceptionTimeLite: "
            + ", ".join(f"{s} {c}" for s, c in zip(sets, cells)) + f"; mean {mean}."]


def write_docs(body: str) -> None:
    from trustlab.core.files import atomic_write_text

    doc = DOC.read_text(encoding="utf-8")
    block = f"{START}\n{body.strip()}\n{END}"
    if START in doc and END in doc:
        doc = doc[: doc.index(START)] + block + doc[doc.index(END) + len(END):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    atomic_write_text(DOC, doc)


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=PILOT_SEED)
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--render-only", action="store_true")
    args = ap.parse_args()
    result = json.loads(JSON.read_text()) if args.render_only else run(args.seed, args.sets, args.variants)
    write_docs(render(result))


if __name__ == "__main__":
    main()
