"""Executor tasks of experiment ``softshape`` (issue 46): one fit per task, run through ``RunContext.map``.

A task fits one model (a P1 fit, a claim 4/5 comparison fit or a P2 fold) on the data the driver loaded and
returns its record; the P1 SoftShape fit on GunPoint, first seed, also returns claim 3's faithfulness summary
(the model stays in the task). Tasks do not touch the run context. Each warms the baselines' numba kernels once
per process, then fits with torch/BLAS limited to ``cfg.threads`` (set after the warm-up: aeon's fits reset
thread counts to the machine's cores) and its own warning filter (a worker inherits neither from the driver).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from trustlab.experiments.softshape import (
    VARIANTS,
    Config,
    _acc,
    _baseline,
    _faithfulness,
    _fit_record,
    _pad_for,
    _softshape,
)
from trustlab.results.result import Result

_WARMED: dict[tuple[Any, ...], float] = {}


def warm_once(cfg: Config) -> float:
    """Compile the baselines' numba kernels on a tiny set, once per process (cached on disk by aeon); the
    seconds the first warm-up took."""
    key = (tuple(cfg.baselines), cfg.minirocket_kernels)
    if key not in _WARMED:
        t0 = time.perf_counter()
        rng = np.random.default_rng(0)
        X, y = rng.normal(size=(10, 1, 30)), np.repeat([0, 1], 5)
        for name in cfg.baselines:
            if name in ("MiniRocket", "RDST"):
                _baseline(name, cfg, 0).fit(X, y).predict(X)
        _WARMED[key] = time.perf_counter() - t0
    return _WARMED[key]


def fit_items(cfg: Config) -> list[tuple[str, str, int, str]]:
    """Every fit of the run as ``(stage, data set, seed or P2 fold, method)``, in the serial loops' order:
    P1 (SoftShape, its ablations, the baselines), then claims 4/5 fits P1 did not make, then the P2 folds."""
    p1 = []
    for name in dict.fromkeys(cfg.claim1_datasets + cfg.ablation_datasets):
        for i, seed in enumerate(cfg.seeds):
            p1.append(("P1", name, seed, "soft"))
            if name in cfg.ablation_datasets and i < cfg.ablation_seeds:
                p1 += [("P1", name, seed, v) for v in cfg.ablations]
            p1 += [("P1", name, seed, b) for b in cfg.baselines if name in cfg.claim1_datasets or b == "MiniRocket"]
    made = {(n, s, m) for _, n, s, m in p1}
    names = cfg.compare_univariate + cfg.compare_multivariate + cfg.compare_synthetic
    methods = ("soft", "InceptionTimeLite") + ((cfg.compare_variant,) if cfg.compare_variant else ())
    c4 = [("C4", n, s, m) for n in names for s in cfg.seeds[:cfg.compare_seeds] for m in methods
          if (n, s, m) not in made]
    p2 = [("P2", n, f, m) for n in cfg.p2_datasets for f in range(cfg.p2_folds) for m in ("soft", "MiniRocket")]
    return p1 + c4 + p2


def fit_job(cfg: Config, data: dict[str, Any], item: tuple[str, str, int, str]
            ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """One fit (a task of ``ctx.map``): its records and, for the P1 SoftShape fit on GunPoint with the first
    seed, claim 3's faithfulness summary (else None)."""
    import warnings

    import torch  # noqa: F401 - imported before the thread limit below, so that it covers torch's threads

    from trustlab.core.threads import limit_threads

    res = Result("softshape", "", {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warm_once(cfg)  # before the limit: aeon's fits reset torch's and BLAS' thread counts (to the cores)
        with limit_threads(cfg.threads):
            return _fit_one(cfg, res, item, data[item[1]])


def _fit_one(cfg: Config, res: Result, item: tuple[str, str, int, str], d: tuple[Any, Any, Any, Any]
             ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    stage, name, seed, method = item
    if stage == "P2":
        _p2_fold(cfg, res, name, seed, method, d)
        return res.records, None
    pad = _pad_for(name, d) if stage == "C4" else {}
    est = (_softshape(cfg, name, seed, **pad, **VARIANTS[method]) if method in VARIANTS
           else _baseline(method, cfg, seed, **pad))
    _fit_record(res, est, name, seed, method, d, claim=stage)
    first_gunpoint = (stage, name, seed, method) == ("P1", "GunPoint", cfg.seeds[0], "soft")
    return res.records, _faithfulness(cfg, est, d) if first_gunpoint else None


def _p2_fold(cfg: Config, res: Result, name: str, fold: int, method: str, d: tuple[Any, Any, Any, Any]) -> None:
    """P2, the paper's merged 5-fold 60/20/20 protocol: one fold of one method (validation split for early
    stopping carved from the fold's training part)."""
    from trustlab.methods.softshape import p2_splits

    X, y = np.concatenate([d[0], d[2]]), np.concatenate([d[1], d[3]])
    split = next(s for s in p2_splits(y, 5, random_state=cfg.seeds[0], max_folds=cfg.p2_folds) if s.fold == fold)
    idx = np.concatenate([split.train, split.val])
    frac = len(split.val) / len(idx)
    est = (_softshape(cfg, name, cfg.seeds[0], validation_fraction=round(frac, 4)) if method == "soft"
           else _baseline(method, cfg, cfg.seeds[0]))
    est.fit(X[idx], y[idx])
    res.add(protocol="P2", dataset=name, seed=cfg.seeds[0], fold=split.fold, method=method,
            metric="accuracy", value=_acc(est, X[split.test], y[split.test]))
