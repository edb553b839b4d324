"""FedCEO speed: server step vs plain averaging (K = 10, 50, 100), vectorised vs per-client-loop rounds, and a
DP-SGD round (Opacus per client, what the experiment runs).

Standalone: ``python benchmarks/fedceo.py [--repeats 20]``. Prints a table and writes
``benchmarks/results/fedceo.json``. Targets (issue 5): the FedCEO server step <= 3x averaging at K = 100;
a vectorised simulator round >= 5x faster than a per-client loop.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

from trustlab.core.seeding import isolated_global_rng  # noqa: E402
from trustlab.core.threads import limit_threads  # noqa: E402
from trustlab.data import load_digits_images, partition_iid  # noqa: E402
from trustlab.methods.fedceo import DPSGD, BiasFreeMLP, FedCEO, UDPFedAvg, run_federated  # noqa: E402
from trustlab.methods.fedceo._tsvt import to_three_way  # noqa: E402


def _median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _singular_values_only(ups: list[dict], names: list[str]) -> None:
    """The floor of any exact per-client t-SVT: the singular values (no vectors) of every rfft slice of every layer;
    the threshold cannot be applied without them."""
    for n in names:
        x3 = to_three_way(np.stack([u[n] for u in ups], axis=-1).astype(np.float64))
        np.linalg.svd(np.moveaxis(np.fft.rfft(x3, axis=-1), -1, 0), compute_uv=False)


def server_steps(repeats: int) -> list[dict]:
    model = BiasFreeMLP(64, 128, 10)
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    rows = []
    for k in (10, 50, 100):
        rng = np.random.default_rng(k)
        ups = [{n: rng.normal(size=s).astype(np.float32) for n, s in shapes.items()} for _ in range(k)]
        t_avg = _median_time(lambda ups=ups: UDPFedAvg().aggregate(ups), repeats)
        t_glob = _median_time(lambda ups=ups: FedCEO(lam=1.0, client_models=False).aggregate(ups), repeats)
        t_full = _median_time(lambda ups=ups: FedCEO(lam=1.0).aggregate(ups), max(3, repeats // 4))
        t_floor = _median_time(lambda ups=ups: _singular_values_only(ups, list(shapes)), max(3, repeats // 4))
        rows.append(dict(K=k, averaging_ms=1e3 * t_avg, fedceo_global_ms=1e3 * t_glob, fedceo_full_ms=1e3 * t_full,
                         svd_floor_ms=1e3 * t_floor, ratio_global=t_glob / t_avg, ratio_full=t_full / t_avg,
                         ratio_floor=t_floor / t_avg))
    return rows


def simulator_rounds(rounds: int) -> dict:
    ds = load_digits_images(flatten=True)
    X, y = ds.X[:1200], ds.y[:1200]
    clients = [(X[p], y[p]) for p in partition_iid(y, 20, random_state=0)]
    with isolated_global_rng(0):
        model = BiasFreeMLP(64, 128, 10)
    out = {}
    for vec in (True, False):
        kw = dict(rounds=rounds, clients_per_round=10, local_epochs=2, batch_size=16, lr=0.1, random_state=0, vectorised=vec)
        run_federated(model, clients, aggregator=UDPFedAvg(), **{**kw, "rounds": 2})   # warm-up
        h = run_federated(model, clients, aggregator=UDPFedAvg(), **kw)
        out["vectorised" if vec else "loop"] = dict(round_ms=1e3 * float(np.median(h.round_time_s)),
                                                   local_ms=1e3 * h.local_time_s / rounds)
    out["speedup"] = out["loop"]["round_ms"] / out["vectorised"]["round_ms"]
    with isolated_global_rng(0):
        small = BiasFreeMLP(64, 64, 10)
    h = run_federated(small, clients, aggregator=FedCEO(lam=1.0, interval=10, theta=1.04), mechanism=DPSGD(sigma=2.0),
                      restart=True, rounds=max(2, rounds // 4), clients_per_round=10, batch_size=16, lr=0.1,
                      momentum=0.5, random_state=0)
    out["dpsgd"] = dict(round_ms=1e3 * float(np.median(h.round_time_s)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    with limit_threads(1):
        steps = server_steps(args.repeats)
        sim = simulator_rounds(args.rounds)
    print("server step (MLP 64-128-10, median ms):")
    print(f"{'K':>4} {'average':>9} {'FedCEO global':>14} {'ratio':>6} {'FedCEO +clients':>16} {'ratio':>6} "
          f"{'SVD floor':>10} {'ratio':>6}")
    for r in steps:
        print(f"{r['K']:>4} {r['averaging_ms']:>9.3f} {r['fedceo_global_ms']:>14.3f} {r['ratio_global']:>6.2f} "
              f"{r['fedceo_full_ms']:>16.3f} {r['ratio_full']:>6.1f} {r['svd_floor_ms']:>10.3f} {r['ratio_floor']:>6.1f}")
    print(f"simulator round (K=10, 2 local epochs, batch 16): vectorised {sim['vectorised']['round_ms']:.1f} ms, "
          f"loop {sim['loop']['round_ms']:.1f} ms, speedup {sim['speedup']:.1f}x")
    print(f"DP-SGD round (Opacus per client, K=10, MLP 64-64-10, 1 epoch, batch 16): {sim['dpsgd']['round_ms']:.0f} ms")
    at100 = next(r for r in steps if r["K"] == 100)
    print(f"target server step <= 3x at K=100 (global path): {'MET' if at100['ratio_global'] <= 3 else 'MISSED'} "
          f"({at100['ratio_global']:.2f}x; with per-client models {at100['ratio_full']:.1f}x)")
    per_client = {"fedceo_full_ms": at100["fedceo_full_ms"] / 100, "dpsgd_round_ms": sim["dpsgd"]["round_ms"] / 10}
    per_client["share"] = per_client["fedceo_full_ms"] / per_client["dpsgd_round_ms"]
    print(f"the floor (singular values only) is already {at100['ratio_floor']:.1f}x averaging at K=100; per client, "
          f"FedCEO with client models costs {per_client['fedceo_full_ms']:.2f} ms = {100 * per_client['share']:.0f} % "
          f"of that client's own DP-SGD round ({per_client['dpsgd_round_ms']:.1f} ms)")
    print(f"target vectorised >= 5x: {'MET' if sim['speedup'] >= 5 else 'MISSED'} ({sim['speedup']:.1f}x)")
    out = Path(__file__).parent / "results" / "fedceo.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"server_step": steps, "simulator": sim, "per_client_at_K100": per_client,
                                "threads": 1, "load_average": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
