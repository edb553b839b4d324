"""A deception probe on your own model and your own dialogues (the documented path of docs/papers/deception.md).

    python scripts/deception_own_model.py [--model gemma3-270m] [--layer 5] [--dialogues my_chats.jsonl]
                                          [--device cpu|cuda] [--cache-dir DIR]

Trains the LR probe on the shipped instructed pairs (60/20/20 split by pair), then reports the held-out
instructed-pairs AUROC, the true-vs-false AUROC under a fixed persona (what the probe detects) and, with
``--dialogues``, the scores of your own labelled dialogues. Activations are cached in ``--cache-dir`` (default:
trustlab's cache root), so a second run reads them instead of running the model.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

#: a Gemma-style turn template for base models that ship none (system text is put before the first user turn)
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}<start_of_turn>user\n{{ m['content'] }}\n\n"
    "{% elif m['role'] == 'user' %}{% if loop.index0 == 0 or messages[loop.index0 - 1]['role'] != 'system' %}"
    "<start_of_turn>user\n{% endif %}{{ m['content'] }}<end_of_turn>\n{% else %}<start_of_turn>model\n"
    "{{ m['content'] }}<end_of_turn>\n{% endif %}{% endfor %}"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma3-270m", help="a registered name, a .gguf file or an HF folder")
    ap.add_argument("--layer", type=int, default=None, help="default: about 27 %% of the depth (the paper's 22/80)")
    ap.add_argument("--dialogues", default=None, help="your own .json/.jsonl dialogues (labels honest/deceptive)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--n-facts", type=int, default=None, help="use only the first N facts (default: all 277)")
    args = ap.parse_args()

    from trustlab.core.threads import limit_threads
    from trustlab.llm import dims, load_model
    from trustlab.methods.deception import (
        ActivationExtractor,
        DeceptionProbe,
        auroc,
        instructed_pairs,
        label_masks,
        load_dialogues,
        persona_statements,
        split_dialogues,
    )

    with limit_threads(2 if args.device == "cpu" else None):
        t0 = time.perf_counter()
        lm = load_model(args.model, device=args.device)
        n_layers = dims(lm.model).n_layers
        layer = args.layer if args.layer is not None else max(1, round(0.27 * n_layers))
        print(f"loaded {args.model} ({n_layers} layers) in {time.perf_counter() - t0:.1f} s; probe layer {layer}")
        if getattr(lm.tokenizer, "chat_template", None) is None:
            print("the tokenizer has no chat template (a base model): using a Gemma-style turn template")
            lm.tokenizer.chat_template = GEMMA_TEMPLATE
        ex = ActivationExtractor(lm.model, lm.tokenizer, layers=[layer],
                                 cache_dir=args.cache_dir if args.cache_dir else True)
        inst = instructed_pairs(args.n_facts)
        t0 = time.perf_counter()
        acts = ex(inst)
        print(f"instructed pairs: {len(inst)} dialogues in {time.perf_counter() - t0:.1f} s "
              f"(read from cache: {ex.last_hits[layer]})")
        tr, va, te = split_dialogues(inst)
        train, test = acts.subset(tr), acts.subset(te)
        probe = DeceptionProbe(layer=layer).fit(train, train.labels)
        s = probe.score_samples(test)
        h, d = label_masks(test.labels)
        print(f"held-out instructed pairs AUROC: {auroc(s[h], s[d]):.3f}")

        held = {inst[i].meta["pair"] for i in np.concatenate([va, te])}
        tf = [x for x in persona_statements() if x.meta["fact"] in held]
        st = probe.score_samples(ex(tf))
        persona = np.array([x.meta["persona"] for x in tf])
        truth = np.array([x.meta["true"] for x in tf])
        print(f"persona AUROC (honest vs dishonest prompt): {auroc(st[persona == 'honest'], st[persona != 'honest']):.3f}")
        for p in ("honest", "dishonest"):
            m = persona == p
            print(f"false vs true statements, {p} persona: AUROC {auroc(st[m & truth], st[m & ~truth]):.3f}")
        if args.dialogues:
            own = load_dialogues(args.dialogues)
            so = probe.score_samples(ex(own))
            h, d = label_masks([x.label for x in own])
            print(f"your dialogues ({len(own)}): AUROC {auroc(so[h], so[d]):.3f}")


if __name__ == "__main__":
    main()
