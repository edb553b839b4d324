"""Plots of experiment ``dint``: accuracy vs activation noise per intervened layer, learned sigma per layer."""

from __future__ import annotations

from typing import Any

from trustlab.results.result import Result

_LABEL = {("loreft", "deterministic"): "LoReFT", ("dreft_clamp", "sample"): "D-ReFT clamp (sample)",
          ("dreft_clamp", "mean"): "D-ReFT clamp (mean)", ("dreft_sigmoid", "sample"): "D-ReFT sigmoid (sample)",
          ("dreft_sigmoid", "mean"): "D-ReFT sigmoid (mean)"}


def PLOTS(result: Result) -> dict[str, Any]:
    from trustlab.results.plots import new_figure

    out: dict[str, Any] = {}
    df = result.to_frame()
    if df.empty or "perturbation" not in df:
        return out
    acc = df[(df["metric"] == "accuracy") & df["perturbation"].isin(["clean", "act_noise@own"])]
    zs = df[(df["arm"] == "zero_shot") & (df["metric"] == "accuracy")]["value"]
    for layer, name in ((result.config["late_layer"], "noise_late"), (result.config["early_layer"], "noise_layer0")):
        sub = acc[acc["layer"] == layer]
        if sub.empty:
            continue
        fig, ax = new_figure(5.6, 3.8)
        for (arm, inf), g in sub.groupby(["arm", "inference"], sort=False):
            m = g.groupby("level")["value"].agg(["mean", "std"]).sort_index()
            ax.errorbar(m.index, 100 * m["mean"], yerr=100 * m["std"].fillna(0), marker="o", ms=3, capsize=2,
                        label=_LABEL.get((arm, inf), f"{arm} ({inf})"))
        if len(zs):
            ax.axhline(100 * float(zs.iloc[0]), color="grey", ls=":", lw=1, label="zero-shot")
        ax.set_xlabel("activation noise c (x token RMS) at the intervened block's input")
        ax.set_ylabel(f"{result.config.get('task', 'arith_lite')} test accuracy (%)")
        ax.set_title(f"accuracy vs noise, intervention at block {layer} (mean +- sd over seeds)", fontsize=9)
        ax.legend(fontsize=7)
        out[name] = fig
    sig = df[df["metric"] == "sigma"]
    if not sig.empty:
        fig, ax = new_figure(5.0, 3.4)
        arms = [a for a in ("dreft_clamp", "dreft_sigmoid") if a in set(sig["arm"])]
        layers = sorted(set(sig["layer"]))
        width = 0.8 / max(1, len(arms))
        for i, arm in enumerate(arms):
            g = sig[sig["arm"] == arm].groupby("layer")["value"]
            ms, sds = g.mean(), g.std().fillna(0)
            xs = [layers.index(x) + i * width for x in ms.index]
            ax.bar(xs, ms.values, width=width, yerr=sds.values, capsize=2,
                   label={"dreft_clamp": "official clamp", "dreft_sigmoid": "bounded sigmoid"}[arm])
        ax.axhline(0.2, color="grey", ls=":", lw=1, label="initial / clamp value 0.2")
        ax.set_xticks([k + width * (len(arms) - 1) / 2 for k in range(len(layers))], [f"block {x}" for x in layers])
        ax.set_ylabel("learned sigma (mean over tokens and dims)")
        ax.set_title("D-ReFT learned sigma per layer", fontsize=9)
        ax.legend(fontsize=7)
        out["sigma_per_layer"] = fig
    return out
