"""Money: currencies' minor units and the largest-remainder (Hamilton) allocation, exact in integers."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import NONE, Interval, Options, Satisfies
from trustlab.core.exceptions import InputError

__all__ = ["MINOR_UNITS", "minor_unit_of", "to_minor_units", "largest_remainder", "PoolSplit", "split_pool"]

#: ISO 4217 minor-unit exponents of common currencies (payouts are integers of 10**-exponent units:
#: cents for EUR/USD, whole yen for JPY, fils for KWD). Pass ``minor_unit=`` for any other code.
MINOR_UNITS: dict[str, int] = {
    **dict.fromkeys(["EUR", "USD", "GBP", "CHF", "CAD", "AUD", "NZD", "SEK", "NOK", "DKK", "PLN", "CZK", "HUF",
                     "RON", "BGN", "CNY", "HKD", "SGD", "INR", "BRL", "MXN", "ZAR", "TRY", "ILS", "THB", "MYR",
                     "PHP", "IDR", "RUB", "UAH", "ARS", "COP", "PEN", "EGP", "NGN", "KES", "MAD", "AED", "SAR",
                     "QAR", "TWD"], 2),
    **dict.fromkeys(["JPY", "KRW", "ISK", "CLP", "VND", "PYG", "UGX", "XAF", "XOF", "RWF"], 0),
    **dict.fromkeys(["KWD", "BHD", "OMR", "JOD", "TND", "LYD", "IQD"], 3),
}

_CODE = Satisfies(lambda c: isinstance(c, str) and len(c) == 3 and c.isalpha() and c.isupper(),
                  "a 3-letter upper-case ISO 4217 currency code", ["eu", "euro", 978], "EUR")


@validate_args(currency=[_CODE], minor_unit=[NONE, Interval(int, 0, 6)])
def minor_unit_of(currency: str, minor_unit: int | None = None) -> int:
    """The minor-unit exponent of ``currency`` (2 for EUR: cents; 0 for JPY: whole yen).

    ``minor_unit`` overrides the table; an unknown code without it raises InputError.

    Examples
    --------
    >>> minor_unit_of("EUR"), minor_unit_of("JPY"), minor_unit_of("XBT", minor_unit=8 - 2)
    (2, 0, 6)
    """
    if minor_unit is not None:
        return int(minor_unit)
    if currency not in MINOR_UNITS:
        raise InputError(f"The 'currency' argument of minor_unit_of is {currency!r}, whose minor unit is not in "
                         "trustlab's table. Pass minor_unit=<ISO 4217 exponent> (2 for cents, 0 for a currency "
                         "without a minor unit).")
    return MINOR_UNITS[currency]


def _is_amount(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    try:
        d = Decimal(str(v)) if not isinstance(v, Decimal) else v
    except (InvalidOperation, ValueError, TypeError):
        return False
    return d.is_finite() and d > 0


class _Amount(Satisfies):
    error_class = InputError  # an amount of money is data, not a hyper-parameter


_AMOUNT = _Amount(_is_amount, "a finite number > 0 (int, float, Decimal or numeric string)",
                  [0, -5.0, float("nan"), float("inf"), "abc"], 100)


@validate_args(pool=[_AMOUNT], exponent=[Interval(int, 0, 6)])
def to_minor_units(pool: Any, exponent: int) -> tuple[int, bool]:
    """``pool`` (major units) as an integer of minor units, and whether it had to be rounded.

    The amount is read through ``Decimal(str(pool))`` (so ``100000.10`` is exactly 10,000,010 cents)
    and rounded half-to-even to the minor unit when it has more decimals than the currency allows.

    Examples
    --------
    >>> to_minor_units(100000, 2), to_minor_units("12.345", 2), to_minor_units(5000, 0)
    ((10000000, False), (1234, True), (5000, False))
    """
    d = pool if isinstance(pool, Decimal) else Decimal(str(pool))
    scaled = d.scaleb(exponent)
    rounded = scaled.quantize(Decimal(1), rounding=ROUND_HALF_EVEN)
    if rounded <= 0:
        raise InputError(f"The 'pool' argument of to_minor_units is {pool!r}, which is less than one minor unit "
                         f"(10**-{exponent}) of the currency. Got {pool!r} instead.")
    return int(rounded), rounded != scaled


def _order_key(ids: list[str]) -> list[int]:
    """Rank of each id in the natural order (numeric when every id is an integer, else lexicographic)."""
    numeric = all(s.lstrip("-").isdigit() for s in ids)
    srt = sorted(range(len(ids)), key=(lambda i: (int(ids[i]), ids[i])) if numeric else (lambda i: ids[i]))
    rank = [0] * len(ids)
    for r, i in enumerate(srt):
        rank[i] = r
    return rank


@validate_args(weights=[ArrayLike(ndim=1)], total=[Interval(int, 0, None)],
               owner_ids=[NONE, ArrayLike(ndim=1, dtype="any", finite=False)],
               _example=lambda: {"weights": np.array([1.0, 2.0])})
def largest_remainder(weights: Any, total: int, owner_ids: Any = None) -> np.ndarray:
    """Split the integer ``total`` in proportion to ``weights`` by the largest-remainder method.

    ``q_c = total * w_c / sum(w)`` in exact rational arithmetic; each gets ``floor(q_c)``, then the
    remaining units go one each in descending order of the fractional parts, ties broken by owner id
    (natural order of ``owner_ids``; default the position). The result sums to ``total`` exactly and
    each amount is within one unit of its quota. Negative weights are allowed (negative amounts) as long
    as ``sum(w) > 0``.

    Examples
    --------
    >>> largest_remainder(np.array([1.0, 1.0, 1.0]), 100).tolist()
    [34, 33, 33]
    """
    w = [Fraction(float(x)) for x in np.asarray(weights, dtype=np.float64)]
    s = sum(w, Fraction(0))
    if s <= 0:
        raise InputError(f"The 'weights' argument of largest_remainder must have a positive sum. Got {float(s)!r}.")
    ids = [str(i) for i in range(len(w))] if owner_ids is None else [str(o) for o in owner_ids]
    if len(ids) != len(w):
        raise InputError(f"The 'owner_ids' argument of largest_remainder must have {len(w)} ids. Got {len(ids)}.")
    quota = [Fraction(total) * x / s for x in w]
    base = [math.floor(q) for q in quota]
    left = total - sum(base)
    rank = _order_key(ids)
    for i in sorted(range(len(w)), key=lambda i: (-(quota[i] - base[i]), rank[i]))[:left]:
        base[i] += 1
    big = max(abs(b) for b in base)
    if big > np.iinfo(np.int64).max:
        raise InputError(f"The 'weights' argument of largest_remainder gives an amount of {big} minor units, beyond "
                         f"the int64 range: negative weights nearly cancel (sum {float(s)!r}). Got {len(w)} weights.")
    return np.array(base, dtype=np.int64)


#: what ``split_pool`` does when nothing is left: pay nothing (say so), split evenly, or raise; None = "raise"
FALLBACKS = ("unpaid", "equal", "raise")


@dataclass
class PoolSplit:
    """The outcome of :func:`split_pool`. ``payouts`` (int64, minor units) plus ``unpaid_minor`` sum to the pool;
    ``rule`` is ``"proportional"``, ``"nothing left: unpaid"`` or ``"nothing left: equal split"``; ``reason``
    says why nothing was left (None otherwise); ``weight_sum`` is the exact sum of the payout weights."""

    payouts: np.ndarray
    unpaid_minor: int
    rule: str
    reason: str | None
    weight_sum: float


def _nothing_left(w: list[Fraction], values: np.ndarray, gain: float | None, zero_tol: float) -> str | None:
    scale = max([float(np.sum(np.abs(values)))] + ([abs(gain)] if gain is not None else []) + [np.finfo(float).tiny])
    s = sum(w, Fraction(0))
    if gain is not None and gain <= zero_tol * scale:
        return f"the pool's total value v(N) - v(empty) = {gain:.3g} is <= {zero_tol:g} x {scale:.3g}"
    if s <= Fraction(zero_tol) * Fraction(scale):
        return f"the payout weights sum to {float(s):.3g} <= {zero_tol:g} x {scale:.3g} (exact arithmetic)"
    return None


@validate_args(values=[ArrayLike(ndim=1)], total=[Interval(int, 0, None)],
               owner_ids=[NONE, ArrayLike(ndim=1, dtype="any", finite=False)], negative=[Options(["clip", "allow"])],
               fallback=[NONE, Options(FALLBACKS)], eligible=[NONE, ArrayLike(ndim=1, dtype="any")],
               gain=[NONE, Interval(float, None, None)], zero_tol=[Interval(float, 0, 1)],
               _example=lambda: {"values": np.array([0.2, -0.1, 0.5]), "total": 1000})
def split_pool(values: Any, total: int, owner_ids: Any = None, *, negative: str = "clip", fallback: str | None = "unpaid",
               eligible: Any = None, gain: float | None = None, zero_tol: float = 1e-9) -> PoolSplit:
    """Split ``total`` minor units by owners' values, with a rule for a pool that has nothing left to split.

    Weights are ``max(values, 0)`` (``negative="clip"``) or the signed values (``"allow"``: a negative
    payout is a deduction). **Nothing is left** when the total gain ``gain = v(N) - v(empty)`` (when given)
    or the exact sum of the weights is <= ``zero_tol * max(sum |values|, |gain|)``: a pool whose data are
    worth no more than no data, every value <= 0, or signed values that cancel (their quotas would be
    amplified rounding noise). Otherwise the weights are split by :func:`largest_remainder`. When nothing
    is left, ``fallback`` decides: ``"unpaid"`` pays nothing (``unpaid_minor = total``, the caller reports
    it), ``"equal"`` splits evenly among the ``eligible`` owners (boolean mask; default all), ``"raise"``
    or None raises InputError.

    Examples
    --------
    >>> split_pool(np.array([0.2, -0.1, 0.6]), 1000).payouts.tolist()
    [250, 0, 750]
    >>> r = split_pool(np.array([-0.2, -0.1]), 1000)
    >>> r.payouts.tolist(), r.unpaid_minor, r.rule
    ([0, 0], 1000, 'nothing left: unpaid')
    """
    v = np.asarray(values, dtype=np.float64)
    wf = np.maximum(v, 0.0) if negative == "clip" else v
    w = [Fraction(float(x)) for x in wf]
    reason = _nothing_left(w, v, gain, zero_tol)
    if reason is None:
        return PoolSplit(largest_remainder(wf, total, owner_ids), 0, "proportional", None, float(sum(w, Fraction(0))))
    if fallback in (None, "raise"):
        raise InputError(f"Nothing is left to split the pool by: {reason}. Pass fallback='unpaid' to pay nothing "
                         "(and say so) or fallback='equal' to split the pool evenly, or check the validation set "
                         "and utility.")
    if fallback == "unpaid":
        return PoolSplit(np.zeros(len(v), dtype=np.int64), int(total), "nothing left: unpaid", reason,
                         float(sum(w, Fraction(0))))
    elig = np.ones(len(v), dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    if len(elig) != len(v) or not elig.any():
        raise InputError(f"The 'eligible' argument of split_pool must be {len(v)} booleans with at least one True. "
                         f"Got {int(elig.sum())} True of {len(elig)}.")
    return PoolSplit(largest_remainder(elig.astype(np.float64), total, owner_ids), 0, "nothing left: equal split",
                     reason, float(sum(w, Fraction(0))))
