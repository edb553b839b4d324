"""AMUN and the unlearning baselines as ModelEdits: ``apply(model, forget_idx, data) -> handle``.

Every method fine-tunes the given model in place; ``handle.restore()`` gives back the exact original weights
(the :class:`~trustlab.core.roles.ModelEdit` role snapshots them). ``handle.info`` records what was done
(set sizes, wall time, and for AMUN the adversarial-set statistics).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.base import PaperInfo
from trustlab.core.constraints import Interval
from trustlab.core.exceptions import ConfigError, InputError, UnsupportedModelError
from trustlab.core.roles import EditHandle, EditInfo, ModelEdit
from trustlab.core.seeding import isolated_global_rng
from trustlab.core.threads import limit_threads
from trustlab.methods.amun._data import (
    MODEL_RULE,
    SGDSpec,
    UnlearningData,
    as_unlearning_data,
    check_finite,
    check_forget_idx,
    sgd_train,
)
from trustlab.methods.amun._paper import PAPER
from trustlab.models import MLP, device_of, make_optimizer, train_epoch

__all__ = ["Unlearner", "AMUN", "Retrain", "FineTune", "GradientAscent", "RandomLabel", "BoundaryShrink",
           "SalUn", "L1Sparse"]

_POS = [Interval("real", 0, None, closed="neither")]
_NONNEG = [Interval("real", 0, None)]
_COMMON: dict[str, list[Any]] = {
    "lr": _POS,
    "epochs": [Interval(int, 1, None)],
    "batch_size": [Interval(int, 1, None)],
    "momentum": [Interval("real", 0, 1, closed="left")],
    "weight_decay": _NONNEG,
    "lr_step": [Interval(int, 1, None), None],
    "use_remain": ["boolean"],
    "random_state": ["random_state"],
}


def _tiny_model() -> Any:
    """A seeded 4-8-3 MLP for the common checks (its initialisation draws from an isolated global RNG)."""
    with isolated_global_rng(0):
        return MLP(4, 3, hidden=(8,))


def _tiny_inputs() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    X = rng.random((30, 4)).astype(np.float32)
    y = rng.integers(0, 3, 30)
    data = UnlearningData(X=X, y=y, train_idx=np.arange(20), test_idx=np.arange(20, 30), num_classes=3)
    return {"model": _tiny_model, "args": (np.array([0, 1, 2]), data), "kwargs": {},
            "forward_input": rng.random((5, 4))}


def check_model_outputs(model: Any, data: UnlearningData, owner: str) -> None:
    """The model must have one output per class of ``data`` (labels index its outputs)."""
    import torch

    with torch.no_grad():
        was = model.training
        model.eval()
        try:
            out = model(torch.as_tensor(np.asarray(data.X[:1]), device=device_of(model)))
        finally:
            model.train(was)
    n_out = int(out.shape[-1]) if out.ndim >= 2 else 1
    if n_out != data.num_classes:
        raise InputError(f"The 'model' argument of {owner} has {n_out} outputs, but the data has "
                         f"{data.num_classes} classes (labels in [0, {data.num_classes})); they must match.")


@dataclass
class UnlearnInfo(EditInfo):
    """What an unlearning edit did (``handle.info``). Fields a method does not use stay None."""

    n_forget: int = 0
    n_retain: int = 0
    use_remain: bool = False
    n_finetune: int | None = None
    adv: dict[str, Any] | None = None
    adv_build_s: float | None = None
    finetune_s: float | None = None
    mask_fraction: float | None = None
    bs_label_changed: float | None = None
    epochs_run: int | None = None


class Unlearner(ModelEdit):
    """Base of the unlearning edits. Subclasses implement ``_unlearn(model, parts, info)``.

    ``parts`` holds tensors ``Xr, yr`` (retain), ``Xf, yf`` (forget), plus ``data``/``forget_idx``.
    """

    paper: ClassVar[PaperInfo] = PAPER
    tags: ClassVar[dict[str, Any]] = {"stochastic": True, "requires": ("torch",)}
    _constraints: ClassVar[dict[str, list[Any]]] = dict(_COMMON)
    _info_class = UnlearnInfo

    def __init__(self, *, lr: float = 0.05, epochs: int = 10, batch_size: int = 64, momentum: float = 0.9,
                 weight_decay: float = 5e-4, lr_step: int | None = None, use_remain: bool = True,
                 random_state: Any = None) -> None:
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.lr_step = lr_step
        self.use_remain = use_remain
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"epochs": 2, "random_state": 0}]

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        return _tiny_inputs()

    # -- helpers ------------------------------------------------------------------------------------
    def _spec(self) -> SGDSpec:
        return SGDSpec(epochs=self.epochs, lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay,
                       batch_size=self.batch_size, lr_step=self.lr_step)

    def _seed(self) -> int:
        return int(self._rng.integers(0, 2**31 - 1))

    def _apply(self, model: Any, handle: EditHandle, forget_idx: Any, data: Any) -> None:
        import torch

        owner = f"{type(self).__name__}.apply"
        data = as_unlearning_data(data, owner)
        f = check_forget_idx(forget_idx, data, owner)
        check_model_outputs(model, data, owner)
        r = data.retain_idx(f)
        dev = device_of(model)

        def t(a: Any, dt: Any = torch.float32) -> Any:
            return torch.as_tensor(np.asarray(a), dtype=dt, device=dev)

        parts = {"Xr": t(data.X[r]), "yr": t(data.y[r], torch.int64), "Xf": t(data.X[f]),
                 "yf": t(data.y[f], torch.int64), "data": data, "forget_idx": f, "retain_idx": r}
        info: dict[str, Any] = {"method": type(self).__name__, "n_forget": int(len(f)), "n_retain": int(len(r)),
                                "use_remain": bool(self.use_remain)}
        was = model.training
        try:
            with limit_threads(1):
                self._unlearn(model, parts, info)
        finally:
            model.train(was)
        info.pop("method", None)
        for key, value in info.items():
            setattr(handle.info, key, value)

    def _unlearn(self, model: Any, parts: dict[str, Any], info: dict[str, Any]) -> None:  # pragma: no cover
        raise NotImplementedError

    def _train_on(self, model: Any, X: Any, y: Any, *, grad_mask: Any = None, l1: float = 0.0,
                  relabel: Any = None) -> None:
        """Minibatch SGD over (X, y) for ``self.epochs`` (the shared loop, :func:`trustlab.models.train_epoch`);
        ``relabel(epoch, gen) -> y`` redraws labels each epoch; ``grad_mask`` (name -> 0/1 tensor) masks
        gradients; ``l1`` adds alpha_e * ||theta||_1 with the linear decay alpha_e = l1 * (1 - e/E)."""
        import torch

        opt, sched = make_optimizer(model, self._spec().train_config())
        gen = torch.Generator().manual_seed(self._seed())
        owner = type(self).__name__
        params = dict(model.named_parameters())

        def check(loss: Any) -> None:
            check_finite(loss, owner, "fine-tuning")

        def mask_grads() -> None:
            for name, m in grad_mask.items():
                if params[name].grad is not None:
                    params[name].grad.mul_(m)

        for epoch in range(self.epochs):
            model.train()
            yy = relabel(epoch, gen) if relabel is not None else y
            alpha = l1 * (1.0 - epoch / self.epochs)
            extra = (lambda a=alpha: a * sum(p.abs().sum() for p in model.parameters())) if l1 else None
            train_epoch(model, X, yy, opt, batch_size=self.batch_size, generator=gen, extra_loss=extra,
                        after_backward=mask_grads if grad_mask is not None else None, check_loss=check)
            if sched is not None:
                sched.step()
        model.eval()


def _cat(*pairs: tuple[Any, Any]) -> tuple[Any, Any]:
    import torch

    pairs = tuple(p for p in pairs if p[0] is not None and len(p[0]))
    return torch.cat([p[0] for p in pairs]), torch.cat([p[1] for p in pairs])


def _other_labels(y: Any, k: int, gen: Any) -> Any:
    """A label drawn uniformly from the k-1 labels different from y."""
    import torch

    shift = torch.randint(1, k, (len(y),), generator=gen).to(y.device)
    return (y + shift) % k


class AMUN(Unlearner):
    """AMUN: fine-tune on adversarial examples of the forget set, labelled with their (wrong) predictions.

    ``variant="amun"``: D_R u D_F u D_A (the paper's main method; without D_R: D_F u D_A).
    ``variant="advonly"``: D_R u D_A (without D_R: D_A alone), the paper's choice "when D_F is very large".
    D_A is built once on the original model by Algorithm 1 (:func:`adversarial_set`, cached); ``eps_init=None``
    picks it by the paper's 95 %-pilot rule. Capped points (never misclassified) are dropped from D_A unless
    ``keep_failed``.

    Examples
    --------
    >>> from trustlab.methods.amun import AMUN, UnlearningData
    >>> handle = AMUN(epochs=2, random_state=0).apply(model, forget_idx, data)  # doctest: +SKIP
    >>> handle.info.adv["success_rate"]  # doctest: +SKIP
    >>> handle.restore()  # doctest: +SKIP
    """

    _constraints: ClassVar[dict[str, list[Any]]] = {
        **_COMMON, "variant": [{"amun", "advonly"}], "eps_init": [Interval("real", 0, None, closed="neither"), None],
        "steps": [Interval(int, 1, None)], "max_doublings": [Interval(int, 0, 30)], "keep_failed": ["boolean"],
    }

    def __init__(self, *, variant: str = "amun", use_remain: bool = True, lr: float = 0.05, epochs: int = 10,
                 batch_size: int = 64, momentum: float = 0.9, weight_decay: float = 5e-4, lr_step: int | None = None,
                 eps_init: float | None = None, steps: int = 50, max_doublings: int = 12, keep_failed: bool = False,
                 random_state: Any = None) -> None:
        super().__init__(lr=lr, epochs=epochs, batch_size=batch_size, momentum=momentum, weight_decay=weight_decay,
                         lr_step=lr_step, use_remain=use_remain, random_state=random_state)
        self.variant = variant
        self.eps_init = eps_init
        self.steps = steps
        self.max_doublings = max_doublings
        self.keep_failed = keep_failed

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"epochs": 2, "eps_init": 0.2, "steps": 5, "random_state": 0},
                {"variant": "advonly", "use_remain": False, "epochs": 2, "steps": 5, "random_state": 0}]

    def _unlearn(self, model: Any, parts: dict[str, Any], info: dict[str, Any]) -> None:
        import torch

        from trustlab.methods.amun._adversarial import adversarial_set, choose_eps_init

        data: UnlearningData = parts["data"]
        f = parts["forget_idx"]
        t0 = time.perf_counter()
        eps0 = self.eps_init
        if eps0 is None:
            eps0 = choose_eps_init(model, data.X[f], data.y[f], steps=self.steps, input_range=data.input_range,
                                   random_state=self._seed())
        D = adversarial_set(model, data.X[f], data.y[f], eps0, self.steps, self.max_doublings,
                            input_range=data.input_range)
        info["adv_build_s"] = time.perf_counter() - t0
        info["adv"] = {**D.summary(), "eps_init": float(eps0), "from_cache": D.from_cache}
        keep = np.ones(len(f), bool) if self.keep_failed else ~D.capped
        info["adv"]["n_used"] = int(keep.sum())
        dev = parts["Xf"].device
        Xa = torch.as_tensor(D.x_adv[keep], device=dev)
        ya = torch.as_tensor(D.y_adv[keep], device=dev)
        sets = [(Xa, ya)]
        if self.variant == "amun":
            sets.append((parts["Xf"], parts["yf"]))
        if self.use_remain:
            sets.append((parts["Xr"], parts["yr"]))
        X, y = _cat(*sets)
        info["n_finetune"] = int(len(X))
        t1 = time.perf_counter()
        self._train_on(model, X, y)
        info["finetune_s"] = time.perf_counter() - t1


class Retrain(Unlearner):
    """The oracle: re-initialise the weights (``reset_parameters``, seeded) and train on D_R from scratch.

    ``target_accuracy`` (optional) stops training after the first epoch whose accuracy on D_R reaches it
    (at most ``epochs``): "retrain until as accurate as the original model" instead of a fixed epoch count.
    ``handle.info.epochs_run`` records the epochs trained."""

    _constraints: ClassVar[dict[str, list[Any]]] = {
        **_COMMON, "target_accuracy": [Interval("real", 0, 1, closed="right"), None]}

    def __init__(self, *, lr: float = 0.05, epochs: int = 60, batch_size: int = 64, momentum: float = 0.9,
                 weight_decay: float = 0.0, lr_step: int | None = None, use_remain: bool = True,
                 target_accuracy: float | None = None, random_state: Any = None) -> None:
        super().__init__(lr=lr, epochs=epochs, batch_size=batch_size, momentum=momentum, weight_decay=weight_decay,
                         lr_step=lr_step, use_remain=use_remain, random_state=random_state)
        self.target_accuracy = target_accuracy

    def _unlearn(self, model: Any, parts: dict[str, Any], info: dict[str, Any]) -> None:
        n_reset = 0
        with isolated_global_rng(self._seed()):  # reset_parameters draws from torch's global RNG
            for m in model.modules():
                if hasattr(m, "reset_parameters"):
                    m.reset_parameters()
                    n_reset += 1
        if n_reset == 0:
            raise UnsupportedModelError(f"Retrain needs modules with reset_parameters(); {type(model).__name__} has none.")
        data, r = parts["data"], parts["retain_idx"]
        hist = sgd_train(model, data.X[r], data.y[r], self._spec(), random_state=self._seed(), num_threads=None,
                         target_accuracy=self.target_accuracy)
        info["epochs_run"] = hist.epochs_run


class FineTune(Unlearner):
    """FT: continue training on D_R only (catastrophic forgetting of D_F). Needs ``use_remain=True``."""

    def _unlearn(self, model: Any, parts: dict[str, Any], info: dict[str, Any]) -> None:
        if not self.use_remain:
            raise ConfigError("FineTune needs the remain set: use_remain=True.")
        self._train_on(model, parts["Xr"], parts["yr"])


class L1Sparse(Unlearner):
    """l1-sparse: FT plus alpha_e * ||theta||_1 with alpha_e = alpha * (1 - e/E) (the paper's linear decay)."""

    _constraints: ClassVar[dict[str, list[Any]]] = {**_COMMON, "alpha": _POS}

    def __init__(self, *, alpha: float = 5e-4, lr: float = 0.05, epochs: int = 10, batch_size: int = 64,
                 momentum: float = 0.9, weight_decay: float = 5e-4, lr_step: int | None = None,
                 use_remain: bool = True, random_state: Any = None) -> None:
        super().__init__(lr=lr, epochs=epochs, batch_size=batch_size, momentum=momentum, weight_decay=weight_decay,
                         lr_step=lr_step, use_remain=use_remain, random_state=random_state)
        self.alpha = alpha

    def _unlearn(self, model: Any, parts: dict[str, Any], info: dict[str, Any]) -> None:
        if not self.use_remain:
            raise ConfigError("L1Sparse needs the remain set: use_remain=True.")
        self._train_on(model, parts["Xr"], parts["yr"], l1=self.alpha)


class GradientAscent(Unlearner):
    """GA: each epoch, one descent pass over D_R (if ``use_remain``) then one ascent pass (-CE) over D_F.
    A non-finite loss raises :class:`UnlearningDivergedError` (the weights are restored)."""

    def _unlearn(self, model: Any, parts: dict[str, Any], info: dict[str, Any]) -> None:
        import torch
        import torch.nn.functional as F

        opt, sched = make_optimizer(model, self._spec().train_config())
        gen = torch.Generator().manual_seed(self._seed())
        owner = type(self).__name__

        def checker(what: str) -> Any:
            return lambda loss: check_finite(loss, owner, what)

        for _ in range(self.epochs):
            model.train()
            passes = ([(parts["Xr"], parts["yr"], 1.0)] if self.use_remain else []) + [(parts["Xf"], parts["yf"], -1.0)]
            for X, y, sign in passes:
                train_epoch(model, X, y, opt, batch_size=self.batch_size, generator=gen, sign=sign,
                            check_loss=checker("ascent" if sign < 0 else "descent"))
            if sched is not None:
                sched.step()
        model.eval()
        with torch.no_grad():
            check_finite(F.cross_entropy(model(parts["Xf"]), parts["yf"]), owner, "final forget")


class RandomLabel(Unlearner):
    """RL: D_R u {(x, y')} with y' drawn uniformly from the labels != y, freshly every epoch."""

    def _relabel_sets(self, parts: dict[str, Any]) -> tuple[Any, Any, Any]:
        import torch

        k = parts["data"].num_classes
        nf = len(parts["Xf"])
        if self.use_remain:
            X = torch.cat([parts["Xf"], parts["Xr"]])
            y = torch.cat([parts["yf"], parts["yr"]])
        else:
            X, y = parts["Xf"], parts["yf"]

        def relabel(epoch: int, gen: Any) -> Any:
            out = y.clone()
            out[:nf] = _other_labels(y[:nf], k, gen)
            return out

        return X, y, relabel

    def _unlearn(self, model: Any, parts: dict[str, Any], info: dict[str, Any]) -> None:
        X, y, relabel = self._relabel_sets(parts)
        self._train_on(model, X, y, relabel=relabel)


class SalUn(RandomLabel):
    """SalUn: RL whose gradients are multiplied by a saliency mask, the top ``mask_ratio`` fraction (over all
    parameters) of |grad of the forget loss| at the original weights."""

    _constraints: ClassVar[dict[str, list[Any]]] = {**_COMMON, "mask_ratio": [Interval("real", 0, 1, closed="right")]}

    def __init__(self, *, mask_ratio: float = 0.5, lr: float = 0.05, epochs: int = 10, batch_size: int = 64,
                 momentum: float = 0.9, weight_decay: float = 5e-4, lr_step: int | None = None,
                 use_remain: bool = True, random_state: Any = None) -> None:
        super().__init__(lr=lr, epochs=epochs, batch_size=batch_size, momentum=momentum, weight_decay=weight_decay,
                         lr_step=lr_step, use_remain=use_remain, random_state=random_state)
        self.mask_ratio = mask_ratio

    @staticmethod
    @validate_args(model=MODEL_RULE, X=[ArrayLike(ndim=(2, 3, 4))], y=[ArrayLike(ndim=1, dtype="integer", low=0)],
                   ratio=[Interval(float, 0, 1, closed="right")])
    def saliency_mask(model: Any, X: Any, y: Any, ratio: float) -> dict[str, Any]:
        import torch
        import torch.nn.functional as F

        model.eval()
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        loss = -F.cross_entropy(model(X), y, reduction="sum")
        grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
        mags = [torch.zeros_like(p) if g is None else g.abs() for (_, p), g in zip(named, grads)]
        flat = torch.cat([m.flatten() for m in mags])
        n_keep = max(1, int(round(ratio * flat.numel())))
        thresh = torch.topk(flat, n_keep, sorted=True).values[-1]
        return {n: (m >= thresh).to(p.dtype) for (n, p), m in zip(named, mags)}

    def _unlearn(self, model: Any, parts: dict[str, Any], info: dict[str, Any]) -> None:
        mask = self.saliency_mask(model, parts["Xf"], parts["yf"], float(self.mask_ratio))
        info["mask_fraction"] = float(sum(float(m.sum()) for m in mask.values()) / sum(m.numel() for m in mask.values()))
        X, y, relabel = self._relabel_sets(parts)
        self._train_on(model, X, y, relabel=relabel, grad_mask=mask)


class BoundaryShrink(Unlearner):
    """BS: FGSM (L-inf, ``bound``) on a frozen copy of the model; each forget point is relabelled with the copy's
    prediction on its FGSM image and the model is fine-tuned on (x, that label) (plus D_R if ``use_remain``)."""

    _constraints: ClassVar[dict[str, list[Any]]] = {**_COMMON, "bound": _POS}

    def __init__(self, *, bound: float = 0.1, lr: float = 0.05, epochs: int = 10, batch_size: int = 64,
                 momentum: float = 0.9, weight_decay: float = 5e-4, lr_step: int | None = None,
                 use_remain: bool = True, random_state: Any = None) -> None:
        super().__init__(lr=lr, epochs=epochs, batch_size=batch_size, momentum=momentum, weight_decay=weight_decay,
                         lr_step=lr_step, use_remain=use_remain, random_state=random_state)
        self.bound = bound

    def _unlearn(self, model: Any, parts: dict[str, Any], info: dict[str, Any]) -> None:
        import copy

        import torch
        import torch.nn.functional as F

        lo, hi = parts["data"].input_range
        frozen = copy.deepcopy(model).eval()
        x = parts["Xf"].clone().requires_grad_(True)
        (g,) = torch.autograd.grad(F.cross_entropy(frozen(x), parts["yf"]), x)
        with torch.no_grad():
            x_fgsm = (parts["Xf"] + self.bound * g.sign()).clamp(lo, hi)
            y_new = frozen(x_fgsm).argmax(1)
        info["bs_label_changed"] = float((y_new != parts["yf"]).float().mean())
        sets = [(parts["Xf"], y_new)] + ([(parts["Xr"], parts["yr"])] if self.use_remain else [])
        X, y = _cat(*sets)
        self._train_on(model, X, y)
