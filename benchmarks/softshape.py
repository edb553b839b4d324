"""Benchmark: SoftShape training/inference cost with vs without soft sparsification.

Run: ``OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/softshape.py``.

For several series lengths T (so M = (T - 32) / 4 + 1 shape tokens), D = 128, batch 64 and 1 torch thread,
prints the median wall time of one training step (forward + backward + Adam) and of one forward pass for
the sparsified model ("soft": layer 2 keeps ceil(M/2) + 1 tokens, plus the MoE), the hard-drop variant,
the warm-up path (no sparsification, no MoE; identical to sparsify="none") and InceptionTimeLite on the raw
series. The efficiency claim of the paper is that sparsification makes training cheaper once M is large.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch.nn import functional as F

from trustlab.methods.softshape._model import InceptionTimeNet, SoftShapeNet


def _median_time(fn, reps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(lengths=(150, 512, 1024), batch: int = 64, d_model: int = 128, reps: int = 7) -> None:
    torch.manual_seed(0)
    print(f"batch {batch}, D={d_model}, 1 thread; median of {reps} (seconds)")
    print(f"{'T':>6} {'M':>5} {'variant':>18} {'train step':>11} {'forward':>9}")
    for T in lengths:
        x = torch.randn(batch, 1, T)
        y = torch.randint(0, 2, (batch,))
        cases = {
            "soft (sparsified)": (SoftShapeNet(1, T, 2, shape_size=32, d_model=d_model), False),
            "hard (sparsified)": (SoftShapeNet(1, T, 2, shape_size=32, d_model=d_model, sparsify="hard"), False),
            "none (warm path)": (SoftShapeNet(1, T, 2, shape_size=32, d_model=d_model, sparsify="none"), False),
            "InceptionTimeLite": (InceptionTimeNet(1, 2), False),
        }
        for name, (net, warm) in cases.items():
            opt = torch.optim.Adam(net.parameters(), 1e-3)

            def step(net=net, opt=opt, warm=warm, x=x, y=y):
                net.train()
                logits, aux, _ = net(x, warm=warm)
                loss = F.cross_entropy(logits, y) + 1e-3 * aux
                opt.zero_grad()
                loss.backward()
                opt.step()

            def fwd(net=net, warm=warm, x=x):
                net.eval()
                with torch.no_grad():
                    net(x, warm=warm)

            M = getattr(net, "n_tokens", "-")
            print(f"{T:>6} {M!s:>5} {name:>18} {_median_time(step, reps):>11.4f} {_median_time(fwd, reps):>9.4f}",
                  flush=True)


if __name__ == "__main__":
    from trustlab.core.threads import limit_threads

    with limit_threads(1):
        main()
