"""MMD two-sample tests as Detectors: MMD-G, MMD-D, SAMMD and the topology-augmented SAMMD.

Every detector follows one API:

* ``fit(X, y=None)`` -- ``X`` the feature rows, ``y`` optional 0/1 labels (0 = clean reference, 1 =
  adversarial). With ``y`` and ``train=True`` the kernel is trained on the two groups (equal sizes) by
  maximising the test-power criterion ``J = MMD^2_u / sqrt(V)`` (Adam, full batch); without ``y`` (or with
  ``train=False``) the kernel keeps its median-heuristic initialisation.
* ``score_samples(X)`` -- the witness ``mean k(x, adversarial) - mean k(x, clean)`` when fitted with both
  groups, else ``-mean k(x, reference)``; higher = more suspicious. ``threshold_`` is the ``1 - alpha``
  quantile of the reference rows' scores, so ``predict`` flags about ``alpha`` of clean data.
* ``test(X, Y) -> TestResult`` -- statistic, p-value (permutation or wild-bootstrap null), the decision at
  ``alpha`` and an asymptotic power estimate ``Phi(sqrt(n) (stat - q_{1-alpha}) / sigma_H1)``. Rows used to
  train the kernel are refused (leakage).

Feature layouts: :class:`MMDGaussian` and :class:`MMDDeep` use every column. :class:`SAMMD` reads
``[semantic (n_semantic) | raw]``; :class:`TopoSAMMD` reads ``[semantic | raw | topological (n_topo)]``, e.g.
``np.hstack([image_embeddings, pixels, topo_features(...)])``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.stats import norm

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import AnyValue, Boolean, Interval, Options
from trustlab.core.exceptions import InputError
from trustlab.core.hashing import content_hash
from trustlab.core.optional import require
from trustlab.core.roles import Detector
from trustlab.core.seeding import torch_generator
from trustlab.core.validation import check_array, check_is_fitted
from trustlab.methods.topodetect._kernels import (
    median_sq,
    mmd2_and_var,
    permutation_null,
    power_criterion,
    sqdist,
    wild_bootstrap_null,
)
from trustlab.methods.topodetect._paper import PAPER

torch = require("torch", extra="topo", purpose="trustlab.methods.topodetect")

__all__ = ["TestResult", "MMDGaussian", "MMDDeep", "SAMMD", "TopoSAMMD"]


@dataclass(frozen=True)
class TestResult:
    """One two-sample test: ``statistic``, ``p_value``, ``reject`` (p <= alpha), ``power_estimate``."""

    __test__ = False  # not a pytest class

    test: str
    statistic: float
    p_value: float
    reject: bool
    alpha: float
    power_estimate: float
    n_x: int
    n_y: int
    null: str
    n_null: int
    kernel_hash: str


class _KernelTest(Detector):
    """Shared fit / score / test machinery; subclasses define the kernel (``_init_kernel``, ``_K``)."""

    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {"stochastic": True, "requires": ("torch",)}
    _trainable: ClassVar[bool] = True
    _common: ClassVar[dict[str, list[Any]]] = {
        "alpha": [Interval(float, 0, 1, closed="neither")], "n_null": [Interval(int, 1, None)],
        "train": [Boolean()], "epochs": [Interval(int, 1, None)], "lr": [Interval(float, 0, None, closed="neither")],
        "random_state": ["random_state"]}

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        rng = np.random.default_rng(0)
        X = rng.normal(size=(24, 6))
        y = np.repeat([0, 1], 12)
        X[y == 1] += 0.8
        return {"X": X, "y": y}

    def _check_common(self, name: str) -> None:
        if self.n_null < int(np.ceil(1 / self.alpha)):
            raise InputError(f"The 'n_null' parameter of {name} must be >= 1/alpha = {int(np.ceil(1 / self.alpha))} "
                             f"so that a p-value <= alpha is possible. Got {self.n_null} instead.")

    # ----------------------------------------------------------------------------------------------- fit
    def _fit(self, X: np.ndarray, y: Any, **_: Any) -> None:
        name = type(self).__name__
        self._check_common(name)
        self._check_layout(X.shape[1])
        Xt = torch.as_tensor(X, dtype=torch.float64)
        if y is None:
            ref, adv = Xt, None
        else:
            yy = np.asarray(y)
            if not set(np.unique(yy).tolist()) <= {0, 1} or len(np.unique(yy)) != 2:
                raise InputError(f"The 'y' argument of {name}.fit must be 0 (clean) / 1 (adversarial) labels with both "
                                 f"groups. Got values {np.unique(yy).tolist()} instead.")
            ref, adv = Xt[torch.as_tensor(yy == 0)], Xt[torch.as_tensor(yy == 1)]
        if len(ref) < 4 or (adv is not None and len(adv) < 4):
            raise InputError(f"The 'X' argument of {name}.fit needs >= 4 rows per group (unbiased MMD terms divide by "
                             f"n(n-1)). Got {len(ref)}{'' if adv is None else f' and {len(adv)}'} instead.")
        gen = torch_generator(self._rng)
        self._init_kernel(ref if adv is None else torch.cat([ref, adv]), gen)
        self.history_: list[float] = []
        trains = self.train and self._trainable and adv is not None
        if trains:
            if len(ref) != len(adv):
                raise InputError(f"The 'y' argument of {name}.fit must give equal group sizes to train the kernel (the "
                                 f"variance of J assumes n_x = n_y). Got {len(ref)} clean and {len(adv)} adversarial.")
            self._train(ref, adv)
        self.reference_, self.adversarial_ = ref.detach(), None if adv is None else adv.detach()
        self._seen = {r.tobytes() for r in X.astype(np.float64)} if trains else set()
        self.reference_hash_ = content_hash(X, None if y is None else np.asarray(y))
        with torch.no_grad():
            self.threshold_ = float(np.quantile(self._scores(ref), 1 - self.alpha))

    def _train(self, ref: Any, adv: Any) -> None:
        params = [p for p in self._parameters() if p.requires_grad]
        opt = torch.optim.Adam(params, lr=self.lr)
        Z = torch.cat([ref, adv])
        for _ in range(self.epochs):
            J = power_criterion(self._K(Z, Z), len(ref))
            opt.zero_grad()
            (-J).backward()
            opt.step()
            self.history_.append(float(J.detach()))

    # --------------------------------------------------------------------------------------------- score
    def _scores(self, Xt: Any) -> np.ndarray:
        c = self._K(Xt, self.reference_).mean(1)
        if self.adversarial_ is None:
            return (-c).numpy()
        return (self._K(Xt, self.adversarial_).mean(1) - c).numpy()

    def _score_samples(self, X: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self._scores(torch.as_tensor(X, dtype=torch.float64))

    # ---------------------------------------------------------------------------------------------- test
    @validate_args(X=[AnyValue("checked by check_array and the fitted width (InputError naming X)")],
                   Y=[AnyValue("checked by check_array and the fitted width (InputError naming Y)")])
    def test(self, X: Any, Y: Any) -> TestResult:
        """Two-sample test of ``X`` against ``Y`` with the fitted kernel (see the module docstring)."""
        check_is_fitted(self, "threshold_")
        name = type(self).__name__
        with self._verb_scope():
            A = check_array(X, owner=f"{name}.test", ndim=2)
            B = check_array(Y, owner=f"{name}.test", ndim=2)
            for arg, M in (("X", A), ("Y", B)):
                if M.shape[1] != self.n_features_in_:
                    raise InputError(f"The '{arg}' argument of {name}.test must have {self.n_features_in_} columns (as "
                                     f"at fit). Got {M.shape[1]} instead.")
                if len(M) < 4:
                    raise InputError(f"The '{arg}' argument of {name}.test must have >= 4 rows (unbiased MMD terms divide "
                                     f"by n(n-1)). Got {len(M)} instead.")
                if self._seen and any(r.tobytes() in self._seen for r in M.astype(np.float64)):
                    raise InputError(f"The '{arg}' argument of {name}.test contains rows the kernel was trained on "
                                     "(leakage: test on held-out data).")
            if self._null_kind() == "wild" and len(A) != len(B):
                raise InputError(f"The 'Y' argument of {name}.test must have as many rows as X ({len(A)}) for the "
                                 f"wild-bootstrap V-statistic. Got {len(B)} instead.")
            return self._run_test(A, B, name)

    def _run_test(self, A: np.ndarray, B: np.ndarray, name: str) -> TestResult:
        Z = torch.as_tensor(np.vstack([A, B]), dtype=torch.float64)
        with torch.no_grad():
            Kt = self._K(Z, Z)
            _, var = mmd2_and_var(Kt, len(A)) if len(A) == len(B) else (None, Kt.new_zeros(()))
        K = Kt.numpy()
        if self._null_kind() == "wild":
            stat, null = wild_bootstrap_null(K, len(A), self.n_null, self._rng)
        else:
            stat, null = permutation_null(K, len(A), self.n_null, self._rng)
        pv = (1 + int((null >= stat).sum())) / (1 + len(null))
        q = float(np.quantile(null, 1 - self.alpha))
        sd = float(np.sqrt(max(float(var), 1e-8)))
        n = min(len(A), len(B))
        power = float(norm.cdf(np.sqrt(n) * (stat - q) / sd))
        return TestResult(name, float(stat), float(pv), bool(pv <= self.alpha), float(self.alpha), power, len(A), len(B),
                          self._null_kind(), int(self.n_null), content_hash([w.detach() for w in self._parameters()]))

    # ---------------------------------------------------------------------------------------- to define
    def _check_layout(self, d: int) -> None:
        return None

    def _null_kind(self) -> str:
        return "permutation"

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"epochs": 3, "n_null": 40, "random_state": 0}]

    def _parameters(self) -> list[Any]:
        return list(self._kparams.values())

    def _init_kernel(self, Z: Any, gen: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _K(self, A: Any, B: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


def _logp(v: float) -> Any:
    return torch.tensor(float(np.log(max(v, 1e-12))), dtype=torch.float64, requires_grad=True)


class MMDGaussian(_KernelTest):
    """MMD-G: a Gaussian kernel ``exp(-|x - y|^2 / s)``, ``s`` = median pairwise squared distance of the fit
    rows (median heuristic), permutation test. Never trained (``train`` is accepted and ignored)."""

    _constraints: ClassVar[dict[str, list[Any]]] = dict(_KernelTest._common)
    _trainable: ClassVar[bool] = False

    def __init__(self, *, alpha: float = 0.05, n_null: int = 200, train: bool = False, epochs: int = 1, lr: float = 1e-2,
                 random_state: Any = None) -> None:
        self.alpha, self.n_null, self.train, self.epochs, self.lr, self.random_state = (
            alpha, n_null, train, epochs, lr, random_state)

    def _init_kernel(self, Z: Any, gen: Any) -> None:
        self._kparams = {"log_s": torch.tensor(float(np.log(median_sq(Z))), dtype=torch.float64)}

    def _K(self, A: Any, B: Any) -> Any:
        return torch.exp(-sqdist(A, B) / self._kparams["log_s"].exp())


class MMDDeep(_KernelTest):
    """MMD-D (Liu et al. 2020): ``k = [(1 - eps) exp(-|phi(x) - phi(y)|^2 / s_phi) + eps] exp(-|x - y|^2 / s_q)``
    with ``phi`` an MLP (``hidden`` units, ``out`` outputs), all trained on J; permutation test."""

    _constraints: ClassVar[dict[str, list[Any]]] = {**_KernelTest._common, "hidden": [Interval(int, 1, None)],
                                                    "out": [Interval(int, 1, None)]}

    def __init__(self, *, hidden: int = 32, out: int = 16, alpha: float = 0.05, n_null: int = 200, train: bool = True,
                 epochs: int = 200, lr: float = 5e-3, random_state: Any = None) -> None:
        self.hidden, self.out = hidden, out
        self.alpha, self.n_null, self.train, self.epochs, self.lr, self.random_state = (
            alpha, n_null, train, epochs, lr, random_state)

    def _init_kernel(self, Z: Any, gen: Any) -> None:
        d = Z.shape[1]
        self._phi = torch.nn.Sequential(torch.nn.Linear(d, self.hidden), torch.nn.Softplus(),
                                        torch.nn.Linear(self.hidden, self.hidden), torch.nn.Softplus(),
                                        torch.nn.Linear(self.hidden, self.out)).double()
        with torch.no_grad():
            for p in self._phi.parameters():
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * (1.0 / np.sqrt(max(p.shape[-1], 1))))
            f = self._phi(Z)
        self._kparams = {"log_s_phi": _logp(median_sq(f)), "log_s_q": _logp(median_sq(Z)),
                         "eps_logit": torch.tensor(-10.0, dtype=torch.float64, requires_grad=True)}

    def _parameters(self) -> list[Any]:
        return [*self._kparams.values(), *self._phi.parameters()]

    def _K(self, A: Any, B: Any) -> Any:
        eps = torch.sigmoid(self._kparams["eps_logit"])
        kphi = torch.exp(-sqdist(self._phi(A), self._phi(B)) / self._kparams["log_s_phi"].exp())
        return ((1 - eps) * kphi + eps) * torch.exp(-sqdist(A, B) / self._kparams["log_s_q"].exp())


class SAMMD(_KernelTest):
    """SAMMD (Gao et al. 2021): columns ``[semantic (n_semantic) | raw]``,
    ``k = (1 - eps) exp(-|s - s'|^2 / s0 - |x - x'|^2 / s) + eps exp(-|x - x'|^2 / s)``; ``s0`` starts at the
    median semantic distance, ``s`` at ``2 * raw dimension`` (the code's ``(sqrt(2*32*32))^2``), ``eps`` near 0;
    trained on J (``train=True``), wild-bootstrap test (equal sizes)."""

    _constraints: ClassVar[dict[str, list[Any]]] = {**_KernelTest._common, "n_semantic": [Interval(int, 1, None)],
                                                    "null": [Options(("wild", "permutation"))]}

    def __init__(self, *, n_semantic: int = 3, alpha: float = 0.05, n_null: int = 200, train: bool = True,
                 epochs: int = 200, lr: float = 2e-2, null: str = "wild", random_state: Any = None) -> None:
        self.n_semantic = n_semantic
        self.alpha, self.n_null, self.train, self.epochs, self.lr, self.random_state = (
            alpha, n_null, train, epochs, lr, random_state)
        self.null = null

    def _null_kind(self) -> str:
        return self.null

    def _topo_cols(self) -> int:
        return 0

    def _check_layout(self, d: int) -> None:
        t = self._topo_cols()
        if self.n_semantic + t >= d:
            raise InputError(f"The 'X' argument of {type(self).__name__}.fit must have more than n_semantic + n_topo = "
                             f"{self.n_semantic + t} columns (semantic | raw{' | topological' if t else ''}). Got {d}.")

    def _split(self, A: Any) -> tuple[Any, Any, Any]:
        s, t = self.n_semantic, self._topo_cols()
        return A[:, :s], A[:, s:A.shape[1] - t], A[:, A.shape[1] - t:] if t else None

    def _init_kernel(self, Z: Any, gen: Any) -> None:
        s, x, g = self._split(Z)
        self._kparams = {"log_s0": _logp(median_sq(s)), "log_s": _logp(2.0 * x.shape[1]),
                         "eps_logit": torch.tensor(-10.0, dtype=torch.float64, requires_grad=True)}
        if g is not None:
            self._kparams["log_sg"] = _logp(median_sq(g))

    def _K(self, A: Any, B: Any) -> Any:
        sa, xa, ga = self._split(A)
        sb, xb, gb = self._split(B)
        p = self._kparams
        raw = sqdist(xa, xb) / p["log_s"].exp()
        inner = sqdist(sa, sb) / p["log_s0"].exp() + raw
        if ga is not None:
            inner = inner + sqdist(ga, gb) / p["log_sg"].exp()
        eps = torch.sigmoid(p["eps_logit"])
        return (1 - eps) * torch.exp(-inner) + eps * torch.exp(-raw)


class TopoSAMMD(SAMMD):
    """Topology-augmented SAMMD (the paper's test): columns ``[semantic | raw | topological (n_topo)]``; the
    SAMMD kernel's first term is multiplied by a Gaussian kernel on the topological features
    ``exp(-|g - g'|^2 / s_g)`` (``s_g`` median-initialised and trained with the rest)."""

    _constraints: ClassVar[dict[str, list[Any]]] = {**SAMMD._constraints, "n_topo": [Interval(int, 1, None)]}

    def __init__(self, *, n_semantic: int = 2, n_topo: int = 2, alpha: float = 0.05, n_null: int = 200,
                 train: bool = True, epochs: int = 200, lr: float = 2e-2, null: str = "wild",
                 random_state: Any = None) -> None:
        super().__init__(n_semantic=n_semantic, alpha=alpha, n_null=n_null, train=train, epochs=epochs, lr=lr,
                         null=null, random_state=random_state)
        self.n_topo = n_topo

    def _topo_cols(self) -> int:
        return self.n_topo
