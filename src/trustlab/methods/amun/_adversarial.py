"""Algorithm 1 of AMUN: untargeted PGD-L2 with per-sample epsilon doubling, cached by content hash."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.base import state_dict_hash
from trustlab.core.constraints import Interval
from trustlab.core.exceptions import InputError
from trustlab.core.hashing import content_hash
from trustlab.core.seeding import as_seed, seed_alias
from trustlab.core.threads import limit_threads
from trustlab.methods.amun._data import MODEL_RULE, POSITIVE_FINITE, RANGE_RULE, as_int64
from trustlab.models import MLP, device_of

__all__ = ["AdversarialSet", "adversarial_set", "choose_eps_init", "clear_adversarial_cache"]

_CACHE: OrderedDict[str, AdversarialSet] = OrderedDict()
_CACHE_SIZE = 64


@dataclass(frozen=True)
class AdversarialSet:
    """D_A for a set of inputs.

    ``x_adv`` (same shape as X), ``y_adv`` = argmax F(x_adv), ``eps`` = eps_init * 2**n_doublings (the final
    radius), ``norms`` = ||x_adv - x||_2, ``success`` (y_adv != y), ``pre_misclassified`` (x_adv = x, delta 0),
    ``capped`` (still correct after ``max_doublings`` doublings; kept with y_adv = y).
    """

    x_adv: np.ndarray
    y_adv: np.ndarray
    eps: np.ndarray
    norms: np.ndarray
    n_doublings: np.ndarray
    success: np.ndarray
    pre_misclassified: np.ndarray
    capped: np.ndarray
    eps_init: float
    steps: int
    max_doublings: int
    key: str = ""
    from_cache: bool = False
    wall_time_s: float = 0.0
    info: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def failed_idx(self) -> np.ndarray:
        """Positions (into the given X) where the attack was capped without success."""
        return np.flatnonzero(self.capped)

    def summary(self) -> dict[str, float]:
        return {"n": int(len(self.y_adv)), "success_rate": float(self.success.mean()),
                "n_capped": int(self.capped.sum()), "n_pre_misclassified": int(self.pre_misclassified.sum()),
                "mean_norm": float(self.norms.mean()), "median_eps": float(np.median(self.eps)),
                "mean_doublings": float(self.n_doublings.mean()), "wall_time_s": float(self.wall_time_s)}


@validate_args()
def clear_adversarial_cache() -> None:
    """Forget every cached adversarial set (the cache holds the 64 most recent)."""
    _CACHE.clear()


def _content_key(model: Any, X: np.ndarray, y: np.ndarray, schedule: tuple[Any, ...]) -> str:
    return content_hash(type(model).__qualname__, state_dict_hash(model), X, y, repr(schedule))


def _n_outputs(model: Any, x: np.ndarray, owner: str = "adversarial_set") -> int:
    """Outputs of ``model`` on one row of ``x``; a row the model cannot take is the user's shape error."""
    import torch

    try:
        with torch.no_grad():
            out = model(torch.as_tensor(x[:1], device=device_of(model)))
    except (RuntimeError, ValueError) as exc:  # torch's "mat1 and mat2 shapes cannot be multiplied" and kin
        raise InputError(f"The 'X' argument of {owner} does not fit the model: a row of shape {tuple(x.shape[1:])} "
                         f"({x.shape[1] if x.ndim == 2 else 'per-row'} features) failed in its forward pass "
                         f"({str(exc).splitlines()[0]}). Pass data with the features the model was built for.") from None
    return int(out.shape[-1]) if out.ndim >= 2 else 1


def _validate(model: Any, X: Any, y: Any, input_range: Any, owner: str) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The semantic checks the declared rules cannot make: lengths, the box, labels vs the model's outputs."""
    X = np.asarray(X).astype(np.float32)
    y = np.asarray(y)
    if len(y) != len(X):
        raise InputError(f"The 'y' argument of {owner} must be 1-d with {len(X)} labels. Got shape {y.shape}.")
    y = as_int64(y, f"The 'y' argument of {owner} must hold integer labels")
    lo, hi = (float(v) for v in input_range)
    tol = 1e-6 * (hi - lo)
    if X.min() < lo - tol or X.max() > hi + tol:
        raise InputError(f"The inputs of {owner} lie outside the declared input_range {(lo, hi)} "
                         f"(min {float(X.min()):.4g}, max {float(X.max()):.4g}).")
    X = np.clip(X, lo, hi)
    was = model.training
    model.eval()
    try:
        n_out = _n_outputs(model, X, owner)
    finally:
        model.train(was)
    if y.max() >= n_out:
        raise InputError(f"The 'y' argument of {owner} holds the label {int(y.max())}, but the model has {n_out} "
                         f"outputs: labels must lie in [0, {n_out}).")
    return X, y, lo, hi


def _example() -> dict[str, Any]:
    return {"model": MLP(2, 3, hidden=(4,)), "X": np.full((3, 2), 0.5), "y": np.array([0, 1, 2])}


_RULES: dict[str, Any] = {"model": MODEL_RULE, "X": [ArrayLike(ndim=(2, 3, 4, 5))],
                          "y": [ArrayLike(ndim=1, dtype="integer", low=0)], "steps": [Interval(int, 1, None)],
                          "input_range": [RANGE_RULE]}


def _attack_batch(model: Any, x0: Any, y: Any, eps_init: float, steps: int, max_doublings: int,
                  lo: float, hi: float) -> tuple[Any, ...]:
    """Algorithm 1 on one batch. The still-correct ("active") rows are kept as compact tensors (their current
    point, start point, label and radius) that shrink only when a row flips, instead of gathered from and
    scattered into the full batch at every step; each forward/backward sees the same rows in the same order
    as the gather/scatter loop did, so the result is bit-identical to it (tests/methods/test_amun.py)."""
    import torch
    import torch.nn.functional as F

    view = (-1,) + (1,) * (x0.ndim - 1)
    x = x0.clone()
    eps = torch.full((len(x0),), float(eps_init), dtype=x0.dtype, device=x0.device)
    k = torch.zeros(len(x0), dtype=torch.int64, device=x0.device)
    with torch.no_grad():
        pred = model(x0).argmax(1)
    done = pred != y
    pre = done.clone()
    y_adv = pred.clone()
    act = torch.nonzero(~done).flatten()  # global rows of the active set, increasing
    xa, x0a, ya, ea = x0[act], x0[act], y[act], eps[act]
    for r in range(max_doublings + 1):
        if act.numel() == 0:
            break
        if r > 0:  # still correct after `steps` steps: double the radius, continue from the current point
            ea = ea * 2.0
            k[act] += 1
        for t in range(steps + 1):
            if act.numel() == 0:
                break
            xg = xa.detach().requires_grad_(True)
            logits = model(xg)
            p = logits.argmax(1)
            flipped = p != ya
            n_flip = int(flipped.sum())
            if n_flip:
                fi = act[flipped]
                done[fi] = True
                y_adv[fi] = p[flipped].detach()
                x[fi], eps[fi] = xa[flipped], ea[flipped]
            if t == steps or n_flip == len(act):
                if n_flip:
                    keep = ~flipped
                    act, xa, x0a, ya, ea = act[keep], xa[keep], x0a[keep], ya[keep], ea[keep]
                continue
            loss = F.cross_entropy(logits, ya, reduction="sum")
            (g,) = torch.autograd.grad(loss, xg)
            g = g.detach()
            if n_flip:
                keep = ~flipped
                act, xa, x0a, ya, ea, g = act[keep], xa[keep], x0a[keep], ya[keep], ea[keep], g[keep]
            gn = g.flatten(1).norm(dim=1).clamp_min(1e-12)
            xi = xa + ((ea / 10.0) / gn).view(view) * g
            delta = xi - x0a
            dn = delta.flatten(1).norm(dim=1).clamp_min(1e-12)
            delta = delta * torch.clamp(ea / dn, max=1.0).view(view)
            xa = (x0a + delta).clamp(lo, hi)
    x[act], eps[act] = xa, ea
    capped = ~done
    if bool(capped.any()):
        y_adv[capped] = y[capped]
    return x.detach(), y_adv, eps, k, pre, capped


@validate_args(_example, **_RULES, eps_init=[POSITIVE_FINITE], max_doublings=[Interval(int, 0, 30)],
               batch_size=[Interval(int, 1, None)], use_cache=["boolean"], num_threads=[Interval(int, 1, None), None])
def adversarial_set(model: Any, X: Any, y: Any, eps_init: float, steps: int = 50, max_doublings: int = 12, *,
                    input_range: tuple[float, float] = (0.0, 1.0), batch_size: int = 512, use_cache: bool = True,
                    num_threads: int | None = 1) -> AdversarialSet:
    """Algorithm 1: for every (x, y), untargeted PGD-L2 (``steps`` steps of size eps/10, no random start,
    unit-L2 normalised gradient, projection on the eps-ball then clamping to ``input_range``) that stops as
    soon as argmax F(x') != y; if still correct after ``steps`` steps, eps doubles and the attack continues
    from the current x'. Points the model already misclassifies map to themselves (delta 0, y_adv = their
    wrong prediction). After ``max_doublings`` doublings a still-correct point is *capped*: kept with y_adv = y
    and reported in ``capped``.

    The model is put in eval mode and restored. Results are cached by a SHA-256 of (model weights, X, y,
    schedule); PGD has no random start, so the output is deterministic.

    Labels must index the model's outputs (``0 <= y < n_outputs``).

    Examples
    --------
    >>> import torch, numpy as np
    >>> _ = torch.manual_seed(0); net = torch.nn.Linear(4, 3)
    >>> X = np.random.default_rng(0).random((8, 4)).astype("float32"); y = np.zeros(8, dtype=int)
    >>> D = adversarial_set(net, X, y, eps_init=0.1)
    >>> bool(np.all(D.norms <= D.eps + 1e-5)) and bool(np.all((D.x_adv >= 0) & (D.x_adv <= 1)))
    True
    """
    import torch

    owner = "adversarial_set"
    X, y, lo, hi = _validate(model, X, y, input_range, owner)
    schedule = ("pgd-l2-doubling-v1", float(eps_init), int(steps), int(max_doublings), lo, hi)
    key = _content_key(model, X, y, schedule) if use_cache else ""
    if use_cache and key in _CACHE:
        _CACHE.move_to_end(key)
        hit = _CACHE[key]
        return replace(hit, x_adv=hit.x_adv.copy(), y_adv=hit.y_adv.copy(), from_cache=True)
    t0 = time.perf_counter()
    was_training = model.training
    model.eval()
    dev = device_of(model)
    outs = []
    try:
        with limit_threads(num_threads):
            for s in range(0, len(X), batch_size):
                x0 = torch.as_tensor(X[s:s + batch_size], device=dev)
                yt = torch.as_tensor(y[s:s + batch_size], device=dev)
                outs.append([t.cpu() for t in _attack_batch(model, x0, yt, float(eps_init), int(steps),
                                                            int(max_doublings), lo, hi)])
    finally:
        model.train(was_training)
    x_adv, y_adv, eps, k, pre, capped = (torch.cat([o[i] for o in outs]).numpy() for i in range(6))
    x_adv = x_adv.astype(np.float32)
    norms = np.sqrt(((x_adv.astype(np.float64) - X.astype(np.float64)).reshape(len(X), -1) ** 2).sum(1))
    eps_final = float(eps_init) * np.power(2.0, k)
    res = AdversarialSet(
        x_adv=x_adv, y_adv=y_adv.astype(np.int64), eps=eps_final, norms=norms, n_doublings=k.astype(np.int64),
        success=(y_adv != y), pre_misclassified=pre.astype(bool), capped=capped.astype(bool),
        eps_init=float(eps_init), steps=int(steps), max_doublings=int(max_doublings), key=key,
        wall_time_s=time.perf_counter() - t0,
    )
    if use_cache:
        _CACHE[key] = replace(res, x_adv=res.x_adv.copy(), y_adv=res.y_adv.copy())
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return res


@seed_alias
@validate_args(_example, **_RULES, target=[Interval("real", 0, 1, closed="right")], pilot=[Interval(int, 1, None)],
               start=[POSITIVE_FINITE, None], random_state=["random_state"])
def choose_eps_init(model: Any, X: Any, y: Any, *, target: float = 0.95, pilot: int = 100, steps: int = 50,
                    start: float | None = None, input_range: tuple[float, float] = (0.0, 1.0),
                    random_state: Any = 0) -> float:
    """The paper's App. E.1 rule: pick eps_init so that ~``target`` of a ``pilot``-sample succeed at eps_init.

    Runs Algorithm 1 on the pilot from a small ``start`` radius (default 1 % of the box diagonal) and returns
    the ``target`` quantile of the final radii (a power-of-two multiple of ``start``).
    """
    X, y, lo, hi = _validate(model, X, y, input_range, "choose_eps_init")
    rng = np.random.default_rng(as_seed(random_state))
    take = rng.choice(len(X), size=min(pilot, len(X)), replace=False)
    diag = (hi - lo) * float(np.sqrt(np.prod(X.shape[1:])))
    start = 0.01 * diag if start is None else float(start)
    D = adversarial_set(model, X[take], y[take], start, steps, max_doublings=16, input_range=(lo, hi),
                        use_cache=False)
    ok = ~D.pre_misclassified
    if not ok.any():
        return start
    return float(np.quantile(D.eps[ok], target, method="higher"))
