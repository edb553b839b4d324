"""Attacks on purifier + classifier defences: ``generate((X, y), budget) -> AttackResult``.

* :class:`TransferPGD` -- PGD on the classifier alone (torchattacks' ``PGD`` / ``PGDL2``), the adversarial
  images then handed to the defence (the weakest evaluation; never enough on its own).
* :class:`PGDEOT` -- full-gradient PGD-EOT: the gradient of the loss through the whole purification
  (every reverse step, the frequency guidance and its reference), averaged over ``eot`` noise draws.
  With ``purifier=None`` it is plain PGD on the classifier (checked against torchattacks in the tests).
* :class:`BPDAEOT` -- BPDA-EOT: the purifier's backward pass replaced by the identity.
* :class:`SurrogatePGDEOT` -- Lee & Kim's surrogate process: gradients through a cheaper purification of
  the same kind (the released code's ``att_max_timesteps`` / ``att_num_denoising_steps``).

``budget`` is the radius of the L-inf or L2 ball (``norm``) in [0, 1] pixel units; every output is
projected onto the ball and the box in float64, so each image's cost (its distance to the input) is
within the budget. ``success``: one purification of the final image is misclassified (the voted
accuracy is what :func:`evaluate_defence` reports). Evaluation is one-shot: the final iterate is scored.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Boolean, Interval, Options, Satisfies
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.core.optional import require
from trustlab.core.roles import Attack, AttackResult
from trustlab.core.seeding import torch_generator
from trustlab.methods.freqpure._paper import PAPER

torch = require("torch", purpose="trustlab.methods.freqpure")

__all__ = ["TransferPGD", "PGDEOT", "BPDAEOT", "SurrogatePGDEOT", "AutoAttackRand", "project"]

_PURIFIER = Satisfies(lambda v: callable(getattr(v, "purify_tensor", None)) and hasattr(v, "get_params"),
                      "a purifier with a differentiable purify_tensor (DiffPure, FreqPure)", [object(), "diffpure", 3])


@validate_args(x=[ArrayLike(ndim=(2, 3, 4))], x_adv=[ArrayLike(ndim=(2, 3, 4))], budget=[Interval(float, 0, None)],
               norm=[Options(("linf", "l2"))])
def project(x: np.ndarray, x_adv: np.ndarray, budget: float, norm: str) -> np.ndarray:
    """``x_adv`` projected (float64) onto the ``norm`` ball of radius ``budget`` around ``x`` and the box [0, 1]."""
    if np.shape(x) != np.shape(x_adv):
        raise InputError(f"The 'x_adv' argument of project must have the shape of 'x' {np.shape(x)}. Got "
                         f"{np.shape(x_adv)} instead.")
    return _project(np.asarray(x, dtype=np.float64), x_adv, budget, norm)


def _project(x: np.ndarray, x_adv: Any, budget: float, norm: str) -> np.ndarray:
    delta = np.asarray(x_adv, dtype=np.float64) - x
    if norm == "linf":
        delta = np.clip(delta, -budget, budget)
    else:
        n = np.sqrt((delta.reshape(len(delta), -1) ** 2).sum(1)).reshape((-1,) + (1,) * (delta.ndim - 1))
        delta = delta * np.minimum(1.0, budget / np.maximum(n, 1e-300))
    return np.clip(x + delta, 0.0, 1.0)


def _cost(x: np.ndarray, x_adv: np.ndarray, norm: str) -> np.ndarray:
    d = (x_adv - x).reshape(len(x), -1)
    return np.abs(d).max(1) if norm == "linf" else np.sqrt((d ** 2).sum(1))


def _tiny_classifier(seed: int = 0) -> Any:
    """A small CNN for 16x16 single-channel images, initialised from a local generator (test fixture)."""
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.AvgPool2d(4),
                              torch.nn.Flatten(), torch.nn.Linear(64, 10))
    g = torch_generator(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return net.eval()


class _AttackBase(Attack):
    """Input checks, batching, the float64 projection and the cost/success bookkeeping."""

    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {"stochastic": True, "requires": ("torch",)}
    _base: ClassVar[dict[str, list[Any]]] = {
        "classifier": [torch.nn.Module], "norm": [Options(("linf", "l2"))], "steps": [Interval(int, 1, None)],
        "step_size": [Interval(float, 0, None, closed="neither")], "random_start": [Boolean()],
        "batch_size": [Interval(int, 1, None)], "random_state": ["random_state"]}
    _gradient_kind: ClassVar[str] = "classifier"

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        rng = np.random.default_rng(0)
        return {"inputs": (rng.random((2, 1, 16, 16)), np.array([3, 7])), "budget": 0.1}

    def _unpack(self, inputs: Any) -> tuple[np.ndarray, np.ndarray, bool]:
        own = f"{type(self).__name__}.generate"
        if not isinstance(inputs, tuple | list) or len(inputs) != 2:
            raise InputError(f"The 'inputs' argument of {own} must be a pair (X, y) of images and integer labels. "
                             f"Got {type(inputs).__name__} instead.")
        X = np.asarray(inputs[0], dtype=np.float64)
        y = np.asarray(inputs[1])
        squeeze = X.ndim == 3
        X = X[:, None] if squeeze else X
        if X.ndim != 4 or len(X) == 0 or not np.isfinite(X).all():
            raise InputError(f"The 'inputs' argument of {own} must hold finite, non-empty images (n, C, H, W) or "
                             f"(n, H, W). Got shape {np.asarray(inputs[0]).shape} instead.")
        if X.min() < 0 or X.max() > 1:
            raise InputError(f"The images in 'inputs' of {own} must be in [0, 1]. Got min {X.min():.4g}, max "
                             f"{X.max():.4g} instead.")
        if y.shape != (len(X),) or y.dtype.kind not in "iu" or (y < 0).any():
            raise InputError(f"The labels in 'inputs' of {own} must be {len(X)} ints >= 0. Got shape {y.shape}, "
                             f"dtype {y.dtype} instead.")
        return X, y.astype(np.int64), squeeze

    def _check_budget(self, budget: float, X: np.ndarray) -> None:
        limit = 1.0 if self.norm == "linf" else float(np.sqrt(X[0].size))
        if budget > limit:
            raise InputError(f"The 'budget' argument of {type(self).__name__}.generate must be an {self.norm} radius in "
                             f"[0, {limit:.4g}] for images in [0, 1] (pixel units such as 8 mean 8/255). Got "
                             f"{budget!r} instead.")

    def _generate(self, inputs: Any, budget: float) -> AttackResult:
        X, y, squeeze = self._unpack(inputs)
        self._check_budget(budget, X)
        self._prepare_attack()
        t0 = time.perf_counter()
        gen = torch_generator(self._rng)
        clf = self.classifier
        was_training = clf.training
        clf.eval()
        try:
            with torch.no_grad():
                n_classes = int(clf(torch.as_tensor(X[:1], dtype=torch.float32)).shape[1])
            if int(y.max()) >= n_classes:
                raise InputError(f"The labels in 'inputs' of {type(self).__name__}.generate must be < {n_classes} (the "
                                 f"classifier's outputs). Got {int(y.max())} instead.")
            if budget == 0:
                adv = X.copy()
            else:
                parts = [self._attack_batch(X[s:s + self.batch_size], y[s:s + self.batch_size], budget, gen)
                         for s in range(0, len(X), self.batch_size)]
                adv = _project(X, np.concatenate(parts), budget, self.norm)
            success = self._misclassified(adv, y, gen)
        finally:
            clf.train(was_training)
        kind = self._gradient_kind if getattr(self, "purifier", None) is not None else "classifier"
        info = {"norm": self.norm, "gradient": kind, "steps": self.steps,
                "eot": getattr(self, "eot", 1), "wall_time_s": time.perf_counter() - t0,
                "protocol": "one-shot: the final iterate is returned and scored"}
        return AttackResult(adv[:, 0] if squeeze else adv, budget, _cost(X, adv, self.norm), success, info)

    def _prepare_attack(self) -> None:
        return None

    def _misclassified(self, adv: np.ndarray, y: np.ndarray, gen: Any) -> np.ndarray:
        out = []
        with torch.no_grad():
            for s in range(0, len(adv), self.batch_size):
                xb = torch.as_tensor(adv[s:s + self.batch_size], dtype=torch.float32)
                pur = getattr(self, "purifier", None)
                if pur is not None:
                    xb = pur.purify_tensor(xb, generator=gen).float()
                out.append(self.classifier(xb).argmax(1).numpy())
        return np.concatenate(out) != y

    # -- PGD (ours) -------------------------------------------------------------------------------------
    def _attack_batch(self, x: np.ndarray, y: np.ndarray, budget: float, gen: Any) -> np.ndarray:
        x0 = torch.as_tensor(x, dtype=torch.float32)
        yt = torch.as_tensor(y)
        alpha = float(self.step_size) * budget
        adv = x0.clone()
        if self.random_start:
            adv = torch.as_tensor(_project(x, x + self._random_delta(x.shape, budget, gen), budget, self.norm),
                                  dtype=torch.float32)
        for _ in range(self.steps):
            g = self._gradient(adv, yt, gen)
            if self.norm == "linf":
                adv = adv + alpha * g.sign()
            else:
                gn = g.flatten(1).norm(dim=1).clamp_min(1e-12).reshape(-1, 1, 1, 1)
                adv = adv + alpha * g / gn
            adv = torch.as_tensor(_project(x, adv.numpy(), budget, self.norm), dtype=torch.float32)
        return adv.numpy().astype(np.float64)

    def _random_delta(self, shape: tuple[int, ...], budget: float, gen: Any) -> np.ndarray:
        if self.norm == "linf":
            return ((torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * budget).numpy()
        d = torch.randn(shape, generator=gen, dtype=torch.float64)
        d = d / d.flatten(1).norm(dim=1).reshape(-1, 1, 1, 1)
        return (d * budget * torch.rand((shape[0], 1, 1, 1), generator=gen, dtype=torch.float64)).numpy()

    def _loss_grad(self, x: Any, y: Any, forward: Any) -> Any:
        xr = x.clone().requires_grad_(True)
        loss = torch.nn.functional.cross_entropy(self.classifier(forward(xr).float()), y, reduction="sum")
        return torch.autograd.grad(loss, xr)[0]

    def _gradient(self, x: Any, y: Any, gen: Any) -> Any:
        return self._loss_grad(x, y, lambda v: v)


class TransferPGD(_AttackBase):
    """PGD against the classifier alone (torchattacks ``PGD`` for L-inf, ``PGDL2`` for L2), ``step_size``
    a fraction of the budget; the adversarial images are then given to the defence (a transfer attack).

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.methods.freqpure._attacks import _tiny_classifier
    >>> X, y = np.random.default_rng(0).random((2, 1, 16, 16)), np.array([1, 2])
    >>> res = TransferPGD(classifier=_tiny_classifier(), steps=3).generate((X, y), 0.05)
    >>> bool(res.cost.max() <= 0.05)
    True
    """

    _constraints: ClassVar[dict[str, list[Any]]] = dict(_AttackBase._base)

    def __init__(self, *, classifier: Any = None, norm: str = "linf", steps: int = 200, step_size: float = 0.25,
                 random_start: bool = False, batch_size: int = 256, random_state: Any = None) -> None:
        self.classifier = classifier
        self.norm = norm
        self.steps = steps
        self.step_size = step_size
        self.random_start = random_start
        self.batch_size = batch_size
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"classifier": _tiny_classifier(), "steps": 3, "random_state": 0},
                {"classifier": _tiny_classifier(1), "norm": "l2", "steps": 2, "random_start": True}]

    def _attack_batch(self, x: np.ndarray, y: np.ndarray, budget: float, gen: Any) -> np.ndarray:
        torchattacks = require("torchattacks", purpose="TransferPGD (classifier-only PGD)")
        kind = torchattacks.PGD if self.norm == "linf" else torchattacks.PGDL2
        atk = kind(self.classifier, eps=budget, alpha=float(self.step_size) * budget, steps=self.steps,
                   random_start=bool(self.random_start))
        # torchattacks draws its random start from the global torch RNG: the verb scope seeds and restores it
        adv = atk(torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y)).numpy().astype(np.float64)
        # torchattacks' L2 random start divides by the float32 norm of a delta that underflows for budgets
        # below float32 resolution (NaN); such images stay at the input (the projection keeps the budget)
        return np.where(np.isfinite(adv), adv, x)


class PGDEOT(_AttackBase):
    """Full-gradient PGD-EOT through the purifier: each step follows the sign (L-inf) or the direction (L2)
    of the cross-entropy gradient summed over ``eot`` independent purifications. ``purifier=None``: plain
    PGD on the classifier."""

    _constraints: ClassVar[dict[str, list[Any]]] = {**_AttackBase._base, "purifier": [_PURIFIER, None],
                                                     "eot": [Interval(int, 1, None)]}
    _gradient_kind: ClassVar[str] = "full"

    def __init__(self, *, classifier: Any = None, purifier: Any = None, norm: str = "linf", steps: int = 200,
                 eot: int = 20, step_size: float = 0.25, random_start: bool = False, batch_size: int = 64,
                 random_state: Any = None) -> None:
        self.classifier = classifier
        self.purifier = purifier
        self.norm = norm
        self.steps = steps
        self.eot = eot
        self.step_size = step_size
        self.random_start = random_start
        self.batch_size = batch_size
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        from trustlab.methods.freqpure._purify import FreqPure

        pur = FreqPure(t_star=10, steps=1, rounds=1, r_amp=1.5, r_phase=1.5, votes=1)
        return [{"classifier": _tiny_classifier(), "purifier": pur, "steps": 1, "eot": 1, "random_state": 0},
                {"classifier": _tiny_classifier(), "purifier": None, "norm": "l2", "steps": 2, "eot": 1}]

    def _eot_gradient(self, x: Any, y: Any, forward: Any) -> Any:
        g = torch.zeros_like(x)
        for _ in range(self.eot):
            g = g + self._loss_grad(x, y, forward)
        return g

    def _gradient(self, x: Any, y: Any, gen: Any) -> Any:
        if self.purifier is None:
            return self._loss_grad(x, y, lambda v: v)
        return self._eot_gradient(x, y, lambda v: self.purifier.purify_tensor(v, generator=gen))


class BPDAEOT(PGDEOT):
    """BPDA-EOT: the loss gradient at the purified image, used as the gradient at the input (the purifier's
    backward pass approximated by the identity), summed over ``eot`` purifications."""

    _constraints: ClassVar[dict[str, list[Any]]] = {**_AttackBase._base, "purifier": [_PURIFIER],
                                                     "eot": [Interval(int, 1, None)]}
    _gradient_kind: ClassVar[str] = "bpda"

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return PGDEOT._get_test_params()[:1]

    def _gradient(self, x: Any, y: Any, gen: Any) -> Any:
        def forward(v: Any) -> Any:
            with torch.no_grad():
                purified = self.purifier.purify_tensor(v.detach(), generator=gen)
            return v + (purified.to(v.dtype) - v).detach()  # value of the purified image, identity backward

        return self._eot_gradient(x, y, forward)


class SurrogatePGDEOT(PGDEOT):
    """PGD-EOT with gradients through a surrogate process (Lee & Kim, ICCV 2023; the released code's attack
    path): the same purifier with one round of ``surrogate_t_star`` levels in ``surrogate_steps`` steps
    (default 50 / 1, the code's CIFAR-10 v2 setting). The defence itself is evaluated unchanged."""

    _constraints: ClassVar[dict[str, list[Any]]] = {
        **_AttackBase._base, "purifier": [_PURIFIER], "eot": [Interval(int, 1, None)],
        "surrogate_t_star": [Interval(int, 1, None)], "surrogate_steps": [Interval(int, 1, None)]}
    _gradient_kind: ClassVar[str] = "surrogate"

    def __init__(self, *, classifier: Any = None, purifier: Any = None, norm: str = "linf", steps: int = 200,
                 eot: int = 20, step_size: float = 0.25, random_start: bool = False, batch_size: int = 64,
                 surrogate_t_star: int = 50, surrogate_steps: int = 1, random_state: Any = None) -> None:
        super().__init__(classifier=classifier, purifier=purifier, norm=norm, steps=steps, eot=eot,
                         step_size=step_size, random_start=random_start, batch_size=batch_size,
                         random_state=random_state)
        self.surrogate_t_star = surrogate_t_star
        self.surrogate_steps = surrogate_steps

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        p = dict(PGDEOT._get_test_params()[0])
        return [{**p, "surrogate_t_star": 10, "surrogate_steps": 1}]

    def _prepare_attack(self) -> None:
        from sklearn.base import clone

        params = self.purifier.get_params(deep=False)
        if not {"t_star", "steps", "rounds"} <= set(params):
            raise ConfigError(f"The 'purifier' parameter of {type(self).__name__} must have t_star/steps/rounds "
                              f"parameters (DiffPure, FreqPure). Got {type(self.purifier).__name__} instead.")
        self._surrogate = clone(self.purifier).set_params(t_star=self.surrogate_t_star, steps=self.surrogate_steps,
                                                          rounds=1)

    def _gradient(self, x: Any, y: Any, gen: Any) -> Any:
        return self._eot_gradient(x, y, lambda v: self._surrogate.purify_tensor(v, generator=gen))



class _Defended(torch.nn.Module):
    """``classifier(purifier(x))`` as one (stochastic) model, for attacks that take a model (torchattacks)."""

    def __init__(self, classifier: Any, purifier: Any, gen: Any) -> None:
        super().__init__()
        self.classifier, self._purifier, self._gen = classifier, purifier, gen

    def forward(self, x: Any) -> Any:
        if self._purifier is not None:
            x = self._purifier.purify_tensor(x, generator=self._gen).float()
        return self.classifier(x)


class AutoAttackRand(_AttackBase):
    """AutoAttack's ensemble for randomised defences (Croce & Hein, 2020; torchattacks' ``AutoAttack(version=
    "rand")``): torchattacks' APGD-CE and APGD-DLR, each averaging ``eot`` EOT gradients over ``steps`` steps,
    combined by torchattacks' ``MultiAttack`` (per image, the first attack that fools the model is kept), run on
    ``classifier(purifier(x))`` as one stochastic model (``purifier=None``: the classifier alone). The defaults
    are torchattacks' rand version (10 steps, 20 EOT iterations, 1 restart).

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.methods.freqpure._attacks import _tiny_classifier
    >>> X, y = np.random.default_rng(0).random((2, 1, 16, 16)), np.array([1, 2])
    >>> res = AutoAttackRand(classifier=_tiny_classifier(), steps=2, eot=1, random_state=0).generate((X, y), 0.05)
    >>> bool(res.cost.max() <= 0.05)
    True
    """

    _constraints: ClassVar[dict[str, list[Any]]] = {
        "classifier": [torch.nn.Module], "purifier": [_PURIFIER, None], "norm": [Options(("linf", "l2"))],
        "steps": [Interval(int, 1, None)], "eot": [Interval(int, 1, None)], "batch_size": [Interval(int, 1, None)],
        "random_state": ["random_state"]}
    _gradient_kind: ClassVar[str] = "full"

    def __init__(self, *, classifier: Any = None, purifier: Any = None, norm: str = "linf", steps: int = 10,
                 eot: int = 20, batch_size: int = 64, random_state: Any = None) -> None:
        self.classifier = classifier
        self.purifier = purifier
        self.norm = norm
        self.steps = steps
        self.eot = eot
        self.batch_size = batch_size
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return PGDEOT._get_test_params()  # the same parameter names: a tiny purifier, then none (L2)

    def _attack_batch(self, x: np.ndarray, y: np.ndarray, budget: float, gen: Any) -> np.ndarray:
        ta = require("torchattacks", purpose="AutoAttackRand (AutoAttack's rand version)")
        model = _Defended(self.classifier, self.purifier, gen).eval()
        xt = torch.as_tensor(x, dtype=torch.float32)
        norm = "Linf" if self.norm == "linf" else "L2"
        seeds = [int(v) for v in torch.randint(0, 2**31 - 1, (2,), generator=gen)]
        kw = {"norm": norm, "eps": float(budget), "steps": int(self.steps), "eot_iter": int(self.eot), "n_restarts": 1}
        atk = ta.MultiAttack([ta.APGD(model, loss="ce", seed=seeds[0], **kw),
                              ta.APGD(model, loss="dlr", seed=seeds[1], **kw)])
        adv = atk(xt, torch.as_tensor(y)).detach().numpy().astype(np.float64)
        return np.where(np.isfinite(adv), adv, x)
