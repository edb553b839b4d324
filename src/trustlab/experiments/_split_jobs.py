"""Executor tasks of experiment ``split`` (issue 46): one (data set, seed) job, run through ``RunContext.map``.

A job binarizes its split, fits our methods and the baselines on it and returns its records and its row of
``summary["runs"]``; it does not touch the run context. The numba warm-up runs once per process before the
first timed fit, so a fresh worker's first job is not charged the compilation.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from trustlab.experiments.split import Config, _record, binary_split
from trustlab.results.result import Result


@functools.cache
def warm_up() -> float:
    """Fit once on tiny data so one-time numba compilation/loading is not charged to the first timed fit
    (once per process; the seconds it took)."""
    import numpy as np

    from trustlab.methods.split import LicketySPLITClassifier, SPLITClassifier

    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    X = (rng.random((64, 6)) < 0.5).astype(np.uint8)
    y = (X[:, 0] ^ X[:, 1]).astype(int)
    SPLITClassifier(depth_budget=3, lookahead_depth=2, binarize=False).fit(X, y)
    LicketySPLITClassifier(depth_budget=3, binarize=False).fit(X, y)
    return time.perf_counter() - t0


def dataset_seed_job(cfg: Config, have: dict[str, bool], job: tuple[str, int]) -> tuple[list[dict[str, Any]],
                                                                                         dict[str, Any]]:
    """One (data set, seed): its records and its row of ``summary["runs"]`` (a task of ``ctx.map``)."""
    warm_up()
    ds, seed = job
    res = Result("split", "", {})
    Btr, Bte, ytr, yte = binary_split(ds, seed, cfg)
    row: dict[str, Any] = {"dataset": ds, "seed": seed, "n_train": len(ytr), "p": int(Btr.shape[1]),
                           "majority": float(max(yte.mean(), 1 - yte.mean()))}
    _record(res, "data", ds, seed, n_train=len(ytr), n_binary_features=Btr.shape[1])
    fit_ours(res, row, cfg, (Btr, Bte, ytr, yte))
    fit_baselines(res, row, cfg, (Btr, Bte, ytr, yte), have)
    return res.records, row


def fit_ours(res: Result, row: dict[str, Any], cfg: Config, data: tuple[Any, Any, Any, Any]) -> None:
    """Greedy, both LicketySPLIT variants, SPLIT per lookahead and the exact solver on one binary split."""
    from trustlab.methods.split import GreedyTreeClassifier, LicketySPLITClassifier, SPLITClassifier

    Btr, Bte, ytr, yte = data
    ds, seed, d, lam = row["dataset"], row["seed"], cfg.depth_budget, cfg.reg
    ours: list[tuple[str, Any]] = [
        ("greedy", GreedyTreeClassifier(depth_budget=d, reg=lam, binarize=False)),
        ("LicketySPLIT", LicketySPLITClassifier(depth_budget=d, reg=lam, binarize=False)),
        ("LicketySPLIT (exact_last)", LicketySPLITClassifier(depth_budget=d, reg=lam, completion="exact_last",
                                                             binarize=False)),
    ]
    for dl in cfg.lookaheads:
        ours.append((f"SPLIT(d_l={dl})", SPLITClassifier(depth_budget=d, lookahead_depth=dl, reg=lam,
                                                         time_limit=cfg.split_time_limit, binarize=False)))
    if cfg.run_exact:
        ours.append(("exact (ours)", SPLITClassifier(depth_budget=d, lookahead_depth=d, reg=lam,
                                                     time_limit=cfg.gosdt_time_limit, binarize=False)))
    for name, est in ours:
        t0 = time.perf_counter()
        est.fit(Btr, ytr)
        dt = time.perf_counter() - t0
        info = est.fit_info_
        timed_out = bool(info.get("search_timed_out") or info.get("refill_timed_out"))
        acc = est.score(Bte, yte)
        _record(res, name, ds, seed, objective=est.objective_, test_accuracy=acc,
                train_accuracy=est.score(Btr, ytr), time_s=dt, n_leaves=est.n_leaves_,
                prefix_objective=info.get("prefix_objective"), timed_out=timed_out)
        row[name] = {"R": est.objective_, "prefix": info.get("prefix_objective"), "time": dt, "acc": acc,
                     "timed_out": timed_out}


def fit_baselines(res: Result, row: dict[str, Any], cfg: Config, data: tuple[Any, Any, Any, Any],
                  have: dict[str, bool]) -> None:
    """CART tuned to the objective, the C++ licketysplit package and GOSDT (capped) on the same split."""
    import numpy as np

    from trustlab.methods.split import fit_cart, fit_gosdt, fit_licketysplit_package

    Btr, Bte, ytr, yte = data
    ds, seed = row["dataset"], row["seed"]
    baselines: list[tuple[str, Any, dict[str, Any]]] = [("CART", fit_cart, {"random_state": seed})]
    if have["licketysplit"]:
        baselines.append(("licketysplit (C++)", fit_licketysplit_package, {"lookahead_k": 1}))
    if have["gosdt"]:
        baselines.append(("GOSDT", fit_gosdt, {"time_limit": cfg.gosdt_time_limit}))
    for name, fit, kwargs in baselines:
        b = fit(Btr, ytr, reg=cfg.reg, depth_budget=cfg.depth_budget, **kwargs)
        acc = float(np.mean(b.predict(Bte) == yte))
        counted = b.time_s if b.converged else max(b.time_s, cfg.gosdt_time_limit)
        _record(res, name, ds, seed, objective=b.objective, test_accuracy=acc,
                train_accuracy=float(np.mean(b.predict(Btr) == ytr)), time_s=counted, n_leaves=b.n_leaves,
                converged=b.converged, lower_bound=b.lower_bound)
        row[name] = {"R": b.objective, "time": counted, "acc": acc, "converged": b.converged, "lb": b.lower_bound}

