"""FedCEO experiment, claims A1 (t-SVT operator identities) and A2 (synthetic low-rank denoising)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trustlab.results.result import Result


def _svt_np(m: np.ndarray, tau: float) -> np.ndarray:
    """An independent SVT (the 1-d bias is a (1, n) row, conv kernels (out, rest))."""
    shape = m.shape
    mat = m.reshape(1, -1) if m.ndim == 1 else m.reshape(shape[0], -1)
    u, s, vt = np.linalg.svd(mat, full_matrices=False)
    return ((u * np.maximum(s - tau, 0)) @ vt).reshape(shape)


def _a1_stack(
    ups: list[dict[str, np.ndarray]], name: str, tau: float, k: int, g: dict[str, np.ndarray]
) -> dict:
    import warnings

    from trustlab.methods.fedceo import FedCEO, tsvt, tsvt_reference

    mean = np.mean([u[name] for u in ups], axis=0)
    stack = np.stack([u[name] for u in ups], axis=-1)
    _, imag = tsvt_reference(stack, tau)
    d = np.moveaxis(np.fft.fft(stack.reshape(stack.shape[0] if stack.ndim > 2 else 1, -1, k), axis=-1), -1, 0)
    smax = np.linalg.svd(d, compute_uv=False).max(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # tau >= sigma_max of every slice zeroes every client; >= sigma_max(D_0) zeroes the global
        zero = max(
            float(np.abs(tsvt(stack, float(smax.max()))).max()),
            float(np.abs(FedCEO(lam=1.0 / (2 * float(smax[0]))).aggregate(ups, server_round=1)[name]).max()),
        )
    return {
        "identity_err": float(np.abs(g[name] - _svt_np(mean, tau / k)).max()),
        "imag_max": imag,
        "tau0_err": float(np.abs(tsvt(stack, 0.0) - stack).max()),
        "big_tau_max": zero,
    }


def a1(res: Result, seeds: tuple[int, ...]) -> None:
    from trustlab.methods.fedceo import FedCEO

    worst = {"identity_err": 0.0, "perm_err": 0.0, "imag_max": 0.0, "tau0_err": 0.0, "big_tau_max": 0.0}
    shapes = {"matrix": (8, 5), "conv": (4, 3, 3, 3), "bias": (6,)}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for k in (2, 5, 10):
            ups = [{n: rng.normal(size=s) for n, s in shapes.items()} for _ in range(k)]
            agg = FedCEO(lam=0.5)
            g = agg.aggregate(ups, server_round=1)
            for n in shapes:
                for key, v in _a1_stack(ups, n, agg.tau_, k, g).items():
                    worst[key] = max(worst[key], v)
            for _ in range(3):
                p = rng.permutation(k)
                g2 = FedCEO(lam=0.5).aggregate([ups[i] for i in p], server_round=1)
                worst["perm_err"] = max(
                    worst["perm_err"], max(float(np.abs(g2[n] - g[n]).max()) for n in shapes)
                )
    for metric, v in worst.items():
        res.add(method="operator", seed=-1, metric=metric, value=v)
    res.summary["a1_max_error"] = max(worst.values())
    res.summary["a1"] = worst


def a2(cfg: Any, res: Result) -> None:
    from trustlab.methods.fedceo import FedCEO

    m, n = cfg.a2_shape
    k, r = cfg.clients_per_round, cfg.a2_rank
    noise_sd = 1.0
    edge = noise_sd / math.sqrt(k) * (math.sqrt(m) + math.sqrt(n))  # bulk edge of the client mean's noise

    def problem(seed: int) -> tuple[np.ndarray, list[dict[str, np.ndarray]]]:
        rng = np.random.default_rng(seed)
        u, _ = np.linalg.qr(rng.normal(size=(m, r)))
        v, _ = np.linalg.qr(rng.normal(size=(n, r)))
        w = (u * (cfg.a2_snr * edge)) @ v.T
        return w, [{"w": w + rng.normal(0, noise_sd, size=(m, n))} for _ in range(k)]

    def errors(lam: float, seed: int) -> tuple[float, float]:
        w, ups = problem(seed)
        mean = np.mean([u["w"] for u in ups], axis=0)
        g = FedCEO(lam=lam).aggregate(ups, server_round=1)["w"] if cfg.smoothing else mean
        nw = np.linalg.norm(w)
        return float(np.linalg.norm(g - w) / nw), float(np.linalg.norm(mean - w) / nw)

    # lam from a grid on a validation problem (seed 10_000), threshold tau/K around the bulk edge
    grid = [1.0 / (2 * k * edge * f) for f in (0.5, 0.75, 1.0, 1.25, 1.5)]
    lam = min(grid, key=lambda g: errors(g, 10_000)[0])
    rel_f, rel_m = [], []
    for seed in cfg.seeds:
        ef, em = errors(lam, seed)
        rel_f.append(ef)
        rel_m.append(em)
        res.add(method="FedCEO", seed=seed, metric="a2_rel_error", value=ef, lam=lam)
        res.add(method="mean", seed=seed, metric="a2_rel_error", value=em)
    res.summary["a2_rel_error_fedceo"] = float(np.mean(rel_f))
    res.summary["a2_rel_error_mean"] = float(np.mean(rel_m))
    res.summary["a2_reduction"] = 1.0 - float(np.mean(rel_f)) / float(np.mean(rel_m))
    res.summary["a2_lam"] = lam
