"""Pilot for C5's premise (issue 41), on pilot seed 100 (not a reported seed): is truth linearly decodable?

For each layer: an LR probe trained on true-vs-false twins of the training facts under the honest persona
(false = positive), its AUROC on the validation / test facts' twins (same persona) and on the test facts under
the dishonest persona; beside it C5's own number (the instructed-pairs probe, false vs true, min over personas,
on the held-out facts). Prints one JSON line per layer.

    .venv/bin/python scripts/deception_data/pilot_c5.py [--seed 100]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from trustlab.core.threads import limit_threads
from trustlab.llm import load_model
from trustlab.methods.deception import (
    ActivationExtractor,
    DeceptionProbe,
    auroc,
    instructed_pairs,
    persona_statements,
    split_dialogues,
)

ap = argparse.ArgumentParser()
ap.add_argument("--seed", type=int, default=100)
ap.add_argument("--layers", default="3,6,9,12,15,18,21,24,27")
args = ap.parse_args()
layers = [int(x) for x in args.layers.split(",")]
with limit_threads(1):
    lm = load_model("smollm2-135m-instruct")
    ex = ActivationExtractor(lm.model, lm.tokenizer, layers=layers, batch_size=16)
    inst, tf = instructed_pairs(), persona_statements()
    t0 = time.perf_counter()
    both = ex(inst + tf)
    print(json.dumps({"extract_s": round(time.perf_counter() - t0, 1), "n": len(inst) + len(tf)}), flush=True)
    ia, ta = both.subset(np.arange(len(inst))), both.subset(np.arange(len(inst), len(inst) + len(tf)))
    tr, va, te = split_dialogues(inst, (0.6, 0.2, 0.2), random_state=args.seed)
    fact = np.array([d.meta["fact"] for d in tf])
    persona = np.array([d.meta["persona"] for d in tf])
    truth = np.array([d.meta["true"] for d in tf])
    part = {name: {int(inst[i].meta["pair"]) for i in idx} for name, idx in (("train", tr), ("val", va), ("test", te))}
    held = part["val"] | part["test"]

    def rows(facts, p):
        return np.nonzero(np.isin(fact, list(facts)) & (persona == p))[0]

    for layer in layers:
        ip = DeceptionProbe(layer=layer, reg_coeff=10.0).fit(ia.subset(tr), ia.subset(tr).labels)
        trn = rows(part["train"], "honest")
        y = np.where(truth[trn], "honest", "deceptive")
        tp = DeceptionProbe(layer=layer, reg_coeff=10.0).fit(ta.subset(trn), y)
        out = {"layer": layer}
        for name, idx in (("val", rows(part["val"], "honest")), ("test", rows(part["test"], "honest")),
                          ("test_dishonest_persona", rows(part["test"], "dishonest"))):
            s = tp.score_samples(ta.subset(idx))
            out[f"truth_probe_{name}"] = round(auroc(s[truth[idx]], s[~truth[idx]]), 3)
        c5 = []
        for p in ("honest", "dishonest"):
            idx = rows(held, p)
            s = ip.score_samples(ta.subset(idx))
            c5.append(auroc(s[truth[idx]], s[~truth[idx]]))
        out["c5_instructed_probe"] = [round(v, 3) for v in c5]
        print(json.dumps(out), flush=True)
