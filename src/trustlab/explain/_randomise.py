"""The randomisation tests' control models (Adebayo et al., "Sanity Checks for Saliency Maps", NeurIPS 2018).

* **Model-parameter randomisation**, cascading from the output towards the input. A torch module: every
  sub-module with ``reset_parameters`` (``Linear``, ``Conv``, norms), last first, is re-initialised with
  torch's own initialiser (the mechanism quantus' ``get_random_layer_generator(order="top_down")`` uses),
  seeded locally. A scikit-learn tree model: stage ``leaves`` permutes the leaf values across the leaves of
  every tree (the output layer), stage ``splits`` then also draws every split's feature uniformly and its
  threshold uniformly in that feature's range on the reference rows. Linear models: the coefficients are
  permuted. ``MLPClassifier``/``MLPRegressor``: each layer, last first, is re-drawn from scikit-learn's
  Glorot initialisation. Pipelines randomise their final estimator. Every stage is a deep copy; the user's
  model is never changed.
* **Data randomisation**: the same model class refitted on permuted labels (``sklearn.base.clone`` + fit; a
  torch module re-initialised and trained with :func:`trustlab.models.fit_model`; or the user's ``refit``).

Refitting "with another random_state" is deliberately *not* a randomisation control: it changes almost
nothing in the learned function (see docs/papers/xai_controls.md), so an explanation that reflects the
model is expected to stay the same under it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from trustlab.core.seeding import isolated_global_rng, spawn_seed
from trustlab.explain._models import TREE_MODELS, model_kind

__all__ = ["randomised_models", "refit_on_permuted_labels"]

Stages = list[tuple[str, Any]]


def _torch_stages(model: Any, rng: np.random.Generator) -> Stages:
    work = copy.deepcopy(model)
    layers = [(n, m) for n, m in work.named_modules() if hasattr(m, "reset_parameters") and n]
    stages: Stages = []
    for name, module in reversed(layers):
        with isolated_global_rng(spawn_seed(rng)):
            module.reset_parameters()
        stages.append((f"layer:{name}", copy.deepcopy(work)))
    return stages


def _trees_of(model: Any) -> list[Any]:
    if hasattr(model, "tree_"):
        return [model]
    ests = getattr(model, "estimators_", None)
    return [] if ests is None else [e for e in np.asarray(ests, dtype=object).ravel() if hasattr(e, "tree_")]


def _tree_stages(model: Any, X_ref: np.ndarray, rng: np.random.Generator) -> Stages:
    work = copy.deepcopy(model)
    trees = _trees_of(work)
    for est in trees:
        t = est.tree_
        leaf = np.flatnonzero(t.children_left == -1)
        t.value[leaf] = t.value[leaf][rng.permutation(len(leaf))]
    stages: Stages = [("leaves", copy.deepcopy(work))]
    lo, hi = X_ref.min(axis=0), X_ref.max(axis=0)
    for est in trees:
        t = est.tree_
        inner = np.flatnonzero(t.children_left != -1)
        feats = rng.integers(0, X_ref.shape[1], size=len(inner))
        t.feature[inner] = feats
        t.threshold[inner] = rng.uniform(lo[feats], hi[feats])
    stages.append(("splits", work))
    return stages


def _mlp_stages(model: Any, rng: np.random.Generator) -> Stages:
    work = copy.deepcopy(model)
    factor = 2.0 if getattr(work, "activation", "relu") == "logistic" else 6.0
    stages: Stages = []
    for k in reversed(range(len(work.coefs_))):
        fan_in, fan_out = work.coefs_[k].shape
        bound = np.sqrt(factor / (fan_in + fan_out))
        work.coefs_[k] = rng.uniform(-bound, bound, size=(fan_in, fan_out))
        work.intercepts_[k] = rng.uniform(-bound, bound, size=fan_out)
        stages.append((f"layer:{k}", copy.deepcopy(work)))
    return stages


def _linear_stages(model: Any, rng: np.random.Generator) -> Stages:
    work = copy.deepcopy(model)
    coef = np.asarray(work.coef_, dtype=float)
    work.coef_ = coef.ravel()[rng.permutation(coef.size)].reshape(coef.shape)
    return [("coefficients", work)]


def randomised_models(model: Any, X_ref: np.ndarray, rng: np.random.Generator,
                      randomise: Callable[..., Any] | None = None) -> tuple[Stages, str | None]:
    """Cascade stages ``[(name, randomised copy), ...]`` (last = fully randomised) and a reason if none exist."""
    if randomise is not None:
        stages = list(randomise(model, rng))
        return stages, None if stages else "the user's randomise function returned no stage"
    kind = model_kind(model)
    if kind == "torch":
        stages = _torch_stages(model, rng)
        return stages, None if stages else "the torch module has no sub-module with reset_parameters"
    if kind != "sklearn":
        return [], "a plain callable has no parameters to randomise (pass randomise=...)"
    steps = getattr(model, "steps", None)
    if steps is not None:  # a Pipeline: randomise its final estimator, keep the preprocessing
        last_name, last = steps[-1]
        Z = X_ref
        for _, step in steps[:-1]:
            Z = step.transform(Z)
        inner, reason = randomised_models(last, np.asarray(Z, dtype=float), rng)
        out = []
        for name, est in inner:
            pipe = copy.deepcopy(model)
            pipe.steps[-1] = (last_name, est)
            out.append((f"{last_name}:{name}", pipe))
        return out, reason
    name = type(model).__name__
    if name in TREE_MODELS:
        return _tree_stages(model, X_ref, rng), None
    if name in ("MLPClassifier", "MLPRegressor"):
        return _mlp_stages(model, rng), None
    if hasattr(model, "coef_"):
        return _linear_stages(model, rng), None
    return [], (f"no parameter randomisation is known for {name} (supported: torch modules, scikit-learn tree "
                "models, MLPs and linear models; pass randomise=callable(model, rng) -> [(stage, model)])")


def refit_on_permuted_labels(model: Any, X_train: np.ndarray, y_train: np.ndarray, rng: np.random.Generator, *,
                             refit: Callable[[np.ndarray, np.ndarray], Any] | None = None,
                             train_config: Any = None) -> tuple[Any, str | None]:
    """The model refitted on a random permutation of ``y_train`` (None and a reason when it cannot be)."""
    y_perm = np.asarray(y_train)[rng.permutation(len(y_train))]
    seed = spawn_seed(rng)
    with isolated_global_rng(seed):
        if refit is not None:
            return refit(X_train, y_perm), None
        kind = model_kind(model)
        if kind == "sklearn":
            from sklearn.base import clone

            return clone(model).fit(X_train, y_perm), None
        if kind == "torch":
            from trustlab.models import TrainConfig, fit_model

            net = copy.deepcopy(model)
            for m in net.modules():
                if hasattr(m, "reset_parameters"):
                    m.reset_parameters()
            cfg = train_config if train_config is not None else TrainConfig(seed=seed % 2**31)
            fit_model(net, X_train, y_perm, cfg)
            return net, None
    return None, "a plain callable cannot be refitted (pass refit=callable(X, y) -> model)"
