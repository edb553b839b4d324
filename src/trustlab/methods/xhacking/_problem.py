"""The evaluation context shared by the X-hacking search and the audit.

:class:`SearchContext` fixes everything except the pipeline: the split, the background and explanation
rows, the scoring rule and the reference pipeline. ``evaluate(config)`` fits the pipeline of one
configuration and returns its held-out score and explanation metrics; results are cached by the
configuration's canonical JSON (the evaluation is deterministic, so a cache hit equals a recomputation).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Satisfies
from trustlab.core.exceptions import InputError, ScaleWarning, UnknownNameError, did_you_mean
from trustlab.core.hashing import content_hash
from trustlab.core.seeding import as_seed, seed_alias
from trustlab.methods.xhacking._explain import explain_pipeline, shares_and_ranks
from trustlab.methods.xhacking._space import build_pipeline

__all__ = ["SearchContext", "EvalSettings", "reference_config", "resolve_feature", "data_hash", "tts_summary",
           "speedup_ci", "TrialsToSuccess", "SpeedupCI"]


@seed_alias
@validate_args(random_state=["random_state"])
def reference_config(random_state: Any = 0) -> dict[str, Any]:
    """Default reference: mean imputation, no scaling or selection, a 100-tree random forest; its ``"seed"`` is
    ``random_state`` (an int is kept, a Generator or None drawn once; ``seed=`` is its deprecated name)."""
    return {"imputer": "mean", "scaler": "none", "selector": "none", "transform": "none", "model": "rf",
            "rf_n": 100, "rf_depth": None, "rf_max_features": "sqrt", "rf_leaf": 1, "seed": as_seed(random_state)}


@dataclass(frozen=True)
class EvalSettings:
    """How every pipeline is scored and explained (part of the search specification)."""

    test_size: float = 0.25
    split_seed: int = 0
    model_seed: int = 0
    explain_on: str = "test"
    n_background: int = 50
    n_explain: int = 50
    scoring: str = "accuracy"

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def data_hash(X: np.ndarray, y: np.ndarray) -> str:
    """SHA-256 of the data an audit ran on (float64 features, labels as text)."""
    return content_hash(np.ascontiguousarray(X, dtype=np.float64), np.asarray(y).astype(str))


def resolve_feature(feature: Any, names: list[str], owner: str) -> int:
    """Index of a feature given by name or index; UnknownNameError with suggestions otherwise."""
    if isinstance(feature, int | np.integer) and not isinstance(feature, bool):
        if 0 <= int(feature) < len(names):
            return int(feature)
        raise UnknownNameError(f"The feature index {feature} passed to {owner} is out of range: the data have "
                               f"{len(names)} features (0..{len(names) - 1}).")
    if isinstance(feature, str) and feature in names:
        return names.index(feature)
    raise UnknownNameError(f"Unknown target feature {feature!r} passed to {owner}.{did_you_mean(str(feature), names)} "
                           f"Pass a column name or an index in 0..{len(names) - 1}.")


class SearchContext:
    """Split, background, explanation rows, scorer and reference of one X-hacking problem.

    Parameters
    ----------
    X, y : array-like
        Features ``(n, p)`` and class labels.
    settings : EvalSettings
    feature_names : list of str, optional
    reference : dict, optional
        Configuration of the reference pipeline (default :func:`reference_config`).
    owner : str
        Name used in error messages.
    """

    def __init__(self, X: Any, y: Any, settings: EvalSettings, *, feature_names: Any = None,
                 reference: dict[str, Any] | None = None, owner: str = "xhack") -> None:
        from sklearn.model_selection import train_test_split

        from trustlab.core.validation import check_classification_targets, check_X_y

        X, y = check_X_y(X, y, owner=owner, allow_complex=False)
        check_classification_targets(y, owner=owner)
        X = X.astype(np.float64)
        self.classes_, y = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise InputError(f"The 'y' argument of {owner} must contain at least 2 classes. Got {self.classes_.tolist()}.")
        if settings.scoring == "roc_auc" and len(self.classes_) != 2:
            raise InputError(f"scoring='roc_auc' in {owner} needs a binary target; got {len(self.classes_)} classes.")
        self.n_classes = len(self.classes_)
        self.p = X.shape[1]
        self.names = [str(n) for n in feature_names] if feature_names is not None else [f"x{j}" for j in range(self.p)]
        if len(self.names) != self.p:
            raise InputError(f"The 'feature_names' argument of {owner} has {len(self.names)} names for {self.p} features.")
        self.settings = settings
        self.data_hash = data_hash(X, y)
        counts = np.bincount(y)
        strat = y if counts.min() >= 2 else None
        self.X_tr, self.X_te, self.y_tr, self.y_te = train_test_split(
            X, y, test_size=settings.test_size, random_state=settings.split_seed, stratify=strat)
        rng = np.random.default_rng(settings.split_seed)
        n_bg = settings.n_background
        if n_bg < 10:
            warnings.warn(f"{owner}: n_background={n_bg} is too small for stable interventional SHAP values "
                          "(use >= 10, typically 50-100).", ScaleWarning, stacklevel=3)
        if n_bg > len(self.X_tr):
            warnings.warn(f"{owner}: n_background={n_bg} exceeds the {len(self.X_tr)} training rows; using all.",
                          ScaleWarning, stacklevel=3)
            n_bg = len(self.X_tr)
        self.X_bg = self.X_tr[np.sort(rng.choice(len(self.X_tr), n_bg, replace=False))]
        if settings.explain_on == "train":
            warnings.warn(f"{owner}: explain_on='train' explains the rows the pipelines were fitted on "
                          "(leakage: attributions then describe memorised data). Use 'test' for reports.",
                          UserWarning, stacklevel=3)
            pool = self.X_tr
        else:
            pool = self.X_te
        n_ex = min(settings.n_explain, len(pool))
        self.X_ex = pool[np.sort(rng.choice(len(pool), n_ex, replace=False))]
        self._cache: dict[str, dict[str, Any]] = {}
        self.reference_config = dict(reference) if reference is not None else reference_config(settings.model_seed)
        self.reference = self.evaluate(self.reference_config)
        if self.reference.get("error"):
            raise InputError(f"The reference pipeline of {owner} failed: {self.reference['error']}")
        if self.reference["score"] >= 1.0:
            warnings.warn(f"{owner}: the reference pipeline scores {self.reference['score']:.3f} on the {len(self.y_te)} "
                          "held-out rows, the maximum: 'within eps of the reference' then admits only pipelines that "
                          "are also (nearly) perfect there, so the set of defensible models says little. Use a "
                          "larger test_size, scoring='roc_auc', or a harder problem.", UserWarning, stacklevel=3)

    # -- evaluation -------------------------------------------------------------------------------------
    def _score(self, pipe: Any) -> float:
        from sklearn.metrics import accuracy_score, balanced_accuracy_score, roc_auc_score

        s = self.settings.scoring
        if s == "roc_auc":
            model = pipe
            scores = model.decision_function(self.X_te) if not hasattr(model, "predict_proba") or \
                hasattr(pipe.steps[-1][1], "gamma_mult") else model.predict_proba(self.X_te)[:, 1]
            return float(roc_auc_score(self.y_te, scores))
        pred = pipe.predict(self.X_te)
        return float(balanced_accuracy_score(self.y_te, pred) if s == "balanced_accuracy"
                     else accuracy_score(self.y_te, pred))

    @validate_args(config=[InstanceOf(Mapping)])
    def evaluate(self, config: dict[str, Any]) -> dict[str, Any]:
        """Fit the configuration's pipeline; score, shares, ranks and directions (cached)."""
        config = dict(config)
        config.setdefault("seed", self.settings.model_seed)
        key = json.dumps(config, sort_keys=True, default=str)
        if key in self._cache:
            return dict(self._cache[key])
        out: dict[str, Any] = {"config": config}
        try:
            pipe, expl = self.fit_and_explain(config, score_into=out)
            m = shares_and_ranks(expl["phi"], self.X_ex)
            out.update(share=m["share"].tolist(), rank=m["rank"].tolist(), direction=m["direction"].tolist(),
                       explainer=expl["explainer"], additivity_ok=bool(expl["additivity_ok"]), error=None)
        except Exception as exc:  # noqa: BLE001 - a failing pipeline is logged as a failed, indefensible trial
            out.update(score=float("nan"), share=[0.0] * self.p, rank=[self.p] * self.p, direction=[0.0] * self.p,
                       explainer=None, additivity_ok=True, error=f"{type(exc).__name__}: {exc}")
        self._cache[key] = out
        return dict(out)

    @validate_args(config=[InstanceOf(Mapping)], score_into=[None, InstanceOf(dict)])
    def fit_and_explain(self, config: dict[str, Any], *,
                        score_into: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """The fitted pipeline of ``config`` (its ``seed`` defaults to the model seed) and its
        :func:`explain_pipeline` result on this context's background and rows; with ``score_into``, the
        held-out score is stored there as ``"score"`` before the explanation runs."""
        config = {"seed": self.settings.model_seed, **config}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)
            warnings.simplefilter("ignore", category=FutureWarning)
            from sklearn.exceptions import ConvergenceWarning

            warnings.simplefilter("ignore", category=ConvergenceWarning)
            pipe = build_pipeline(config, self.p, self.n_classes).fit(self.X_tr, self.y_tr)
            if score_into is not None:
                score_into["score"] = self._score(pipe)
        return pipe, explain_pipeline(pipe, self.X_bg, self.X_ex, n_classes=self.n_classes, seed=int(config["seed"]))

    def spec(self) -> dict[str, Any]:
        """The part of the search specification this context fixes."""
        return {"settings": self.settings.to_dict(), "reference": self.reference_config, "data_hash": self.data_hash,
                "feature_names": self.names}


@dataclass(frozen=True)
class TrialsToSuccess:
    """Trials-to-first-success over seeds: ``values`` (censored runs at the budget), their ``median``,
    ``n_censored`` of ``n`` runs."""

    median: float
    n_censored: int
    n: int
    values: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SpeedupCI:
    """``ratio`` = median(random) / median(BO) trials-to-first-success, with its bootstrap CI ``[lo, hi]``."""

    ratio: float
    lo: float
    hi: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_TTS = [SequenceOf(Satisfies(lambda v: v is None or (isinstance(v, int | np.integer) and not isinstance(v, bool)
                                                     and v >= 1), "None (censored) or an int >= 1", ["x", 0, 1.5], valid=1))]


@validate_args(tts=_TTS, budget=[Interval(int, 1, None)])
def tts_summary(tts: list[int | None], budget: int) -> TrialsToSuccess:
    """Trials-to-first-success over seeds with censoring: censored runs (None) count at ``budget``."""
    vals = np.array([budget if t is None else t for t in tts], dtype=float)
    return TrialsToSuccess(median=float(np.median(vals)), n_censored=int(sum(t is None for t in tts)), n=len(tts),
                           values=vals.tolist())


@validate_args(tts_random=_TTS, tts_bo=_TTS, budget=[Interval(int, 1, None)], n_boot=[Interval(int, 1, None)],
               level=[Interval(float, 0, 1, closed="neither")], random_state=["random_state"])
def speedup_ci(tts_random: list[int | None], tts_bo: list[int | None], budget: int, *, n_boot: int = 2000,
               level: float = 0.95, random_state: Any = 0) -> SpeedupCI:
    """Ratio median(random) / median(BO) of trials-to-first-success with a percentile bootstrap CI.

    Censored runs (no success within ``budget``) count at ``budget``, which biases the ratio towards 1
    when the slower sampler is censored (a conservative estimate).
    """
    from trustlab.core.seeding import check_random_state

    r = np.array(tts_summary(tts_random, budget).values)
    b = np.array(tts_summary(tts_bo, budget).values)
    ratio = float(np.median(r) / np.median(b))
    rng = check_random_state(random_state)
    boots = np.empty(n_boot)
    for i in range(n_boot):
        boots[i] = np.median(rng.choice(r, len(r))) / np.median(rng.choice(b, len(b)))
    a = (1 - level) / 2
    return SpeedupCI(ratio=ratio, lo=float(np.quantile(boots, a)), hi=float(np.quantile(boots, 1 - a)))
