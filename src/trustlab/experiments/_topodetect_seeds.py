"""One seed of the ``topodetect`` experiment as an executor task (issue 46): the stand-ins' MiniCLIP models, their
adversarial images, the signature sweeps and (first stand-in) the detection tests.

:func:`seed_job` does not touch the run's context: it returns the seed's records and summary entries, which the
driver adds in seed order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from trustlab.results.result import Result

if TYPE_CHECKING:
    from trustlab.experiments.topodetect import Config


def seed_job(cfg: Config, caps: tuple[np.ndarray, np.ndarray], seed: int) -> tuple[list[dict[str, Any]],
                                                                                    dict[str, dict[str, Any]]]:
    """One seed (a task of ``ctx.map``): its records and its ``accuracy``, ``spearman`` and
    ``feature_agreement`` summary entries."""
    from trustlab.experiments.topodetect import _adversarial, _model, _split

    res = Result("topodetect", "", {})
    Xtr, ytr, Xte, yte = _split(seed)
    for kind in cfg.models:
        m = _model(kind, caps, cfg, Xtr, ytr, seed)
        advs = {a: _adversarial(m, a, cfg, Xte, yte, seed) for a in cfg.attacks}
        _signatures(cfg, res, m, kind, seed, Xte, yte, advs)
        if kind == cfg.models[0]:
            _detection(cfg, res, m, seed, Xte, advs["pgd"])
    return res.records, res.summary


def _signatures(cfg: Config, res: Result, m: Any, kind: str, seed: int, Xte: np.ndarray, yte: np.ndarray,
                advs: dict[str, np.ndarray]) -> None:
    from trustlab.experiments.topodetect import _embed
    from trustlab.methods.topodetect import signature_sweep

    zc, tc, pc = _embed(m, Xte)
    res.summary.setdefault("accuracy", {})[f"{kind}/seed{seed}/clean"] = float((pc == yte).mean())
    props = tuple(float(p) for p in np.round(np.linspace(0, 1, cfg.n_proportions), 3))
    for attack in cfg.attacks:
        za, ta, pa = _embed(m, advs[attack])
        res.summary["accuracy"][f"{kind}/seed{seed}/{attack}"] = float((pa == yte).mean())
        sw = signature_sweep(zc, tc, za, ta, props, n_batches=cfg.sig_batches, batch_size=cfg.sig_batch_size,
                             sigmas=cfg.sigmas, h1=cfg.h1, random_state=seed)
        res.summary.setdefault("spearman", {})[f"{kind}/{attack}/seed{seed}"] = sw.spearman
        for meas, mu in sw.means.items():
            for p, v in zip(sw.proportions, mu):
                res.add(part="signature", model=kind, attack=attack, seed=seed, measure=meas, proportion=p, loss=v)


def _detector_features(cfg: Config, m: Any, X: np.ndarray, Xadv: np.ndarray, seed: int) -> dict[str, Any]:
    """Feature blocks of the held-out rows (reference | kernel-train | pool): semantic, pixels, cross-modal and
    unimodal topological features, for the clean and the adversarial version of every image."""
    from trustlab.experiments.topodetect import _embed
    from trustlab.methods.topodetect import topo_features

    zc, tc, _ = _embed(m, X)
    za, ta, _ = _embed(m, Xadv)
    ref = np.arange(cfg.n_ref)
    rows = np.arange(cfg.n_ref, cfg.n_ref + 2 * cfg.n_kernel_train + cfg.n_pool)
    kw = {"n_batches": cfg.topo_batches, "batch_size": cfg.topo_batch_size}
    out: dict[str, Any] = {}
    for tag, z, t, raw in (("clean", zc, tc, X), ("adv", za, ta, Xadv)):
        g = topo_features(z[rows], t[rows], zc[ref], tc[ref], view=cfg.topo_view, random_state=seed, **kw)
        gu = topo_features(z[rows], t[rows], zc[ref], tc[ref], view="image", random_state=seed, **kw)
        px = raw[rows].reshape(len(rows), -1).astype(np.float64)
        out[tag] = {"sem": z[rows], "sa": np.hstack([z[rows], px]), "tc": np.hstack([z[rows], px, g]),
                    "tu": np.hstack([z[rows], px, gu]), "g": g, "gu": gu}
    return out


def _feature_agreement(F: dict[str, Any]) -> dict[str, float]:
    """How far the cross-modal topological feature is from the unimodal one (pre-features-differ)."""
    g = np.concatenate([F["clean"]["g"].ravel(), F["adv"]["g"].ravel()])
    gu = np.concatenate([F["clean"]["gu"].ravel(), F["adv"]["gu"].ravel()])
    sd = float(np.std(g) * np.std(gu))
    corr = 1.0 if sd == 0 else float(np.mean((g - g.mean()) * (gu - gu.mean())) / sd)
    return {"corr": corr, "max_abs_diff": float(np.max(np.abs(g - gu)))}


def _detectors(cfg: Config, seed: int) -> dict[str, tuple[str, Any]]:
    from trustlab.methods.topodetect import SAMMD, MMDDeep, MMDGaussian, TopoSAMMD

    c = {"alpha": 0.05, "n_null": cfg.n_null, "random_state": seed}
    k = {"epochs": cfg.kernel_epochs, **c}
    d = cfg.dim
    return {"MMD-G": ("sem", MMDGaussian(**c)), "MMD-D": ("sem", MMDDeep(**k)),
            "SAMMD": ("sa", SAMMD(n_semantic=d, **k)), "TC-SAMMD": ("tc", TopoSAMMD(n_semantic=d, n_topo=d, **k)),
            "TC-SAMMD (unimodal)": ("tu", TopoSAMMD(n_semantic=d, n_topo=d, **k)),
            "SAMMD-fixed": ("sa", SAMMD(n_semantic=d, train=False, **k)),
            "TC-SAMMD-fixed": ("tc", TopoSAMMD(n_semantic=d, n_topo=d, train=False, **k))}


def _detection(cfg: Config, res: Result, m: Any, seed: int, X: np.ndarray, Xadv: np.ndarray) -> None:
    F = _detector_features(cfg, m, X, Xadv, seed)
    res.summary.setdefault("feature_agreement", {})[f"seed{seed}"] = _feature_agreement(F)
    nk = cfg.n_kernel_train
    tr_c, tr_a = np.arange(nk), np.arange(nk, 2 * nk)
    pool = np.arange(2 * nk, 2 * nk + cfg.n_pool)
    rng = np.random.default_rng([seed, 19])
    draws = {n: [rng.choice(pool, 2 * n, replace=False) for _ in range(cfg.reps)] for n in cfg.ns}
    for name, (block, det) in _detectors(cfg, seed).items():
        C, A = F["clean"][block], F["adv"][block]
        det.fit(np.vstack([C[tr_c], A[tr_a]]), np.repeat([0, 1], nk))
        for n in cfg.ns:
            power = np.mean([det.test(C[d[:n]], A[d[n:]]).reject for d in draws[n]])
            type1 = np.mean([det.test(C[d[:n]], C[d[n:]]).reject for d in draws[n]])
            res.add(part="detection", test=name, seed=seed, n=n, power=float(power), type1=float(type1))
