"""SoftShape: does soft sparsification make a training step cheaper than not sparsifying? (issue 45)

Run: ``python benchmarks/softshape.py [--lengths 24,150,512,1024] [--repeat 9]`` (1 thread; under the CPU lock).

For each series length T (M = (T - m) / 4 + 1 shape tokens; m = 32 as at GunPoint, and for T < 64 the classifier's
default m = max(4, round(0.2 T)), so T = 24 is ItalyPowerDemand with M = 5), D = 128, batch 64, 2 classes: one
training step (forward + backward + Adam) of the sparsified model ("soft": layer 2 keeps ceil(M/2) tokens plus the
merged one and runs the MoE), of the same with a spread router (weights N(0, 1), so the tokens go to both experts:
the general dispatch path; the zero-initialised router sends every token to expert 0), of the hard-drop variant
and of the unsparsified model (``sparsify="none"``, which is also the warm-up path), all timed alternately (ABBA);
then one forward pass of soft and none, and InceptionTimeLite's step for scale. Target (the paper's efficiency
claim, C2): soft / none <= 1 at T = 150.

The profile (``--profile-lengths``, default 150 and 24): every part of layer 2 and the head, forward + backward, timed
alternately on the shapes the two paths see (N tokens vs ceil(N/2) + 1), and the top operators of both steps under
``torch.profiler``. ``--before PATH`` copies the summary of an earlier run's JSON (the code before the change) into
this one, so the docs section shows both.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import _harness  # noqa: E402

NAME = "softshape"
TARGET_T = 150


def _shape(T: int) -> int:
    return 32 if T >= 64 else max(4, round(0.2 * T))


def _net(T: int, d_model: int, sparsify: str = "soft", spread: bool = False) -> Any:
    import torch

    from trustlab.core.seeding import isolated_global_rng
    from trustlab.methods.softshape._model import SoftShapeNet

    with isolated_global_rng(0):
        net = SoftShapeNet(1, T, 2, shape_size=_shape(T), d_model=d_model, sparsify=sparsify)
        if spread:
            with torch.no_grad():
                net.moe.w_gate.normal_()
    return net


def _data(T: int, batch: int) -> tuple[Any, Any]:
    import torch

    g = torch.Generator().manual_seed(T)
    return torch.randn(batch, 1, T, generator=g), torch.arange(batch) % 2


def _step(net: Any, x: Any, y: Any) -> Any:
    import torch
    from torch.nn import functional as F

    opt = torch.optim.Adam(net.parameters(), 1e-3)

    def step() -> None:
        net.train()
        logits, aux, _ = net(x)
        loss = F.cross_entropy(logits, y) + 1e-3 * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def _forward(net: Any, x: Any) -> Any:
    import torch

    def fwd() -> None:
        net.eval()
        with torch.no_grad():
            net(x)
    return fwd


def _length(bench: _harness.Bench, T: int, args: Any) -> None:
    from trustlab.methods.softshape._model import InceptionTimeNet

    x, y = _data(T, args.batch)
    nets = {"soft": _net(T, args.d_model), "soft, spread router": _net(T, args.d_model, spread=True),
            "hard": _net(T, args.d_model, "hard"), "none": _net(T, args.d_model, "none")}
    M = nets["none"].n_tokens
    t = bench.compare({k: _step(n, x, y) for k, n in nets.items()}, repeat=args.repeat, warmup=2, key=f"step T={T}")
    f = bench.compare({k: _forward(nets[k], x) for k in ("soft", "none")}, repeat=args.repeat, warmup=2,
                      key=f"forward T={T}")
    r = _harness.ratio(t["soft"]["wall"], t["none"]["wall"])
    r_spread = _harness.ratio(t["soft, spread router"]["wall"], t["none"]["wall"])
    bench.put(**{f"T={T}": {"M": M, "layer2_tokens": math.ceil(0.5 * M) + 1, "shape_size": _shape(T),
                            "step_ratio": r, "step_ratio_spread": r_spread,
                            "forward_ratio": _harness.ratio(f["soft"]["wall"], f["none"]["wall"])}})
    bench.print_ratio(f"T={T} (M={M}) soft/none training step", r, target="<= 1x", met=r <= 1)
    bench.print_ratio(f"T={T} (M={M}) soft (spread router)/none training step", r_spread)
    if args.itl:
        bench.compare({"InceptionTimeLite": _step(InceptionTimeNet(1, 2), x, y)}, repeat=3, warmup=1,
                      key=f"itl T={T}")


def _parts(T: int, args: Any) -> dict[str, Any]:
    """Forward + backward of each part of layer 2 and of the head on the shapes each path sees."""
    import torch
    from torch.nn import functional as F

    from trustlab.methods.softshape._model import soft_sparsify

    net = _net(T, args.d_model).train()
    lay, B, N, D = net.layers[1], args.batch, net.n_tokens, args.d_model
    k = math.ceil(0.5 * N)
    g = torch.Generator().manual_seed(1)
    H, S = torch.randn(B, N, D, generator=g), torch.rand(B, N, 1, generator=g)
    Hs = {N: H, k + 1: H[:, :k + 1].contiguous()}

    def fb(fn: Any, n: int, with_s: bool = False) -> Any:
        def run() -> None:
            h = Hs[n].detach().requires_grad_(True)
            out = fn(h, S.detach().requires_grad_(True)) if with_s else fn(h)
            (out[0] if isinstance(out, tuple) else out).sum().backward()
        return run

    def head(h: Any) -> Any:
        return (net.head(F.gelu(net.out_drop(h))) * net.scorer(h)).mean(dim=1)

    return {"norm + scorer (N)": fb(lambda h: net.scorer(lay.norm1(h)), N),
            "h * s (N; none only)": fb(lambda h, s: h * s, N, True),
            "top-k, gather, merge (soft only)": fb(lambda h, s: soft_sparsify(h, s, k)[0], N, True),
            "norm + Inception (k+1)": fb(lambda h: lay._incep(lay.norm2(h)), k + 1),
            "norm + Inception (N)": fb(lambda h: lay._incep(lay.norm2(h)), N),
            "MoE (k+1; soft only)": fb(lambda h: net.moe(h)[0], k + 1),
            "head (k+1)": fb(head, k + 1), "head (N)": fb(head, N)}


def _op_table(step: Any, n: int = 5, top: int = 8) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    for _ in range(2):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as p:
        for _ in range(n):
            step()
    ev = sorted(p.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in ev)
    return {"total_ms": total / 1e3 / n,
            "top": [{"op": e.key, "ms": e.self_cpu_time_total / 1e3 / n, "calls": e.count // n} for e in ev[:top]]}


def _profile(bench: _harness.Bench, args: Any, T: int) -> None:
    t = bench.compare(_parts(T, args), repeat=2 * args.repeat, warmup=2, key=f"parts T={T}")
    w = {k: v["wall"] for k, v in t.items()}
    saved = w["norm + Inception (N)"] - w["norm + Inception (k+1)"] + w["head (N)"] - w["head (k+1)"]
    added = w["top-k, gather, merge (soft only)"] - w["h * s (N; none only)"] + w["MoE (k+1; soft only)"]
    x, y = _data(T, args.batch)
    ops = {k: _op_table(_step(_net(T, args.d_model, k), x, y)) for k in ("soft", "none")}
    st = bench.result["timings"].get(f"step T={T}")
    diff = 1e3 * (st["none"]["wall"] - st["soft"]["wall"]) if st else float("nan")
    bench.put(**{f"profile T={T}": {"T": T, "saved_ms": 1e3 * saved, "added_ms": 1e3 * added,
                                    "step_none_minus_soft_ms": diff, "ops": ops}})
    print(f"T={T} layer 2 + head, forward + backward: sparsifying saves {1e3 * saved:.1f} ms and adds "
          f"{1e3 * added:.1f} ms", flush=True)


def _before(path: str) -> dict[str, Any]:
    old = json.loads(Path(path).read_text(encoding="utf-8"))
    keep = {k: v for k, v in old["values"].items() if k.startswith(("T=", "profile T="))}
    if "profile" in old["values"]:  # the first version of this script kept one profile under this key
        keep[f"profile T={old['values']['profile']['T']}"] = old["values"]["profile"]
    parts = {k: v for k, v in old["timings"].items() if k.startswith(("parts", "step"))}
    return {"commit": old.get("setting_end", {}).get("commit", "?"), "date": old["setting_start"]["date"],
            "values": keep, "timings": {k: {n: {"wall": s["wall"]} for n, s in v.items()} for k, v in parts.items()}}


def run(bench: _harness.Bench, args: Any) -> None:
    import torch  # noqa: F401 - imported before the thread limit, which limits torch only when torch is imported

    with _harness.threads(1):
        for T in args.lengths:
            _length(bench, T, args)
        for T in args.profile_lengths:
            _profile(bench, args, T)
    if args.before:
        bench.put(before=_before(args.before))


# -- the docs section (from the JSON only) ------------------------------------------------------------------------------
def _ms(s: float) -> str:
    return f"{1e3 * s:.1f}"


def _length_table(res: dict[str, Any]) -> list[str]:
    tm, vals, before = res["timings"], res["values"], res["values"].get("before", {}).get("values", {})
    rows = ["| T | M | layer-2 tokens | soft step | soft, spread router | hard | none | **soft / none** | "
            "before the change | forward soft / none | InceptionTimeLite step |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key in (k for k in vals if k.startswith("T=")):
        v, st = vals[key], tm[f"step {key}"]
        itl = tm.get(f"itl {key}", {}).get("InceptionTimeLite", {}).get("wall")
        met = "met" if v["step_ratio"] <= 1 else "missed"
        b = before.get(key, {}).get("step_ratio")
        rows.append(f"| {key[2:]} | {v['M']} | {v['layer2_tokens']} | {_ms(st['soft']['wall'])} | "
                    f"{_ms(st['soft, spread router']['wall'])} | {_ms(st['hard']['wall'])} | {_ms(st['none']['wall'])} "
                    f"| **{v['step_ratio']:.2f} ({met})** | {'-' if b is None else f'{b:.2f}'} | "
                    f"{v['forward_ratio']:.2f} | {'-' if itl is None else _ms(itl)} |")
    return rows


def _parts_table(res: dict[str, Any], Ts: list[int]) -> list[str]:
    tm, bt = res["timings"], res["values"].get("before", {}).get("timings", {})
    head = " | ".join(f"T = {T} now | before" for T in Ts)
    rows = [f"| part (forward + backward, ms) | {head} |", "|---|" + "---:|---:|" * len(Ts)]
    for k in tm[f"parts T={Ts[0]}"]:
        cells = []
        for T in Ts:
            now, b = tm[f"parts T={T}"].get(k), bt.get(f"parts T={T}", {}).get(k)
            cells += [_ms(now["wall"]) if now else "-", _ms(b["wall"]) if b else "-"]
        rows.append(f"| {k} | {' | '.join(cells)} |")
    return rows


def _ops(p: dict[str, Any]) -> str:
    out = []
    for k, o in p["ops"].items():
        top = ", ".join(f"{t['op'].removeprefix('aten::')} {t['ms']:.1f}" for t in o["top"][:6])
        out.append(f"{k} {o['total_ms']:.0f} ms/step ({top})")
    return "; ".join(out)


def _profile_text(res: dict[str, Any], Ts: list[int]) -> list[str]:
    vals = res["values"]
    bvals = vals.get("before", {}).get("values", {})
    sizes = "; ".join(f"T = {T}: k + 1 = {vals[f'T={T}']['layer2_tokens']} vs N = {vals[f'T={T}']['M']}"
                      for T in Ts if f"T={T}" in vals)
    lines = ["", f"**Where the time goes.** Layer 2 and the head, each part forward + backward on the shapes each path "
             f"sees ({sizes}), timed alternately:", ""] + _parts_table(res, Ts) + [""]
    for T in Ts:
        p, b = vals[f"profile T={T}"], bvals.get(f"profile T={T}")
        lines.append(f"T = {T}: sparsifying saves {p['saved_ms']:.1f} ms (the Inception branch and the head on fewer "
                     f"tokens) and adds {p['added_ms']:.1f} ms (top-k/gather/merge beyond the h * s both paths "
                     "compute, and the MoE)"
                     + (f"; before the change: saves {b['saved_ms']:.1f}, adds {b['added_ms']:.1f}" if b else "")
                     + f". The whole step: none - soft = {p['step_none_minus_soft_ms']:.1f} ms (it also runs dropout, "
                     "GELU and the head's scorer on fewer tokens; the parts are timed alone). torch.profiler, self "
                     f"CPU ms per training step, top operators: {_ops(p)}"
                     + (f" (before: soft {b['ops']['soft']['total_ms']:.0f}, none {b['ops']['none']['total_ms']:.0f}"
                        " ms/step)" if b else "") + ".")
        lines.append("")
    lines.append("The Inception branch's convolutions (kernels 39/19/9, 32 channels, over a few tokens, with their "
                 "backward) are the largest cost of both paths, so halving its tokens is what sparsification saves; "
                 "what it adds is the MoE (in the sparsified phase only: its expert MLP, dropout and norm are most of "
                 "it, the routing a small rest) and the top-k/gather/merge. With few tokens (T = 24, M = 5) layer 2 "
                 "keeps 4 of 5 tokens, so there is one token's Inception work to save against a whole MoE: there "
                 "the sparsified step cannot be cheaper than not sparsifying.")
    return lines


def render(res: dict[str, Any]) -> str:
    vals = res["values"]
    bf = vals.get("before")
    met = [k[2:] for k in vals if k.startswith("T=") and vals[k]["step_ratio"] <= 1]
    missed = [k[2:] for k in vals if k.startswith("T=") and vals[k]["step_ratio"] > 1]
    lines = ["## SoftShape", "",
             f"`benchmarks/softshape.py` (batch {res['params']['batch']}, D = {res['params']['d_model']}, 1 thread; "
             f"median ms of {res['params']['repeat']} alternated runs per variant). Target (C2): a sparsified training "
             f"step costs <= the unsparsified one at T = {TARGET_T} (GunPoint, M = 30). Met at T = "
             f"{', '.join(met) or 'none'}; missed at T = {', '.join(missed) or 'none'}.", ""]
    lines += _length_table(res)
    Ts = [int(k.split("=")[1]) for k in vals if k.startswith("profile T=")]
    if Ts:
        lines += _profile_text(res, Ts)
    if bf:
        steps = [(k[7:], v, res["timings"].get(k)) for k, v in bf["timings"].items() if k.startswith("step T=")]
        lines += ["", f"*Before the change* (the same script on the previous `_model.py`, measured {bf['date']}, "
                  "minutes before this run): training step soft / none ms, before -> now: "
                  + "; ".join(f"T = {T}: {_ms(v['soft']['wall'])} / {_ms(v['none']['wall'])} -> "
                              f"{_ms(now['soft']['wall'])} / {_ms(now['none']['wall'])}" for T, v, now in steps if now)
                  + ". The change: a MoE whose routing sends every token to one expert (always at the "
                  "zero-initialised router, and in collapsed fits) runs that expert on the tokens themselves, "
                  "without the per-expert select and scatter (the general case groups the tokens by one stable "
                  "argsort); RMSNorm multiplies once by gamma * sqrt(D); an Inception convolution over fewer "
                  "tokens than its kernel (2L - 1 < k) runs only the 2L - 1 taps that meet a token. Outputs are "
                  "unchanged up to float rounding (the same kept tokens and expert loads; see the paper page)."]
    lines += ["", _harness.setting_line(res)]
    return "\n".join(lines)


def main() -> None:
    ap = _harness.parser(__doc__)
    ap.add_argument("--lengths", default="24,150,512,1024", type=lambda s: [int(v) for v in s.split(",")])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--profile-lengths", default=f"{TARGET_T},24", help="lengths to profile ('' for none)",
                    type=lambda s: [int(v) for v in s.split(",") if v])
    ap.add_argument("--no-itl", dest="itl", action="store_false", help="skip InceptionTimeLite")
    ap.add_argument("--before", default=None, help="an earlier run's JSON (the code before the change)")
    args = ap.parse_args()
    _harness.main(NAME, args, lambda bench: run(bench, args), render)


if __name__ == "__main__":
    main()
