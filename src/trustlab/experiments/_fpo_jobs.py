"""The independent units of experiment ``fpo`` as executor tasks (issue 46): every (method, seed) training run
with its held-out evaluation. A worker process builds the backbone, the LoRA policy, the replay, reference and
feature caches and the SAE once (:func:`setup`, cached per config) and reuses them across its tasks; each task
starts from the seed's freshly reset LoRA and returns records (and, for FPO's first seed, the trained adapter
that C4 checks) only. The backbone stays in the worker."""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=1)
def setup(cfg: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's state (``fpo._setup``) and the summary entries it reports (SAE, data), built under global RNGs
    seeded with the run's first seed, so every worker builds the same state whichever task asks first."""
    from trustlab.core.seeding import isolated_global_rng
    from trustlab.experiments.fpo import _setup
    from trustlab.results.result import Result

    res = Result("fpo", "", {})
    with isolated_global_rng(cfg.seeds[0]):
        st = _setup(cfg, res)
    return st, dict(res.summary)


def unit_job(cfg: Any, unit: tuple[str, int]) -> dict[str, Any]:
    """One ``(method, seed)`` run: its records, FPO's feature-term share and FPO's trained adapter (first seed
    only; ``None`` otherwise, as the share)."""
    from trustlab.experiments.fpo import _one
    from trustlab.results.result import Result

    st, _ = setup(cfg)
    res = Result("fpo", "", {})
    method, seed = unit
    _one(cfg, res, st, method, seed)
    state = st.pop("fpo_state", None)
    return {"records": res.records, "feature_term": res.summary.get("feature_term"), "fpo_state": state}
