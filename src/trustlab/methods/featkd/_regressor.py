"""FEATKDRegressor: concise symbolic features distilled from a TabNet teacher, combined by ridge."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import AnyValue, Interval, Options, Satisfies
from trustlab.core.exceptions import InputError, TrustlabError
from trustlab.core.roles import Regressor
from trustlab.core.seeding import spawn_seed
from trustlab.core.threads import limit_threads
from trustlab.core.validation import check_is_fitted
from trustlab.methods.featkd._paper import PAPER
from trustlab.methods.featkd._symbolic import GuardReport, SymbolicFeature

__all__ = ["FEATKDRegressor", "Complexity", "DistillationReport", "FormulaGuardWarning", "GP_FUNCTIONS"]

#: gplearn functions with a symbolic form here
GP_FUNCTIONS = ("add", "sub", "mul", "div", "sqrt", "log", "sin", "cos", "tan", "neg", "inv", "abs")


class FormulaGuardWarning(UserWarning):
    """A distilled formula overflowed or left its training range on the data passed; values were guarded."""


@dataclass(frozen=True)
class Complexity:
    """Size of the fitted model. ``n_nodes``: the whole formula ``b0 + sum_i b_i f_i`` per target
    (feature nodes + 3 per feature + 1, summed over targets' heads only once since features are shared);
    ``feature_nodes``: the features alone; ``feat_complexity``: FEAT's recursive complexity of the features;
    ``teacher_parameters``: the TabNet teacher's trainable parameters."""

    n_nodes: int
    feature_nodes: int
    feat_complexity: int
    n_features: int
    teacher_parameters: int


@dataclass(frozen=True)
class DistillationReport:
    """What happened to each teacher signal, and the time of each stage (seconds)."""

    n_signals: int
    n_dead: int
    dropped: dict[str, int]
    n_duplicates: int
    n_kept: int
    inputs_per_step: tuple[tuple[int, ...], ...]
    teacher_epochs: int
    teacher_best_epoch: int
    times: dict[str, float] = field(default_factory=dict)


def _pair(v: Any) -> bool:
    return isinstance(v, tuple) and len(v) == 2 and all(isinstance(i, int) and not isinstance(i, bool)
                                                         for i in v) and 1 <= v[0] <= v[1]


class FEATKDRegressor(Regressor):
    """FEAT-KD (Fong & Motani, ICML 2025): TabNet teacher -> per-step symbolic features -> ridge head.

    1. A TabNet teacher (pytorch-tabnet) is fitted on standardized ``X`` and ``y`` (one output per target),
       early-stopped on a ``validation_fraction`` split of the rows.
    2. Teacher signals: ``targets="step_contributions"`` (choice B, default since issue 40: concise, at most
       ``n_steps`` features per target) distils the scalar ``W_m · d_k(x)`` per step and target;
       ``"step_outputs"`` (choice A) distils every unit of every step output ``d_k(x)``, shared by all targets
       (larger formulas: ``n_steps * n_d`` signals). Units with variance below ``variance_threshold`` are dead.
    3. Each step's signals may use only the inputs whose mean TabNet mask exceeds ``mask_threshold`` (at
       least the top ``min_inputs``).
    4. gplearn's ``SymbolicRegressor`` distils each signal on the raw inputs; sympy simplifies it; features
       over ``max_feature_nodes`` nodes, constant, non-finite or with fidelity below ``fidelity_threshold``
       are dropped, and duplicates removed.
    5. One ridge head per target on the shared features (alpha by ``cv``-fold inner CV over ``alphas``),
       fitted on the true targets.

    ``predict`` evaluates the formula with numpy only (no torch); values that overflow or leave the
    feature's training range by more than one training span are guarded and a
    :class:`FormulaGuardWarning` says how many. Read the model with ``features_``, ``coef_``,
    ``intercept_``, ``complexity_``, :meth:`export_text`, :meth:`to_latex`, :meth:`export_numpy`.
    """

    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {"requires": ("symbolic",), "stochastic": True}
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "n_d": [Interval(int, 1, 64)],
        "n_a": [Interval(int, 1, 64)],
        "n_steps": [Interval(int, 1, 10)],
        "gamma": [Interval(float, 1.0, 2.0)],
        "lambda_sparse": [Interval(float, 0, None)],
        "learning_rate": [Interval(float, 0, 1, closed="right")],
        "max_epochs": [Interval(int, 1, None)],
        "patience": [Interval(int, 1, None)],
        "batch_size": [Interval(int, 2, None)],
        "virtual_batch_size": [Interval(int, 2, None)],
        "validation_fraction": [Interval(float, 0, 0.5, closed="neither")],
        "targets": [Options(["step_outputs", "step_contributions"])],
        "mask_threshold": [Interval(float, 0, 1)],
        "min_inputs": [Interval(int, 1, None)],
        "population_size": [Interval(int, 10, None)],
        "generations": [Interval(int, 1, None)],
        "parsimony_coefficient": [Interval(float, 0, None)],
        "function_set": [SequenceOf(Options(GP_FUNCTIONS), unique=True)],
        "init_depth": [Satisfies(_pair, "a tuple (min_depth, max_depth) of ints with 1 <= min <= max",
                                 [(3, 2), (0, 2), "2-4", (2,)], valid=(2, 4))],
        "max_samples": [Interval(float, 0, 1, closed="right")],
        "max_feature_nodes": [Interval(int, 1, None)],
        "fidelity_threshold": [Interval(float, 0, 1)],
        "variance_threshold": [Interval(float, 0, None)],
        "alphas": [SequenceOf(Interval("real", 0, None, closed="neither")), None],
        "cv": [Interval(int, 2, None)],
        "keep_teacher": ["boolean"],
        "n_threads": [Interval(int, 1, None), None],
        "random_state": ["random_state"],
    }

    def __init__(self, *, n_d: int = 8, n_a: int = 8, n_steps: int = 3, gamma: float = 1.3,
                 lambda_sparse: float = 1e-3, learning_rate: float = 0.02, max_epochs: int = 100,
                 patience: int = 15, batch_size: int = 256, virtual_batch_size: int = 128,
                 validation_fraction: float = 0.2, targets: str = "step_contributions", mask_threshold: float = 0.05,
                 min_inputs: int = 2, population_size: int = 1000, generations: int = 20,
                 parsimony_coefficient: float = 0.005,
                 function_set: tuple[str, ...] = ("add", "sub", "mul", "div", "sqrt", "log", "sin", "cos"),
                 init_depth: tuple[int, int] = (2, 4), max_samples: float = 1.0, max_feature_nodes: int = 40,
                 fidelity_threshold: float = 0.25, variance_threshold: float = 1e-6,
                 alphas: tuple[float, ...] | None = None, cv: int = 5, keep_teacher: bool = True,
                 n_threads: int | None = None, random_state: Any = None):
        self.n_d = n_d
        self.n_a = n_a
        self.n_steps = n_steps
        self.gamma = gamma
        self.lambda_sparse = lambda_sparse
        self.learning_rate = learning_rate
        self.max_epochs = max_epochs
        self.patience = patience
        self.batch_size = batch_size
        self.virtual_batch_size = virtual_batch_size
        self.validation_fraction = validation_fraction
        self.targets = targets
        self.mask_threshold = mask_threshold
        self.min_inputs = min_inputs
        self.population_size = population_size
        self.generations = generations
        self.parsimony_coefficient = parsimony_coefficient
        self.function_set = function_set
        self.init_depth = init_depth
        self.max_samples = max_samples
        self.max_feature_nodes = max_feature_nodes
        self.fidelity_threshold = fidelity_threshold
        self.variance_threshold = variance_threshold
        self.alphas = alphas
        self.cv = cv
        self.keep_teacher = keep_teacher
        self.n_threads = n_threads
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"n_d": 2, "n_a": 2, "n_steps": 1, "max_epochs": 3, "patience": 2, "batch_size": 16,
                 "virtual_batch_size": 8, "population_size": 40, "generations": 2, "fidelity_threshold": 0.0,
                 "cv": 2, "random_state": 0}]

    # ------------------------------------------------------------------------------------------ inputs
    def _validate_X(self, X: Any, *, reset: bool) -> Any:
        dtypes = getattr(X, "dtypes", None)
        if dtypes is not None and hasattr(X, "columns"):
            import pandas as pd

            bad = [str(c) for c, d in zip(X.columns, dtypes) if not (pd.api.types.is_numeric_dtype(d)
                                                                    or pd.api.types.is_bool_dtype(d))]
            if bad:
                raise InputError(
                    f"The 'X' argument of {type(self).__name__} has categorical or text columns {bad}. "
                    "TabNet embeddings are not used here: one-hot encode them first, e.g. with "
                    "pandas.get_dummies(X, columns=...) or sklearn.preprocessing.OneHotEncoder.")
        return super()._validate_X(X, reset=reset)

    def _check_targets(self, Y: np.ndarray) -> None:
        sd = Y.std(axis=0)
        const = np.flatnonzero(sd <= 1e-12 * np.maximum(1.0, np.abs(Y).max(axis=0)))
        if const.size:
            raise InputError(f"The 'y' argument of {type(self).__name__} is constant in target column(s) "
                             f"{const.tolist()} (value {Y[0, const[0]]!r}); there is nothing to regress.")

    # ------------------------------------------------------------------------------------------ fit
    def _fit(self, X: np.ndarray, y: np.ndarray) -> None:
        # import_torch: the teacher imports torch lazily, so without it a process's first fit would train
        # TabNet at torch's default thread count and later fits at n_threads (different floats, formulas)
        with limit_threads(self.n_threads, import_torch=True):
            self._fit_all(X.astype(np.float64), y)

    def _split(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        n_val = max(1, int(round(self.validation_fraction * n)))
        n_fit = n - n_val
        if n_fit < self.virtual_batch_size:
            raise InputError(
                f"The 'X' argument of {type(self).__name__} has {n} rows: {n_fit} are left to train TabNet "
                f"after the validation split, fewer than virtual_batch_size={self.virtual_batch_size} (TabNet's "
                f"ghost batch norm needs a full virtual batch). Pass at least "
                f"{int(np.ceil(self.virtual_batch_size / (1 - self.validation_fraction))) + 1} rows or lower "
                "virtual_batch_size and batch_size.")
        perm = self._rng.permutation(n)
        return perm[n_val:], perm[:n_val]

    def _fit_all(self, X: np.ndarray, y: np.ndarray) -> None:
        from trustlab.methods.featkd import _teacher as T
        from trustlab.methods.featkd._distill import GPSettings, distil_signal, select_inputs, teacher_signals

        Y = y.reshape(len(y), -1)
        self._check_targets(Y)
        times: dict[str, float] = {}
        fit_rows, val_rows = self._split(len(X))
        self.x_mean_, self.x_scale_ = X.mean(0), np.where(X.std(0) > 1e-12, X.std(0), 1.0)
        self.y_mean_, self.y_scale_ = Y.mean(0), Y.std(0)
        Xs, Ys = (X - self.x_mean_) / self.x_scale_, (Y - self.y_mean_) / self.y_scale_
        t0 = time.perf_counter()
        settings = T.TeacherSettings(self.n_d, self.n_a, self.n_steps, self.gamma, self.lambda_sparse,
                                     self.learning_rate, self.max_epochs, self.patience, self.batch_size,
                                     self.virtual_batch_size)
        teacher = T.fit_teacher(Xs[fit_rows], Ys[fit_rows], Xs[val_rows], Ys[val_rows], settings,
                                spawn_seed(self._rng))
        times["teacher_s"] = time.perf_counter() - t0
        self.teacher_parameters_ = T.n_parameters(teacher)
        t0 = time.perf_counter()
        D = T.step_outputs(teacher, Xs)
        signals = teacher_signals(D, T.head_weights(teacher), self.targets)
        live = [s for s in signals if s.values.var() >= self.variance_threshold and np.any(s.values != 0)]
        if not live:
            raise TrustlabError(
                f"{type(self).__name__}: all {len(signals)} teacher units are dead after the variance filter "
                f"(variance < {self.variance_threshold}); the teacher learned nothing to distil. Train it longer "
                "(max_epochs, patience), use more rows, or lower variance_threshold.")
        inputs = select_inputs(T.step_masks(teacher, Xs), self.mask_threshold, min(self.min_inputs, X.shape[1]))
        times["signals_s"] = time.perf_counter() - t0
        gp = GPSettings(self.population_size, self.generations, self.parsimony_coefficient,
                        tuple(self.function_set), tuple(self.init_depth), self.max_samples, self.max_feature_nodes)
        t0 = time.perf_counter()
        kept: dict[str, SymbolicFeature] = {}
        dropped: dict[str, int] = {}
        duplicates = 0
        for s in live:
            feat, why = distil_signal(X, s, inputs[s.step], gp, spawn_seed(self._rng), self.fidelity_threshold)
            if feat is None:
                dropped[why] = dropped.get(why, 0) + 1
            elif feat.text in kept:
                duplicates += 1
                if feat.fidelity > kept[feat.text].fidelity:
                    kept[feat.text] = feat
            else:
                kept[feat.text] = feat
        times["distillation_s"] = time.perf_counter() - t0
        if not kept:
            raise TrustlabError(
                f"{type(self).__name__}: none of the {len(live)} live teacher signals gave a usable formula "
                f"({dropped}). Give gplearn more budget (population_size, generations), lower "
                "fidelity_threshold or raise max_feature_nodes.")
        self.features_ = tuple(kept.values())
        t0 = time.perf_counter()
        self._fit_head(X, Y)
        times["head_s"] = time.perf_counter() - t0
        self.teacher_ = teacher if self.keep_teacher else None
        self.distillation_report_ = DistillationReport(
            len(signals), len(signals) - len(live), dropped, duplicates, len(self.features_), tuple(inputs),
            len(teacher.history["loss"]), int(teacher.best_epoch), times)
        self.complexity_ = Complexity(self._model_nodes(), sum(f.nodes for f in self.features_),
                                      sum(f.complexity for f in self.features_), len(self.features_),
                                      self.teacher_parameters_)

    def _fit_head(self, X: np.ndarray, Y: np.ndarray) -> None:
        from sklearn.linear_model import RidgeCV

        F, _ = self._features(X)
        mu, sd = F.mean(0), np.where(F.std(0) > 1e-12, F.std(0), 1.0)
        Fs = (F - mu) / sd
        alphas = np.asarray(self.alphas if self.alphas is not None else np.logspace(-6, 3, 19), dtype=float)
        coef, intercept, chosen = [], [], []
        for m in range(Y.shape[1]):
            ridge = RidgeCV(alphas=alphas, cv=min(self.cv, len(X))).fit(Fs, Y[:, m])
            coef.append(ridge.coef_ / sd)
            intercept.append(float(ridge.intercept_ - np.sum(ridge.coef_ * mu / sd)))
            chosen.append(float(ridge.alpha_))
        C, b = np.asarray(coef), np.asarray(intercept)
        single = self._y_ndim == 1
        self.coef_ = C[0] if single else C
        self.intercept_ = float(b[0]) if single else b
        self.alpha_ = chosen[0] if single else np.asarray(chosen)

    def _model_nodes(self) -> int:
        return sum(f.nodes for f in self.features_) + 3 * len(self.features_) + 1

    # ------------------------------------------------------------------------------------------ predict
    def _features(self, X: np.ndarray) -> tuple[np.ndarray, GuardReport]:
        cols, reports = [], []
        for f in self.features_:
            v, r = f.evaluate(X)
            cols.append(v)
            reports.append(r)
        total = GuardReport(len(X) * len(cols), sum(r.n_nonfinite for r in reports),
                            sum(r.n_clipped for r in reports))
        return np.column_stack(cols), total

    def _predict(self, X: np.ndarray) -> np.ndarray:
        F, report = self._features(np.asarray(X, dtype=np.float64))
        if report.touched:
            warnings.warn(f"{type(self).__name__}: {report.n_nonfinite} non-finite and {report.n_clipped} "
                          f"out-of-range feature values (of {report.n_values}) were guarded; see guard_report(X).",
                          FormulaGuardWarning, stacklevel=3)
        C = np.atleast_2d(self.coef_)
        out = F @ C.T + np.atleast_1d(self.intercept_)
        return out[:, 0] if self._y_ndim == 1 else out

    @validate_args(X=[AnyValue("checked by _validate_X (InputError naming X)")])
    def transform(self, X: Any) -> np.ndarray:
        """The distilled features on ``X`` (guarded), shape ``(n_rows, n_features)``."""
        check_is_fitted(self, "features_")
        return self._features(np.asarray(self._validate_X(X, reset=False), dtype=np.float64))[0]

    @validate_args(X=[AnyValue("checked by _validate_X (InputError naming X)")])
    def guard_report(self, X: Any) -> GuardReport:
        """How many feature values on ``X`` the guard replaced (non-finite) or clipped (out of range)."""
        check_is_fitted(self, "features_")
        return self._features(np.asarray(self._validate_X(X, reset=False), dtype=np.float64))[1]

    # ------------------------------------------------------------------------------------------ export
    @property
    def formula_hash_(self) -> str:
        """Content hash of the fitted formula (feature code, coefficients, intercepts)."""
        from trustlab.core.hashing import content_hash

        check_is_fitted(self, "features_")
        return content_hash([f.code for f in self.features_], np.atleast_2d(self.coef_),
                            np.atleast_1d(self.intercept_))

    @validate_args(precision=[Interval(int, 1, None)],
                   feature_names=[None, ArrayLike(ndim=1, dtype="any", finite=False)])
    def export_text(self, *, precision: int = 4, feature_names: Any = None) -> str:
        """The model as plain text: one line per target, then one line per feature."""
        from trustlab.methods.featkd._export import export_text

        check_is_fitted(self, "features_")
        return export_text(self, precision=precision, feature_names=feature_names)

    @validate_args(precision=[Interval(int, 1, None)],
                   feature_names=[None, ArrayLike(ndim=1, dtype="any", finite=False)])
    def to_latex(self, *, precision: int = 4, feature_names: Any = None) -> str:
        """The model as a LaTeX formula per target (features substituted in)."""
        from trustlab.methods.featkd._export import to_latex

        check_is_fitted(self, "features_")
        return to_latex(self, precision=precision, feature_names=feature_names)

    def sympy_formulas(self) -> list[Any]:
        """The model as one sympy expression per target, ``b0 + sum_i b_i f_i(x)`` in ``x0, x1, ...``."""
        from trustlab.methods.featkd._export import formulas

        check_is_fitted(self, "features_")
        return formulas(self)

    def export_numpy(self) -> str:
        """Python source of a standalone ``predict(X)`` that needs only numpy (guard included); it gives
        exactly this model's predictions."""
        from trustlab.methods.featkd._export import export_numpy

        check_is_fitted(self, "features_")
        return export_numpy(self)
