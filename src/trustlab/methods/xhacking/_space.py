"""The AutoML search space of the X-hacking search: sklearn pipelines built from flat configurations.

A configuration is a flat ``dict`` of JSON-ready values (strings, ints, floats, bools). It is what
optuna samples, what the trial log stores and what :func:`build_pipeline` turns back into the exact
same fitted pipeline (every random step is seeded from ``config["seed"]``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from trustlab.core.arguments import HasMethods, validate_args
from trustlab.core.constraints import Interval
from trustlab.core.exceptions import ConfigError
from trustlab.core.hashing import content_hash

__all__ = ["SearchSpace", "build_pipeline", "default_space", "audit_space", "tiny_space", "spec_hash",
           "MODEL_FAMILIES"]

MODEL_FAMILIES = ("lr", "rf", "et", "hgb", "svc", "knn")
_SCALERS = ("none", "standard", "minmax", "robust")
_SELECTORS = ("none", "kbest_f", "kbest_mi", "percentile_f")
_TRANSFORMS = ("none", "pca", "poly")


@dataclass(frozen=True)
class SearchSpace:
    """A standard AutoML space: imputer, scaler, feature selection, optional PCA/polynomial step, model.

    Parameters
    ----------
    imputers : tuple of {"mean", "median"}
    scalers : tuple of {"none", "standard", "minmax", "robust"}
    selectors : tuple of {"none", "kbest_f", "kbest_mi", "percentile_f"}
        ``kbest_*`` keep the ``k`` best features by the ANOVA F statistic or mutual information;
        ``percentile_f`` keeps a percentile by F. ``k`` is sampled as a fraction in ``keep_range``.
    keep_range : (float, float)
        Range of the fraction of features a selector keeps.
    transforms : tuple of {"none", "pca", "poly"}
        An optional mixing step after selection (explanations then use the model-agnostic explainer).
    models : tuple of {"lr", "rf", "et", "hgb", "svc", "knn"}
    n_estimators : (int, int)
        Range of the forest sizes and boosting iterations.
    feature_switches : bool
        Add one keep/drop boolean per input feature (the analyst's feature selection). Off in
        :func:`default_space` (the attack's standard AutoML space, where switches would make the attack
        trivial on redundant data: about half of all random configurations drop any given feature); on
        in :func:`audit_space`, the audit's default, because a defence must search at least what an
        analyst plausibly does.

    Examples
    --------
    >>> space = SearchSpace(models=("lr", "rf"))
    >>> sorted(space.to_spec())[:3]
    ['feature_switches', 'imputers', 'keep_range']
    """

    imputers: tuple[str, ...] = ("mean", "median")
    scalers: tuple[str, ...] = _SCALERS
    selectors: tuple[str, ...] = _SELECTORS
    keep_range: tuple[float, float] = (0.3, 1.0)
    transforms: tuple[str, ...] = _TRANSFORMS
    models: tuple[str, ...] = MODEL_FAMILIES
    n_estimators: tuple[int, int] = (20, 120)
    feature_switches: bool = False

    def validate(self) -> None:
        """Raise ConfigError for unknown choices or bad ranges."""
        for name, allowed in (("imputers", ("mean", "median")), ("scalers", _SCALERS),
                              ("selectors", _SELECTORS), ("transforms", _TRANSFORMS), ("models", MODEL_FAMILIES)):
            vals = getattr(self, name)
            bad = [v for v in vals if v not in allowed]
            if not vals or bad:
                raise ConfigError(f"The '{name}' field of SearchSpace must be a non-empty tuple drawn from "
                                  f"{allowed}. Got {vals!r} instead.")
        lo, hi = self.keep_range
        if not (0 < lo <= hi <= 1):
            raise ConfigError(f"The 'keep_range' field of SearchSpace must satisfy 0 < lo <= hi <= 1. "
                              f"Got {self.keep_range!r} instead.")
        a, b = self.n_estimators
        if not (1 <= a <= b):
            raise ConfigError(f"The 'n_estimators' field of SearchSpace must satisfy 1 <= lo <= hi. "
                              f"Got {self.n_estimators!r} instead.")

    def to_spec(self) -> dict[str, Any]:
        """A JSON-ready description (what the search-specification hash covers)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    # -- sampling -------------------------------------------------------------------------------------
    @validate_args(trial=[HasMethods("suggest_categorical", "suggest_float", "suggest_int", what="an optuna Trial")],
                   n_features=[Interval(int, 1, None)])
    def suggest(self, trial: Any, n_features: int) -> dict[str, Any]:
        """Sample one configuration from an optuna ``trial`` (conditional parameters per choice)."""
        c: dict[str, Any] = {}
        c["imputer"] = trial.suggest_categorical("imputer", list(self.imputers))
        c["scaler"] = trial.suggest_categorical("scaler", list(self.scalers))
        c["selector"] = trial.suggest_categorical("selector", list(self.selectors))
        if c["selector"] != "none":
            c["keep"] = trial.suggest_float("keep", *self.keep_range)
        c["transform"] = trial.suggest_categorical("transform", list(self.transforms))
        if c["transform"] == "pca":
            c["pca_keep"] = trial.suggest_float("pca_keep", 0.3, 1.0)
        m = c["model"] = trial.suggest_categorical("model", list(self.models))
        if m == "lr":
            c["lr_C"] = trial.suggest_float("lr_C", 1e-3, 1e2, log=True)
            c["lr_penalty"] = trial.suggest_categorical("lr_penalty", ["l1", "l2"])
        elif m in ("rf", "et"):
            c[f"{m}_n"] = trial.suggest_int(f"{m}_n", *self.n_estimators)
            c[f"{m}_depth"] = trial.suggest_int(f"{m}_depth", 2, 16)
            c[f"{m}_max_features"] = trial.suggest_float(f"{m}_max_features", 0.05, 1.0)
            c[f"{m}_leaf"] = trial.suggest_int(f"{m}_leaf", 1, 10)
        elif m == "hgb":
            c["hgb_lr"] = trial.suggest_float("hgb_lr", 0.01, 0.3, log=True)
            c["hgb_depth"] = trial.suggest_int("hgb_depth", 2, 8)
            c["hgb_l2"] = trial.suggest_float("hgb_l2", 1e-4, 10.0, log=True)
            c["hgb_iter"] = trial.suggest_int("hgb_iter", *self.n_estimators)
        elif m == "svc":
            c["svc_C"] = trial.suggest_float("svc_C", 0.1, 100.0, log=True)
            c["svc_gamma"] = trial.suggest_float("svc_gamma", 0.1, 10.0, log=True)
        elif m == "knn":
            c["knn_k"] = trial.suggest_int("knn_k", 3, 30)
            c["knn_weights"] = trial.suggest_categorical("knn_weights", ["uniform", "distance"])
        if self.feature_switches:
            for j in range(n_features):
                c[f"keep_{j}"] = trial.suggest_categorical(f"keep_{j}", [True, False])
        return c


@validate_args()
def default_space() -> SearchSpace:
    """The standard AutoML space of the attack (:func:`xhack`): imputer, scaler, SelectKBest/SelectPercentile
    by F or mutual information, optional PCA or interaction features, six model families with their
    hyper-parameters; no per-feature switches."""
    return SearchSpace()


@validate_args()
def audit_space() -> SearchSpace:
    """The audit's default space: every defensible choice the spec lists, i.e. :func:`default_space` plus
    one keep/drop switch per input feature."""
    return SearchSpace(feature_switches=True)


@validate_args()
def tiny_space() -> SearchSpace:
    """A very small space for tests and examples: LR or a small forest, F-score selection."""
    return SearchSpace(imputers=("mean",), scalers=("standard",), selectors=("none", "kbest_f"),
                       transforms=("none",), models=("lr", "rf"), n_estimators=(5, 15))


class _KeepColumns(TransformerMixin, BaseEstimator):
    """Keep the columns whose mask entry is True (the per-feature switch of ``feature_switches``)."""

    def __init__(self, mask: tuple[bool, ...] = ()):
        self.mask = mask

    def fit(self, X: Any, y: Any = None) -> _KeepColumns:
        m = np.asarray(self.mask, dtype=bool)
        if not m.any():  # keep at least one column so the pipeline stays valid
            m = m.copy()
            m[0] = True
        self.support_ = m
        return self

    def transform(self, X: Any) -> Any:
        return np.asarray(X)[:, self.support_]

    def get_support(self) -> np.ndarray:
        return self.support_


def _mi_score(seed: int) -> Any:
    from functools import partial

    from sklearn.feature_selection import mutual_info_classif

    return partial(mutual_info_classif, random_state=seed)


@validate_args(config=[dict], n_features=[Interval(int, 1, None)], n_classes=[Interval(int, 2, None)])
def build_pipeline(config: dict[str, Any], n_features: int, n_classes: int = 2) -> Any:
    """The unfitted sklearn ``Pipeline`` of ``config``; its random steps use ``config["seed"]``.

    ``svc_gamma`` is a multiplier of sklearn's ``"scale"`` heuristic, so it means the same on scaled and
    unscaled inputs. The pipeline is fully determined by ``config`` (and the data it is fitted on). A
    configuration without a ``model`` entry, with an unknown family or without that family's
    hyper-parameters raises ConfigError.
    """
    try:
        return _build(config, n_features, n_classes)
    except KeyError as exc:
        raise ConfigError(f"The 'config' argument of build_pipeline lacks the entry {exc}. Got keys "
                          f"{sorted(config)} instead.") from None


def _build(config: dict[str, Any], n_features: int, n_classes: int) -> Any:
    from sklearn.decomposition import PCA
    from sklearn.ensemble import ExtraTreesClassifier, HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.feature_selection import SelectKBest, SelectPercentile, f_classif
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, PolynomialFeatures, RobustScaler, StandardScaler

    seed = int(config.get("seed", 0))
    steps: list[tuple[str, Any]] = [("impute", SimpleImputer(strategy=config.get("imputer", "mean"),
                                                             keep_empty_features=True))]
    p = n_features
    if any(k.startswith("keep_") for k in config):
        mask = tuple(bool(config.get(f"keep_{j}", True)) for j in range(n_features))
        steps.append(("switches", _KeepColumns(mask)))
        p = max(1, sum(mask))
    scaler = config.get("scaler", "none")
    if scaler != "none":
        steps.append(("scale", {"standard": StandardScaler, "minmax": MinMaxScaler, "robust": RobustScaler}[scaler]()))
    sel = config.get("selector", "none")
    if sel != "none":
        keep = float(config["keep"])
        k = max(1, int(round(keep * p)))
        if sel == "kbest_f":
            steps.append(("select", SelectKBest(f_classif, k=k)))
        elif sel == "kbest_mi":
            steps.append(("select", SelectKBest(_mi_score(seed), k=k)))
        else:
            steps.append(("select", SelectPercentile(f_classif, percentile=100.0 * keep)))
        p = k
    tr = config.get("transform", "none")
    if tr == "pca":
        steps.append(("pca", PCA(n_components=max(1, int(round(float(config["pca_keep"]) * p))), random_state=seed)))
    elif tr == "poly":
        steps.append(("poly", PolynomialFeatures(degree=2, interaction_only=True, include_bias=False)))
    m = config["model"]
    if m == "lr":
        model: Any = LogisticRegression(C=float(config["lr_C"]), l1_ratio=1.0 if config["lr_penalty"] == "l1" else 0.0,
                                        solver="liblinear" if n_classes == 2 else "saga", max_iter=500,
                                        random_state=seed)
    elif m in ("rf", "et"):
        cls = RandomForestClassifier if m == "rf" else ExtraTreesClassifier
        depth, mf = config[f"{m}_depth"], config[f"{m}_max_features"]
        model = cls(n_estimators=int(config[f"{m}_n"]), max_depth=None if depth is None else int(depth),
                    max_features=mf if isinstance(mf, str) else float(mf), min_samples_leaf=int(config[f"{m}_leaf"]),
                    random_state=seed, n_jobs=1)
    elif m == "hgb":
        model = HistGradientBoostingClassifier(learning_rate=float(config["hgb_lr"]), max_depth=int(config["hgb_depth"]),
                                               l2_regularization=float(config["hgb_l2"]),
                                               max_iter=int(config["hgb_iter"]), early_stopping=False,
                                               random_state=seed)
    elif m == "svc":
        model = _ScaledGammaSVC(C=float(config["svc_C"]), gamma_mult=float(config["svc_gamma"]))
    elif m == "knn":
        model = KNeighborsClassifier(n_neighbors=int(config["knn_k"]), weights=config["knn_weights"])
    else:
        raise ConfigError(f"The 'model' entry of the config passed to build_pipeline must be one of "
                          f"{MODEL_FAMILIES}. Got {m!r} instead.")
    steps.append(("model", model))
    return Pipeline(steps)


class _ScaledGammaSVC(BaseEstimator):
    """RBF SVC whose gamma is ``gamma_mult / (n_features * X.var())`` (a multiple of sklearn's "scale").

    ``decision_function`` is evaluated in numpy from the support vectors (exact, much faster than
    libsvm's per-row loop when the permutation explainer calls it on thousands of rows).
    """

    _estimator_type = "classifier"

    def __init__(self, C: float = 1.0, gamma_mult: float = 1.0):
        self.C = C
        self.gamma_mult = gamma_mult

    def fit(self, X: Any, y: Any) -> _ScaledGammaSVC:
        from sklearn.svm import SVC

        X = np.asarray(X, dtype=float)
        var = float(X.var()) or 1.0
        self.gamma_ = self.gamma_mult / (X.shape[1] * var)
        self.svc_ = SVC(C=self.C, gamma=self.gamma_, kernel="rbf", decision_function_shape="ovr").fit(X, y)
        self.classes_ = self.svc_.classes_
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        if len(self.classes_) > 2:
            return self.svc_.decision_function(X)
        X = np.asarray(X, dtype=float)
        sv = self.svc_.support_vectors_
        d2 = (X ** 2).sum(1)[:, None] + (sv ** 2).sum(1)[None, :] - 2.0 * X @ sv.T
        k = np.exp(-self.gamma_ * np.maximum(d2, 0.0))
        return k @ self.svc_.dual_coef_[0] + self.svc_.intercept_[0]

    def predict(self, X: Any) -> np.ndarray:
        return self.svc_.predict(X)

    def score(self, X: Any, y: Any) -> float:
        return float(np.mean(self.predict(X) == np.asarray(y)))


def spec_hash(spec: dict[str, Any]) -> str:
    """SHA-256 of a search specification (:func:`trustlab.core.hashing.content_hash`: keys sorted, so
    the same specification read back from the JSON report hashes the same)."""
    return content_hash(spec)
