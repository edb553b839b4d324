"""Power analysis for a two-group comparison: the exact noncentral-t computation (Cohen 1988, ch. 2).

For a two-sample t-test with standardised effect size ``d``, group sizes ``n1`` and ``n2 = ratio * n1``,
the test statistic follows a noncentral t with ``df = n1 + n2 - 2`` and noncentrality
``d * sqrt(n1 n2 / (n1 + n2))``. ``sample_size`` solves ``power(n1) = target`` for ``n1`` and rounds up.
Textbook check: d = 0.5, alpha = 0.05 (two-sided), power = 0.8 gives 64 per group (Cohen's Table 2.4.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Interval, Options

__all__ = ["PowerResult", "sample_size", "achieved_power", "PROBABILITY"]

#: a probability strictly between 0 and 1 (alpha, power)
PROBABILITY = Interval(float, 0, 1, closed="neither")
_POS = Interval(float, 0, None, closed="neither")
_ALT = Options(["two-sided", "larger"])


@dataclass(frozen=True)
class PowerResult:
    """The sample size that reaches ``power``: ``n_per_group`` (rounded up), the exact solution and settings."""

    n_per_group: int
    n_second_group: int
    n_exact: float
    achieved_power: float
    effect_size: float
    alpha: float
    alpha_per_test: float
    power: float
    ratio: float
    alternative: str
    n_comparisons: int

    @property
    def n_total(self) -> int:
        return self.n_per_group + self.n_second_group

    def to_markdown(self) -> str:
        corr = f" (Bonferroni over {self.n_comparisons} comparisons: {self.alpha_per_test:.4g} per test)" \
            if self.n_comparisons > 1 else ""
        return (f"two-sample t-test, {self.alternative}, d = {self.effect_size:g}, alpha = {self.alpha:g}{corr}, "
                f"power = {self.power:g}: **{self.n_per_group} per group** (exact {self.n_exact:.2f}; achieved "
                f"power {self.achieved_power:.3f})")


def _power(d: float, n1: float, alpha: float, ratio: float, alternative: str) -> float:
    from scipy import stats

    n2 = ratio * n1
    df = n1 + n2 - 2
    if df <= 0:
        return 0.0
    nc = d * math.sqrt(n1 * n2 / (n1 + n2))
    if alternative == "larger":
        return float(stats.nct.sf(stats.t.ppf(1 - alpha, df), df, nc))
    crit = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


@validate_args(effect_size=[_POS], n_per_group=[Interval("real", 2, None)], alpha=[PROBABILITY], ratio=[_POS],
               alternative=[_ALT])
def achieved_power(effect_size: float, n_per_group: float, *, alpha: float = 0.05, ratio: float = 1.0,
                   alternative: str = "two-sided") -> float:
    """Power of the two-sample t-test with ``n_per_group`` in the first group and ``ratio`` times it in the second.

    Examples
    --------
    >>> round(achieved_power(0.5, 64), 3)
    0.801
    """
    return _power(float(effect_size), float(n_per_group), float(alpha), float(ratio), alternative)


@validate_args(effect_size=[_POS], alpha=[PROBABILITY], power=[PROBABILITY], ratio=[_POS], alternative=[_ALT],
               n_comparisons=[Interval(int, 1, None)])
def sample_size(effect_size: float, *, alpha: float = 0.05, power: float = 0.8, ratio: float = 1.0,
                alternative: str = "two-sided", n_comparisons: int = 1) -> PowerResult:
    """Participants per group for a two-sample t-test to detect ``effect_size`` (Cohen's d) with ``power``.

    ``n_comparisons`` > 1 applies a Bonferroni correction (``alpha / n_comparisons`` per test), e.g. one test
    of the real explanation against each control condition.

    Examples
    --------
    >>> sample_size(0.5).n_per_group
    64
    """
    from scipy.optimize import brentq

    d, a, r = float(effect_size), float(alpha) / n_comparisons, float(ratio)
    lo, hi = 2.0, 4.0
    while _power(d, hi, a, r, alternative) < power:
        lo, hi = hi, hi * 2
        if hi > 1e9:
            from trustlab.core.exceptions import InputError

            raise InputError(f"The 'effect_size' argument of sample_size is too small to reach power {power} "
                             f"with fewer than 1e9 participants per group. Got {effect_size!r} instead.")
    n = brentq(lambda v: _power(d, v, a, r, alternative) - power, lo, hi, xtol=1e-8)
    n1 = int(math.ceil(n - 1e-9))
    return PowerResult(n_per_group=n1, n_second_group=int(math.ceil(r * n1 - 1e-9)), n_exact=float(n),
                       achieved_power=_power(d, n1, a, r, alternative), effect_size=d, alpha=float(alpha),
                       alpha_per_test=a, power=float(power), ratio=r, alternative=alternative,
                       n_comparisons=int(n_comparisons))
