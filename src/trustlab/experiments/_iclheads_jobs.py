"""Executor tasks of experiment ``iclheads`` (issue 46): the head-ablation sweep on one held-out task.

The model stays where the task runs: :func:`load_eager` loads it once per process (cached), so a worker loads
it on its first task and the driver's own run shares it. A task is handed the head sets and the mean head
activations (small arrays) and returns plain data (records, the clean accuracy, the drop of every condition).
Ablations are context managers, so the cached model is left as it was.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from trustlab.results.result import Result


@functools.lru_cache(maxsize=1)
def load_eager(name: str) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of ``name`` with eager attention (the head hooks need it), once per process."""
    from trustlab.llm import load_model

    return load_model(name, attn_implementation="eager")


def ablation_job(cfg: Any, seed: int, conds: list[tuple[tuple[str, float, int], list[tuple[int, int]]]],
                 means: np.ndarray, item: tuple[int, str]) -> tuple[list[dict[str, Any]], float, dict]:
    """Held-out task ``name`` (``item = (index, name)``): 5-shot accuracy clean and under every ablation of
    ``conds`` (``(key, heads)``; key ``("fv_zero", ...)`` zero-ablates, every other mean-ablates with ``means``)."""
    from trustlab.methods import iclheads as ih

    ti, name = item
    model, tok = load_eager(cfg.model)
    res = Result("iclheads", "", {})
    train, test = ih.load_task(name).split(0.4, random_state=seed)
    prompts = ih.build_prompts(train, cfg.n_eval, cfg.n_shots, queries=test,
                               random_state=np.random.default_rng([seed, ti]))
    pp = ih.PreparedPrompts(model, [p.text for p in prompts], [ih.target_token(tok, p.answer) for p in prompts],
                            tokenizer=tok)
    acc0 = pp.accuracy()
    res.add(method="clean", dataset=name, seed=seed, metric="accuracy", value=acc0, fraction=0.0, draw=0)
    drops = {}
    for key, heads in conds:
        with ih.HeadAblation(heads=heads, kind="zero" if key[0] == "fv_zero" else "mean").apply(model, means=means):
            acc = pp.accuracy()
        drops[key] = acc0 - acc
        res.add(method=key[0], dataset=name, seed=seed, metric="accuracy", value=acc, fraction=key[1],
                draw=key[2], n_heads=len(heads))
    return res.records, acc0, drops
