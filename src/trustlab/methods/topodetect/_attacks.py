"""Image-side attacks on zero-shot logits: FGSM and L-inf PGD from torchattacks.

``generate((X, y), budget)``: X images in [0, 1] (n, 1, H, W) or (n, H, W), y the true class indices;
``budget`` the L-inf radius. Any module whose ``forward`` returns logits works (MiniCLIP's zero-shot
logits, or the user's own CLIP wrapper). Outputs are re-projected (float64) onto the ball and the box, so
each image's cost stays within the budget; ``success`` = the zero-shot prediction changed away from y.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from trustlab.core.constraints import Boolean, Interval
from trustlab.core.exceptions import InputError
from trustlab.core.optional import require
from trustlab.core.roles import Attack, AttackResult
from trustlab.methods.topodetect._paper import PAPER

torch = require("torch", extra="topo", purpose="trustlab.methods.topodetect")

__all__ = ["ZeroShotFGSM", "ZeroShotPGD"]


def _tiny_logits_model() -> Any:
    g = torch.Generator().manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return net.eval()


class _ZeroShotAttack(Attack):
    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {"stochastic": True, "requires": ("torch", "torchattacks")}

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        rng = np.random.default_rng(0)
        return {"inputs": (rng.random((4, 1, 4, 4)), np.array([0, 1, 2, 0])), "budget": 0.1}

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"model": _tiny_logits_model()}]

    def _generate(self, inputs: Any, budget: float) -> AttackResult:
        own = f"{type(self).__name__}.generate"
        if not isinstance(inputs, tuple | list) or len(inputs) != 2:
            raise InputError(f"The 'inputs' argument of {own} must be a pair (X, y). Got {type(inputs).__name__}.")
        X = np.asarray(inputs[0], dtype=np.float64)
        y = np.asarray(inputs[1])
        X4 = X[:, None] if X.ndim == 3 else X
        if X4.ndim != 4 or not np.isfinite(X4).all() or X4.min() < 0 or X4.max() > 1:
            raise InputError(f"The images in 'inputs' of {own} must be finite, in [0, 1], shaped (n, C, H, W) or "
                             f"(n, H, W). Got shape {X.shape} instead.")
        if y.shape != (len(X4),) or y.dtype.kind not in "iu" or (y < 0).any():
            raise InputError(f"The labels in 'inputs' of {own} must be {len(X4)} ints >= 0. Got shape {y.shape}, "
                             f"dtype {y.dtype} instead.")
        if budget > 1:
            raise InputError(f"The 'budget' argument of {own} must be an L-inf radius in [0, 1]. Got {budget}.")
        model = self.model
        was = model.training
        model.eval()
        try:
            xt = torch.as_tensor(X4, dtype=torch.float32)
            yt = torch.as_tensor(y, dtype=torch.long)
            with torch.no_grad():
                k = int(model(xt[:1]).shape[1])
            if int(y.max()) >= k:
                raise InputError(f"The labels in 'inputs' of {own} must be < {k} (the model's outputs). Got "
                                 f"{int(y.max())} instead.")
            adv = xt.clone() if budget == 0 else self._attack(model, xt, yt, budget)
            adv64 = np.clip(X4 + np.clip(adv.detach().numpy().astype(np.float64) - X4, -budget, budget), 0, 1)
            with torch.no_grad():
                pred = model(torch.as_tensor(adv64, dtype=torch.float32)).argmax(1).numpy()
        finally:
            model.train(was)
        cost = np.abs(adv64 - X4).reshape(len(X4), -1).max(1)
        out = adv64[:, 0] if X.ndim == 3 else adv64
        return AttackResult(out, budget, cost, pred != y, {"attack": type(self).__name__})


class ZeroShotFGSM(_ZeroShotAttack):
    """FGSM (torchattacks ``FGSM``) on zero-shot logits, L-inf radius = budget."""

    _constraints: ClassVar[dict[str, list[Any]]] = {"model": [torch.nn.Module], "random_state": ["random_state"]}

    def __init__(self, *, model: Any = None, random_state: Any = None) -> None:
        self.model = model
        self.random_state = random_state

    def _attack(self, model: Any, x: Any, y: Any, eps: float) -> Any:
        ta = require("torchattacks", extra="topo")
        return ta.FGSM(model, eps=eps)(x, y)


class ZeroShotPGD(_ZeroShotAttack):
    """L-inf PGD (torchattacks ``PGD``): ``steps`` steps of ``step_size * budget``, random start optional."""

    _constraints: ClassVar[dict[str, list[Any]]] = {
        "model": [torch.nn.Module], "steps": [Interval(int, 1, None)],
        "step_size": [Interval(float, 0, None, closed="neither")], "random_start": [Boolean()],
        "random_state": ["random_state"]}

    def __init__(self, *, model: Any = None, steps: int = 10, step_size: float = 0.25, random_start: bool = True,
                 random_state: Any = None) -> None:
        self.model = model
        self.steps = steps
        self.step_size = step_size
        self.random_start = random_start
        self.random_state = random_state

    def _attack(self, model: Any, x: Any, y: Any, eps: float) -> Any:
        ta = require("torchattacks", extra="topo")
        return ta.PGD(model, eps=eps, alpha=self.step_size * eps, steps=self.steps,
                      random_start=self.random_start)(x, y)
