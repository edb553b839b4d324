"""The defensive X-hacking audit: how far can each feature's explanation move inside the Rashomon set?

For every audited feature the audit reports the explanation interval ``[E_f^min, E_f^max]`` and rank range
reachable by defensible pipelines (``A(theta) >= A_ref - eps``), the reference value, the redundancy
``R^2_f``, flags when the interval crosses the user's thresholds, the full trial log ("all models tried")
and a SHA-256 of the search specification. Each interval endpoint names the logged trial that attains it;
:func:`~trustlab.methods.xhacking.verify_report` refits those trials from their stored configurations.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import SequenceOf
from trustlab.core.constraints import Interval, Options
from trustlab.core.exceptions import InputError
from trustlab.core.roles import Auditor
from trustlab.core.validation import check_X_y
from trustlab.methods.xhacking._controls import pipeline_controls
from trustlab.methods.xhacking._data import redundancy
from trustlab.methods.xhacking._paper import PAPER
from trustlab.methods.xhacking._problem import EvalSettings, SearchContext, resolve_feature
from trustlab.methods.xhacking._report import FeatureInterval, XHackingReport
from trustlab.methods.xhacking._search import FEATURE_RULE, as_seed, check_eps, xhack
from trustlab.methods.xhacking._space import SearchSpace, audit_space, spec_hash

__all__ = ["XHackingAudit", "MIN_DEFENSIBLE"]

#: fewer defensible pipelines than this (besides the reference) make an interval meaningless: a warning
MIN_DEFENSIBLE = 5
MIN_ROWS = 20  # rows an audit needs (5 rows gave confidence intervals from a 3-row training set)


class XHackingAudit(Auditor):
    """Audit how much each feature's SHAP explanation can be moved by defensible AutoML choices.

    For each audited feature ``f``: a shared exploration (``n_explore`` random trials, all features logged),
    a *drop probe* (the reference pipeline with only ``f`` removed: the first thing an analyst tries), then
    two directed searches (minimise and maximise ``E_f``, ``budget`` trials each) with the chosen sampler.
    The interval ``[E_f^min, E_f^max]`` is taken over every defensible logged trial
    (``A(theta) >= A_ref - eps``, the reference included).

    Parameters
    ----------
    search_space : SearchSpace, optional
        Default :func:`audit_space`: the standard AutoML space (imputer, scaler, SelectKBest/SelectPercentile,
        PCA/interaction features, six model families with hyper-parameters) **plus one keep/drop switch per
        feature**. An audit is a defence, so its default search is at least as strong as an analyst's
        feature selection. Pass :func:`default_space` for the attack's space without switches.
    features : list of str or int, optional
        Features to run directed searches and drop probes for (default: all; an empty list is refused).
        Intervals are reported for all features.
    eps : float
        Defensibility tolerance on the held-out score.
    budget : int
        Trials per directed search (0: exploration and probes only).
    n_explore : int
        Random exploration trials shared by every feature.
    drop_probes : bool
        With a space that has feature switches, evaluate for each audited feature the reference pipeline
        without that feature (logged as search ``"probe:drop:<name>"``).
    sampler : {"tpe", "gp", "random"}
    metric : {"shap_share", "rank"}
        The objective of the directed searches.
    top_k : int
        A feature "crosses" when it can be both top-``k`` and not (rank range straddles ``k``).
    negligible : float
        Share below which a feature is called negligible.
    explain_on : {"test", "train"}
    test_size : float
    n_background, n_explain : int
    scoring : {"accuracy", "balanced_accuracy", "roc_auc"}
    reference : dict, optional
        Configuration of the reference pipeline (default: a 100-tree random forest).
    redundancy_estimator : {"ridge", "gbm"}
    n_startup_trials : int, optional
        Start-up (random) trials of TPE/GP (optuna's default 10).
    progress : bool
        Show a progress bar (tqdm, on stderr) over the trials.
    random_state : int, numpy Generator or None
        Seeds the split, the models and the samplers (a Generator or None is turned into one int seed,
        recorded in the report's specification).

    Warns when fewer than ``MIN_DEFENSIBLE`` (5) pipelines besides the reference are defensible, and when
    the reference scores 1.0 on the held-out rows.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from trustlab.methods.xhacking import XHackingAudit, tiny_space
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> rep = XHackingAudit(search_space=tiny_space(), features=[0], budget=4, n_explore=4,
    ...                     random_state=0).audit(X[:, :6], y)  # doctest: +SKIP
    >>> print(rep.to_markdown())  # doctest: +SKIP

    References
    ----------
    Sharma et al., "X-Hacking: The Threat of Misguided AutoML", ICML 2025 (arXiv:2401.08513);
    official code github.com/datasciapps/x-hacking (not read: no copy was available).
    """

    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {"requires": ("shap", "optuna"), "stochastic": True}
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "search_space": [None, SearchSpace],
        "features": [None, SequenceOf(FEATURE_RULE)],
        "eps": [Interval(float, 0, None)],
        "budget": [Interval(int, 0, None)],
        "n_explore": [Interval(int, 0, None)],
        "drop_probes": ["boolean"],
        "sampler": [Options(["tpe", "gp", "random"])],
        "metric": [Options(["shap_share", "rank"])],
        "top_k": [Interval(int, 1, None)],
        "negligible": [Interval(float, 0, 1)],
        "explain_on": [Options(["test", "train"])],
        "test_size": [Interval(float, 0, 1, closed="neither")],
        "n_background": [Interval(int, 1, None)],
        "n_explain": [Interval(int, 2, None)],
        "scoring": [Options(["accuracy", "balanced_accuracy", "roc_auc"])],
        "reference": [None, dict],
        "redundancy_estimator": [Options(["ridge", "gbm"])],
        "n_startup_trials": [None, Interval(int, 0, None)],
        "progress": ["boolean"],
        "controls": [Options(["none", "reference", "endpoints"])],
        "random_state": ["random_state"],
    }

    def __init__(self, *, search_space: SearchSpace | None = None, features: Any = None, eps: float = 0.01,
                 budget: int = 20, n_explore: int = 20, drop_probes: bool = True, sampler: str = "tpe",
                 metric: str = "shap_share", top_k: int = 3, negligible: float = 0.01, explain_on: str = "test",
                 test_size: float = 0.25, n_background: int = 50, n_explain: int = 50, scoring: str = "accuracy",
                 reference: dict[str, Any] | None = None, redundancy_estimator: str = "ridge",
                 n_startup_trials: int | None = None, progress: bool = True, controls: str = "reference",
                 random_state: Any = 0):
        self.search_space = search_space
        self.features = features
        self.eps = eps
        self.budget = budget
        self.n_explore = n_explore
        self.drop_probes = drop_probes
        self.sampler = sampler
        self.metric = metric
        self.top_k = top_k
        self.negligible = negligible
        self.explain_on = explain_on
        self.test_size = test_size
        self.n_background = n_background
        self.n_explain = n_explain
        self.scoring = scoring
        self.reference = reference
        self.redundancy_estimator = redundancy_estimator
        self.n_startup_trials = n_startup_trials
        self.progress = progress
        self.controls = controls
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        from trustlab.methods.xhacking._space import tiny_space

        return [{"search_space": tiny_space(), "features": [0], "budget": 3, "n_explore": 3, "n_background": 10,
                 "n_explain": 10, "n_startup_trials": 2, "progress": False, "random_state": 0}]

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(80, 4))
        X[:, 1] = X[:, 0] + 0.2 * rng.normal(size=80)
        y = (X[:, 0] + X[:, 2] > 0).astype(int)
        return {"args": (X, y), "kwargs": {}}

    def _settings(self, seed: int) -> EvalSettings:
        return EvalSettings(test_size=self.test_size, split_seed=seed, model_seed=seed, explain_on=self.explain_on,
                            n_background=self.n_background, n_explain=self.n_explain, scoring=self.scoring)

    def _audit(self, X: Any, y: Any, feature_names: Any = None) -> XHackingReport:
        owner = type(self).__name__
        X, y = check_X_y(X, y, owner=owner, allow_complex=False)
        if len(X) < MIN_ROWS:  # a split, a fitted model and a redundancy R^2 per feature need rows
            raise InputError(f"{owner}.audit needs at least {MIN_ROWS} rows in 'X' (a train / test split, a "
                             f"fitted pipeline and a cross-validated redundancy per feature). Got {len(X)}.")
        eps = check_eps(self.eps, owner)
        space = self.search_space if self.search_space is not None else audit_space()
        space.validate()
        rs = self.random_state
        seed = as_seed(rs if isinstance(rs, int | np.integer) else self._rng)  # one int seed, kept in the spec
        if feature_names is None and hasattr(X, "columns"):
            feature_names = list(X.columns)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ctx = SearchContext(X, y, self._settings(seed), feature_names=feature_names, reference=self.reference,
                                owner=owner)
            targets = list(range(ctx.p)) if self.features is None else \
                [resolve_feature(f, ctx.names, owner) for f in self.features]
            log = self._search(ctx, space, eps, targets, seed)
        warn_msgs = sorted({str(w.message) for w in caught if "trustlab" in str(w.filename)
                            and not issubclass(w.category, DeprecationWarning)})
        floor = log[0]["score"] - eps
        for t in log:
            t["defensible"] = bool(t.get("error") is None and t["score"] >= floor)
        defensible = [t for t in log if t["defensible"]]
        if len(defensible) - 1 < MIN_DEFENSIBLE:
            warn_msgs.append(f"{owner}: only {len(defensible) - 1} of {len(log) - 1} trials are defensible (score >= "
                             f"{floor:.4f}); the intervals rest on so few pipelines that they say little. Raise "
                             "budget / n_explore, or eps.")
        for msg in warn_msgs:
            warnings.warn(msg, UserWarning, stacklevel=3)
        feats = [self._interval(ctx, j, log[0], defensible) for j in range(ctx.p)]
        controls = self._controls(ctx, log, feats, targets, seed)
        if controls.get(0, {}).get("status", "PASS") != "PASS":
            warn_msgs.append(f"{owner}: the reference explanation does not pass its controls (status "
                             f"{controls[0]['status']}); its intervals describe an explanation that may not reflect "
                             "the model (see report.controls).")
            warnings.warn(warn_msgs[-1], UserWarning, stacklevel=3)
        spec = {"search_space": space.to_spec(), "eps": eps, "budget": self.budget, "n_explore": self.n_explore,
                "drop_probes": self.drop_probes, "sampler": self.sampler, "metric": self.metric,
                "features": [ctx.names[j] for j in targets], "n_startup_trials": self.n_startup_trials,
                "random_state": seed, "redundancy_estimator": self.redundancy_estimator, **ctx.spec()}
        return XHackingReport(features=feats, reference={k: ctx.reference[k] for k in ("config", "score", "share", "rank")},
                              eps=eps, score_floor=float(floor), top_k=self.top_k, negligible=self.negligible,
                              n_trials=len(log), n_defensible=len(defensible), trials=log, spec=spec,
                              spec_hash=spec_hash(spec), warnings=warn_msgs, controls=controls)

    def _controls(self, ctx: SearchContext, log: list[dict[str, Any]], feats: list[FeatureInterval],
                  targets: list[int], seed: int) -> dict[int, dict[str, Any]]:
        """Sanity verdicts (trustlab.explain controls) of the reference and, with ``controls="endpoints"``, of
        the trials at each audited feature's share-interval endpoints; keyed by trial number."""
        if self.controls == "none":
            return {}
        numbers = [0]
        if self.controls == "endpoints":
            for f in (feats[j] for j in targets):
                numbers += [f.argmin_share_trial, f.argmax_share_trial]
        by_number = {t["number"]: t for t in log}
        return {n: pipeline_controls(ctx, by_number[n]["config"], seed) for n in dict.fromkeys(numbers)}

    def _plan(self, ctx: SearchContext, space: SearchSpace, targets: list[int]) -> list[tuple[str, int, str, str, int]]:
        """The searches, in order: (label, target, goal, sampler, trials); probes have sampler "probe"."""
        plan: list[tuple[str, int, str, str, int]] = []
        if self.n_explore > 0:
            plan.append(("explore", targets[0], "minimise", "random", self.n_explore))
        if self.drop_probes and space.feature_switches and ctx.p > 1:
            plan += [(f"probe:drop:{ctx.names[j]}", j, "minimise", "probe", 1) for j in targets]
        if self.budget > 0:
            for j in targets:
                plan += [(f"min:{ctx.names[j]}", j, "minimise", self.sampler, self.budget),
                         (f"max:{ctx.names[j]}", j, "maximise", self.sampler, self.budget)]
        return plan

    def _search(self, ctx: SearchContext, space: SearchSpace, eps: float, targets: list[int],
                seed: int) -> list[dict[str, Any]]:
        """Run the plan; returns the trial log, the reference first (number 0)."""
        from tqdm.auto import tqdm

        log: list[dict[str, Any]] = [dict(ctx.reference, number=0, search="reference", defensible=True)]
        common = {"context": ctx, "search_space": space, "eps": eps, "metric": self.metric,
                  "n_startup_trials": self.n_startup_trials}
        plan = self._plan(ctx, space, targets)
        bar = tqdm(total=sum(p[-1] for p in plan), desc=f"{type(self).__name__}", leave=False, disable=not self.progress)
        k = 0  # index of the search (probes are not counted, so adding them leaves the searches' seeds alone)
        try:
            for label, j, goal, smp, n in plan:
                if smp == "probe":
                    keep = {f"keep_{i}": i != j for i in range(ctx.p)}
                    trials = [ctx.evaluate({**ctx.reference_config, **keep})]
                else:
                    trials = xhack(None, None, j, goal=goal, sampler=smp, budget=n,
                                   random_state=(seed + 7919 * k) % 2**32, **common).trials
                    k += 1
                for t in trials:
                    t = dict(t, number=len(log), search=label)
                    t.pop("success", None)
                    log.append(t)
                bar.update(n)
        finally:
            bar.close()
        return log

    def _interval(self, ctx: SearchContext, j: int, ref: dict[str, Any],
                  defensible: list[dict[str, Any]]) -> FeatureInterval:
        shares = np.array([t["share"][j] for t in defensible])
        ranks = np.array([t["rank"][j] for t in defensible])
        i_min, i_max = int(np.argmin(shares)), int(np.argmax(shares))
        r_best, r_worst = int(np.argmin(ranks)), int(np.argmax(ranks))
        red = redundancy(ctx.X_tr, j, estimator=self.redundancy_estimator, random_state=ctx.settings.split_seed) \
            if ctx.p > 1 else 0.0
        return FeatureInterval(
            name=ctx.names[j], index=j, reference_share=float(ref["share"][j]), reference_rank=int(ref["rank"][j]),
            min_share=float(shares[i_min]), max_share=float(shares[i_max]), min_rank=int(ranks[r_best]),
            max_rank=int(ranks[r_worst]), argmin_share_trial=int(defensible[i_min]["number"]),
            argmax_share_trial=int(defensible[i_max]["number"]), best_rank_trial=int(defensible[r_best]["number"]),
            worst_rank_trial=int(defensible[r_worst]["number"]), redundancy=float(red),
            crosses_top_k=bool(ranks.min() <= self.top_k < ranks.max()),
            can_be_negligible=bool(shares.min() < self.negligible),
            top_or_negligible=bool(ranks.min() <= self.top_k and shares.min() < self.negligible))
