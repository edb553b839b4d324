"""Experiment ``licensing``: a collective-licensing compensation report on the spec's demo (issues 22, 41).

The position paper (Hazra et al., ICML 2025) has no experiments; its recommendation R5 is royalties paid
by each contributor's contribution. The demo of spec 3.4: digits, 10 owners x 100 points, owners 7-9 with
10/20/30 % of their labels flipped, owner 3 re-submitting owner 2's data, 300 validation points, a pool of
100,000 EUR. Primary claims (empirical, issue 41): G1 a re-submission perturbed well beyond the old
tolerance gains its submitter <= 2 pp with the embedded de-duplication; G2 that rule's cost on a clean pool;
P6a/P6b noisy labels; M1 Monte-Carlo standard errors at 200 owners; S1 the worst owner stays worst across
utilities, K and validation sets. The algebraic properties P1-P5, P7 (money sums, efficiency telescopes,
null players, copies dropped before valuation) and the zero-value rule Z1 are secondary lines, tested in
tests/methods/test_licensing.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.experiments import _licensing_claims as C
from trustlab.experiments._licensing_data import make_demo
from trustlab.experiments._licensing_measures import gaming, monte_carlo, sensitivity, zero_value
from trustlab.experiments._licensing_premises import (
    PRE_LEARNED,
    PRE_RANGE,
    _pre_learned,
    _pre_values_vary,
    _premise_stats,
)
from trustlab.experiments._licensing_props import (
    _duplicates,
    _efficiency,
    _money,
    _noise_and_determinism,
    _symmetry_null,
)
from trustlab.experiments.base import Claim, ExperimentConfig, Premise, RunContext
from trustlab.methods.licensing import PAPER as PAPER
from trustlab.results.result import Result

TITLE = "Collective licensing: a contributor compensation report by data valuation"
EXTRAS: tuple[str, ...] = ()

#: the quick gate's rule (python -m trustlab.experiments._gates licensing, 2026-12-03: >= 4 of 5 quick seeds, not PASS
#: under KNOCKOUT; the table is in docs/papers/licensing.md). S1 passed 3 of 5 quick seeds (the log-likelihood owner
#: game ranks another noisy owner lowest on seeds 1-2) and G2 passes under the knockout, so the rule leaves them out;
#: M1 FAILs under the knockout (82 % coverage: chance-level values have skewed marginals) and is admitted.
#: Secondary lines (the properties P1-P5, P7, Z1 and G1b) are never gated.
QUICK_EXPECTED_PASS = ("pre-learned", "G1", "P6a", "P6b", "M1")
#: the mechanism off: the validation labels are shuffled, so the utility the values are computed from carries no
#: information about the training points (the model's validation accuracy falls to chance), and the gaming check
#: uses the old max-norm near de-duplication (tol near_tol) instead of the embedded rule
KNOCKOUT: tuple[str, ...] = ("shuffle_val_labels=true", "gaming_dedup=near")


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: tuple[int, ...] = (0,)
    n_owners: int = 10
    points_per_owner: int = 100
    n_val: int = 300
    k: int = 5
    flip_rates: tuple[float, ...] = (0.1, 0.2, 0.3)  # the last owners' label-flip rates (owners 7, 8, 9)
    resubmitter: int = 3                              # owner who re-submits ...
    resubmitted: int = 2                              # ... this owner's data
    pool: float = 100000.0
    currency: str = "EUR"
    tmc_permutations: int = 300
    tmc_truncation: float = 0.01                      # the truncated TMC run (secondary P2d)
    banzhaf_samples: int = 1000
    money_trials: int = 2000
    noise_rate: float = 0.1                           # P6a: random label flips over the whole training set
    n_dup_inject: int = 50                            # P5a: exact copies and near copies injected (each)
    near_tol: float = 0.01                            # in pixel units of digits scaled to [0, 1] (grid 1/16)
    singleton_subsets: int = 5                        # P2a: 12-point subsets checked against the exact game
    logreg_game: bool = True                          # P2b also with the logistic-accuracy utility
    shuffle_val_labels: bool = False                  # True (the KNOCKOUT): validation labels permuted at random
    # issue 41 -------------------------------------------------------------------------------------------
    gaming_dedup: str = "embedded"                    # G1: the de-duplication the perturbed re-submission meets
    perturb_amplitudes: tuple[float, ...] = (0.05, 0.8)  # G1: uniform per-pixel noise, 0-16 pixel scale
    sweep_amplitudes: tuple[float, ...] = (1.6, 3.2)  # G1b (secondary): where the embedded rule stops finding copies
    near_quantile: float = 0.01                       # embedded tolerance: this quantile of validation->training NN
    near_variance: float = 0.9                        # distances in the PCA space keeping this share of variance
    mc_owners: int = 200                              # M1: the demo's points re-split among this many owners
    mc_permutations: int = 200                        # M1: permutations of the shorter run
    mc_reference_factor: int = 5                      # M1: the reference run has this many times more
    sens_k: tuple[int, ...] = (1, 3, 5, 10, 20)       # S1: K of the sensitivity grid
    sens_bootstraps: int = 3                          # S1: bootstrap resamples of the validation set

    @classmethod
    def quick(cls) -> Config:
        return cls(points_per_owner=50, n_val=150, tmc_permutations=100, banzhaf_samples=300, money_trials=300,
                   n_dup_inject=25, singleton_subsets=2, logreg_game=False, mc_owners=100, mc_permutations=100)

    @classmethod
    def paper(cls) -> Config:
        return cls(tmc_permutations=1000, banzhaf_samples=4000, money_trials=10000, seeds=(0, 1, 2))

    def validate(self) -> None:
        super().validate()
        from trustlab.core.constraints import Interval, Options, validate_value
        from trustlab.core.exceptions import ConfigError

        for name in ("n_owners", "points_per_owner", "n_val", "k", "tmc_permutations", "banzhaf_samples",
                     "money_trials", "n_dup_inject", "singleton_subsets", "mc_owners", "mc_permutations",
                     "mc_reference_factor"):
            validate_value("licensing.Config", name, getattr(self, name), [Interval(int, 1, None)])
        validate_value("licensing.Config", "near_tol", self.near_tol, [Interval(float, 0, 1 / 32)])
        validate_value("licensing.Config", "noise_rate", self.noise_rate, [Interval(float, 0, 1)])
        validate_value("licensing.Config", "near_quantile", self.near_quantile, [Interval(float, 0, 1, closed="neither")])
        validate_value("licensing.Config", "near_variance", self.near_variance, [Interval(float, 0, 1, closed="right")])
        validate_value("licensing.Config", "gaming_dedup", self.gaming_dedup, [Options(["embedded", "near", "exact"])])
        if self.mc_owners > self.n_owners * self.points_per_owner:
            raise ConfigError(f"The 'mc_owners' field of licensing.Config must be <= the {self.n_owners * self.points_per_owner}"
                              f" training points (each owner needs one). Got {self.mc_owners}.")
        if not 2 <= self.n_owners <= 11 or len(self.flip_rates) >= self.n_owners - 1:
            raise ConfigError(f"The 'n_owners' field of licensing.Config must be in [2, 11] (P3 adds an owner to "
                              f"the exact game) and exceed len(flip_rates) + 1. Got {self.n_owners}.")
        if 1797 < self.n_owners * self.points_per_owner + 2 * self.n_val:
            raise ConfigError("licensing.Config asks for more digits than the 1,797 available (the training points "
                              "and two validation sets: the demo's and S1's disjoint one).")


def run(cfg: Config, ctx: RunContext) -> Result:
    from trustlab.methods.licensing import compensation_report

    res = Result("licensing", "", {})
    seed = cfg.seeds[0]
    d = make_demo(cfg, seed)
    if cfg.shuffle_val_labels:
        d["y_val"] = np.random.default_rng([seed, 9]).permutation(d["y_val"])
        d["y_val2"] = np.random.default_rng([seed, 10]).permutation(d["y_val2"])
    _premise_stats(cfg, d, res)
    common = {"pool": cfg.pool, "currency": cfg.currency, "k": cfg.k, "random_state": seed}
    args = (d["X_demo"], d["y_demo"], d["owner_demo"], d["X_val"], d["y_val"])

    # -- the demo report (knn_shapley, exact dedup, counterfactual without dedup) -----------------------
    demo = compensation_report(*args, **common)
    res.summary["demo_report"] = demo.to_dict()
    res.summary["demo_markdown"] = demo.to_markdown()
    for o in demo.owners:
        for stage, v in (("no_dedup", o.share_no_dedup), ("dedup", o.share_dedup), ("final", o.share)):
            res.add(method="knn_shapley", dataset="digits-demo", seed=seed, owner=o.owner, metric="share",
                    stage=stage, value=v, payout_minor=o.payout_minor, flip_rate=float(d["rates"][int(o.owner)]))
    ctx.check_budget("demo report")

    res.summary.update(_money(cfg, np.random.default_rng([seed, 1])))
    res.summary["demo_payout_sum"] = int(sum(o.payout_minor for o in demo.owners))
    res.summary["demo_share_range_pp"] = 100 * float(max(o.share for o in demo.owners) - min(o.share for o in demo.owners))
    res.summary["demo_pool_minor"] = demo.pool_minor

    _efficiency(cfg, d, res, common)
    ctx.check_budget("efficiency")
    _symmetry_null(cfg, d, res, common)
    ctx.check_budget("symmetry and null players")
    _duplicates(cfg, d, res, common)
    ctx.check_budget("duplicates")
    gaming(cfg, d, res, common, ctx)
    ctx.check_budget("perturbed re-submission")
    monte_carlo(cfg, d, res, common)
    ctx.check_budget("Monte Carlo at many owners")
    sensitivity(cfg, d, res, common, ctx)
    ctx.check_budget("sensitivity")
    zero_value(cfg, d, res, common)

    _noise_and_determinism(cfg, d, res, common, demo)
    return res


def _note(cfg: dict[str, Any]) -> str:
    return (f"digits, {cfg['n_owners']} owners x {cfg['points_per_owner']} points, {cfg['n_val']} validation points, "
            f"k={cfg['k']}, flip rates {tuple(cfg['flip_rates'])} for the last owners")


_PROP = "(property, secondary since issue 41: holds by construction; tested in tests/methods/test_licensing.py) "

CLAIMS = [
    Premise("pre-learned", f"The valuation's model learned: k-NN on all owners' points beats the majority class on the "
            f"validation set by >= {PRE_LEARNED:g} points", _pre_learned),
    Premise("pre-values-vary", f"The payouts are not constant: the demo's largest and smallest final shares differ by "
            f">= {PRE_RANGE:g} pp", _pre_values_vary),
    Claim("G1", f"A re-submission of another owner's images perturbed by +-0.05 and by +-0.8 (uniform per pixel, 0-16 "
          f"scale) gains its submitter <= {C.G1_MAX_GAIN_PP:g} pp of share with the embedded de-duplication "
          "(Euclidean in a PCA space, tolerance = the near_quantile quantile of validation->training nearest-"
          "neighbour distances)", C._g1, requires=("pre-learned", "pre-values-vary"),
          scale_note=lambda c: f"amplitudes {tuple(c['perturb_amplitudes'])}, dedup {c['gaming_dedup']}, quantile "
          f"{c['near_quantile']}, PCA variance {c['near_variance']}; " + _note(c)),
    Claim("G1b", "The same re-submission at larger amplitudes: where the embedded rule stops finding copies", C._g1b,
          secondary=True, requires=("pre-learned", "pre-values-vary"),
          scale_note=lambda c: f"amplitudes {tuple(c['sweep_amplitudes'])} (0-16 scale); threshold as G1"),
    Claim("G2", f"The embedded rule's cost on the clean pool (no copies): it drops <= {100 * C.G2_MAX_DROP:g} % of the "
          f"rows and moves no owner's share by more than {C.G2_MAX_MOVE_PP:g} pp against exact de-duplication", C._g2,
          scale_note=_note),
    Claim("P6a", "Noisy labels: with 10 % flipped labels the AUROC of -phi (KNN-Shapley) is >= 0.95", C._p6a,
          requires=("pre-learned",),
          scale_note=lambda c: f"{c['noise_rate']} of {c['n_owners'] * c['points_per_owner']} training labels "
          "flipped at random"),
    Claim("P6b", "Owners' shares decrease with their flip rate: Spearman(flip rate, share) <= -0.8 across the demo's "
          "owners", C._p6b, requires=("pre-learned", "pre-values-vary"),
          scale_note=lambda c: _note(c) + "; the tied zero rates cap |rho| near 0.81"),
    Claim("M1", f"Owner-level Monte Carlo (permutation sampling, KNN utility) at hundreds of owners: the values agree "
          f"with an independent run of 5x the permutations within 1.96 combined standard errors for >= "
          f"{100 * C.M1_MIN_COVERAGE:g} % of owners (nominal 95 %); payouts carry their SE", C._m1,
          scale_note=lambda c: f"{c['mc_owners']} owners, {c['mc_permutations']} and "
          f"{c['mc_reference_factor'] * c['mc_permutations']} permutations; " + _note(c)),
    Claim("S1", "The owner with the highest flip rate gets the lowest share under every setting of the sensitivity "
          "grid (utility: KNN-Shapley and the exact owner game with the KNN, naive-Bayes log-likelihood and, in "
          "default mode, logistic utilities; K in sens_k; a disjoint validation set and bootstrap resamples)", C._s1,
          requires=("pre-learned", "pre-values-vary"),
          scale_note=lambda c: f"K {tuple(c['sens_k'])}, {c['sens_bootstraps']} bootstraps; " + _note(c)),
    Claim("Z1", "Zero-value rule (property): an all-noise pool valued by the log-likelihood owner game has nothing left "
          "(v(N) - v(empty) <= 0); fallback='unpaid' pays nothing and says so, fallback='equal' splits evenly",
          C._z1, secondary=True, scale_note=_note),
    Claim("P1", _PROP + "Money efficiency: payouts are integers of minor units summing exactly to the pool (random "
          "splits with negatives, ties and three currencies, and the demo), each within one unit of its quota", C._p1,
          secondary=True, scale_note=lambda c: f"{c['money_trials']} random splits; " + _note(c)),
    Claim("P2a", _PROP + "KNN-Shapley is efficient (sum = v(N) - v(empty) to 1e-9) and equals the exact Shapley value "
          "of the singleton KNN game (to 1e-12)", C._p2a, secondary=True,
          scale_note=lambda c: f"{c['singleton_subsets']} random 12-point subsets, k drawn in [1, {c['k']}]; " + _note(c)),
    Claim("P2b", _PROP + "Exact owner Shapley is efficient to 1e-9 for the KNN, naive-Bayes log-likelihood (and "
          "logistic) utilities", C._p2b, secondary=True,
          scale_note=lambda c: "logistic utility " + ("included" if c["logreg_game"] else "skipped (quick mode)")
          + "; " + _note(c)),
    Claim("P2c", _PROP + "TMC Shapley (no truncation) agrees with exact owner Shapley within 3 standard errors for >= "
          "90 % of owners, and its efficiency residual is within 3 SE", C._p2c, secondary=True,
          scale_note=lambda c: f"{c['tmc_permutations']} permutations; " + _note(c)),
    Claim("P2d", "Truncated TMC (tol = tmc_truncation) keeps efficiency within 3 SE of its per-permutation total",
          C._p2d, secondary=True,
          scale_note=lambda c: f"tol {c['tmc_truncation']}, {c['tmc_permutations']} permutations; truncation biases "
          "the total by up to tol * v(N), which the SE does not cover"),
    Claim("P3", _PROP + "Symmetry: an owner holding the same multiset of points as owner 0 (dedup off) gets the same "
          "raw value (1e-12) and payout (1 cent)", C._p3, secondary=True, scale_note=_note),
    Claim("P4", _PROP + "Null players: a registered owner with 0 points and an owner whose points are all removed by "
          "dedup get exactly 0; a dummy owner of the exact game gets 0 to 1e-12", C._p4, secondary=True,
          scale_note=_note),
    Claim("P5a", _PROP + "Injected exact and near duplicates (|delta|_inf <= 0.9 tol) are found with precision and "
          "recall >= 0.99", C._p5a, secondary=True,
          scale_note=lambda c: f"{c['n_dup_inject']} exact + {c['n_dup_inject']} near copies, tol "
          f"{c['near_tol']}; " + _note(c)),
    Claim("P5b", _PROP + "With dedup, duplicating one's own data (exactly or within tol) or re-submitting another's "
          "changes one's share by <= 0.5 pp", C._p5b, secondary=True, scale_note=_note,
          requires=("pre-learned", "pre-values-vary")),
    Claim("P7", _PROP + "Determinism: the same seed and inputs give a byte-identical JSON report", C._p7,
          secondary=True, scale_note=_note),
]


def PLOTS(result: Result) -> dict[str, Any]:
    from trustlab.methods.licensing import CompensationReport
    from trustlab.results.plots import claims_plot

    rep = CompensationReport.from_dict(result.summary["demo_report"])
    return {"shares": rep.plot_shares(), "waterfall": rep.plot_waterfall(), "claims": claims_plot(result)}
