"""``CompensationAudit`` (Auditor) and ``compensation_report``: split a licence pool among data owners by
data valuation, after de-duplication and with noisy-label flags, to the minor unit."""

from __future__ import annotations

import importlib.metadata
from decimal import Decimal
from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import NONE, Boolean, Interval, Options, RandomStateRule
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.hashing import content_hash
from trustlab.core.roles import Auditor
from trustlab.core.validation import check_array
from trustlab.methods.licensing._dedup import embedded_duplicates, find_duplicates
from trustlab.methods.licensing._games import exact_shapley, loo_values, msr_banzhaf, tmc_shapley
from trustlab.methods.licensing._knn import check_knn_inputs, flag_noisy_labels, knn_shapley
from trustlab.methods.licensing._paper import PAPER
from trustlab.methods.licensing._payout import (
    _AMOUNT,
    _CODE,
    FALLBACKS,
    minor_unit_of,
    split_pool,
    to_minor_units,
)
from trustlab.methods.licensing._report import CompensationReport, OwnerLine
from trustlab.methods.licensing._utilities import KNNUtility, LogisticAccuracy, NaiveBayesLogLikelihood

__all__ = ["CompensationAudit", "compensation_report"]

METHODS = ("knn_shapley", "owner_shapley_exact", "owner_banzhaf_msr", "tmc_shapley", "loo")
UTILITIES = {"knn": lambda k: KNNUtility(k), "logreg_acc": lambda k: LogisticAccuracy(),
             "loglik": lambda k: NaiveBayesLogLikelihood()}

_CONSTRAINTS: dict[str, list[Any]] = {
    "method": [Options(METHODS)],
    "utility": [Options(tuple(UTILITIES))],
    "k": [Interval(int, 1, None)],
    "currency": [_CODE],
    "minor_unit": [NONE, Interval(int, 0, 6)],
    "negative": [Options(["clip", "allow"])],
    "fallback": [NONE, Options(FALLBACKS)],
    "zero_tol": [Interval(float, 0, 1)],
    "dedup": [Options(["exact", "near", "embedded", "off"])],
    "near_tol": [Interval(float, 0, None)],
    "near_quantile": [Interval(float, 0, 1, closed="neither")],
    "near_variance": [Interval(float, 0, 1, closed="right")],
    "dedup_decimals": [Interval(int, 0, 15)],
    "dup_credit": [Options(["first", "split"])],
    "noise_flag_quantile": [Interval(float, 0, 1)],
    "noisy": [Options(["keep", "drop"])],
    "n_samples": [Interval(int, 2, None)],
    "tmc_tol": [Interval(float, 0, 1)],
    "counterfactual": [Boolean()],
    "random_state": [RandomStateRule()],
}


def owner_ids(owner: Any, n: int, name: str = "owner") -> list[str]:
    """Owner ids as strings; raises InputError for missing ids or ids that differ only by case/spaces."""
    vals = owner.tolist() if hasattr(owner, "tolist") else list(owner)
    if len(vals) != n:
        raise InputError(f"The '{name}' argument of CompensationAudit.audit must have one id per row of X ({n}). "
                         f"Got {len(vals)}.")
    out, missing = [], []
    for i, v in enumerate(vals):
        if v is None or (isinstance(v, float) and not np.isfinite(v)) or (isinstance(v, str) and not v.strip()):
            missing.append(i)
            continue
        out.append(str(int(v)) if isinstance(v, float) and float(v).is_integer() else str(v))
    if missing:
        raise InputError(f"The '{name}' argument of CompensationAudit.audit has {len(missing)} missing owner "
                         f"id(s) (None, NaN or empty) at rows {missing[:10]}. Every row must name its owner.")
    seen: dict[str, str] = {}
    for o in dict.fromkeys(out):
        key = o.strip().casefold()
        if key in seen and seen[key] != o:
            raise InputError(f"The '{name}' argument of CompensationAudit.audit has ids {seen[key]!r} and {o!r}, "
                             "which differ only by case or spaces. Normalise the ids first.")
        seen[key] = o
    return out


def _natural(ids: list[str]) -> list[str]:
    numeric = all(s.lstrip("-").isdigit() for s in ids)
    return sorted(ids, key=(lambda s: (int(s), s)) if numeric else (lambda s: s))


def _weights(values: np.ndarray, negative: str) -> np.ndarray:
    return np.maximum(values, 0.0) if negative == "clip" else values.astype(np.float64)


def _shares(values: np.ndarray, negative: str) -> np.ndarray:
    w = _weights(values, negative)
    s = w.sum()
    return w / s if s > 0 else np.zeros_like(w)


class CompensationAudit(Auditor):
    """Split a licence pool among data owners by data valuation (collective licensing, SRS-style).

    Pipeline of ``audit(X, y, owner, X_val, y_val, pool, owners=None)``: validate; de-duplicate
    (``dedup``: exact hash of rounded feature bytes + label, near = max-norm radius ``near_tol``; the
    earlier row in submission order is kept; ``dup_credit="first"`` credits its submitter,
    ``"split"`` splits its value equally among the distinct owners who submitted it, point-level
    method only); value (``method``): point-level exact KNN-Shapley summed per owner, or an owner-level
    game (players = owners) with ``utility`` "knn", "logreg_acc" or "loglik" solved exactly (<= 12
    owners), by MSR Banzhaf, TMC Shapley (``n_samples`` permutations / coalitions) or leave-one-out;
    flag noisy points (lowest ``noise_flag_quantile`` of the point-level KNN-Shapley values *and*
    disagreeing with the leave-one-out KNN vote; ``noisy="drop"`` removes them and values again); pay
    out ``max(value, 0)`` (``negative="clip"``) or the signed values (``"allow"``: negative payouts are
    deductions) by the largest-remainder method to the minor unit, ties by owner id (:func:`split_pool`).
    When nothing is left (the total gain ``v(N) - v(empty)`` or the weights' sum is <= ``zero_tol`` times
    the values' scale), ``fallback="unpaid"`` (default) pays nothing and the report says so,
    ``"equal"`` splits the pool equally among owners with valued points, ``"raise"`` / None raises
    InputError. ``dedup="embedded"`` finds perturbed copies: Euclidean distance in the PCA space keeping
    ``near_variance`` of the variance, tolerance = the ``near_quantile`` quantile of validation-to-training
    nearest-neighbour distances (:func:`embedded_duplicates`). Monte-Carlo methods give each owner's
    ``share_se`` and ``payout_se_minor``. With ``counterfactual`` (and ``dedup`` on) the same valuation
    without de-duplication gives each owner's ``share_no_dedup``: what duplicate submissions would
    have earned.

    Parameters
    ----------
    method : {"knn_shapley", "owner_shapley_exact", "owner_banzhaf_msr", "tmc_shapley", "loo"}
    utility : {"knn", "logreg_acc", "loglik"}, utility of the owner-level games ("knn" for knn_shapley)
    k : int, neighbours of the KNN utility, the KNN-Shapley values and the noise vote
    currency : str, ISO 4217 code; minor_unit : int or None, overrides the code's exponent
    negative : {"clip", "allow"}; fallback : {"unpaid", "equal", "raise"} or None (= "raise"); zero_tol : float
    dedup : {"exact", "near", "embedded", "off"}; near_tol : float (max norm, "near"); near_quantile,
    near_variance : float ("embedded"); dedup_decimals : int; dup_credit : {"first", "split"}
    noise_flag_quantile : float in [0, 1]; noisy : {"keep", "drop"}
    n_samples : int, TMC permutations or Banzhaf coalitions; tmc_tol : float, TMC truncation tolerance
    counterfactual : bool; random_state : None, int or Generator (TMC and Banzhaf draws)

    Examples
    --------
    >>> from trustlab.methods.licensing import CompensationAudit
    >>> rep = CompensationAudit(currency="EUR").audit(X, y, owner, X_val, y_val, pool=100000)  # doctest: +SKIP
    >>> print(rep.to_markdown())  # doctest: +SKIP
    """

    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {"stochastic": True}
    _constraints: ClassVar[dict[str, list[Any]]] = _CONSTRAINTS

    def __init__(self, *, method: str = "knn_shapley", utility: str = "knn", k: int = 5, currency: str = "EUR",
                 minor_unit: int | None = None, negative: str = "clip", fallback: str | None = "unpaid",
                 zero_tol: float = 1e-9, dedup: str = "exact", near_tol: float = 1e-3, near_quantile: float = 0.01,
                 near_variance: float = 0.9, dedup_decimals: int = 6, dup_credit: str = "first",
                 noise_flag_quantile: float = 0.05, noisy: str = "keep", n_samples: int = 200,
                 tmc_tol: float = 0.0, counterfactual: bool = True, random_state: Any = 0):
        self.method = method
        self.utility = utility
        self.k = k
        self.currency = currency
        self.minor_unit = minor_unit
        self.negative = negative
        self.fallback = fallback
        self.zero_tol = zero_tol
        self.dedup = dedup
        self.near_tol = near_tol
        self.near_quantile = near_quantile
        self.near_variance = near_variance
        self.dedup_decimals = dedup_decimals
        self.dup_credit = dup_credit
        self.noise_flag_quantile = noise_flag_quantile
        self.noisy = noisy
        self.n_samples = n_samples
        self.tmc_tol = tmc_tol
        self.counterfactual = counterfactual
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"random_state": 0}, {"method": "tmc_shapley", "utility": "loglik", "n_samples": 8, "random_state": 0}]

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(40, 3))
        y = (X[:, 0] > 0).astype(int)
        Xv = rng.normal(size=(20, 3))
        return {"args": (X, y, np.repeat(["a", "b", "c", "d"], 10), Xv, (Xv[:, 0] > 0).astype(int), 1000),
                "kwargs": {}}

    # -- pipeline pieces ---------------------------------------------------------------------------
    def _check_config(self) -> None:
        if self.method == "knn_shapley" and self.utility != "knn":
            raise ConfigError(f"The 'utility' parameter of CompensationAudit must be 'knn' with "
                              f"method='knn_shapley' (the other utilities need an owner-level game). "
                              f"Got {self.utility!r} instead.")
        if self.method != "knn_shapley" and self.dup_credit == "split":
            raise ConfigError("The 'dup_credit' parameter of CompensationAudit must be 'first' with an owner-level "
                              f"method (a point shared by owners has no single player). Got 'split' with "
                              f"method={self.method!r}.")

    def _value(self, X: np.ndarray, y: np.ndarray, player: np.ndarray, n_players: int, X_val: np.ndarray,
               y_val: np.ndarray, credit: list[list[int]] | None) -> dict[str, Any]:
        """Owner values (length n_players) for the rows given; ``credit[i]``: owners splitting row i."""
        if self.method == "knn_shapley":
            phi = knn_shapley(X, y, X_val, y_val, k=self.k)
            vals = np.zeros(n_players)
            if credit is None:
                np.add.at(vals, player, phi)
            else:
                for i, owners in enumerate(credit):
                    for o in owners:
                        vals[o] += phi[i] / len(owners)
            v_full = KNNUtility(self.k).game(X, y, X_val, y_val, np.zeros(len(X), dtype=np.int64)).v_full
            return {"values": vals, "se": None, "v_full": v_full, "v_empty": 0.0, "efficient": True,
                    "sum_se": None, "phi": phi}
        present = np.unique(player)  # players of the game: owners with at least one valued row
        local = np.searchsorted(present, player)
        game = UTILITIES[self.utility](self.k).game(X, y, X_val, y_val, local)
        if self.method == "owner_shapley_exact":
            res = exact_shapley(game)
        elif self.method == "owner_banzhaf_msr":
            res = msr_banzhaf(game, n_samples=self.n_samples, random_state=self._rng)
        elif self.method == "tmc_shapley":
            res = tmc_shapley(game, n_permutations=self.n_samples, tol=self.tmc_tol, random_state=self._rng)
        else:
            res = loo_values(game)
        vals = np.zeros(n_players)
        vals[present] = res.values
        se = None
        if res.se is not None:
            se = np.zeros(n_players)
            se[present] = res.se
        return {"values": vals, "se": se, "v_full": res.v_full, "v_empty": res.v_empty,
                "efficient": res.efficient, "sum_se": res.sum_se, "phi": None}

    def _pay(self, values: np.ndarray, pool_minor: int, ids: list[str], eligible: np.ndarray, gain: float) -> Any:
        return split_pool(values, pool_minor, ids, negative=self.negative, fallback=self.fallback, eligible=eligible,
                          gain=gain, zero_tol=float(self.zero_tol))

    # -- the verb ------------------------------------------------------------------------------------
    def _inputs(self, X: Any, y: Any, owner: Any, X_val: Any, y_val: Any, pool: Any, owners: Any) -> dict[str, Any]:
        """Validated arrays, encoded labels, money and owner registry, with the input warnings."""
        name = type(self).__name__
        X = check_array(X, owner=name)
        X_val = check_array(X_val, name="X_val", owner=name)
        y = check_array(y, name="y", owner=name, ndim=1, dtype=None)
        y_val = check_array(y_val, name="y_val", owner=name, ndim=1, dtype=None)
        X, y_enc, X_val, yv_enc, classes = check_knn_inputs(X, y, X_val, y_val, self.k, f"{name}.audit")
        if not _AMOUNT.is_satisfied_by(pool):
            raise InputError(f"The 'pool' argument of {name}.audit must be {_AMOUNT.describe()}. Got {pool!r} instead.")
        exponent = minor_unit_of(self.currency, self.minor_unit)
        pool_minor, rounded = to_minor_units(pool, exponent)
        ids_row = owner_ids(owner, len(X))
        registry = _natural(list(dict.fromkeys(ids_row)))
        if owners is not None:
            extra = sorted(set(ids_row) - {str(o) for o in owners})
            if extra:
                raise InputError(f"The 'owners' argument of {name}.audit lacks owner id(s) found in the data: "
                                 f"{extra[:10]}.")
            registry = _natural(list(dict.fromkeys(str(o) for o in owners)))
        pos = {o: i for i, o in enumerate(registry)}
        warn: list[str] = []
        if rounded:
            warn.append(f"pool {pool!r} has more decimals than {self.currency} allows (10^-{exponent}); rounded "
                        f"half-to-even to {pool_minor} minor units.")
        if len(np.unique(yv_enc)) == 1:
            warn.append("the validation set has a single class: values only reward points of that class.")
        val_keys = {r.tobytes() for r in np.ascontiguousarray(X_val)}
        n_overlap = sum(r.tobytes() in val_keys for r in np.ascontiguousarray(X))
        if n_overlap:
            warn.append(f"{n_overlap} training row(s) also appear in the validation set; their values are inflated.")
        return {"X": X, "y": y_enc, "X_val": X_val, "y_val": yv_enc, "classes": classes, "exponent": exponent,
                "pool_minor": pool_minor, "ids_row": ids_row, "registry": registry, "warnings": warn,
                "player": np.array([pos[o] for o in ids_row], dtype=np.int64)}

    def _deduplicate(self, d: dict[str, Any]) -> dict[str, Any]:
        """Kept rows, per-owner duplicate counts and (``dup_credit="split"``) the owners of each kept row."""
        X, player, n_own = d["X"], d["player"], len(d["registry"])
        if self.dedup == "off":
            keep, leader = np.ones(len(X), dtype=bool), np.arange(len(X))
        else:
            if self.dedup == "embedded":
                groups = embedded_duplicates(X, d["y"], d["X_val"], quantile=float(self.near_quantile),
                                             variance=float(self.near_variance))
            else:
                groups = find_duplicates(X, d["y"], mode=self.dedup, tol=self.near_tol, decimals=self.dedup_decimals)
            keep, leader = ~groups.is_duplicate, groups.leader
            d["dedup_tol"] = None if self.dedup == "exact" else groups.tol
            sd = X.std(axis=0)
            sd = sd[sd > 0]
            if self.dedup in ("near", "embedded") and len(sd) and sd.max() > 100 * sd.min():
                d["warnings"].append(f"feature scales differ by {sd.max() / sd.min():.0f}x and the {self.dedup} "
                                     "tolerance is in raw units: standardise X (and X_val) before a near "
                                     "de-duplication.")
        within, cross = np.zeros(n_own, dtype=np.int64), np.zeros(n_own, dtype=np.int64)
        for i in np.flatnonzero(~keep):
            (within if player[leader[i]] == player[i] else cross)[player[i]] += 1
        kept = np.flatnonzero(keep)
        if self.k > len(kept):
            raise InputError(f"The 'k' argument of {type(self).__name__} must be <= the number of training points "
                             f"left after de-duplication ({len(kept)}). Got {self.k} instead.")
        credit = None
        if self.dup_credit == "split" and self.dedup != "off":
            members: dict[int, list[int]] = {int(i): [int(player[i])] for i in kept}
            for i in np.flatnonzero(~keep):
                if player[i] not in members[int(leader[i])]:
                    members[int(leader[i])].append(int(player[i]))
            credit = [members[int(i)] for i in kept]
        return {"kept": kept, "n_dup": int((~keep).sum()), "within": within, "cross": cross, "credit": credit}

    def _flag(self, d: dict[str, Any], kept: np.ndarray) -> np.ndarray:
        """Kept rows in the bottom quantile of point-level KNN-Shapley that disagree with the KNN vote."""
        return flag_noisy_labels(d["X"][kept], d["y"][kept], d["X_val"], d["y_val"], k=self.k,
                                 quantile=float(self.noise_flag_quantile))

    def _audit(self, X: Any, y: Any, owner: Any, X_val: Any, y_val: Any, pool: Any,
               owners: Any = None) -> CompensationReport:
        self._check_config()
        d = self._inputs(X, y, owner, X_val, y_val, pool, owners)
        player, n_own = d["player"], len(d["registry"])
        dd = self._deduplicate(d)
        kept, credit = dd["kept"], dd["credit"]
        flags = self._flag(d, kept)

        def value(rows: np.ndarray, cred: list[list[int]] | None) -> dict[str, Any]:
            return self._value(d["X"][rows], d["y"][rows], player[rows], n_own, d["X_val"], d["y_val"], cred)

        res = value(kept, credit)
        share_dedup = _shares(res["values"], self.negative)
        valued = kept
        if self.noisy == "drop" and flags.any():
            valued = kept[~flags]
            if len(valued) < self.k:
                raise InputError(f"Dropping {int(flags.sum())} flagged row(s) leaves {len(valued)} < k={self.k} rows.")
            res = value(valued, None if credit is None else [c for c, f in zip(credit, flags) if not f])
        values = res["values"]
        split = self._pay(values, d["pool_minor"], d["registry"], np.bincount(player[valued], minlength=n_own) > 0,
                          float(res["v_full"] - res["v_empty"]))
        payout, fallback_used = split.payouts, split.rule != "proportional"
        share = payout / d["pool_minor"] if fallback_used else _shares(values, self.negative)
        wsum = float(_weights(values, self.negative).sum())
        share_se = None if res["se"] is None or fallback_used or wsum <= 0 else res["se"] / wsum
        share_nd = None
        if self.counterfactual and self.dedup != "off":
            share_nd = _shares(value(np.arange(len(player)), None)["values"], self.negative)
        order = sorted(range(n_own), key=lambda c: (-int(payout[c]), c))  # ties: owner-id order
        rank = {c: r + 1 for r, c in enumerate(order)}
        n_points, n_unique = np.bincount(player, minlength=n_own), np.bincount(player[kept], minlength=n_own)
        n_flag = np.bincount(player[kept][flags], minlength=n_own)
        lines = [OwnerLine(
            owner=d["registry"][c], n_points=int(n_points[c]), n_unique=int(n_unique[c]),
            n_dup_within=int(dd["within"][c]), n_dup_cross=int(dd["cross"][c]), n_flagged_noisy=int(n_flag[c]),
            raw_value=float(values[c]), value_se=None if res["se"] is None else float(res["se"][c]),
            share=float(share[c]), payout_minor=int(payout[c]),
            payout=format(Decimal(int(payout[c])).scaleb(-d["exponent"]), "f"),
            rank=rank[c], share_no_dedup=None if share_nd is None else float(share_nd[c]),
            share_dedup=float(share_dedup[c]), share_se=None if share_se is None else float(share_se[c]),
            payout_se_minor=None if share_se is None else float(share_se[c] * d["pool_minor"]))
            for c in range(n_own)]
        if fallback_used or split.unpaid_minor:
            d["warnings"].append(f"nothing is left to split the pool by ({split.reason}): {split.rule}.")
        rep = self._report(d, res, lines, fallback_used, len(kept), dd["n_dup"], int(flags.sum()))
        rep.payout_rule, rep.unpaid_minor, rep.dedup_tol = split.rule, int(split.unpaid_minor), d.get("dedup_tol")
        return rep

    def _report(self, d: dict[str, Any], res: dict[str, Any], lines: list[OwnerLine], fallback_used: bool,
                n_kept: int, n_dup: int, n_flagged: int) -> CompensationReport:
        sum_raw = float(np.sum([o.raw_value for o in lines]))
        eff = sum_raw - (res["v_full"] - res["v_empty"]) if res["efficient"] or res["sum_se"] is not None else None
        versions = {"trustlab": _version("trustlab"), "numpy": np.__version__, "scikit-learn": _version("scikit-learn")}
        cls = d["classes"]
        return CompensationReport(
            owners=lines, method=self.method, utility=self.utility, k=self.k, v_full=float(res["v_full"]),
            v_empty=float(res["v_empty"]), sum_raw=sum_raw, efficient=bool(res["efficient"]),
            efficiency_residual=None if eff is None else float(eff), efficiency_se=res["sum_se"],
            negative=self.negative, fallback_used=fallback_used, currency=self.currency, minor_unit=d["exponent"],
            pool_minor=d["pool_minor"], n_train=len(d["X"]), n_kept=n_kept, n_val=len(d["X_val"]),
            n_duplicates=n_dup, n_flagged_noisy=n_flagged,
            seed=self.random_state if isinstance(self.random_state, int | None) else "Generator",
            versions=versions,
            input_hash=content_hash({"X": d["X"], "y": [str(v) for v in cls[d["y"]]], "owner": d["ids_row"],
                                     "X_val": d["X_val"], "y_val": [str(v) for v in cls[d["y_val"]]]}),
            params={k: v for k, v in self.get_params(deep=False).items() if k != "random_state"},
            warnings=d["warnings"])


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _example() -> dict[str, Any]:
    inputs = CompensationAudit._get_test_inputs()["args"]
    return dict(zip(("X", "y", "owner", "X_val", "y_val", "pool"), inputs))


@validate_args(X=[ArrayLike(ndim=2)], y=[ArrayLike(ndim=1, dtype="any")],
               owner=[ArrayLike(ndim=1, dtype="any", finite=False)], X_val=[ArrayLike(ndim=2)],
               y_val=[ArrayLike(ndim=1, dtype="any")], pool=[_AMOUNT], owners=[NONE, SequenceOf(object, min_len=1)],
               _example=_example, **_CONSTRAINTS)
def compensation_report(X: Any, y: Any, owner: Any, X_val: Any, y_val: Any, pool: Any, *, owners: Any = None,
                        currency: str = "EUR", method: str = "knn_shapley", utility: str = "knn", k: int = 5,
                        minor_unit: int | None = None, negative: str = "clip", fallback: str | None = "unpaid",
                        zero_tol: float = 1e-9, dedup: str = "exact", near_tol: float = 1e-3,
                        near_quantile: float = 0.01, near_variance: float = 0.9, dedup_decimals: int = 6,
                        dup_credit: str = "first", noise_flag_quantile: float = 0.05, noisy: str = "keep",
                        n_samples: int = 200, tmc_tol: float = 0.0, counterfactual: bool = True,
                        random_state: Any = 0) -> CompensationReport:
    """One call: ``CompensationAudit(**settings).audit(X, y, owner, X_val, y_val, pool, owners=owners)``.

    ``pool`` is in major units (EUR, not cents); payouts come back as integers of the currency's minor
    unit (cents; whole yen for JPY) that sum exactly to the pool. See :class:`CompensationAudit`.

    Examples
    --------
    >>> rep = compensation_report(**_example())
    >>> sum(o.payout_minor for o in rep.owners) == rep.pool_minor == 100000
    True
    """
    audit = CompensationAudit(method=method, utility=utility, k=k, currency=currency, minor_unit=minor_unit,
                              negative=negative, fallback=fallback, zero_tol=zero_tol, dedup=dedup,
                              near_tol=near_tol, near_quantile=near_quantile, near_variance=near_variance,
                              dedup_decimals=dedup_decimals, dup_credit=dup_credit,
                              noise_flag_quantile=noise_flag_quantile, noisy=noisy, n_samples=n_samples,
                              tmc_tol=tmc_tol, counterfactual=counterfactual, random_state=random_state)
    return audit.audit(X, y, owner, X_val, y_val, pool, owners=owners)
