"""The multiplicity audit: refit a model family m times, measure the ground truth, and test the cheap measures.

For a user's model factory (``seed -> unfitted estimator``: an sklearn estimator, a torch wrapper, or a
:class:`TabularLLMClassifier` sharing one backbone) the audit fits ``n_models`` seeds (optionally on
bootstrap resamples), keeps the delta-Rashomon set on validation rows, computes the ground-truth
multiplicity of every test point over the kept models, the local stability S on the reference model
(the first kept), the competing measures (confidence, entropy, MC-dropout where the model has dropout),
how well each predicts consistency (Spearman with -std, top-vs-bottom tercile agreement), the bound
check, and which points are unstable (S < 0.5 + eps for a binary task: not certified).
"""

from __future__ import annotations

import functools
import json
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import NONE, AnyValue, Boolean, CallableRule, Interval, Options, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.executor import Executor
from trustlab.core.roles import Auditor
from trustlab.core.seeding import as_seed
from trustlab.methods.multiplicity._metrics import (
    confidence_score,
    entropy_score,
    multiplicity_metrics,
    rashomon_filter,
    tercile_gap,
)
from trustlab.methods.multiplicity._paper import PAPER
from trustlab.methods.multiplicity._stability import local_stability

__all__ = ["MultiplicityAudit", "MultiplicityReport", "mc_dropout_proba"]


def _is_mc_model(m: Any) -> bool:
    torch = sys.modules.get("torch")
    return hasattr(m, "mc_dropout_proba") and not isinstance(m, type) or (
        torch is not None and isinstance(m, torch.nn.Module))


@validate_args(_example=lambda: _mc_example(),
               model=[Satisfies(_is_mc_model, "a TabularLLMClassifier or a torch.nn.Module", invalid=[None, "model", 3])],
               X=[AnyValue("rows: a table checked by the classifier's _validate_X, or numbers the body turns into a "
                           "float32 tensor for a torch module")],
               n_masks=[Interval(int, 2, None)], p=[None, Interval(float, 0, 1, closed="neither")],
               random_state=["random_state"])
def mc_dropout_proba(model: Any, X: Any, n_masks: int = 16, p: float | None = 0.1, random_state: Any = 0
                     ) -> np.ndarray:
    """Probabilities ``[n_masks, n, C]`` under MC dropout: the LoRA path of a :class:`TabularLLMClassifier`
    (rate ``p``) or every ``torch.nn.Dropout`` of a torch module (rate ``p``, or the module's own if None)."""
    import torch

    from trustlab.core.seeding import isolated_global_rng

    if hasattr(model, "mc_dropout_proba"):
        return model.mc_dropout_proba(X, n_masks=n_masks, p=0.1 if p is None else p, random_state=random_state)
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"mc_dropout_proba needs a TabularLLMClassifier or a torch module. Got {type(model).__name__}.")
    drops = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    if not drops:
        raise InputError("mc_dropout_proba: the torch module has no Dropout layers.")
    was, old = model.training, [d.p for d in drops]
    Xt = torch.as_tensor(np.asarray(X, dtype=np.float32))
    seed = as_seed(random_state)
    try:
        model.eval()
        for d in drops:
            d.train()
            d.p = d.p if p is None else float(p)
        with torch.no_grad(), isolated_global_rng(seed):
            return np.stack([torch.softmax(model(Xt).float(), -1).numpy() for _ in range(n_masks)])
    finally:
        for d, v in zip(drops, old):
            d.p = v
        model.train(was)


def _mc_example() -> dict[str, Any]:
    import torch

    return {"model": torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Dropout(0.1), torch.nn.Linear(4, 2)),
            "X": [[0.0, 1.0]]}


@dataclass
class MultiplicityReport:
    """What :class:`MultiplicityAudit` found (per-point arrays are over the test rows)."""

    n_models: int
    kept: list[int]
    dropped: dict[int, str]
    val_scores: list[float]
    positive_rates: list[float]
    test_accuracies: list[float]
    summary: dict[str, Any]
    S: np.ndarray
    bound: np.ndarray
    std: np.ndarray
    majority_agreement: np.ndarray
    flips: np.ndarray
    measures: dict[str, np.ndarray]
    spearman: dict[str, float]
    terciles: dict[str, tuple[float, float]]
    bound_check: dict[str, float]
    unstable: list[int]
    threshold: float
    settings: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        from trustlab.results.result import to_jsonable

        return to_jsonable({**asdict(self), "timings": self.timings})

    @property
    def timings(self) -> dict[str, float]:
        """Wall times (``fit_s_per_model``, ``stability_s``): kept outside the fields so that two runs with the
        same seed compare equal."""
        return getattr(self, "_timings", {})

    @validate_args(indent=[NONE, Interval(int, 0, None), str])
    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @validate_args(n_bins=[Interval(int, 1, None)])
    def plot_data(self, n_bins: int = 5) -> dict[str, list[float]]:
        """Majority agreement (consistency) per quantile bin of each measure."""
        out: dict[str, list[float]] = {}
        for name, score in self.measures.items():
            order = np.argsort(score, kind="stable")
            bins = np.array_split(order, n_bins)
            out[f"{name}_x"] = [float(score[b].mean()) for b in bins if len(b)]
            out[f"{name}_y"] = [float(self.majority_agreement[b].mean()) for b in bins if len(b)]
        return out

    @validate_args(n_bins=[Interval(int, 1, None)])
    def plot(self, n_bins: int = 5) -> Any:
        """Consistency across the kept models vs each measure (quantile bins), one panel per measure."""
        from matplotlib.figure import Figure

        d = self.plot_data(n_bins)
        names = list(self.measures)
        fig = Figure(figsize=(3.0 * len(names), 2.8), dpi=110, layout="constrained")
        for i, name in enumerate(names):
            ax = fig.add_subplot(1, len(names), i + 1)
            ax.plot(d[f"{name}_x"], d[f"{name}_y"], marker="o")
            ax.set_xlabel(name)
            ax.set_title(f"rho={self.spearman.get(name, float('nan')):.2f}", fontsize=8)
            if i == 0:
                ax.set_ylabel("majority agreement")
        return fig

    def to_markdown(self) -> str:
        s = self.summary
        lines = ["## Multiplicity audit", "",
                 f"- models fitted: {self.n_models}; kept in the Rashomon set: {len(self.kept)} {self.kept}",
                 f"- positive rates (all models): {[round(r, 3) for r in self.positive_rates]}",
                 f"- test accuracies (kept): {[round(a, 3) for a in self.test_accuracies]}",
                 f"- arbitrariness {s['arbitrariness']:.3f}, mean std {s['mean_std']:.4f}, pairwise disagreement "
                 f"{s['pairwise_disagreement']:.3f}",
                 f"- unstable points (S < {self.threshold:.2f}): {len(self.unstable)} of {len(self.S)}", "",
                 "| measure | Spearman with -std | agreement top tercile | bottom tercile |", "|---|---|---|---|"]
        for name in self.measures:
            top, bot = self.terciles[name]
            lines.append(f"| {name} | {self.spearman[name]:.3f} | {top:.3f} | {bot:.3f} |")
        bc = self.bound_check
        lines += ["", f"Bound check (eps={self.settings['eps']}): share of points with mean_j f_j(x) >= S - eps: "
                  f"{bc['share_mean_ok']:.3f} (mean bound {bc['mean_bound']:.3f}); share with frequency >= bound - "
                  f"0.1: {bc['share_freq_ok']:.3f}"]
        for name, reason in self.dropped.items():
            lines.append(f"- dropped model {name}: {reason}")
        lines += [f"- warning: {w}" for w in self.warnings]
        return "\n".join(lines) + "\n"


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(spearmanr(a, b).statistic)


class MultiplicityAudit(Auditor):
    """Audit the fine-tuning/refit multiplicity of a model family and the measures that predict it.

    Parameters
    ----------
    factory : callable seed -> unfitted estimator (fit, predict_proba)
        E.g. ``lambda s: TabularLLMClassifier(backbone=bb, random_state=s)`` or
        ``lambda s: RandomForestClassifier(random_state=s)``.
    n_models : int >= 2
    bootstrap : bool
        Refit each seed on a bootstrap resample of the training rows (data multiplicity) too.
    delta, rate_tolerance : the Rashomon filter on the validation rows (:func:`rashomon_filter`)
    k, sigma, space, relative, sampler, eps : local stability on the reference model (:func:`local_stability`)
    mc_masks : int
        MC-dropout masks (0: skip; skipped too for models without dropout).
    random_state : int, numpy Generator or None
        With an int seed ``s``, the models' seeds are ``(s + j) mod 2**32``; it also seeds the bootstrap and the neighbours.
        A Generator or None gives one fresh int seed per ``audit`` call (:func:`trustlab.core.seeding.as_seed`).
    """

    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {"requires": ("torch",), "stochastic": True}
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "factory": [CallableRule()], "n_models": [Interval(int, 2, None)], "bootstrap": [Boolean()],
        "delta": [Interval(float, 0, None)], "rate_tolerance": [Interval(float, 0, 1)],
        "k": [Interval(int, 2, None)], "sigma": [Interval(float, 0, None, closed="neither")],
        "space": [Options(("cached", "embedding"))], "relative": [Boolean()],
        "sampler": [Options(("sphere", "gaussian"))], "eps": [Interval(float, 0, None, closed="neither")],
        "mc_masks": [Interval(int, 0, None)], "random_state": ["random_state"],
    }

    def __init__(self, *, factory: Any = None, n_models: int = 8, bootstrap: bool = False, delta: float = 0.03,
                 rate_tolerance: float = 0.15, k: int = 16, sigma: float = 0.05, space: str = "cached",
                 relative: bool = True, sampler: str = "sphere", eps: float = 0.1, mc_masks: int = 16,
                 random_state: int = 0):
        self.factory = factory
        self.n_models = n_models
        self.bootstrap = bootstrap
        self.delta = delta
        self.rate_tolerance = rate_tolerance
        self.k = k
        self.sigma = sigma
        self.space = space
        self.relative = relative
        self.sampler = sampler
        self.eps = eps
        self.mc_masks = mc_masks
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"factory": _tree_factory, "n_models": 3, "k": 4, "sigma": 0.2, "relative": False, "mc_masks": 0}]

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(90, 3))
        y = (X[:, 0] + 0.5 * rng.normal(size=90) > 0).astype(int)
        return {"args": (X[:60], y[:60], X[60:], y[60:]), "kwargs": {}}

    def _fit_all(self, X: Any, y: np.ndarray, executor: Executor | None, seed: int) -> tuple[list[Any], list[float]]:
        """The ``n_models`` fits, one task each (in this process, or on ``executor``'s workers)."""
        rng = np.random.default_rng(seed)
        items = [((seed + j) % 2**32, rng.integers(0, len(y), len(y)) if self.bootstrap else None)
                 for j in range(self.n_models)]
        task = functools.partial(_fit_one, self.factory, X, y)
        if executor is None:
            fitted = [task(it) for it in items]
        else:
            fitted = executor.map(task, items, seed=seed, desc="multiplicity fits")
        return [m for m, _ in fitted], [t for _, t in fitted]

    @staticmethod
    def _proba(model: Any, X: Any) -> np.ndarray:
        import torch

        if isinstance(model, torch.nn.Module):
            with torch.no_grad():
                return torch.softmax(model(torch.as_tensor(np.asarray(X, dtype=np.float32))), -1).numpy()
        return np.asarray(model.predict_proba(X), dtype=np.float64)

    def _audit(self, X: Any, y: Any, X_test: Any, y_test: Any, X_val: Any = None, y_val: Any = None, *,
               executor: Executor | None = None) -> MultiplicityReport:
        """Fit, filter and measure (see the class docstring). ``executor`` (:mod:`trustlab.core.executor`)
        runs the ``n_models`` fits as parallel tasks; the report equals the in-process one for the same seeds.
        Fits made in worker processes come back by pickle; fine-tunes of a :class:`TabularLLM` built from a
        model name come back as their adapters, re-attached to this process's backbone (each worker loads
        the backbone once)."""
        if executor is not None and not isinstance(executor, Executor):
            raise InputError(f"The 'executor' argument of MultiplicityAudit.audit must be an Executor "
                             f"(trustlab.core.executor.make_executor) or None. Got {type(executor).__name__}.")
        y, y_test = _labels(y, "y"), _labels(y_test, "y_test")
        if len(y) != len(X) or len(y_test) != len(X_test):
            raise InputError("MultiplicityAudit.audit: X/y and X_test/y_test must have matching lengths.")
        if (X_val is None) != (y_val is None):
            raise InputError("MultiplicityAudit.audit needs both X_val and y_val, or neither.")
        if X_val is None:
            X_val, y_val = X, y
        y_val = _labels(y_val, "y_val")
        seed = as_seed(self.random_state)
        models, fit_times = self._fit_all(X, y, executor, seed)
        P_val = [self._proba(m, X_val) for m in models]
        C = P_val[0].shape[1]
        scores = [float((p.argmax(1) == y_val).mean()) for p in P_val]
        rates = [float((p.argmax(1) == C - 1).mean()) for p in P_val]
        rs = rashomon_filter(scores, rates, delta=float(self.delta), rate_tolerance=float(self.rate_tolerance))
        msgs = [f"model {j} predicts one class for {max(r, 1 - r):.0%} of the validation rows (degenerate)"
                for j, r in enumerate(rates) if max(r, 1 - r) > 0.95]
        kept = rs.kept.tolist()
        if len(kept) < 2:
            msgs.append(f"only {len(kept)} model(s) in the Rashomon set; using all {len(models)} for the ground truth")
            kept = list(range(len(models)))
        P = np.stack([self._proba(models[j], X_test) for j in kept])
        mm = multiplicity_metrics(P, y_test)
        ref = models[kept[0]]
        st = local_stability(ref, X_test, k=self.k, sigma=float(self.sigma), space=self.space, relative=self.relative,
                             sampler=self.sampler, eps=float(self.eps), random_state=seed)
        measures = {"S": st.S, "confidence": confidence_score(P[0]), "entropy": entropy_score(P[0])}
        if self.mc_masks:
            try:
                mc = mc_dropout_proba(ref, X_test, n_masks=self.mc_masks, random_state=seed)
                measures["mc_dropout"] = -mc[:, np.arange(len(y_test)), st.label].std(0)
            except InputError as exc:
                msgs.append(f"MC dropout skipped: {exc}")
        spear = {k: _spearman(v, -mm.std) for k, v in measures.items()}
        terc = {k: tercile_gap(v, mm.majority_agreement) for k, v in measures.items()}
        others = [i for i in range(1, len(kept))] or [0]
        f_j = P[others][:, np.arange(len(y_test)), st.label]  # prob of the reference's label under the others
        lo = st.S - st.eps
        bound_check = {"share_mean_ok": float((f_j.mean(0) >= lo).mean()), "mean_bound": float(st.bound.mean()),
                       "share_freq_ok": float(((f_j >= lo).mean(0) >= st.bound - 0.1).mean())}
        threshold = 0.5 + st.eps if C == 2 else 1.0 / C + st.eps
        for msg in msgs:
            warnings.warn(f"MultiplicityAudit: {msg}", UserWarning, stacklevel=3)
        settings = {k: getattr(self, k) for k in ("n_models", "bootstrap", "delta", "rate_tolerance", "k", "sigma",
                                                   "space", "relative", "sampler", "eps", "mc_masks", "random_state")}
        rep = MultiplicityReport(
            n_models=len(models), kept=kept, dropped=rs.reasons, val_scores=scores, positive_rates=rates,
            test_accuracies=mm.accuracies, summary=mm.summary(), S=st.S, bound=st.bound, std=mm.std,
            majority_agreement=mm.majority_agreement, flips=mm.flips, measures=measures, spearman=spear,
            terciles=terc, bound_check=bound_check, unstable=np.flatnonzero(st.S < threshold).tolist(),
            threshold=float(threshold), settings=settings, warnings=msgs)
        rep._timings = {"fit_s_per_model": float(np.mean(fit_times)), "stability_s": st.wall_time_s}
        return rep


def _fit_one(factory: Any, X: Any, y: np.ndarray, item: tuple[int, np.ndarray | None]) -> tuple[Any, float]:
    """One model of the audit (an executor task): ``factory(seed)`` fitted on the rows (all, or a bootstrap
    resample), with its wall time."""
    seed, rows = item
    rows = np.arange(len(y)) if rows is None else rows
    X, y = (X.iloc[rows] if hasattr(X, "iloc") else np.asarray(X)[rows]), y[rows]
    t0 = time.perf_counter()
    est = factory(seed)
    if not (hasattr(est, "fit") and hasattr(est, "predict_proba")):
        raise InputError(f"The factory of MultiplicityAudit must return an estimator with fit and "
                         f"predict_proba. Got {type(est).__name__}.")
    return est.fit(X, y), time.perf_counter() - t0


def _labels(y: Any, name: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise InputError(f"The '{name}' argument of MultiplicityAudit.audit must be 1-d integer class labels "
                         f"0..C-1. Got dtype {y.dtype}, shape {y.shape}.")
    return y


def _tree_factory(seed: int) -> Any:
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=10, max_features=1, random_state=seed)

