"""How many held-out controls a calibration check needs: the exact power of the two-sided binomial test.

C3a of the experiment tests whether a threshold fitted at a control FPR ``p0`` flags a fraction of *new* control
dialogues consistent with ``p0`` (``scipy.stats.binomtest``, two-sided, level ``alpha``). With 20 held-out
dialogues that test rejects a doubled FPR (``p1 = 2 p0``) only 13 % of the time; :func:`heldout_size_for_power`
gives the smallest number of held-out dialogues from which the exact power stays >= the target.
"""

from __future__ import annotations

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Interval

__all__ = ["binomial_test_power", "heldout_size_for_power"]

_RATE = [Interval(float, 0, 1, closed="neither")]
#: scipy's relative tolerance for "as likely as the observed count" in the two-sided (minlike) p-value
_RTOL = 1 + 1e-7


def _minlike_pvalues(pmf: np.ndarray) -> np.ndarray:
    """Two-sided p-value of every count: the total probability of counts no more likely than it (scipy's rule)."""
    order = np.sort(pmf)
    cum = np.cumsum(order)
    return np.minimum(1.0, cum[np.searchsorted(order, pmf * _RTOL, side="right") - 1])


def _held_out_pmf(n: int, rate: float, p0: float, n_calibration: int | None) -> np.ndarray:
    """P(K = k) for k flagged of n: Binomial(n, rate), or, with a threshold fitted on ``n_calibration`` controls,
    a mixture over its true exceedance U ~ Beta(m + 1, n_cal - m) (m calibration scores above it) scaled by
    rate / p0 (the held-out FPR is ``rate / p0`` times the calibration one)."""
    from scipy.stats import beta, binom

    k = np.arange(n + 1)
    if n_calibration is None:
        return binom.pmf(k, n, rate)
    m = n_calibration - 1 - int(np.floor((n_calibration - 1) * (1 - p0)))  # scores above quantile(1 - p0)
    u = beta.ppf((np.arange(400) + 0.5) / 400, m + 1, n_calibration - m)
    return binom.pmf(k[None, :], n, np.clip(u[:, None] * rate / p0, 0, 1)).mean(axis=0)


@validate_args(n=[Interval(int, 1, None)], p0=_RATE, p1=_RATE, alpha=_RATE,
               n_calibration=[None, Interval(int, 2, None)])
def binomial_test_power(n: int, p0: float = 0.05, p1: float = 0.10, alpha: float = 0.05, *,
                        n_calibration: int | None = None) -> float:
    """Exact probability that ``binomtest(k, n, p0)`` (two-sided) gives p < ``alpha`` when the true rate is ``p1``.

    ``p1 = p0`` gives the test's size. With ``n_calibration`` the threshold is not exact but fitted on that
    many exchangeable controls: the held-out rate is then random (see the module), which raises the size.

    Example
    -------
    >>> round(binomial_test_power(20), 3), round(binomial_test_power(213), 3)
    (0.133, 0.822)
    """
    from scipy.stats import binom

    reject = _minlike_pvalues(binom.pmf(np.arange(n + 1), n, p0)) < alpha
    return float(_held_out_pmf(n, p1, p0, n_calibration)[reject].sum())


@validate_args(p0=_RATE, p1=_RATE, alpha=_RATE, power=_RATE, n_max=[Interval(int, 1, None)])
def heldout_size_for_power(p0: float = 0.05, p1: float = 0.10, alpha: float = 0.05, power: float = 0.8, *,
                           n_max: int = 2000) -> int:
    """Smallest n whose exact power (:func:`binomial_test_power`) is >= ``power`` at n and at every n' in (n, 2n].

    The power of an exact test is a sawtooth in n (it dips where the rejection region's edge moves), so the
    first n that reaches the target is not enough: one more dialogue can drop below it again.

    Example
    -------
    >>> heldout_size_for_power()
    213
    """
    from trustlab.core.exceptions import InputError

    pw = np.array([binomial_test_power(n, p0, p1, alpha) if n else 0.0 for n in range(2 * n_max + 1)])
    for n in range(1, n_max + 1):
        if np.all(pw[n:2 * n + 1] >= power):
            return n
    raise InputError(f"heldout_size_for_power found no n <= n_max={n_max} with power >= {power} for p0={p0}, "
                     f"p1={p1}, alpha={alpha}.")
