"""Live pools that produce SelectionTables: scikit-learn classifiers of rising cost (B2).

:func:`classifier_pool` trains five classifiers on one part of a bundled data set and records, on the
remaining rows, each model's class-probability vector (the answer), its correctness (the quality) and its
analytic cost in floating-point operations per query (deterministic; wall time is too noisy on a shared
machine). The table is cached under ``cache_dir`` (when given) keyed by a content hash of the recipe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf, Interval, Options
from trustlab.core.hashing import content_hash
from trustlab.core.seeding import as_seed
from trustlab.methods.cascade._table import SelectionTable

__all__ = ["classifier_pool", "POOL_MODELS", "cached_table"]

#: the B2 models in order of (typical) cost; the recipe is part of the cache key
POOL_MODELS = ("nb_pooled", "logreg", "forest", "svc", "knn")
_RECIPE_VERSION = 1


def _pool2(X: np.ndarray) -> np.ndarray:
    """2x2 average pooling of 8x8 digit images (64 -> 16 features)."""
    img = X.reshape(-1, 8, 8)
    return img.reshape(-1, 4, 2, 4, 2).mean(axis=(2, 4)).reshape(len(X), 16)


def _load(dataset: str) -> tuple[np.ndarray, np.ndarray]:
    if dataset == "digits":
        from trustlab.data import load_digits_images

        ds = load_digits_images(flatten=True)
    else:
        from trustlab.data import load_tabular

        ds = load_tabular(dataset)
    return np.asarray(ds.X, dtype=np.float64), np.asarray(ds.y).astype(int)


def _fit_models(X: np.ndarray, y: np.ndarray, dataset: str, seed: int) -> dict[str, Any]:
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    coarse = _pool2(X) if dataset == "digits" else X[:, : max(2, X.shape[1] // 4)]
    return {
        "nb_pooled": GaussianNB().fit(coarse, y),
        "logreg": make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(X, y),
        "forest": RandomForestClassifier(n_estimators=300, random_state=seed, n_jobs=1).fit(X, y),
        "svc": make_pipeline(StandardScaler(), CalibratedClassifierCV(SVC(), ensemble=False)).fit(X, y),
        "knn": make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=5)).fit(X, y),
    }


def _flops(name: str, model: Any, X: np.ndarray, n_classes: int) -> np.ndarray:
    """Analytic floating-point operations per query (a per-query array)."""
    n, d = X.shape
    if name == "nb_pooled":
        d_c = model.theta_.shape[1]
        per = (d if d_c < d else 0) + n_classes * d_c * 4 + n_classes * 3
    elif name == "logreg":
        per = 2 * d + 2 * d * n_classes + 3 * n_classes
    elif name == "forest":  # nodes visited on every tree's decision path, plus summing the leaf distributions
        visited = np.asarray(model.decision_path(X)[0].sum(axis=1)).reshape(-1)
        return visited.astype(float) + len(model.estimators_) * n_classes
    elif name == "svc":
        n_sv = int(model[-1].calibrated_classifiers_[0].estimator.n_support_.sum())
        pairs = n_classes * (n_classes - 1) // 2
        per = 2 * d + n_sv * (3 * d + 2) + pairs * 6 + n_classes * pairs
    elif name == "knn":
        n_fit = int(model[-1].n_samples_fit_)
        per = 2 * d + n_fit * (3 * d + 1) + n_classes
    else:  # pragma: no cover - the recipe lists the names
        raise KeyError(name)
    return np.full(n, float(per))


def _build(dataset: str, train_fraction: float, seed: int) -> SelectionTable:
    from sklearn.model_selection import train_test_split

    X, y = _load(dataset)
    idx_tr, idx_pool = train_test_split(np.arange(len(y)), train_size=train_fraction, random_state=seed, stratify=y)
    models = _fit_models(X[idx_tr], y[idx_tr], dataset, seed)
    Xp, yp = X[idx_pool], y[idx_pool]
    classes = np.unique(y)
    quality, cost, answers = [], [], []
    for name in POOL_MODELS:
        m = models[name]
        Xin = (_pool2(Xp) if dataset == "digits" else Xp[:, : max(2, Xp.shape[1] // 4)]) if name == "nb_pooled" else Xp
        P = m.predict_proba(Xin)
        quality.append((classes[P.argmax(axis=1)] == yp).astype(float))
        cost.append(_flops(name, m, Xin if name != "nb_pooled" else Xp, len(classes)))
        answers.append(list(P))
    ans = np.empty((len(yp), len(POOL_MODELS)), dtype=object)
    for j, col in enumerate(answers):
        for i, p in enumerate(col):
            ans[i, j] = np.asarray(p, dtype=np.float64)
    return SelectionTable(quality=np.column_stack(quality), cost=np.column_stack(cost), models=POOL_MODELS,
                          queries=[f"{dataset}-{int(i)}" for i in idx_pool], answers=ans,
                          name=f"classifier pool ({dataset}, seed {seed})")


def cached_table(cache_dir: str | Path | None, key: dict[str, Any], build: Any) -> SelectionTable:
    """``build()`` once per content hash of ``key``: saved under ``cache_dir/cascade/<hash>`` (atomically,
    manifest-verified) and read back afterwards; without ``cache_dir`` nothing is written."""
    if cache_dir is None:
        return build()
    from trustlab.llm._cache import cached_build
    from trustlab.methods.cascade._io import load_selection_table, save_selection_table

    folder = Path(cache_dir).expanduser() / "cascade" / content_hash(key)[:32]
    made: dict[str, SelectionTable] = {}

    def write(tmp: Path) -> dict[str, Any]:
        made["table"] = build()
        save_selection_table(made["table"], tmp / "table.jsonl")
        return {"recipe": key}

    cached_build(folder, write)
    if "table" in made:
        return made["table"]
    t = load_selection_table(folder / "table.jsonl")
    return SelectionTable(quality=t.quality, cost=t.cost, models=t.models, queries=t.queries, answers=t.answers,
                          features=t.features, name=str(key.get("name", t.name)))


@validate_args(dataset=[Options(["digits", "breast_cancer", "wine"])],
               train_fraction=[Interval("real", 0, 1, closed="neither")], random_state=["random_state"],
               cache_dir=[None, InstanceOf(str, Path)])
def classifier_pool(dataset: str = "digits", *, train_fraction: float = 0.4, random_state: int = 0,
                    cache_dir: str | Path | None = None) -> SelectionTable:
    """The B2 pool: GaussianNB on 2x2-pooled pixels, logistic regression, a 300-tree random forest, an
    RBF SVC (Platt-calibrated with CalibratedClassifierCV) and 5-NN, fitted on ``train_fraction`` of the data; the table holds the
    other rows (answers = class probabilities, quality = correct, cost = FLOPs per query).

    Examples
    --------
    >>> t = classifier_pool("wine", random_state=0)
    >>> t.models[0], t.n_queries > 50
    ('nb_pooled', True)
    """
    random_state = as_seed(random_state)  # int seeds unchanged; a Generator is accepted
    import sklearn

    key = {"name": f"classifier pool ({dataset}, seed {random_state})", "kind": "classifier_pool",
           "dataset": dataset, "train_fraction": float(train_fraction), "seed": int(random_state),
           "models": list(POOL_MODELS), "sklearn": sklearn.__version__, "recipe": _RECIPE_VERSION}
    return cached_table(cache_dir, key, lambda: _build(dataset, train_fraction, int(random_state)))
