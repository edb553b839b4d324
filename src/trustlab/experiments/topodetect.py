"""Topological signatures of adversaries (ICML 2025) at CPU scale: MiniCLIP on 16x16 digits.

Setting (issue 19 / spec 2.4): scikit-learn's digits upsampled to 16x16, half to train MiniCLIP (CNN image tower,
frozen MiniLM caption embeddings + a trained linear head; the second stand-in: MLP image tower + 2-layer text
head), half held out. FGSM and PGD-10 (L-inf, eps on [0, 1] pixels) on the zero-shot logits. Each image is paired
with the prompt-ensemble embedding of its *predicted* class.

Claims (pre-registered here and in docs/papers/topodetect.md before the first default-mode run):

* C1 (monotone signature): |Spearman rho(p, mean TP-H0 loss)| >= 0.9 for every (stand-in, attack, seed), and
  for each (stand-in, attack) the sign is the same over seeds.
* C1b: the same for MK-H0 and (when computed) TP-H1 with |rho| >= 0.8.
* C1u (secondary, reported): the unimodal control, |rho| of the image cloud's own TP-H0 (no threshold).
* C2 (calibration): every test's type-I error (clean vs clean, alpha = 0.05, mean over seeds) <= 0.10 at every n.
* C3 (power sanity): at the largest n, trained SAMMD's power >= 0.5 and > untrained MMD-G's (mean over seeds).
* C4 (the paper's claim): at the claim's n, topology-augmented SAMMD power >= SAMMD power + 0.10 (mean over
  seeds) with its type-I error (mean over seeds) <= 0.10.
* C4f: with untrained (median-heuristic) kernels, TC x SAMMD power >= SAMMD power at the claim's n.
* C4u (secondary): does the signal come from the cross-modal contrast? cross-modal TC-SAMMD power - unimodal
  TC-SAMMD power (features from the image cloud alone) >= 0.05 at the claim's n.
* C5: the differentiable H0 path's autograd gradient matches central finite differences (relative error < 1e-6).

Issue 40: the topological feature comes from the joint image+text cloud (``topo_view``); the claim's n
(``n_claim``) is chosen by the pilot rule (scripts/topodetect_pilot.py) and is where C4, C4f, C4u and
pre-off-ceiling are judged; the power curve covers every n of ``ns``; 5 seeds (one kernel fit each).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.constraints import Interval, validate_value
from trustlab.core.exceptions import ConfigError
from trustlab.experiments.base import CheckResult, Claim, ExperimentConfig, Premise, RunContext
from trustlab.methods.topodetect import PAPER as PAPER
from trustlab.results.result import Result

TITLE = "Topological signatures of adversaries: TP/MK losses and topology-augmented MMD tests (MiniCLIP, digits)"
EXTRAS = ("topo",)
#: issue 40, pilot rule (scripts/topodetect_pilot.py): the n at which C4 is judged; set before the default run
N_CLAIM: int | None = 15  # pilot seed 100: SAMMD power 0.66 at n = 15, 0.86 at 20 (docs)
TESTS = ("MMD-G", "MMD-D", "SAMMD", "TC-SAMMD", "TC-SAMMD (unimodal)", "SAMMD-fixed", "TC-SAMMD-fixed")


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    models: tuple[str, ...] = ("cnn", "mlp")
    attacks: tuple[str, ...] = ("fgsm", "pgd")
    eps: float = 0.1
    pgd_steps: int = 10
    clip_epochs: int = 30
    dim: int = 32
    n_proportions: int = 11
    sig_batches: int = 10
    sig_batch_size: int = 64
    h1: bool = True
    sigmas: tuple[float, ...] = (1e-3, 1e-2, 1e-1)
    # issue 40: the power curve's n grid, and the n at which C4 is judged (None: the largest n), chosen by the
    # pilot rule in scripts/topodetect_pilot.py (docs/papers/topodetect.md)
    ns: tuple[int, ...] = (4, 6, 8, 10, 15, 20, 30, 50)
    n_claim: int | None = N_CLAIM
    # the per-sample topological feature's cloud (methods.topodetect.topo_features' view)
    topo_view: str = "joint"
    reps: int = 100
    n_null: int = 200
    n_kernel_train: int = 100
    kernel_epochs: int = 200
    topo_batches: int = 8
    topo_batch_size: int = 32
    n_ref: int = 64
    n_pool: int = 600

    @classmethod
    def quick(cls) -> Config:
        return cls(seeds=(0,), models=("cnn",), attacks=("pgd",), clip_epochs=20, n_proportions=6, sig_batches=5,
                   h1=False, ns=(N_CLAIM or 20,), n_claim=None, reps=20, n_null=100, kernel_epochs=100, n_pool=240,
                   topo_batches=4)

    @classmethod
    def default(cls) -> Config:
        return cls()

    @classmethod
    def paper(cls) -> Config:
        """More repetitions and kernel fits (the spec's 100 reps x 5 fits); still the digits stand-in."""
        return cls(reps=500, kernel_epochs=1000, sig_batches=20, n_pool=626)

    def validate(self) -> None:
        super().validate()
        own = "topodetect.Config"
        for name in ("pgd_steps", "clip_epochs", "dim", "sig_batches", "reps", "n_kernel_train", "kernel_epochs",
                     "topo_batches"):
            validate_value(own, name, getattr(self, name), [Interval(int, 1, None)])
        # eps = 0 is the KNOCKOUT (no attack: the "adversarial" images are the clean ones)
        validate_value(own, "eps", self.eps, [Interval("real", 0, 1, closed="both")])
        validate_value(own, "n_proportions", self.n_proportions, [Interval(int, 3, None)])
        validate_value(own, "sig_batch_size", self.sig_batch_size, [Interval(int, 8, 256)])
        validate_value(own, "n_null", self.n_null, [Interval(int, 20, None)])
        validate_value(own, "topo_batch_size", self.topo_batch_size, [Interval(int, 4, None)])
        validate_value(own, "n_ref", self.n_ref, [Interval(int, self.topo_batch_size, None)])
        if not self.models or set(self.models) - {"cnn", "mlp"} or not self.attacks or \
                set(self.attacks) - {"fgsm", "pgd"} or "pgd" not in self.attacks:
            raise ConfigError(f"The 'models'/'attacks' fields of {own} must be non-empty subsets of ('cnn', 'mlp') and "
                              f"('fgsm', 'pgd') with 'pgd' (the detection attack). Got {self.models!r}, "
                              f"{self.attacks!r} instead.")
        if not self.ns or min(self.ns) < 4 or 2 * max(self.ns) > self.n_pool:
            raise ConfigError(f"The 'ns' field of {own} must be sizes >= 4 with 2 * max <= n_pool ({self.n_pool}). Got "
                              f"{self.ns!r} instead.")
        if self.n_pool + 2 * self.n_kernel_train + self.n_ref > 890:
            raise ConfigError(f"{own}: n_pool + 2 n_kernel_train + n_ref must fit the ~890 held-out digits. Got "
                              f"{self.n_pool + 2 * self.n_kernel_train + self.n_ref}.")
        if self.n_claim is not None and self.n_claim not in self.ns:
            raise ConfigError(f"The 'n_claim' field of {own} must be one of ns {self.ns!r} (or None: the largest). "
                              f"Got {self.n_claim!r} instead.")
        from trustlab.core.constraints import Options
        from trustlab.methods.topodetect._diffh0 import VIEWS

        validate_value(own, "topo_view", self.topo_view, [Options(VIEWS)])
        if not self.sigmas or min(self.sigmas) <= 0:
            raise ConfigError(f"The 'sigmas' field of {own} must be positive. Got {self.sigmas!r} instead.")


# ------------------------------------------------------------------------------------------- building blocks
def _split(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from trustlab.data.images import load_digits_images

    ds = load_digits_images(size=16)
    _, first = np.unique(ds.X.reshape(len(ds.X), -1), axis=0, return_index=True)  # exact duplicates dropped
    keep = np.sort(first)
    perm = keep[np.random.default_rng(seed).permutation(len(keep))]
    tr, te = perm[:900], perm[900:]
    X = ds.X[:, None].astype(np.float32)
    return X[tr], ds.y[tr], X[te], ds.y[te]


def _model(kind: str, caps: tuple[np.ndarray, np.ndarray], cfg: Config, Xtr: np.ndarray, ytr: np.ndarray,
           seed: int) -> Any:
    from trustlab.core.seeding import isolated_global_rng
    from trustlab.methods.topodetect import MiniCLIP, train_miniclip

    with isolated_global_rng(seed + (0 if kind == "cnn" else 1000)):
        m = MiniCLIP(caps[0], caps[1], dim=cfg.dim, image_tower=kind, text_head="linear" if kind == "cnn" else "mlp")
    train_miniclip(m, Xtr, ytr, epochs=cfg.clip_epochs, random_state=seed)
    return m


def _embed(m: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Image embeddings, the predicted class's prompt embedding per image, predictions."""
    import torch

    with torch.no_grad():
        xt = torch.as_tensor(X, dtype=torch.float32)
        z = m.encode_image(xt).double().numpy()
        C = m.class_embeddings().double().numpy()
        pred = m(xt).argmax(1).numpy()
    return z, C[pred], pred


def _adversarial(m: Any, attack: str, cfg: Config, X: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    from trustlab.methods.topodetect import ZeroShotFGSM, ZeroShotPGD

    atk = ZeroShotFGSM(model=m, random_state=seed) if attack == "fgsm" else \
        ZeroShotPGD(model=m, steps=cfg.pgd_steps, random_state=seed)
    return atk.generate((X, y.astype(np.int64)), cfg.eps).outputs.astype(np.float32)


def _gradient_check(res: Result) -> None:
    import torch

    from trustlab.methods.topodetect import tp_h0_torch

    g = torch.Generator().manual_seed(0)
    Z = torch.randn(20, 5, generator=g, dtype=torch.float64, requires_grad=True)
    V = torch.randn(20, 5, generator=g, dtype=torch.float64)
    (grad,) = torch.autograd.grad(tp_h0_torch(Z, alpha=1.5), Z)
    h = 1e-6
    with torch.no_grad():
        fd = float((tp_h0_torch(Z + h * V, alpha=1.5) - tp_h0_torch(Z - h * V, alpha=1.5)) / (2 * h))
    res.summary["gradient_rel_error"] = abs(float((grad * V).sum()) - fd) / max(abs(fd), 1e-12)


def run(cfg: Config, ctx: RunContext) -> Result:
    import functools

    from trustlab.experiments._topodetect_seeds import seed_job
    from trustlab.methods.topodetect import caption_features

    res = Result("topodetect", "", cfg.to_dict())
    with ctx.untimed("load MiniLM and encode the captions"):
        caps = caption_features()
    res.summary["captions"] = int(len(caps[0]))
    # one executor task per seed (issue 46); records and summary entries are added in seed order
    done = ctx.map(functools.partial(seed_job, cfg, caps), cfg.seeds, desc="topodetect seeds")
    for records, summary in done:
        res.records.extend(records)
        for key, entries in summary.items():
            res.summary.setdefault(key, {}).update(entries)
    ctx.check_budget(f"{len(cfg.seeds)} seed(s)")
    _gradient_check(res)
    _summarise(cfg, res)
    acc = res.summary["accuracy"]
    ctx.note("zero-shot accuracy: " + ", ".join(f"{k} {v:.3f}" for k, v in acc.items()))
    return res


def _summarise(cfg: Config, res: Result) -> None:
    det = [r for r in res.records if r.get("part") == "detection"]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for t in TESTS:
        for n in cfg.ns:
            rs = [r for r in det if r["test"] == t and r["n"] == n]
            if rs:
                out.setdefault(t, {})[str(n)] = {"power": float(np.mean([r["power"] for r in rs])),
                                                 "type1": float(np.mean([r["type1"] for r in rs])),
                                                 "type1_max": float(np.max([r["type1"] for r in rs]))}
    res.summary["detection"] = out
    res.summary["n_claim"] = int(cfg.n_claim if cfg.n_claim is not None else max(cfg.ns))
    res.summary["n_max"] = int(max(cfg.ns))


# ------------------------------------------------------------------------------------------------ claims
def _rhos(r: Result, measure: str) -> dict[str, float]:
    return {k: v[measure] for k, v in r.summary["spearman"].items() if measure in v}


def _monotone(r: Result, measures: tuple[str, ...], thr: float) -> CheckResult:
    low, bad_sign, parts = 1.0, [], []
    for meas in measures:
        rh = _rhos(r, meas)
        if not rh or (meas.endswith("h1") and not r.config.get("h1", True)):
            continue
        low = min(low, min(abs(v) for v in rh.values()))
        groups: dict[str, list[float]] = {}
        for k, v in rh.items():
            groups.setdefault(k.rsplit("/", 1)[0], []).append(v)
        bad_sign += [f"{meas} {g}" for g, vs in groups.items() if len({np.sign(v) for v in vs}) > 1]
        parts.append(f"{meas}: " + ", ".join(f"{k} {v:+.3f}" for k, v in rh.items()))
    ok = low >= thr and not bad_sign
    return CheckResult(ok, round(low, 4), f">= {thr} (and one sign per stand-in/attack)", unit="|Spearman rho| (min)",
                       detail=("sign flips: " + ", ".join(bad_sign) + "; " if bad_sign else "") + "; ".join(parts))


#: pre-registered premise thresholds (docs/papers/topodetect.md, "Premises, knockout and quick gate")
PRE_CLEAN_ACC = 0.80  # the zero-shot model learned the digits (chance is 0.10)
PRE_ATTACK_DROP = 0.30  # every attack moves the model: >= 30 points of zero-shot accuracy lost
PRE_FEATURE_CORR = 0.95  # the cross-modal feature is not the unimodal one
PRE_POWER_BAND = (0.05, 0.90)  # SAMMD baselines off the floor and leave room for the +0.10 gain of C4


def _check_pre_attack(r: Result) -> CheckResult:
    acc = r.summary["accuracy"]
    cleans = {k.rsplit("/", 1)[0]: v for k, v in acc.items() if k.endswith("/clean")}
    drops = {k: cleans[k.rsplit("/", 1)[0]] - v for k, v in acc.items() if not k.endswith("/clean")}
    low_clean, low_drop = min(cleans.values()), min(drops.values())
    return CheckResult(low_clean >= PRE_CLEAN_ACC and low_drop >= PRE_ATTACK_DROP, round(low_drop, 3),
                       f">= {PRE_ATTACK_DROP} (clean accuracy >= {PRE_CLEAN_ACC})",
                       unit="zero-shot accuracy drop under attack (min)", baseline=f"clean min {low_clean:.3f}",
                       detail=", ".join(f"{k} {v:.3f}" for k, v in acc.items()))


def _check_pre_features(r: Result) -> CheckResult:
    fa = r.summary["feature_agreement"]
    hi = max(v["corr"] for v in fa.values())
    return CheckResult(hi < PRE_FEATURE_CORR, round(hi, 4), f"< {PRE_FEATURE_CORR}",
                       unit="Pearson corr(cross-modal g, unimodal g) (max over seeds)",
                       detail=", ".join(f"{k}: corr {v['corr']:.4f}, max |diff| {v['max_abs_diff']:.3g}"
                                        for k, v in fa.items()))


def _check_pre_ceiling(r: Result) -> CheckResult:
    lo, hi = PRE_POWER_BAND
    s, f = _det(r, "SAMMD")["power"], _det(r, "SAMMD-fixed")["power"]
    ok = lo <= s <= hi and lo <= f <= hi
    return CheckResult(ok, round(max(s, f), 3), f"both in [{lo}, {hi}]",
                       unit=f"baseline power at n={r.summary['n_claim']} (max of SAMMD, SAMMD-fixed)",
                       detail=f"SAMMD {s:.3f}, SAMMD-fixed {f:.3f}")


def _check_c1(r: Result) -> CheckResult:
    return _monotone(r, ("tp_h0",), 0.9)


def _check_c1b(r: Result) -> CheckResult:
    return _monotone(r, ("mk_h0", "tp_h1") if r.config.get("h1") else ("mk_h0",), 0.8)


def _check_c1u(r: Result) -> CheckResult:
    rh = _rhos(r, "image_tp_h0")
    low = min(abs(v) for v in rh.values())
    return CheckResult(None, round(low, 4), "reported (no threshold)", unit="|Spearman rho| (min), image cloud alone",
                       detail=", ".join(f"{k} {v:+.3f}" for k, v in rh.items()))


def _det(r: Result, test: str, at: str = "n_claim") -> dict[str, float]:
    return r.summary["detection"][test][str(r.summary.get(at, r.summary["n_claim"]))]


def _check_c2(r: Result) -> CheckResult:
    d = r.summary["detection"]
    worst = max((v["type1"], t, n) for t, ns in d.items() for n, v in ns.items())
    return CheckResult(worst[0] <= 0.10, round(worst[0], 3), "<= 0.10",
                       unit="type-I error (max over tests and n of the mean over seeds)",
                       detail=f"worst: {worst[1]} at n={worst[2]}; single-seed max "
                              f"{max(v['type1_max'] for ns in d.values() for v in ns.values()):.2f}; " + "; ".join(
                           f"{t}: " + ", ".join(f"n={n} {v['type1']:.2f}" for n, v in ns.items()) for t, ns in d.items()))


def _check_c3(r: Result) -> CheckResult:
    s, g = _det(r, "SAMMD", "n_max")["power"], _det(r, "MMD-G", "n_max")["power"]
    n = r.summary.get("n_max", r.summary["n_claim"])
    return CheckResult(s >= 0.5 and s > g, round(s, 3), ">= 0.5 and > MMD-G", unit=f"power at n={n}",
                       baseline=f"MMD-G {g:.3f}", detail=f"MMD-D {_det(r, 'MMD-D', 'n_max')['power']:.3f}")


def _check_c4(r: Result) -> CheckResult:
    tc, s = _det(r, "TC-SAMMD"), _det(r, "SAMMD")["power"]
    gain = tc["power"] - s
    ok = gain >= 0.10 and tc["type1"] <= 0.10
    return CheckResult(ok, round(gain, 3), ">= 0.10 (type-I <= 0.10)", unit="power gain over SAMMD",
                       baseline=f"SAMMD {s:.3f}", detail=f"TC-SAMMD power {tc['power']:.3f}, type-I {tc['type1']:.3f} "
                                                         f"(max {tc['type1_max']:.3f}); unimodal control power "
                                                         f"{_det(r, 'TC-SAMMD (unimodal)')['power']:.3f}")


def _check_c4f(r: Result) -> CheckResult:
    tc, s = _det(r, "TC-SAMMD-fixed")["power"], _det(r, "SAMMD-fixed")["power"]
    return CheckResult(tc >= s, round(tc - s, 3), ">= 0", unit="power gain (untrained kernels)",
                       baseline=f"SAMMD-fixed {s:.3f}", detail=f"TC-SAMMD-fixed {tc:.3f}")


def _check_c4u(r: Result) -> CheckResult:
    tc, u = _det(r, "TC-SAMMD")["power"], _det(r, "TC-SAMMD (unimodal)")["power"]
    return CheckResult(tc - u >= 0.05, round(tc - u, 3), ">= 0.05", unit="power, cross-modal minus unimodal",
                       baseline=f"unimodal {u:.3f}", detail=f"cross-modal {tc:.3f}")


def _check_c5(r: Result) -> CheckResult:
    e = r.summary["gradient_rel_error"]
    return CheckResult(e < 1e-6, float(f"{e:.3g}"), "< 1e-6", unit="relative error")


def _note_sig(c: dict[str, Any]) -> str:
    return (f"{len(c['seeds'])} seed(s) x stand-ins {list(c['models'])} x attacks {list(c['attacks'])} (L-inf eps "
            f"{c['eps']}, PGD {c['pgd_steps']} steps); {c['n_proportions']} proportions x {c['sig_batches']} batches "
            f"of {c['sig_batch_size']} pairs; H1 {'on' if c['h1'] else 'off'}; 16x16 digits, MiniCLIP d={c['dim']} "
            "(the paper: CLIP/BLIP on CIFAR/ImageNet)")


def _note_det(c: dict[str, Any]) -> str:
    return (f"PGD eps {c['eps']} on the {c['models'][0]} stand-in; n in {list(c['ns'])}, {c['reps']} test sets per n "
            f"and seed, {len(c['seeds'])} seed(s) (one kernel fit each on {c['n_kernel_train']} + "
            f"{c['n_kernel_train']} held-out pairs, {c['kernel_epochs']} Adam epochs), {c['n_null']} null draws, "
            f"alpha 0.05; topological features ({c.get('topo_view', 'contrast')} cloud) from {c['topo_batches']} "
            f"batches of {c['topo_batch_size']} (reference {c['n_ref']} clean digits); claim n "
            f"{c.get('n_claim') or max(c['ns'])}")


_ATK = ("pre-attack-moves",)
_C4_PRE = ("pre-attack-moves", "pre-features-differ", "pre-off-ceiling")

CLAIMS = [
    Premise("pre-attack-moves", f"the zero-shot model learned the digits (clean accuracy >= {PRE_CLEAN_ACC}) and "
                                f"every attack drops its accuracy by >= {PRE_ATTACK_DROP}", _check_pre_attack,
            scale_note=_note_sig),
    Premise("pre-features-differ", f"the cross-modal topological feature differs from the unimodal one (correlation "
                                   f"< {PRE_FEATURE_CORR} over the detection rows)", _check_pre_features,
            scale_note=_note_det),
    Premise("pre-off-ceiling", f"SAMMD and SAMMD-fixed power at the claim's n both in [{PRE_POWER_BAND[0]}, "
                               f"{PRE_POWER_BAND[1]}] (off the floor, room for a +0.10 gain)", _check_pre_ceiling,
            scale_note=_note_det),
    Claim("C1", "monotone signature: |Spearman rho(p, mean TP-H0 loss)| >= 0.9 for every stand-in, attack and seed, "
                "one sign per stand-in/attack over seeds", _check_c1, scale_note=_note_sig, requires=_ATK),
    Claim("C1b", "monotone signature of MK-H0 and TP-H1: |rho| >= 0.8, one sign per stand-in/attack", _check_c1b,
          scale_note=_note_sig, requires=_ATK),
    Claim("C1u", "unimodal control: |rho| of the image cloud's own TP-H0 (reported beside C1)", _check_c1u,
          scale_note=_note_sig, secondary=True, requires=_ATK),
    Claim("C2", "calibration: every test's type-I error (clean vs clean, alpha 0.05, mean over seeds) <= 0.10 at "
                "every n",
          _check_c2, scale_note=_note_det),
    Claim("C3", "power sanity: trained SAMMD power >= 0.5 and > untrained MMD-G at the largest n", _check_c3,
          scale_note=_note_det, requires=_ATK),
    Claim("C4", "paper claim: topology-augmented SAMMD power >= SAMMD power + 0.10 at the claim's n with type-I <= "
                "0.10", _check_c4, scale_note=_note_det, requires=_C4_PRE),
    Claim("C4f", "untrained kernels: TC x SAMMD-fixed power >= SAMMD-fixed power at the claim's n", _check_c4f,
          scale_note=_note_det, requires=_C4_PRE),
    Claim("C4u", "cross-modal feature: TC-SAMMD power - unimodal TC-SAMMD power >= 0.05 at the claim's n", _check_c4u,
          scale_note=_note_det, secondary=True, requires=("pre-features-differ",)),
    Claim("C5", "the differentiable H0 path matches central finite differences (relative error < 1e-6)", _check_c5,
          scale_note="a 20-point Gaussian cloud in 5-d, alpha 1.5, h = 1e-6, float64"),
]
#: issue 39: the rule's gate (python -m trustlab.experiments._gates topodetect, 2026-12-02, git 3b968bb) over
#: quick seeds 0-4 + KNOCKOUT is (pre-attack-moves, pre-off-ceiling, C1, C3). C3 is dropped: it FAILs on quick
#: seed 0 itself (the run tests/test_reproduce.py makes; SAMMD power at its 0.5 edge). C2 (2/5) and C5 (PASS under
#: the knockout) are no longer gated; C4/C4f are VOID on every seed (pre-features-differ: the cross-modal feature is
#: the unimodal one). Before issue 39 the gate was (C1, C2, C5).
#: 2026-12-03, a second machine (git 1392e0b): C1 3/5 (FAIL on seeds 3 and 4), so it leaves the gate (design.md: the
#: intersection over machines); C3 passes 5/5 there but failed quick seed 0 on the first machine, so it stays out.
#: issue 40 (2026-12-07, git d635bfb; joint feature, quick n = 15): the rule gives (pre-attack-moves, C1); C1 (4/5) is at
#: the rule's edge, so the gate keeps the premise that passes 5/5 with a wide margin; pre-off-ceiling 2/5 leaves it.
QUICK_EXPECTED_PASS: tuple[str, ...] = ("pre-attack-moves",)
#: the attack switched off: eps = 0, so the "adversarial" images are the clean ones (everything else runs)
KNOCKOUT: tuple[str, ...] = ("eps=0",)


def TABLES(result: Result) -> dict[str, str]:  # noqa: N802 - the contract's name
    """The power curve (power / type-I error per test and n, mean over seeds) as a markdown table."""
    det = result.summary.get("detection", {})
    ns = sorted({int(n) for v in det.values() for n in v})
    if not ns:
        return {}
    claim_n = result.summary.get("n_claim")
    head = "| test | " + " | ".join(f"n = {n}" + (" (claim)" if n == claim_n else "") for n in ns) + " |"
    rows = [head, "|---" * (len(ns) + 1) + "|"]
    for t, v in det.items():
        cells = [f"{v[str(n)]['power']:.2f} / {v[str(n)]['type1']:.2f}" if str(n) in v else "-" for n in ns]
        rows.append(f"| {t} | " + " | ".join(cells) + " |")
    return {"power": "\n".join(rows)}


def PLOTS(result: Result) -> dict[str, Any]:
    from trustlab.results.plots import line_plot, new_figure

    out: dict[str, Any] = {}
    sig = [r for r in result.records if r.get("part") == "signature" and r["seed"] == result.config["seeds"][0]]
    fig, _ = new_figure(9.0, 3.4)
    fig.clf()
    axes = fig.subplots(1, 3)
    for ax, meas in zip(axes, ("tp_h0", "mk_h0", "image_tp_h0")):
        for key in sorted({(r["model"], r["attack"]) for r in sig}):
            rs = sorted([r for r in sig if (r["model"], r["attack"]) == key and r["measure"] == meas],
                        key=lambda r: r["proportion"])
            if rs:
                v = np.array([r["loss"] for r in rs])
                ax.plot([r["proportion"] for r in rs], v / max(abs(v[0]), 1e-12), marker="o", ms=3,
                        label=f"{key[0]}/{key[1]}")
        ax.set_xlabel("adversarial proportion p")
        ax.set_title({"tp_h0": "TP-H0 loss", "mk_h0": "MK-H0 loss", "image_tp_h0": "image-only TP-H0 (control)"}[meas],
                     fontsize=8)
    axes[0].set_ylabel("mean loss / value at p=0")
    axes[0].legend(fontsize=7)
    fig.suptitle("Topological signature vs adversarial fraction (first seed)", fontsize=9)
    out["signature_vs_fraction"] = fig
    det = [r for r in result.records if r.get("part") == "detection"]
    tmp = Result("topodetect", result.mode, {}, records=det)
    out["power_vs_n"] = line_plot(tmp, x="n", y="power", hue="test", ylabel="power (PGD vs clean)",
                                  title="Test power vs sample size n (mean over seeds)")
    return out
