"""FedCEO speed: server step vs plain averaging (K = 10, 50, 100), vectorised vs per-client-loop rounds, and a
DP-SGD round (Opacus per client, what the experiment runs).

Standalone: ``python benchmarks/fedceo.py [--repeats 20] [--rounds 20]`` (harness options: ``--json PATH``,
``--no-docs``, ``--render-only``). Averaging and FedCEO's global step alternate (``--repeats``), as do the per-client
step and the singular-values floor (``max(3, repeats // 4)``); the simulator times its own rounds, vectorised and
loop one after the other after a 2-round warm-up each. Targets (issue 5): the FedCEO server step <= 3x averaging at
K = 100; a vectorised simulator round >= 5x faster than a per-client loop.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import _harness  # noqa: E402

NAME = "fedceo"
NOTES = """**Why the per-client target is missed (issue 45, profiled).** cProfile of the per-client step at K = 100: 68 % of
it is `np.linalg.svd` of the K//2+1 = 51 complex rfft slices (128 x 64 for the first layer), and the rest is the
FFTs, the stacking and the upload checks. An exact t-SVT has to know every singular value of every slice to
threshold it; the "floor" column computes only those (`compute_uv=False`, no vectors), and it alone is several
times averaging at K = 100, which is a mean over 100 uploads (the raw `np.mean` was 0.45 ms of 5.6 ms in the
profiled run). complex64 SVDs were not faster (113 vs 120-160 ms on a loaded core). So <= 3x against averaging
cannot be reached by an exact per-client t-SVT on this machine. The global path, which is what the experiment's
accuracy rests on, meets it through the identity mean(t-SVT) = SVT(mean) (one SVD). **The meaningful comparison**
is with the cost of a round: per client at K = 100, FedCEO with client models against that client's own DP-SGD
round (a K = 10 Opacus round / 10), measured in the same run (above).

History (pre-harness script, 2026-12-03 at 6f682d9, idle machine, load average 0.16, timings not alternating):
ratios at K = 100: global 2.18, per-client 20.7, floor 8.4; per client 1.17 ms = 12 % of a 9.7 ms DP-SGD round;
simulator round 10.0 ms vs 19.1 ms loop, 1.9x (3.0x on the previous machine); DP-SGD round 97 ms."""


def _singular_values_only(ups: list[dict], names: list[str]) -> None:
    """The floor of any exact per-client t-SVT: the singular values (no vectors) of every rfft slice of every layer;
    the threshold cannot be applied without them."""
    from trustlab.methods.fedceo._tsvt import to_three_way

    for n in names:
        x3 = to_three_way(np.stack([u[n] for u in ups], axis=-1).astype(np.float64))
        np.linalg.svd(np.moveaxis(np.fft.rfft(x3, axis=-1), -1, 0), compute_uv=False)


def server_steps(bench: _harness.Bench, repeats: int) -> list[dict]:
    from trustlab.methods.fedceo import BiasFreeMLP, FedCEO, UDPFedAvg

    model = BiasFreeMLP(64, 128, 10)
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    rows = []
    for k in (10, 50, 100):
        rng = np.random.default_rng(k)
        ups = [{n: rng.normal(size=s).astype(np.float32) for n, s in shapes.items()} for _ in range(k)]
        a = bench.compare({"averaging": lambda ups=ups: UDPFedAvg().aggregate(ups),
                           "fedceo_global": lambda ups=ups: FedCEO(lam=1.0, client_models=False).aggregate(ups)},
                          repeat=repeats, key=f"server step K={k}")
        b = bench.compare({"fedceo_full": lambda ups=ups: FedCEO(lam=1.0).aggregate(ups),
                           "svd_floor": lambda ups=ups: _singular_values_only(ups, list(shapes))},
                          repeat=max(3, repeats // 4), key=f"per-client step K={k}")
        t_avg, t_glob = a["averaging"]["wall"], a["fedceo_global"]["wall"]
        t_full, t_floor = b["fedceo_full"]["wall"], b["svd_floor"]["wall"]
        rows.append(dict(K=k, averaging_ms=1e3 * t_avg, fedceo_global_ms=1e3 * t_glob, fedceo_full_ms=1e3 * t_full,
                         svd_floor_ms=1e3 * t_floor, ratio_global=t_glob / t_avg, ratio_full=t_full / t_avg,
                         ratio_floor=t_floor / t_avg))
    return rows


def simulator_rounds(bench: _harness.Bench, rounds: int) -> dict:
    from trustlab.core.seeding import isolated_global_rng
    from trustlab.data import load_digits_images, partition_iid
    from trustlab.methods.fedceo import DPSGD, BiasFreeMLP, FedCEO, UDPFedAvg, run_federated

    ds = load_digits_images(flatten=True)
    X, y = ds.X[:1200], ds.y[:1200]
    clients = [(X[p], y[p]) for p in partition_iid(y, 20, random_state=0)]
    with isolated_global_rng(0):
        model = BiasFreeMLP(64, 128, 10)
    local: dict[str, float] = {}

    def sim(vec: bool) -> list[float]:
        kw = dict(rounds=rounds, clients_per_round=10, local_epochs=2, batch_size=16, lr=0.1, random_state=0,
                  vectorised=vec)
        run_federated(model, clients, aggregator=UDPFedAvg(), **{**kw, "rounds": 2})   # warm-up
        h = run_federated(model, clients, aggregator=UDPFedAvg(), **kw)
        local["vectorised" if vec else "loop"] = 1e3 * h.local_time_s / rounds
        return list(h.round_time_s)

    t = bench.rounds({"vectorised": lambda: sim(True), "loop": lambda: sim(False)}, rounds=1, key="simulator round")
    out: dict[str, Any] = {k: dict(round_ms=1e3 * t[k]["wall"], local_ms=local[k]) for k in ("vectorised", "loop")}
    out["speedup"] = out["loop"]["round_ms"] / out["vectorised"]["round_ms"]
    with isolated_global_rng(0):
        small = BiasFreeMLP(64, 64, 10)
    d = bench.rounds({"dpsgd": lambda: list(run_federated(
        small, clients, aggregator=FedCEO(lam=1.0, interval=10, theta=1.04), mechanism=DPSGD(sigma=2.0),
        restart=True, rounds=max(2, rounds // 4), clients_per_round=10, batch_size=16, lr=0.1, momentum=0.5,
        random_state=0).round_time_s)}, rounds=1, key="DP-SGD round")
    out["dpsgd"] = dict(round_ms=1e3 * d["dpsgd"]["wall"])
    return out


def run(bench: _harness.Bench, repeats: int, rounds: int) -> None:
    with _harness.threads(1):
        steps = server_steps(bench, repeats)
        sim = simulator_rounds(bench, rounds)
    at100 = next(r for r in steps if r["K"] == 100)
    per_client = {"fedceo_full_ms": at100["fedceo_full_ms"] / 100, "dpsgd_round_ms": sim["dpsgd"]["round_ms"] / 10}
    per_client["share"] = per_client["fedceo_full_ms"] / per_client["dpsgd_round_ms"]
    bench.put(server_step=steps, simulator=sim, per_client_at_K100=per_client, threads=1)
    print("server step (MLP 64-128-10, median ms):")
    print(f"{'K':>4} {'average':>9} {'FedCEO global':>14} {'ratio':>6} {'FedCEO +clients':>16} {'ratio':>6} "
          f"{'SVD floor':>10} {'ratio':>6}")
    for r in steps:
        print(f"{r['K']:>4} {r['averaging_ms']:>9.3f} {r['fedceo_global_ms']:>14.3f} {r['ratio_global']:>6.2f} "
              f"{r['fedceo_full_ms']:>16.3f} {r['ratio_full']:>6.1f} {r['svd_floor_ms']:>10.3f} {r['ratio_floor']:>6.1f}")
    print(f"simulator round (K=10, 2 local epochs, batch 16): vectorised {sim['vectorised']['round_ms']:.1f} ms, "
          f"loop {sim['loop']['round_ms']:.1f} ms")
    print(f"DP-SGD round (Opacus per client, K=10, MLP 64-64-10, 1 epoch, batch 16): {sim['dpsgd']['round_ms']:.0f} ms")
    bench.print_ratio("server step / averaging at K=100, global path", at100["ratio_global"], "<= 3x",
                      at100["ratio_global"] <= 3)
    bench.print_ratio("server step / averaging at K=100, with per-client models", at100["ratio_full"], "<= 3x",
                      at100["ratio_full"] <= 3)
    print(f"the floor (singular values only) is already {at100['ratio_floor']:.1f}x averaging at K=100; per client, "
          f"FedCEO with client models costs {per_client['fedceo_full_ms']:.2f} ms = {100 * per_client['share']:.0f} % "
          f"of that client's own DP-SGD round ({per_client['dpsgd_round_ms']:.1f} ms)")
    bench.print_ratio("vectorised round speed-up", sim["speedup"], ">= 5x", sim["speedup"] >= 5)


def render(result: dict[str, Any]) -> str:
    p, v = result["params"], result["values"]
    steps, sim, pc = v["server_step"], v["simulator"], v["per_client_at_K100"]
    lines = ["## FedCEO", "",
             f"`benchmarks/fedceo.py --repeats {p['repeats']} --rounds {p['rounds']}` (1 thread, median ms; averaging "
             "and the global step alternate, as do the per-client step and the floor; compare ratios).", "",
             "| K | averaging | FedCEO global (`client_models=False`) | ratio | FedCEO + per-client models | ratio | "
             "singular values only (floor) | ratio |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in steps:
        g, f = f"{r['ratio_global']:.2f}", f"{r['ratio_full']:.1f}"
        if r["K"] == 100:
            g = f"**{g} (target <= 3: {'met' if r['ratio_global'] <= 3 else 'missed'})**"
            f = f"**{f} (target <= 3: {'met' if r['ratio_full'] <= 3 else 'missed'})**"
        lines.append(f"| {r['K']} | {r['averaging_ms']:.3g} | {r['fedceo_global_ms']:.3g} | {g} | "
                     f"{r['fedceo_full_ms']:.3g} | {f} | {r['svd_floor_ms']:.3g} | {r['ratio_floor']:.1f} |")
    sp = sim["speedup"]
    lines += ["", f"Per client at K = 100, FedCEO with client models costs {pc['fedceo_full_ms']:.2f} ms, "
              f"**{100 * pc['share']:.0f} %** of that client's own DP-SGD round ({pc['dpsgd_round_ms']:.1f} ms: a K = 10 "
              f"Opacus round of {sim['dpsgd']['round_ms']:.0f} ms / 10), same run.", "",
              f"Simulator round (K = 10, 2 local epochs, batch 16, MLP 64-128-10, median of {p['rounds']} rounds): "
              f"vectorised {sim['vectorised']['round_ms']:.1f} ms vs per-client loop {sim['loop']['round_ms']:.1f} ms, "
              f"**{sp:.1f}x (target >= 5x: {'met' if sp >= 5 else 'missed'})**. A DP-SGD round (Opacus `make_private` "
              "per client, K = 10, MLP 64-64-10, 1 epoch of expected batch 16), which is what the experiment runs: "
              f"{sim['dpsgd']['round_ms']:.0f} ms.", "", NOTES, "", _harness.setting_line(result)]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    _harness.main(NAME, a, lambda b: run(b, a.repeats, a.rounds), render)
