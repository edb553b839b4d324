"""The defensive X-hacking audit: how far can each feature's explanation move inside the Rashomon set?

For every audited feature the audit reports the explanation interval ``[E_f^min, E_f^max]`` and rank range
reachable by defensible pipelines (``A(theta) >= A_ref - eps``), the reference value, the redundancy
``R^2_f``, flags when the interval crosses the user's thresholds, the full trial log ("all models tried")
and a SHA-256 of the search specification. Each interval endpoint names the logged trial that attains it;
:func:`verify_report` refits those trials from their stored configurations.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from trustlab.core.base import PaperInfo
from trustlab.core.constraints import Interval, Options
from trustlab.core.roles import Auditor
from trustlab.core.validation import check_X_y
from trustlab.methods.xhacking._data import redundancy
from trustlab.methods.xhacking._problem import EvalSettings, SearchContext, resolve_feature
from trustlab.methods.xhacking._search import check_eps, xhack
from trustlab.methods.xhacking._space import SearchSpace, default_space, spec_hash

__all__ = ["XHackingAudit", "XHackingReport", "FeatureInterval", "verify_report"]

PAPER = PaperInfo(title="X-Hacking: The Threat of Misguided AutoML", arxiv="2401.08513",
                  repo="https://github.com/datasciapps/x-hacking")


@dataclass
class FeatureInterval:
    """The explanation interval of one feature over the defensible trials."""

    name: str
    index: int
    reference_share: float
    reference_rank: int
    min_share: float
    max_share: float
    min_rank: int
    max_rank: int
    argmin_share_trial: int
    argmax_share_trial: int
    best_rank_trial: int
    worst_rank_trial: int
    redundancy: float
    crosses_top_k: bool
    can_be_negligible: bool
    top_or_negligible: bool


@dataclass
class XHackingReport:
    """What :class:`XHackingAudit` found; ``to_markdown()``, ``to_json()``, ``plot_data()``, ``plot()``."""

    features: list[FeatureInterval]
    reference: dict[str, Any]
    eps: float
    score_floor: float
    top_k: int
    negligible: float
    n_trials: int
    n_defensible: int
    trials: list[dict[str, Any]]
    spec: dict[str, Any]
    spec_hash: str
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        from trustlab.results.result import to_jsonable

        return to_jsonable(asdict(self))

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def flagged(self) -> list[FeatureInterval]:
        return [f for f in self.features if f.crosses_top_k or f.top_or_negligible]

    def plot_data(self) -> dict[str, list[Any]]:
        """Columns for an interval plot: name, reference, min and max share, flag."""
        fs = sorted(self.features, key=lambda f: -f.reference_share)
        return {"name": [f.name for f in fs], "reference": [f.reference_share for f in fs],
                "min": [f.min_share for f in fs], "max": [f.max_share for f in fs],
                "flagged": [bool(f.crosses_top_k or f.top_or_negligible) for f in fs]}

    def plot(self) -> Any:
        """A matplotlib Figure of the share intervals (reference as a dot, flagged features in red)."""
        from matplotlib.figure import Figure

        d = self.plot_data()
        n = len(d["name"])
        fig = Figure(figsize=(6.0, 0.6 + 0.28 * n), dpi=110, layout="constrained")
        ax = fig.add_subplot(1, 1, 1)
        ys = np.arange(n)[::-1]
        for yv, lo, hi, flag in zip(ys, d["min"], d["max"], d["flagged"]):
            ax.plot([lo, hi], [yv, yv], color="tab:red" if flag else "tab:blue", lw=3, alpha=0.7)
        ax.scatter(d["reference"], ys, color="black", s=12, zorder=3, label="reference")
        ax.set_yticks(ys, d["name"], fontsize=7)
        ax.set_xlabel("SHAP share within eps")
        ax.set_title(f"X-hacking audit: explanation intervals (eps={self.eps})", fontsize=9)
        ax.legend(fontsize=7)
        return fig

    def to_markdown(self, max_features: int | None = None) -> str:
        """A Markdown report: settings, the interval table, flags and the disclosure of all trials."""
        fs = sorted(self.features, key=lambda f: -f.reference_share)[:max_features]
        ref = self.reference
        lines = [
            "## X-hacking audit",
            "",
            f"- reference pipeline: `{json.dumps(ref['config'], sort_keys=True)}`",
            f"- reference score: {ref['score']:.4f}; defensible = score >= {self.score_floor:.4f} (eps = {self.eps})",
            f"- trials: {self.n_trials} tried, {self.n_defensible} defensible (all logged in the JSON report)",
            f"- search-specification SHA-256: `{self.spec_hash}`",
            "",
            f"| feature | ref share | share interval | ref rank | rank range | R^2 | top-{self.top_k}? | "
            f"negligible (< {self.negligible:g})? | flag |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for f in fs:
            flag = "**FLAG**" if (f.crosses_top_k or f.top_or_negligible) else ""
            lines.append(
                f"| {f.name} | {f.reference_share:.3f} | [{f.min_share:.3f}, {f.max_share:.3f}] | {f.reference_rank} | "
                f"{f.min_rank}-{f.max_rank} | {f.redundancy:.2f} | {'can be' if f.min_rank <= self.top_k else 'no'} | "
                f"{'can be' if f.can_be_negligible else 'no'} | {flag} |")
        flagged = self.flagged()
        lines += ["", f"{len(flagged)} feature(s) flagged: their explanation can be reported as top-{self.top_k} "
                  "or not (or as top and negligible) by choosing among equally accurate pipelines."]
        if self.warnings:
            lines += ["", "Warnings:"] + [f"- {w}" for w in self.warnings]
        return "\n".join(lines) + "\n"


class XHackingAudit(Auditor):
    """Audit how much each feature's SHAP explanation can be moved by defensible AutoML choices.

    For each audited feature ``f``: a shared exploration (``n_explore`` random trials, all features logged),
    then two directed searches (minimise and maximise ``E_f``, ``budget`` trials each) with the chosen
    sampler. The interval ``[E_f^min, E_f^max]`` is taken over every defensible logged trial
    (``A(theta) >= A_ref - eps``, the reference included).

    Parameters
    ----------
    search_space : SearchSpace, optional
        Default :func:`default_space` (no per-feature switches).
    features : list of str or int, optional
        Features to run directed searches for (default: all). Intervals are reported for all features.
    eps : float
        Defensibility tolerance on the held-out score.
    budget : int
        Trials per directed search (0: exploration only).
    n_explore : int
        Random exploration trials shared by every feature.
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
        Configuration of the reference pipeline.
    redundancy_estimator : {"ridge", "gbm"}
    n_startup_trials : int, optional
        Start-up (random) trials of TPE/GP (optuna's default 10).
    random_state : int
        Seeds the split, the models and the samplers.

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
        "features": [None, list, tuple],
        "eps": [Interval(float, 0, None)],
        "budget": [Interval(int, 0, None)],
        "n_explore": [Interval(int, 0, None)],
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
        "random_state": [Interval(int, 0, 2**32 - 1)],
    }

    def __init__(self, *, search_space: SearchSpace | None = None, features: Any = None, eps: float = 0.01,
                 budget: int = 20, n_explore: int = 20, sampler: str = "tpe", metric: str = "shap_share",
                 top_k: int = 3, negligible: float = 0.01, explain_on: str = "test", test_size: float = 0.25,
                 n_background: int = 50, n_explain: int = 50, scoring: str = "accuracy",
                 reference: dict[str, Any] | None = None, redundancy_estimator: str = "ridge",
                 n_startup_trials: int | None = None, random_state: int = 0):
        self.search_space = search_space
        self.features = features
        self.eps = eps
        self.budget = budget
        self.n_explore = n_explore
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
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        from trustlab.methods.xhacking._space import tiny_space

        return [{"search_space": tiny_space(), "features": [0], "budget": 3, "n_explore": 3, "n_background": 10,
                 "n_explain": 10, "n_startup_trials": 2, "random_state": 0}]

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(80, 4))
        X[:, 1] = X[:, 0] + 0.2 * rng.normal(size=80)
        y = (X[:, 0] + X[:, 2] > 0).astype(int)
        return {"args": (X, y), "kwargs": {}}

    def _settings(self) -> EvalSettings:
        return EvalSettings(test_size=self.test_size, split_seed=self.random_state, model_seed=self.random_state,
                            explain_on=self.explain_on, n_background=self.n_background, n_explain=self.n_explain,
                            scoring=self.scoring)

    def _audit(self, X: Any, y: Any, feature_names: Any = None) -> XHackingReport:
        import warnings

        owner = type(self).__name__
        X, y = check_X_y(X, y, owner=owner)
        eps = check_eps(self.eps, owner)
        space = self.search_space if self.search_space is not None else default_space()
        space.validate()
        if feature_names is None and hasattr(X, "columns"):
            feature_names = list(X.columns)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ctx = SearchContext(X, y, self._settings(), feature_names=feature_names, reference=self.reference,
                                owner=owner)
            targets = list(range(ctx.p)) if self.features is None else \
                [resolve_feature(f, ctx.names, owner) for f in self.features]
            ref = dict(ctx.reference, number=0, search="reference", defensible=True)
            log: list[dict[str, Any]] = [ref]
            common = {"context": ctx, "search_space": space, "eps": eps, "metric": self.metric,
                      "n_startup_trials": self.n_startup_trials}
            searches: list[tuple[str, int, str, str, int]] = []
            if self.n_explore > 0:
                searches.append(("explore", targets[0], "minimise", "random", self.n_explore))
            if self.budget > 0:
                for j in targets:
                    searches += [(f"min:{ctx.names[j]}", j, "minimise", self.sampler, self.budget),
                                 (f"max:{ctx.names[j]}", j, "maximise", self.sampler, self.budget)]
            for k, (label, j, goal, smp, n) in enumerate(searches):
                res = xhack(None, None, j, goal=goal, sampler=smp, budget=n,
                            random_state=(self.random_state + 7919 * k) % 2**32, **common)
                for t in res.trials:
                    t = dict(t, number=len(log), search=label)
                    t.pop("success", None)
                    log.append(t)
        warn_msgs = sorted({str(w.message) for w in caught if "trustlab" in str(w.filename)
                            and not issubclass(w.category, DeprecationWarning)})
        for msg in warn_msgs:
            warnings.warn(msg, UserWarning, stacklevel=3)
        floor = ref["score"] - eps
        for t in log:
            t["defensible"] = bool(t.get("error") is None and t["score"] >= floor)
        defensible = [t for t in log if t["defensible"]]
        feats = []
        for j in range(ctx.p):
            shares = np.array([t["share"][j] for t in defensible])
            ranks = np.array([t["rank"][j] for t in defensible])
            i_min, i_max = int(np.argmin(shares)), int(np.argmax(shares))
            r_best, r_worst = int(np.argmin(ranks)), int(np.argmax(ranks))
            red = redundancy(ctx.X_tr, j, estimator=self.redundancy_estimator, random_state=self.random_state) \
                if ctx.p > 1 else 0.0
            feats.append(FeatureInterval(
                name=ctx.names[j], index=j, reference_share=float(ref["share"][j]), reference_rank=int(ref["rank"][j]),
                min_share=float(shares[i_min]), max_share=float(shares[i_max]), min_rank=int(ranks[r_best]),
                max_rank=int(ranks[r_worst]), argmin_share_trial=int(defensible[i_min]["number"]),
                argmax_share_trial=int(defensible[i_max]["number"]), best_rank_trial=int(defensible[r_best]["number"]),
                worst_rank_trial=int(defensible[r_worst]["number"]), redundancy=float(red),
                crosses_top_k=bool(ranks.min() <= self.top_k < ranks.max()),
                can_be_negligible=bool(shares.min() < self.negligible),
                top_or_negligible=bool(ranks.min() <= self.top_k and shares.min() < self.negligible)))
        spec = {"search_space": space.to_spec(), "eps": eps, "budget": self.budget, "n_explore": self.n_explore,
                "sampler": self.sampler, "metric": self.metric, "features": [ctx.names[j] for j in targets],
                "n_startup_trials": self.n_startup_trials, "random_state": self.random_state,
                "redundancy_estimator": self.redundancy_estimator, **ctx.spec()}
        return XHackingReport(features=feats, reference={k: ctx.reference[k] for k in ("config", "score", "share", "rank")},
                              eps=eps, score_floor=float(floor), top_k=self.top_k, negligible=self.negligible,
                              n_trials=len(log), n_defensible=len(defensible), trials=log, spec=spec,
                              spec_hash=spec_hash(spec), warnings=warn_msgs)


def verify_report(report: XHackingReport, X: Any, y: Any, *, tol: float = 1e-6) -> dict[str, Any]:
    """Audit soundness: refit every interval-endpoint trial from its stored configuration.

    Checks that each endpoint trial is in the log, is defensible, attains the reported value, and that
    recomputing it from scratch (fresh split, fresh fit, fresh explainer) reproduces its score and shares
    to within ``tol``. Returns ``{"ok", "n_endpoints", "max_abs_diff", "all_defensible", "problems"}``.
    """
    s = report.spec["settings"]
    names = report.spec["feature_names"]
    ctx = SearchContext(X, y, EvalSettings(**s), feature_names=names, reference=report.spec["reference"],
                        owner="verify_report")
    if report.spec_hash != spec_hash(report.spec):
        return {"ok": False, "n_endpoints": 0, "max_abs_diff": float("inf"), "all_defensible": False,
                "problems": ["the stored specification does not match its hash"]}
    by_number = {t["number"]: t for t in report.trials}
    problems: list[str] = []
    max_diff, all_def, n = 0.0, True, 0
    for f in report.features:
        for attr, value, kind in (("argmin_share_trial", f.min_share, "share"), ("argmax_share_trial", f.max_share, "share"),
                                  ("best_rank_trial", f.min_rank, "rank"), ("worst_rank_trial", f.max_rank, "rank")):
            n += 1
            t = by_number.get(getattr(f, attr))
            if t is None:
                problems.append(f"{f.name}: {attr} not in the log")
                continue
            all_def &= bool(t["defensible"] and t["score"] >= report.score_floor)
            if t[kind][f.index] != value:
                problems.append(f"{f.name}: trial {t['number']} does not attain the reported {kind}")
            fresh = ctx.evaluate(t["config"])
            diff = max(abs(fresh["score"] - t["score"]), float(np.max(np.abs(np.subtract(fresh["share"], t["share"])))))
            max_diff = max(max_diff, diff)
            if diff > tol:
                problems.append(f"{f.name}: trial {t['number']} recomputes with difference {diff:.2e}")
    return {"ok": not problems and all_def, "n_endpoints": n, "max_abs_diff": float(max_diff),
            "all_defensible": bool(all_def), "problems": problems}
