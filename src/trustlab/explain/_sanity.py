"""Sanity verdicts: rank correlation of an explanation with its controls, and deletion/insertion faithfulness.

Documented thresholds (:data:`THRESHOLDS`):

* ``model_randomisation`` and ``data_randomisation`` PASS when the mean per-row Spearman correlation of the
  *absolute* attributions (the importance ranking a reader sees) between the real explanation and the
  control's is below ``max_rank_correlation`` = 0.5 (Adebayo et al. 2018's "the explanation must change when
  the model does"; the spec's ``rho < 0.5``). The fully randomised cascade stage is the one judged.
* ``placebo_faithfulness`` PASSES when, for every placebo, the lower end of a ``confidence`` bootstrap
  interval over rows of ``deletion(real) - deletion(placebo)`` is above 0: removing the features the real
  explanation ranks first must lower the model's output more than removing the placebo's.

Features that are constant on the background and the explained rows are left out of the correlations (no
explainer can attribute anything to them, and their shared ties would inflate every correlation). Rows
whose attributions are constant have no ranking; they are left out and counted. A correlation needs at
least two features.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from trustlab.core.exceptions import InputError

__all__ = ["THRESHOLDS", "RankCorrelation", "Faithfulness", "CheckVerdict", "SanityVerdict", "row_spearman",
           "faithfulness_curves", "judge"]

THRESHOLDS: dict[str, Any] = {
    "max_rank_correlation": 0.5,
    "confidence": 0.95,
    "n_boot": 2000,
    "deletion_steps": 10,
}


def _ranks(a: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(a, axis=1)


def row_spearman(a: np.ndarray, b: np.ndarray, *, absolute: bool = True, keep: np.ndarray | None = None
                 ) -> tuple[np.ndarray, int]:
    """Per-row Spearman correlation of ``a`` and ``b`` (``(n, p)``) over the features in ``keep``.

    Returns the correlations of the rows where both rows vary (NaN elsewhere) and the number of such rows.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if keep is not None:
        a, b = a[:, keep], b[:, keep]
    if a.shape[1] < 2:
        raise InputError(f"A rank correlation between attribution vectors needs at least 2 features; this "
                         f"explanation has {a.shape[1]} feature(s) that vary, so its correlations with the controls "
                         "are undefined (explain more features, or pass controls=False).")
    if absolute:
        a, b = np.abs(a), np.abs(b)
    ra, rb = _ranks(a), _ranks(b)
    ra, rb = ra - ra.mean(axis=1, keepdims=True), rb - rb.mean(axis=1, keepdims=True)
    den = np.sqrt((ra ** 2).sum(axis=1) * (rb ** 2).sum(axis=1))
    ok = den > 0
    rho = np.full(len(a), np.nan)
    rho[ok] = (ra[ok] * rb[ok]).sum(axis=1) / den[ok]
    return rho, int(ok.sum())


@dataclass(frozen=True)
class RankCorrelation:
    """Mean per-row Spearman correlation of the real explanation with one control (absolute and signed)."""

    control: str
    absolute: float
    signed: float
    n_rows: int
    n_rows_defined: int


@dataclass(frozen=True)
class Faithfulness:
    """Deletion and insertion scores per row (higher = more faithful) and their means."""

    deletion: np.ndarray
    insertion: np.ndarray

    @property
    def mean_deletion(self) -> float:
        return float(np.mean(self.deletion))

    @property
    def mean_insertion(self) -> float:
        return float(np.mean(self.insertion))


def faithfulness_curves(target_values: Any, X: np.ndarray, values: np.ndarray, target: np.ndarray,
                        fill: np.ndarray, rng: np.random.Generator, steps: int) -> Faithfulness:
    """Deletion and insertion scores of ``values`` as an ordering of the features of each row of ``X``.

    Features are taken in decreasing attribution (most supporting first; ties in random order). Deletion:
    the mean over ``k = 0..p`` (``steps`` + 1 points) of ``f(x) - f(x with its top-k features set to fill)``.
    Insertion: the mean of ``f(fill with the top-k features of x) - f(fill)``. ``target_values(Z, t)`` is
    output ``t[i]`` of the model on row ``i`` of ``Z``; ``target`` is the explained output of each row of ``X``.
    """
    n, p = X.shape
    ks = np.unique(np.round(np.linspace(0, p, min(p, steps) + 1)).astype(int))
    order = np.lexsort((rng.random((n, p)), -values), axis=1)
    rank = np.empty_like(order)
    rank[np.arange(n)[:, None], order] = np.arange(p)[None, :]
    top = rank[None, :, :] < ks[:, None, None]  # (K, n, p): feature among the top-k of its row
    deleted = np.where(top, fill[None, None, :], X[None, :, :]).reshape(-1, p)
    inserted = np.where(top, X[None, :, :], fill[None, None, :]).reshape(-1, p)
    t = np.tile(np.asarray(target, dtype=int), len(ks))
    f_del = target_values(deleted, t).reshape(len(ks), n)
    f_ins = target_values(inserted, t).reshape(len(ks), n)
    return Faithfulness(deletion=(f_del[0] - f_del).mean(axis=0), insertion=(f_ins - f_ins[0]).mean(axis=0))


@dataclass(frozen=True)
class CheckVerdict:
    """One sanity check: ``status`` PASS, FAIL, NOT_RUN (the control could not be made) or UNDEFINED."""

    name: str
    status: str
    observed: float | None
    threshold: str
    detail: str = ""


@dataclass
class SanityVerdict:
    """All checks of one explanation; ``status`` FAIL if any check fails, PASS if all pass, else INCOMPLETE."""

    checks: list[CheckVerdict]
    correlations: dict[str, RankCorrelation]
    faithfulness: dict[str, Faithfulness]
    cascade: list[RankCorrelation] = field(default_factory=list)
    thresholds: dict[str, Any] = field(default_factory=lambda: dict(THRESHOLDS))
    #: control name -> each explained row's Spearman of |attributions| with that control (NaN where undefined)
    row_correlations: dict[str, np.ndarray] = field(default_factory=dict)
    #: the features the correlations compare (those that vary on the background and the explained rows)
    compared_features: np.ndarray | None = None

    @property
    def status(self) -> str:
        states = [c.status for c in self.checks]
        if "FAIL" in states:
            return "FAIL"
        return "PASS" if states and all(s == "PASS" for s in states) else "INCOMPLETE"

    @property
    def n_rows(self) -> int:
        """The number of explained rows the checks were computed on."""
        return int(len(self.faithfulness["real"].deletion))

    @property
    def passed(self) -> bool:
        return self.status == "PASS"

    def failures(self) -> list[CheckVerdict]:
        return [c for c in self.checks if c.status != "PASS"]

    def summary(self) -> str:
        """One line: the status and every check that did not pass."""
        bad = "; ".join(f"{c.name} {c.status}" + (f" ({c.detail})" if c.detail else "") for c in self.failures())
        return self.status + (f": {bad}" if bad else "")

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "n_rows": self.n_rows, "checks": [asdict(c) for c in self.checks],
                "correlations": {k: asdict(v) for k, v in self.correlations.items()},
                "cascade": [asdict(c) for c in self.cascade],
                "faithfulness": {k: {"mean_deletion": v.mean_deletion, "mean_insertion": v.mean_insertion}
                                 for k, v in self.faithfulness.items()},
                "thresholds": dict(self.thresholds)}


def _randomisation_check(name: str, corr: RankCorrelation | None, reason: str | None) -> CheckVerdict:
    thr = THRESHOLDS["max_rank_correlation"]
    if corr is None:
        return CheckVerdict(name, "NOT_RUN", None, f"< {thr}", reason or "control not available")
    if corr.n_rows_defined == 0:
        return CheckVerdict(name, "UNDEFINED", None, f"< {thr}", "no row where both the real and the control "
                            "attributions vary: the rank correlation is undefined")
    ok = corr.absolute < thr
    return CheckVerdict(name, "PASS" if ok else "FAIL", corr.absolute, f"< {thr}",
                        "" if ok else f"Spearman |attr| with the {name.replace('_', ' ')} control is {corr.absolute:.2f}: "
                        "the explanation does not depend on what the model learned")


def _placebo_check(real: Faithfulness, placebos: dict[str, Faithfulness], rng: np.random.Generator) -> CheckVerdict:
    conf, n_boot = THRESHOLDS["confidence"], THRESHOLDS["n_boot"]
    lows = {}
    for name, pf in placebos.items():
        diff = real.deletion - pf.deletion
        idx = rng.integers(0, len(diff), size=(n_boot, len(diff)))
        lows[name] = float(np.quantile(diff[idx].mean(axis=1), (1 - conf) / 2))
    worst = min(lows, key=lows.get)
    ok = lows[worst] > 0
    return CheckVerdict("placebo_faithfulness", "PASS" if ok else "FAIL", lows[worst],
                        f"> 0 (lower {conf:.0%} bootstrap bound of deletion(real) - deletion(placebo))",
                        "" if ok else f"deletion faithfulness is not above the {worst} placebo's")


def judge(correlations: dict[str, RankCorrelation], faith: dict[str, Faithfulness], reasons: dict[str, str],
          cascade: list[RankCorrelation], rng: np.random.Generator,
          row_correlations: dict[str, np.ndarray] | None = None, compared_features: np.ndarray | None = None
          ) -> SanityVerdict:
    """The verdict from the measured correlations and faithfulness scores (see the module docstring)."""
    checks = [_randomisation_check(n, correlations.get(n), reasons.get(n))
              for n in ("model_randomisation", "data_randomisation")]
    checks.append(_placebo_check(faith["real"], {k: v for k, v in faith.items() if k.startswith("placebo")}, rng))
    return SanityVerdict(checks=checks, correlations=correlations, faithfulness=faith, cascade=cascade,
                         row_correlations=dict(row_correlations or {}), compared_features=compared_features)
