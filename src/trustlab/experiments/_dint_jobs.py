"""The independent units of experiment ``dint`` as executor tasks (issue 46): the zero-shot evaluation and every
(arm, layer, seed) intervention fit with its evaluations. A worker process loads the frozen backbone, the tasks
and the evaluator (with its replay caches) once (:func:`setup`, cached per config) and reuses them across its
tasks; an intervention is applied only inside each evaluation and restored, so every task starts clean."""

from __future__ import annotations

import functools
import time
from typing import Any


@functools.lru_cache(maxsize=1)
def setup(cfg: Any) -> tuple[Any, Any, dict[str, Any], Any, float]:
    """(model, tokenizer, tasks, evaluator, load seconds) of ``cfg``, built under global RNGs seeded with the
    run's first seed (the same in every worker, whichever task asks first)."""
    from trustlab.core.seeding import isolated_global_rng
    from trustlab.experiments.dint import _load, _tasks
    from trustlab.methods.dint import InterventionEvaluator

    with isolated_global_rng(cfg.seeds[0]):
        t0 = time.perf_counter()
        model, tok = _load(cfg)
        load_s = time.perf_counter() - t0
        tasks = _tasks(cfg)
        ev = InterventionEvaluator(model, tok, batch_size=20, system=cfg.system)
    return model, tok, tasks, ev, load_s


def unit_job(cfg: Any, unit: tuple[str, int, int]) -> dict[str, Any]:
    """One unit ``(arm, layer, seed)`` (a task of ``ctx.map``; arm ``"zero_shot"``: the model without an
    intervention): its records, its timings and the worker's load seconds. The backbone stays here."""
    from trustlab.experiments.dint import _arm
    from trustlab.results.result import Result

    model, tok, tasks, ev, load_s = setup(cfg)
    res = Result("dint", "", {})
    timing: dict[str, float] = {}
    items: dict[str, list[float]] = {}
    arm, layer, seed = unit
    if arm == "zero_shot":
        zs = ev.item_scores(tasks["test"])
        items["zero_shot|-1|-1|deterministic|clean"] = [float(x) for x in zs]
        res.add(arm="zero_shot", layer=-1, seed=-1, metric="accuracy", perturbation="clean", level=0.0,
                inference="deterministic", value=float(zs.mean()))
        seen = set(tasks["train"].prompts)  # how many test prompts also occur in training
        out = {"test_in_train": sum(p in seen for p in tasks["test"].prompts) / len(tasks["test"])}
    else:
        _arm(cfg, res, ev, model, tok, tasks, arm, layer, seed, timing, items)
        out = {}
    return {"records": res.records, "timing": timing, "load_s": load_s, "items": items, **out}
