"""``xhack``: the directed X-hacking search (optuna multi-objective over defensible pipelines).

Objectives: maximise the held-out score ``A(theta)`` and minimise (or maximise) the target feature's
explanation metric ``E_f*(theta)`` (SHAP share, or its rank). A trial is *defensible* when
``A(theta) >= A_ref - eps`` and a *success* when it is defensible and reaches the goal:

* ``"minimise"``: ``E_f* <= kappa * E_f*(ref)`` (default ``kappa = 0.25``), or rank ``> target_rank``;
* ``"maximise"``: ``E_f* >= kappa * E_f*(ref)`` (default ``kappa = 2``), or rank ``<= target_rank``;
* ``"flip"``: the direction of the effect (correlation of ``x_f*`` with its SHAP value) changes sign.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Options, Satisfies, validate_value
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.executor import Executor
from trustlab.core.seeding import as_seed
from trustlab.methods.xhacking._problem import EvalSettings, SearchContext, resolve_feature
from trustlab.methods.xhacking._space import SearchSpace, default_space

__all__ = ["xhack", "XHackResult", "make_sampler", "is_success", "check_eps", "achievable_drop", "Vulnerability",
           "as_seed", "FEATURE_RULE"]

#: a feature given by column name or index
FEATURE_RULE = Satisfies(lambda v: isinstance(v, str) or (isinstance(v, int | np.integer) and not isinstance(v, bool)
                                                        and v >= 0),
                         "a column name (str) or a column index (int >= 0)", [-1, 1.5, None], valid=0)

_STARTUP_DEFAULT = 10


@dataclass
class XHackResult:
    """Outcome of one directed search.

    Attributes
    ----------
    target, target_index : the attacked feature
    goal, eps, kappa, sampler, budget : the search settings
    reference : dict
        The reference trial (``score``, ``share``, ``rank``, ``direction``, ``config``).
    trials : list of dict
        Every trial: ``number``, ``config``, ``score``, ``share``/``rank``/``direction`` of all features,
        ``defensible``, ``success``, ``explainer``, ``additivity_ok``, ``error``.
    trials_to_success : int or None
        1-based index of the first successful trial (None: censored at ``budget``).
    best : dict or None
        The defensible trial with the most extreme target metric.
    """

    target: str
    target_index: int
    goal: str
    eps: float
    kappa: float
    sampler: str
    budget: int
    reference: dict[str, Any]
    trials: list[dict[str, Any]] = field(default_factory=list)
    trials_to_success: int | None = None
    best: dict[str, Any] | None = None

    @property
    def success(self) -> bool:
        return self.trials_to_success is not None

    @property
    def achieved_ratio(self) -> float:
        """Best defensible target share divided by the reference share."""
        ref = self.reference["share"][self.target_index]
        return float(self.best["share"][self.target_index] / ref) if self.best is not None and ref > 0 else float("nan")

    @property
    def min_share(self) -> float:
        """Lowest target share reached inside ``eps``, counting the reference itself (defensible by
        definition): the reference's share when no defensible trial is lower."""
        ref = float(self.reference["share"][self.target_index])
        return ref if self.best is None else min(ref, float(self.best["share"][self.target_index]))


def check_eps(eps: Any, owner: str) -> float:
    validate_value(owner, "eps", eps, [Interval(float, 0, None)])
    if eps > 0.5:
        warnings.warn(f"{owner}: eps={eps} is so large that almost every pipeline is defensible; the audit "
                      "then measures arbitrary models, not a Rashomon set.", UserWarning, stacklevel=3)
    return float(eps)


def make_sampler(name: str, seed: int | None, *, n_startup_trials: int | None = None, budget: int | None = None) -> Any:
    """An optuna sampler seeded from ``seed``: ``"tpe"`` (multivariate, grouped), ``"gp"`` or ``"random"``."""
    import optuna

    n_start = _STARTUP_DEFAULT if n_startup_trials is None else int(n_startup_trials)
    if name in ("tpe", "gp") and budget is not None and budget <= n_start:
        warnings.warn(f"budget={budget} <= the {name.upper()} sampler's {n_start} start-up trials: the search is "
                      "plain random sampling. Raise the budget or lower n_startup_trials.", UserWarning, stacklevel=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=optuna.exceptions.ExperimentalWarning)
        if name == "tpe":
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True, n_startup_trials=n_start)
        if name == "gp":
            return optuna.samplers.GPSampler(seed=seed, n_startup_trials=n_start)
        if name == "random":
            return optuna.samplers.RandomSampler(seed=seed)
    raise ConfigError(f"The 'sampler' parameter must be one of {{'tpe', 'gp', 'random'}}. Got {name!r} instead.")


def is_success(rec: dict[str, Any], ref: dict[str, Any], j: int, goal: str, kappa: float, floor: float,
               metric: str, target_rank: int | None) -> bool:
    if rec.get("error") or not rec["score"] >= floor:
        return False
    if goal == "flip":
        return bool(np.sign(ref["direction"][j]) * rec["direction"][j] < 0 and rec["share"][j] > 0)
    if metric == "rank" and target_rank is not None:
        return rec["rank"][j] > target_rank if goal == "minimise" else rec["rank"][j] <= target_rank
    e, e_ref = rec["share"][j], ref["share"][j]
    return e <= kappa * e_ref if goal == "minimise" else e >= kappa * e_ref


def _objective_value(rec: dict[str, Any], ref: dict[str, Any], j: int, goal: str, metric: str) -> float:
    if goal == "flip":
        return float(np.sign(ref["direction"][j]) * rec["direction"][j])
    return float(rec["rank"][j]) if metric == "rank" else float(rec["share"][j])


_DATA_RULES = {"X": [None, ArrayLike(ndim=2)], "y": [None, ArrayLike(ndim=1, dtype="any")]}
_SEARCH_RULES = {
    "eps": [Interval(float, 0, None)], "sampler": [Options(["tpe", "gp", "random"])],
    "budget": [Interval(int, 1, None)], "search_space": [None, InstanceOf(SearchSpace)],
    "metric": [Options(["shap_share", "rank"])], "n_startup_trials": [None, Interval(int, 0, None)],
    "context": [None, InstanceOf(SearchContext)],
}


@validate_args(**_DATA_RULES, target_feature=[FEATURE_RULE], goal=[Options(["minimise", "maximise", "flip"])],
               kappa=[None, Interval(float, 0, None, closed="neither")], target_rank=[None, Interval(int, 1, None)],
               feature_names=[None, ArrayLike(ndim=1, dtype="any")], reference=[None, dict],
               test_size=[Interval(float, 0, 1, closed="neither")], explain_on=[Options(["test", "train"])],
               n_background=[Interval(int, 1, None)], n_explain=[Interval(int, 2, None)],
               scoring=[Options(["accuracy", "balanced_accuracy", "roc_auc"])], use_constraints=["boolean"],
               stop_on_success=["boolean"], random_state=["random_state"], **_SEARCH_RULES)
def xhack(X: Any, y: Any, target_feature: Any, *, goal: str = "minimise", eps: float = 0.01,
          kappa: float | None = None, sampler: str = "tpe", budget: int = 50,
          search_space: SearchSpace | None = None, metric: str = "shap_share", target_rank: int | None = None,
          feature_names: Any = None, reference: dict[str, Any] | None = None, test_size: float = 0.25,
          explain_on: str = "test", n_background: int = 50, n_explain: int = 50, scoring: str = "accuracy",
          use_constraints: bool = True, n_startup_trials: int | None = None, stop_on_success: bool = False,
          random_state: Any = 0, context: SearchContext | None = None) -> XHackResult:
    """Search defensible pipelines that push ``target_feature``'s explanation towards ``goal``.

    Parameters
    ----------
    X, y : array-like
        Data ``(n, p)`` and class labels (ignored when ``context`` is given).
    target_feature : str or int
        The feature ``f*`` (a name from ``feature_names`` or an index).
    goal : {"minimise", "maximise", "flip"}
    eps : float
        Defensibility tolerance: ``A(theta) >= A_ref - eps``.
    kappa : float, optional
        Success factor on the reference share (0.25 for "minimise", 2.0 for "maximise").
    sampler : {"tpe", "gp", "random"}
        Optuna sampler, seeded from ``random_state``.
    budget : int
        Number of trials.
    search_space : SearchSpace, optional
        Default :func:`default_space` (no per-feature switches).
    metric : {"shap_share", "rank"}
        Objective; with ``"rank"`` and ``target_rank`` success is a rank condition.
    reference : dict, optional
        Configuration of the reference pipeline (default: a 100-tree random forest).
    explain_on : {"test", "train"}
        Rows explained; "train" warns (leakage).
    n_background, n_explain : int
        Background rows for interventional/permutation SHAP, rows explained.
    scoring : {"accuracy", "balanced_accuracy", "roc_auc"}
    use_constraints : bool
        Pass ``A >= A_ref - eps`` to the sampler as an optuna constraint (TPE and GP).
    stop_on_success : bool
        Stop at the first success (trials-to-success studies).
    random_state : int, numpy Generator or None
        Seeds the sampler (and, unless ``context`` is given, the split and the models); a Generator or
        None is turned into one int seed first.
    context : SearchContext, optional
        Reuse a split, reference and evaluation cache across searches (seeds, samplers).

    Returns
    -------
    XHackResult

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from trustlab.methods.xhacking import tiny_space, xhack
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> res = xhack(X, y, 27, budget=12, search_space=tiny_space(), n_startup_trials=4)  # doctest: +SKIP
    >>> res.trials_to_success  # doctest: +SKIP

    References
    ----------
    Sharma et al., "X-Hacking: The Threat of Misguided AutoML", ICML 2025 (arXiv:2401.08513);
    official code github.com/datasciapps/x-hacking (not read: no copy was available).
    """
    owner = "xhack"
    random_state = as_seed(random_state)
    eps = check_eps(eps, owner)
    if kappa is None:
        kappa = 0.25 if goal == "minimise" else 2.0
    space = search_space if search_space is not None else default_space()
    space.validate()
    if context is None:
        context = _new_context(X, y, feature_names, reference, owner, test_size=test_size, split_seed=random_state,
                               model_seed=random_state, explain_on=explain_on, n_background=n_background,
                               n_explain=n_explain, scoring=scoring)
    j = resolve_feature(target_feature, context.names, owner)
    result = XHackResult(context.names[j], j, goal, eps, float(kappa), sampler, budget, dict(context.reference))
    smp = make_sampler(sampler, random_state, n_startup_trials=n_startup_trials, budget=budget)
    _run_study(result, context, space, smp, metric=metric, target_rank=target_rank, use_constraints=use_constraints,
               stop_on_success=stop_on_success)
    return result


def _new_context(X: Any, y: Any, feature_names: Any, reference: Any, owner: str, **settings: Any) -> SearchContext:
    """The search context xhack builds when none is given (X and y first, then the settings)."""
    if X is None or y is None:
        raise InputError("The 'X' and 'y' arguments of xhack are required when no 'context' is given. "
                         "Got None instead.")
    return SearchContext(X, y, EvalSettings(**settings), feature_names=feature_names, reference=reference,
                         owner=owner)


def _run_study(result: XHackResult, context: SearchContext, space: SearchSpace, smp: Any, *, metric: str,
               target_rank: int | None, use_constraints: bool, stop_on_success: bool) -> None:
    """The optuna study of one search: (score, explanation metric) objectives, the defensibility constraint,
    every trial logged on ``result``; ``result.best`` is the defensible trial with the most extreme metric."""
    import optuna

    j, goal, kappa, ref = result.target_index, result.goal, result.kappa, result.reference
    floor = ref["score"] - result.eps
    direction = "maximize" if goal == "maximise" else "minimize"
    if metric == "rank" and goal != "flip":  # a larger rank number means less important
        direction = "minimize" if goal == "maximise" else "maximize"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["maximize", direction], sampler=smp)

    def objective(trial: Any) -> tuple[float, float]:
        rec = context.evaluate(space.suggest(trial, context.p))
        score = rec["score"] if np.isfinite(rec["score"]) else 0.0
        if use_constraints and hasattr(trial, "set_constraint"):  # optuna >= 5: constraint values <= 0 mean feasible (read by TPE and GP)
            trial.set_constraint("defensible", float(floor - score))
        rec.update(number=len(result.trials) + 1, defensible=bool(score >= floor and not rec.get("error")))
        rec["success"] = is_success(rec, ref, j, goal, kappa, floor, metric, target_rank)
        result.trials.append(rec)
        if rec["success"] and result.trials_to_success is None:
            result.trials_to_success = rec["number"]
            if stop_on_success:
                trial.study.stop()
        return score, _objective_value(rec, ref, j, goal, metric)

    study.optimize(objective, n_trials=result.budget, catch=())
    defensible = [t for t in result.trials if t["defensible"]]
    if defensible:
        pick = max if (goal == "maximise") ^ (metric == "rank" and goal != "flip") else min
        result.best = pick(defensible, key=lambda t: _objective_value(t, ref, j, goal, metric))


def _directed_search(context: SearchContext, kw: dict[str, Any], item: tuple[int, int]
                     ) -> tuple[float, int, dict[str, Any] | None]:
    """One directed minimisation of feature ``j`` with seed ``s``: (min share, #defensible, best config or None)."""
    j, s = item
    r = xhack(None, None, j, goal="minimise", random_state=s, context=context, **kw)
    m = r.min_share
    best = None if r.best is None or m == float(context.reference["share"][j]) else dict(r.best["config"])
    return m, int(sum(t["defensible"] for t in r.trials)), best


@dataclass
class Vulnerability:
    """How far directed minimisations pushed one feature's SHAP share down within ``eps``.

    ``drop`` is the mean over seeds of ``max(0, 1 - min defensible share / reference share)``, ``drop_max``
    the largest; per seed: ``drops``, ``min_share``, ``n_defensible`` (excluding the reference) and
    ``best_trial`` (the configuration reaching the minimum, None when it is the reference).
    """

    drop: float
    drop_max: float
    drops: list[float]
    min_share: list[float]
    reference_share: float
    n_defensible: list[int]
    best_trial: list[dict[str, Any] | None]

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


@validate_args(**_DATA_RULES, features=[SequenceOf(FEATURE_RULE)], seeds=[SequenceOf(Interval(int, 0, 2**32 - 1))],
               **_SEARCH_RULES, executor=[None, InstanceOf(Executor)])
def achievable_drop(X: Any, y: Any, features: Any, *, eps: float = 0.01, budget: int = 30, sampler: str = "tpe",
                    seeds: Any = (0,), search_space: SearchSpace | None = None, metric: str = "shap_share",
                    n_startup_trials: int | None = None, context: SearchContext | None = None,
                    executor: Executor | None = None, **context_kwargs: Any) -> dict[str, Vulnerability]:
    """Vulnerability of each feature: the SHAP-share drop a *directed* minimisation reaches within ``eps``.

    For every feature ``f`` and every seed ``s`` one ``xhack(goal="minimise")`` search with the same
    ``budget``, sampler, space and seed is run on one shared evaluation context (so every feature gets
    exactly the same effort; with a shared seed the start-up trials coincide and are evaluated once).
    The drop of one search is ``max(0, 1 - min_defensible E_f / E_f(ref))``: the reference itself is
    defensible, so a search that finds nothing better reports 0, never a negative drop.

    Parameters
    ----------
    X, y : array-like
        Data (ignored when ``context`` is given).
    features : list of str or int
        Features to measure.
    eps, budget, sampler, search_space, metric, n_startup_trials :
        As in :func:`xhack`; ``metric="shap_share"`` is the only meaningful choice for a drop in share.
    seeds : sequence of int
        Seeds of the searches, the same for every feature.
    context : SearchContext, optional
        Shared split / reference / cache; otherwise built from ``context_kwargs`` (``feature_names``,
        ``reference``, ``n_background``, ``n_explain``, ``test_size``, ``explain_on``, ``scoring``,
        ``random_state``).
    executor : Executor, optional
        Runs the feature x seed searches as parallel tasks (:mod:`trustlab.core.executor`); each task gets a
        copy of the context, so evaluations are not shared between searches (same results, more work).
        Default: one after another in this process on the shared context.

    Returns
    -------
    dict
        Feature name -> :class:`Vulnerability`.

    Examples
    --------
    >>> from trustlab.methods.xhacking import achievable_drop, make_redundant_classification, tiny_space
    >>> X, y, info = make_redundant_classification(300, rhos=(0.0, 0.95), n_independent=0)
    >>> out = achievable_drop(X, y, ["t0", "t1"], budget=6, search_space=tiny_space(),
    ...                       feature_names=[d["name"] for d in info], n_startup_trials=3)  # doctest: +SKIP
    >>> out["t1"].drop >= 0  # doctest: +SKIP
    True
    """
    seeds = [int(s) for s in seeds]
    if context is None:
        if X is None or y is None:
            raise InputError("The 'X' and 'y' arguments of achievable_drop are required when no 'context' is "
                             "given. Got None instead.")
        rs = int(context_kwargs.pop("random_state", 0))
        names = context_kwargs.pop("feature_names", None)
        ref = context_kwargs.pop("reference", None)
        settings = EvalSettings(split_seed=rs, model_seed=rs, **context_kwargs)
        context = SearchContext(X, y, settings, feature_names=names, reference=ref, owner="achievable_drop")
    cols = [resolve_feature(f, context.names, "achievable_drop") for f in features]
    search = functools.partial(_directed_search, context, {
        "eps": eps, "sampler": sampler, "budget": budget, "search_space": search_space, "metric": metric,
        "n_startup_trials": n_startup_trials})
    items = [(j, s) for j in cols for s in seeds]
    runs = [search(it) for it in items] if executor is None else executor.map(search, items, desc="directed searches")
    out: dict[str, Vulnerability] = {}
    for k, j in enumerate(cols):
        e_ref = float(context.reference["share"][j])
        mine = runs[k * len(seeds):(k + 1) * len(seeds)]
        mins = [m for m, _, _ in mine]
        drops = [max(0.0, 1.0 - m / e_ref) if e_ref > 0 else 0.0 for m in mins]
        out[context.names[j]] = Vulnerability(drop=float(np.mean(drops)), drop_max=float(np.max(drops)),
                                              drops=drops, min_share=mins, reference_share=e_ref,
                                              n_defensible=[n for _, n, _ in mine],
                                              best_trial=[b for _, _, b in mine])
    return out
