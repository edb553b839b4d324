"""``explain`` and ``attach_controls``: a real explanation, its placebo/randomisation/baseline controls, a verdict.

Controls of an explanation with values ``phi`` (``(n, p)``, one output per row):

* ``placebo_permuted``: each row's ``phi`` with its features shuffled (a fresh permutation per row);
* ``placebo_random``: independent draws from the pooled values of ``phi`` (the real explanation's distribution);
* ``model_randomisation``: the same explainer on the same rows and outputs of a parameter-randomised copy of the
  model (cascading, see :mod:`trustlab.explain._randomise`; every stage kept in ``controls.cascade``);
* ``data_randomisation``: the same explainer on the model refitted on permuted labels;
* ``baseline_linear``: the SHAP values of a ridge surrogate fitted to the model's outputs on the standardised
  reference rows, ``coef_{t_i} * (x_i - mean) / sd``, i.e. "a linear model's coefficients for the same rows";
* ``baseline_global``: the mean absolute real attribution of each feature, the same for every row (a global
  importance ranking shown in place of the local explanation).

Placebos give zero to features that are constant on the background and the explained rows (no explainer
can attribute anything to them), so they are not told apart by attributions to blank inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Options, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.hashing import content_hash
from trustlab.core.seeding import check_random_state, derive_seed, isolated_global_rng, spawn_seed
from trustlab.core.validation import check_array
from trustlab.explain._backends import EXPLAINERS, resolve_method, run_explainer
from trustlab.explain._explanation import (
    EXPLANATION_RULE,
    Controls,
    Explanation,
    ProvenanceCard,
    package_versions,
)
from trustlab.explain._models import ModelAdapter, model_hash
from trustlab.explain._randomise import randomised_models, refit_on_permuted_labels
from trustlab.explain._sanity import THRESHOLDS, RankCorrelation, faithfulness_curves, judge, row_spearman
from trustlab.models.training import TrainConfig

__all__ = ["explain", "attach_controls", "explanation_from_values"]

_SEED_PARTS = ("explainer", "background", "placebo", "model_randomisation", "data_randomisation", "faithfulness")


def _is_model(m: Any) -> bool:
    return callable(m) or hasattr(m, "predict")


def _example_model(Z: Any) -> Any:
    return np.asarray(Z, dtype=float).sum(axis=1)


_MODEL = Satisfies(_is_model, "a fitted scikit-learn estimator, a torch module or a callable",
                   ["not-a-model", 3.5, None], valid=_example_model)
_METHOD = [Options(EXPLAINERS), "callable"]
_OUTPUT = Options(["auto", "proba", "raw"])
_TARGET = Satisfies(lambda t: (isinstance(t, str) and t == "predicted") or
                    (isinstance(t, int | np.integer) and not isinstance(t, bool) and t >= 0) or
                    (isinstance(t, list | tuple | np.ndarray) and len(t) > 0 and
                     np.asarray(t).dtype.kind in "iu" and np.asarray(t).min() >= 0),
                    "'predicted', an int >= 0 or a non-empty array of ints >= 0", ["argmax", -1, 1.5],
                    valid="predicted")
_COMMON = {
    "background": [None, ArrayLike(ndim=2)],
    "X_train": [None, ArrayLike(ndim=2)],
    "y_train": [None, ArrayLike(ndim=1, dtype="any")],
    "refit": [None, "callable"],
    "randomise": [None, "callable"],
    "cascade": ["boolean"],
    "max_evals": [None, Interval(int, 3, None)],
    "random_state": ["random_state"],
    "train_config": [None, InstanceOf(TrainConfig)],
}


def _seed_of(random_state: Any) -> int:
    return int(random_state) if isinstance(random_state, int | np.integer) else spawn_seed(check_random_state(random_state))


def _check_rows(X: Any, feature_names: Any, owner: str) -> tuple[np.ndarray, list[str]]:
    cols = list(map(str, X.columns)) if hasattr(X, "columns") else None
    arr = check_array(X, name="X", owner=owner).astype(float)
    if feature_names is None:
        names = cols if cols is not None else [f"x{j}" for j in range(arr.shape[1])]
    else:
        names = [str(f) for f in feature_names]
        if len(names) != arr.shape[1]:
            raise InputError(f"The 'feature_names' argument of {owner} must name each of the {arr.shape[1]} columns "
                             f"of X. Got {len(names)} name(s) instead.")
        if cols is not None and cols != names:
            raise InputError(f"The 'feature_names' argument of {owner} does not match the DataFrame's columns "
                             f"({cols[:5]}...). Got {names[:5]}... instead; drop feature_names or reorder X.")
    if len(set(names)) != len(names):
        raise InputError(f"The 'feature_names' argument of {owner} must hold distinct names. Got {names} instead.")
    return arr, names


def _same_width(arr: Any, p: int, name: str, owner: str) -> np.ndarray | None:
    if arr is None:
        return None
    a = check_array(arr, name=name, owner=owner).astype(float)
    if a.shape[1] != p:
        raise InputError(f"The '{name}' argument of {owner} must have the {p} features of X. "
                         f"Got {a.shape[1]} column(s) instead.")
    return a


def _targets(target: Any, out: np.ndarray, owner: str) -> np.ndarray:
    n, c = out.shape
    if isinstance(target, str):
        return out.argmax(axis=1) if c > 1 else np.zeros(n, dtype=int)
    t = np.broadcast_to(np.asarray(target, dtype=int), (n,)) if np.ndim(target) == 0 or len(target) == n else None
    if t is None or t.max() >= c:
        raise InputError(f"The 'target' argument of {owner} must give an output index below {c} for each of the {n} "
                         f"rows. Got {target!r} instead.")
    return np.array(t)


def _card(adapter: ModelAdapter, X: np.ndarray, names: list[str], bg: np.ndarray, X_train: Any, y_train: Any,
          seeds: dict[str, int], explainer: dict[str, Any]) -> ProvenanceCard:
    train = None if X_train is None else content_hash(X_train, None if y_train is None else np.asarray(y_train))
    return ProvenanceCard(versions=package_versions(torch=adapter.kind == "torch"), seeds=seeds,
                          data_hash=content_hash(X), model_hash=model_hash(adapter.model),
                          model_type=f"{type(adapter.model).__module__}.{type(adapter.model).__qualname__}",
                          background_hash=content_hash(bg), explainer=explainer, train_data_hash=train,
                          feature_names_hash=content_hash(names))


def _control(real: Explanation, values: np.ndarray, role: str, base: np.ndarray | None = None,
             backend: str = "") -> Explanation:
    return Explanation(values=np.asarray(values, dtype=float), base_values=real.base_values if base is None else base,
                       data=real.data, feature_names=real.feature_names, target=real.target,
                       output_value=real.output_value, output=real.output, method=real.method,
                       backend=backend or real.backend, role=role, output_names=real.output_names)


def _linear_baseline(adapter: ModelAdapter, real: Explanation, R: np.ndarray) -> Explanation:
    from sklearn.linear_model import RidgeCV

    out = adapter.outputs(R)
    mean, scale = R.mean(axis=0), R.std(axis=0)
    scale[scale == 0] = 1.0
    Z, Zx = (R - mean) / scale, (real.data - mean) / scale  # standardised, so the ridge penalty treats features alike
    values = np.zeros_like(real.values)
    base = np.zeros(len(values))
    for t in np.unique(real.target):
        fit = RidgeCV(alphas=np.logspace(-3, 3, 13)).fit(Z, out[:, t])
        rows = real.target == t
        values[rows] = fit.coef_[None, :] * Zx[rows]
        base[rows] = float(fit.intercept_)
    return _control(real, values, "baseline_linear", base, "sklearn.linear_model.RidgeCV surrogate (standardised)")


def _placebos(real: Explanation, keep: np.ndarray, rng: np.random.Generator) -> dict[str, Explanation]:
    n, _ = real.shape
    sub = real.values[:, keep]
    perm = np.argsort(rng.random(sub.shape), axis=1)
    permuted, drawn = np.zeros_like(real.values), np.zeros_like(real.values)
    permuted[:, keep] = sub[np.arange(n)[:, None], perm]
    drawn[:, keep] = rng.choice(sub.ravel(), size=sub.shape, replace=True)
    return {"placebo_permuted": _control(real, permuted, "placebo_permuted", backend="placebo: permuted rows"),
            "placebo_random": _control(real, drawn, "placebo_random", backend="placebo: draws from the real values")}


def _explain_model(method: Any, adapter: ModelAdapter, model: Any, real: Explanation, bg: np.ndarray, seed: int,
                   max_evals: int | None, role: str) -> Explanation:
    control = adapter.with_model(model)
    raw = run_explainer(method, control, real.data, bg, real.target, seed=seed,
                        n_outputs=control.outputs(bg[:1]).shape[1], max_evals=max_evals)
    return _control(real, raw.values, role, raw.base_values, raw.backend)


def _corr(real: Explanation, other: Explanation, keep: np.ndarray, name: str,
          rows: dict[str, np.ndarray] | None = None) -> RankCorrelation:
    ra, na = row_spearman(real.values, other.values, absolute=True, keep=keep)
    rs, _ = row_spearman(real.values, other.values, absolute=False, keep=keep)
    if rows is not None:
        rows[name] = ra
    return RankCorrelation(name, float(np.nanmean(ra)) if na else float("nan"),
                           float(np.nanmean(rs)) if na else float("nan"), len(ra), na)


def _attach(real: Explanation, adapter: ModelAdapter, method: Any, bg: np.ndarray, X_train: np.ndarray | None,
            y_train: Any, *, refit: Any, randomise: Any, train_config: Any, max_evals: int | None, cascade: bool,
            seeds: dict[str, int]) -> Explanation:
    keep = np.ptp(np.vstack([bg, real.data]), axis=0) > 0
    if keep.sum() < 2:
        raise InputError(f"The explained rows have {int(keep.sum())} feature(s) that vary on them and the background: "
                         "rank correlations between an explanation and its controls are undefined for fewer than 2 "
                         "features. Explain more features, or pass controls=False.")
    rngs = {k: np.random.default_rng(seeds[k]) for k in _SEED_PARTS}
    ctrl: dict[str, Explanation] = dict(_placebos(real, keep, rngs["placebo"]))
    reasons: dict[str, str] = {}
    R = X_train if X_train is not None else bg
    stages, why = randomised_models(adapter.model, R, rngs["model_randomisation"], randomise)
    stages = stages if cascade else stages[-1:]
    done = [(name, _explain_model(method, adapter, m, real, bg, seeds["explainer"], max_evals,
                                  f"model_randomisation:{name}")) for name, m in stages]
    if done:
        ctrl["model_randomisation"] = done[-1][1]
    else:
        reasons["model_randomisation"] = why or "no randomised model"
    if X_train is None or y_train is None:
        reasons["data_randomisation"] = "no training data: pass X_train and y_train to refit on permuted labels"
    else:
        refitted, why = refit_on_permuted_labels(adapter.model, X_train, np.asarray(y_train),
                                                 rngs["data_randomisation"], refit=refit, train_config=train_config)
        if refitted is None:
            reasons["data_randomisation"] = why or "refit failed"
        else:
            ctrl["data_randomisation"] = _explain_model(method, adapter, refitted, real, bg, seeds["explainer"],
                                                        max_evals, "data_randomisation")
    ctrl["baseline_linear"] = _linear_baseline(adapter, real, R)
    ctrl["baseline_global"] = _control(real, np.broadcast_to(np.abs(real.values).mean(axis=0), real.shape).copy(),
                                       "baseline_global", backend="global mean |attribution|")
    per_row: dict[str, np.ndarray] = {}
    corrs = {name: _corr(real, e, keep, name, per_row) for name, e in ctrl.items()}
    fill = bg.mean(axis=0)
    faith = {name: faithfulness_curves(adapter.target_values, real.data, e.values, real.target, fill,
                                       np.random.default_rng(seeds["faithfulness"]), THRESHOLDS["deletion_steps"])
             for name, e in {"real": real, **ctrl}.items()}
    verdict = judge(corrs, faith, reasons, [_corr(real, e, keep, s) for s, e in done],
                    np.random.default_rng(seeds["faithfulness"] + 1), per_row, keep)
    real.controls = Controls(explanations=ctrl, unavailable=reasons, cascade=done)
    real.verdict = verdict
    return real


def _prepare(model: Any, X: Any, feature_names: Any, output: str, background: Any, X_train: Any, y_train: Any,
             n_background: int, seed: int, owner: str) -> tuple[ModelAdapter, np.ndarray, list[str], np.ndarray,
                                                                np.ndarray | None, dict[str, int], str]:
    X, names = _check_rows(X, feature_names, owner)
    adapter = ModelAdapter(model, output, owner=owner)
    Xtr = _same_width(X_train, X.shape[1], "X_train", owner)
    if (Xtr is None) != (y_train is None) or (Xtr is not None and len(Xtr) != len(np.asarray(y_train))):
        raise InputError(f"The 'y_train' argument of {owner} must come with X_train and have one label per row of it. "
                         f"Got {None if y_train is None else len(np.asarray(y_train))} label(s) for "
                         f"{None if Xtr is None else len(Xtr)} row(s) instead.")
    seeds = {"random_state": seed, **{k: derive_seed(seed, k) for k in _SEED_PARTS}}
    bg = _same_width(background, X.shape[1], "background", owner)
    source = "given"
    if bg is None:
        pool, source = (Xtr, "X_train") if Xtr is not None else (X, "X")
        pick = np.random.default_rng(seeds["background"]).choice(len(pool), min(n_background, len(pool)), replace=False)
        bg = pool[np.sort(pick)]
    return adapter, X, names, bg, Xtr, seeds, source


@validate_args(model=[_MODEL], X=[ArrayLike(ndim=2)], method=_METHOD, controls=["boolean"],
               feature_names=[None, SequenceOf(str)], output=[_OUTPUT], target=[_TARGET],
               n_background=[Interval(int, 1, None)], **_COMMON)
def explain(model: Any, X: Any, method: str | Callable[..., Any] = "shap", controls: bool = True, *,
            feature_names: Any = None, background: Any = None, X_train: Any = None, y_train: Any = None,
            output: str = "auto", target: Any = "predicted", n_background: int = 50, max_evals: int | None = None,
            refit: Callable[..., Any] | None = None, randomise: Callable[..., Any] | None = None,
            train_config: Any = None, cascade: bool = True, random_state: Any = 0) -> Explanation:
    """Explain ``model`` on the rows of ``X`` and (``controls=True``) attach its controls and sanity verdict.

    Parameters
    ----------
    model : fitted scikit-learn estimator or pipeline, torch module (2-d inputs), or callable ``Z -> outputs``
    X : array-like or DataFrame of shape (n, p)
        The rows to explain.
    method : {"shap", "tree", "permutation", "gradient", "input_x_gradient", "integrated_gradients"} or callable
        See :mod:`trustlab.explain._backends`; a callable gets an :class:`ExplainerInput` and returns ``(n, p)``.
    controls : bool
        Build the controls bundle and the verdict (:func:`attach_controls`).
    feature_names : list of str, optional
        Default: the DataFrame's columns or ``x0..x{p-1}``.
    background : array-like, optional
        Masker/baseline rows. Default: ``n_background`` rows drawn from ``X_train`` (or from ``X``).
    X_train, y_train : array-like, optional
        The training data: needed for the data-randomisation control (refit on permuted labels).
    output : {"auto", "proba", "raw"}
        Explain probabilities (needs ``predict_proba``; softmax for torch) or raw scores.
    target : "predicted", int or array of ints
        The output explained in each row (default: the model's predicted class).
    max_evals : int, optional
        Model evaluations per row of the permutation explainer (default ``2p + 1``).
    refit, randomise, train_config, cascade
        See :func:`attach_controls`.
    random_state : int, Generator or None
        Seeds everything (background, explainer, placebos, randomisations); recorded on the provenance card.

    Returns
    -------
    Explanation
        With ``controls`` and ``verdict`` when ``controls=True``; ``status`` is PASS, FAIL or INCOMPLETE.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> rf = RandomForestClassifier(30, random_state=0).fit(X[:400], y[:400])
    >>> e = explain(rf, X[400:430], X_train=X[:400], y_train=y[:400], random_state=0)  # doctest: +SKIP
    >>> e.status  # doctest: +SKIP
    'PASS'
    """
    seed = _seed_of(random_state)
    with isolated_global_rng(seed):
        adapter, Xa, names, bg, Xtr, seeds, source = _prepare(model, X, feature_names, output, background, X_train,
                                                               y_train, n_background, seed, "explain")
        kind = resolve_method(method, adapter)
        out = adapter.outputs(Xa)
        tgt = _targets(target, out, "explain")
        raw = run_explainer(method, adapter, Xa, bg, tgt, seed=seeds["explainer"], n_outputs=out.shape[1],
                            max_evals=max_evals)
        config = {"method": method if isinstance(method, str) else "custom", "resolved": kind, "backend": raw.backend,
                  **raw.config, "output": adapter.output, "target": target if isinstance(target, str) else "given",
                  "n_background": len(bg), "background_source": source}
        exp = Explanation(values=raw.values, base_values=raw.base_values, data=Xa, feature_names=names, target=tgt,
                          output_value=out[np.arange(len(Xa)), tgt], output=adapter.output,
                          method=method if isinstance(method, str) else raw.backend, backend=raw.backend,
                          output_names=adapter.class_names(),
                          provenance=_card(adapter, Xa, names, bg, Xtr, y_train, seeds, config))
        if not controls:
            return exp
        return _attach(exp, adapter, method, bg, Xtr, y_train, refit=refit, randomise=randomise,
                       train_config=train_config, max_evals=max_evals, cascade=cascade, seeds=seeds)


def _example_explanation() -> dict[str, Any]:
    return {"explanation": explanation_from_values(np.eye(3), np.eye(3)), "model": _example_model}


@validate_args(_example=_example_explanation, explanation=[EXPLANATION_RULE], model=[_MODEL], method=_METHOD,
               n_background=[Interval(int, 1, None)], **_COMMON)
def attach_controls(explanation: Explanation, model: Any, *, method: str | Callable[..., Any] = "shap",
                    background: Any = None, X_train: Any = None, y_train: Any = None, n_background: int = 50,
                    refit: Callable[..., Any] | None = None, randomise: Callable[..., Any] | None = None,
                    train_config: Any = None, cascade: bool = True, max_evals: int | None = None,
                    random_state: Any = 0) -> Explanation:
    """Attach the controls bundle and the sanity verdict to an explanation computed elsewhere (in place; returned).

    ``method`` re-explains the control models (randomised, refitted) exactly as the real explanation was made:
    for an external explanation pass the same explainer as a callable ``method(inp: ExplainerInput) -> (n, p)``.
    ``background`` defaults to ``n_background`` rows of ``X_train`` (or of the explained rows).
    ``randomise(model, rng) -> [(stage, model), ...]`` and ``refit(X, y) -> model`` override the built-in
    model randomisation and label-permuted refit; ``train_config`` (a :class:`trustlab.models.TrainConfig`)
    trains a refitted torch module; ``cascade=False`` explains only the fully randomised model. The provenance
    card records the seeds of the controls (an explanation without a card gets one).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> X = np.random.default_rng(0).normal(size=(80, 6))
    >>> y = X @ np.array([3.0, 2.0, 1.0, 0.5, 0.0, 0.0])
    >>> lr = LinearRegression().fit(X, y)
    >>> linear_shap = lambda inp: (inp.X - inp.background.mean(axis=0)) * inp.model.coef_
    >>> e = explanation_from_values(linear_shap(type("I", (), {"X": X, "background": X, "model": lr})), X, model=lr)
    >>> attach_controls(e, lr, method=linear_shap, background=X, X_train=X, y_train=y).status
    'PASS'
    """
    seed = _seed_of(random_state)
    with isolated_global_rng(seed):
        adapter, _, _, bg, Xtr, seeds, source = _prepare(model, explanation.data, explanation.feature_names,
                                                         explanation.output, background, X_train, y_train,
                                                         n_background, seed, "attach_controls")
        resolve_method(method, adapter)
        card = explanation.provenance
        if card is None:
            cfg = {"method": method if isinstance(method, str) else "custom", "output": adapter.output,
                   "n_background": len(bg), "background_source": source, "external_values": True}
            explanation.provenance = _card(adapter, explanation.data, explanation.feature_names, bg, Xtr, y_train,
                                           seeds, cfg)
        elif card.seeds != seeds or card.background_hash != content_hash(bg):
            train = None if Xtr is None else content_hash(Xtr, np.asarray(y_train))
            explanation.provenance = dataclasses.replace(
                card, seeds=seeds, train_data_hash=train,
                explainer={**card.explainer, "controls_background_hash": content_hash(bg)})
        return _attach(explanation, adapter, method, bg, Xtr, y_train, refit=refit, randomise=randomise,
                       train_config=train_config, max_evals=max_evals, cascade=cascade, seeds=seeds)


@validate_args(values=[ArrayLike(ndim=2)], data=[ArrayLike(ndim=2)], model=[None, _MODEL],
               feature_names=[None, SequenceOf(str)], base_values=[None, ArrayLike(ndim=1)], target=[_TARGET],
               output=[_OUTPUT],
               method=[Satisfies(lambda m: isinstance(m, str) and len(m) > 0, "a non-empty str", ["", 3])])
def explanation_from_values(values: Any, data: Any, *, model: Any = None, feature_names: Any = None,
                            base_values: Any = None, target: Any = "predicted", output: str = "auto",
                            method: str = "external") -> Explanation:
    """An :class:`Explanation` from attributions computed elsewhere (values ``(n, p)`` for the rows ``data``).

    With a ``model``, ``target="predicted"`` is its predicted class and ``output_value`` its output; without,
    every row's target is 0 and the output values are NaN. Pass it to :func:`attach_controls`.
    """
    X, names = _check_rows(data, feature_names, "explanation_from_values")
    v = check_array(values, name="values", owner="explanation_from_values").astype(float)
    if v.shape != X.shape:
        raise InputError(f"The 'values' argument of explanation_from_values must have the shape of data {X.shape}. "
                         f"Got {v.shape} instead.")
    if model is not None:
        adapter = ModelAdapter(model, output, owner="explanation_from_values")
        out = adapter.outputs(X)
        tgt, out_name, kind = _targets(target, out, "explanation_from_values"), adapter.class_names(), adapter.output
        ov = out[np.arange(len(X)), tgt]
    else:
        tgt = np.zeros(len(X), dtype=int) if isinstance(target, str) else np.broadcast_to(
            np.asarray(target, dtype=int), (len(X),)).copy()
        ov, out_name, kind = np.full(len(X), np.nan), None, "raw" if output == "auto" else output
    b = np.zeros(len(X)) if base_values is None else np.asarray(base_values, dtype=float)
    if b.shape != (len(X),):
        raise InputError(f"The 'base_values' argument of explanation_from_values must have one value per row "
                         f"({len(X)}). Got shape {b.shape} instead.")
    return Explanation(values=v, base_values=b, data=X, feature_names=names, target=tgt, output_value=ov, output=kind,
                       method=method, backend=method, output_names=out_name)
