"""The local-stability measure S_{k,sigma}(x) and its Bernstein guarantee.

    S_{k,sigma}(x, f) = (1/k) sum_i [ f(e_i) - |f(e(x)) - f(e_i)| ],   e_i ~ neighbourhood of e(x)

where f is the probability of the class predicted at x. Each term equals ``min(f(x), 2 f(e_i) - f(x))``
(:func:`stability_terms`). With V_x = Var f(e_i), Bernstein's inequality gives

    Pr( E_{f'}[f'(x)] >= S - eps ) >= 1 - exp( -k eps^2 / (8 V_x + 4 eps / 3) )

under the paper's assumption that a randomly fine-tuned model's expected output at x is at least the
expected neighbourhood output (:func:`bernstein_bound`).

The embedding space is the model's: the cached replay input of a :class:`TabularLLMClassifier`
(``space="cached"``) or its token embeddings (``space="embedding"``); for a torch module or any estimator
with ``predict_proba`` it is the input itself. Neighbours are drawn per position (token or row): a
uniform direction on the sphere of radius ``sigma * ||e_t||`` (``relative=True``) or ``sigma``
(``sampler="sphere"``), or Gaussian with that expected norm (``sampler="gaussian"``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import AnyValue, Boolean, Interval, Options, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.seeding import torch_generator

__all__ = ["StabilityResult", "local_stability", "bernstein_bound", "stability_terms"]


@dataclass
class StabilityResult:
    """Per-point local stability. ``S`` the measure, ``f_x`` the model's probability of its predicted class
    ``label`` at x, ``neighbour_mean`` mean f(e_i), ``neighbour_var`` V_x, ``bound`` the Bernstein lower
    bound on Pr(E f'(x) >= S - eps)."""

    S: np.ndarray
    f_x: np.ndarray
    label: np.ndarray
    neighbour_mean: np.ndarray
    neighbour_var: np.ndarray
    bound: np.ndarray
    k: int
    sigma: float
    eps: float
    space: str
    wall_time_s: float = 0.0


@validate_args(f_x=[ArrayLike(low=0, high=1)], f_neighbours=[ArrayLike(low=0, high=1)])
def stability_terms(f_x: Any, f_neighbours: Any) -> np.ndarray:
    """Z_i = f(e_i) - |f(x) - f(e_i)| for f_x [n] and f_neighbours [n, k] (= min(f(x), 2 f(e_i) - f(x))).

    Examples
    --------
    >>> stability_terms([0.8], [[0.9, 0.6]]).round(3).tolist()
    [[0.8, 0.4]]
    """
    fx = np.asarray(f_x, dtype=np.float64).reshape(-1, 1)
    fn = np.asarray(f_neighbours, dtype=np.float64)
    if fn.ndim != 2 or fn.shape[0] != fx.shape[0]:
        raise InputError(f"stability_terms: f_neighbours must be [n, k] with n = {fx.shape[0]}. Got {fn.shape}.")
    return fn - np.abs(fx - fn)


@validate_args(k=[Interval(int, 1, None)], eps=[Interval(float, 0, None, closed="neither")],
               variance=[ArrayLike(low=0)])
def bernstein_bound(k: int, eps: float, variance: Any) -> np.ndarray:
    """``1 - exp(-k eps^2 / (8 V + 4 eps / 3))`` for each V in ``variance``.

    Examples
    --------
    >>> float(bernstein_bound(16, 0.1, 0.0).round(4))
    0.6988
    """
    v = np.asarray(variance, dtype=np.float64)
    return 1.0 - np.exp(-k * eps**2 / (8.0 * v + 4.0 * eps / 3.0))


class _Space:
    """An embedding space: ``embed(rows) -> (E [b, T, d], mask [b, T] bool)``, ``proba(rows, E) -> [b', C]``
    where E may hold several perturbed copies per row (rows repeated)."""

    def __init__(self, n: int, embed: Any, proba: Any):
        self.n, self.embed, self.proba = n, embed, proba


def _vector_space(X: Any, proba_fn: Any, torch: Any) -> _Space:
    E = torch.as_tensor(np.asarray(X, dtype=np.float32))
    if E.ndim != 2:
        raise InputError(f"local_stability: 'X' must be a 2-d array for this model. Got shape {tuple(E.shape)}.")

    def embed(rows: Any) -> tuple[Any, Any]:
        e = E[torch.as_tensor(rows)][:, None, :]
        return e, torch.ones(e.shape[:2], dtype=torch.bool)

    def proba(rows: Any, e: Any) -> Any:
        return proba_fn(e[:, 0, :])

    return _Space(len(E), embed, proba)


def _space_of(model: Any, X: Any, space: str, torch: Any) -> _Space:
    if hasattr(model, "_stability_space"):
        return model._stability_space(X, space)
    if isinstance(model, torch.nn.Module):
        def proba_fn(e: Any) -> Any:
            was = model.training
            model.eval()
            try:
                with torch.no_grad():
                    return torch.softmax(model(e).float(), dim=-1)
            finally:
                model.train(was)

        return _vector_space(X, proba_fn, torch)
    if hasattr(model, "predict_proba"):
        return _vector_space(X, lambda e: torch.as_tensor(np.asarray(model.predict_proba(e.numpy()), dtype=np.float32)),
                             torch)
    raise InputError(f"local_stability needs a TabularLLMClassifier, a torch module returning logits or an estimator "
                     f"with predict_proba. Got {type(model).__name__}.")


def _neighbours(e: Any, mask: Any, k: int, sigma: float, relative: bool, sampler: str, gen: Any, torch: Any) -> Any:
    """k perturbed copies of each row of e [b, T, d] -> [b * k, T, d] (row-major: row 0's k copies first)."""
    b, t, d = e.shape
    rep = e.repeat_interleave(k, dim=0)
    noise = torch.randn(rep.shape, generator=gen, dtype=torch.float32).to(e.device, e.dtype)
    if sampler == "sphere":
        noise = noise / noise.norm(dim=-1, keepdim=True).clamp(min=1e-12)
    else:
        noise = noise / np.sqrt(d)
    scale = sigma * (rep.norm(dim=-1, keepdim=True) if relative else torch.ones_like(rep[..., :1]))
    m = mask.repeat_interleave(k, dim=0)[..., None].to(e.dtype)
    return rep + noise * scale * m


def _is_torch_module(m: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(m, torch.nn.Module)


_RULES = dict(
    X=[AnyValue("rows: a table for the LLM classifier (its _validate_X checks it), a 2-d numeric array "
                "otherwise (checked when it becomes a float tensor)")],
    model=[Satisfies(lambda m: not isinstance(m, type) and (hasattr(m, "_stability_space") or hasattr(m, "predict_proba")
                                                            or _is_torch_module(m)),
                     "a fitted TabularLLMClassifier, a torch module returning logits or an estimator with predict_proba",
                     invalid=[None, "model", 3])], k=[Interval(int, 2, None)],
    sigma=[Interval(float, 0, None, closed="neither")], space=[Options(("cached", "embedding"))],
    relative=[Boolean()], sampler=[Options(("sphere", "gaussian"))], eps=[Interval(float, 0, None, closed="neither")],
    batch_size=[Interval(int, 1, None)], random_state=["random_state"],
)


@validate_args(_example=lambda: _example(), **_RULES)
def local_stability(model: Any, X: Any, k: int = 16, sigma: float = 0.05, *, space: str = "cached",
                    relative: bool = True, sampler: str = "sphere", eps: float = 0.1, batch_size: int = 8,
                    random_state: Any = 0) -> StabilityResult:
    """S_{k,sigma}(x) for every row of X, with the Bernstein lower bound at ``eps``.

    Parameters
    ----------
    model : fitted TabularLLMClassifier, torch module returning logits, or estimator with predict_proba
    X : rows (a table for the LLM classifier, a 2-d numeric array otherwise)
    k : int >= 2
        Neighbours per point.
    sigma : float > 0
        Neighbourhood radius (relative to each position's norm when ``relative``).
    space : {"cached", "embedding"}
        For the LLM classifier: the cached replay input (cheap) or the token embeddings (a full forward per
        neighbour). Other models use their input.
    relative, sampler, eps, batch_size, random_state
        See the module docstring; ``batch_size`` points per forward (each with k neighbours).

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Linear(2, 2)
    >>> res = local_stability(net, [[0.0, 1.0], [1.0, 0.0]], k=4, sigma=0.1, relative=False)
    >>> res.S.shape
    (2,)
    """
    import time

    import torch

    t0 = time.perf_counter()
    sp = _space_of(model, X, space, torch)
    gen = torch_generator(random_state)
    f_x, lab, fnb = np.zeros(sp.n), np.zeros(sp.n, dtype=np.int64), np.zeros((sp.n, k))
    for s in range(0, sp.n, batch_size):
        rows = np.arange(s, min(s + batch_size, sp.n))
        e, mask = sp.embed(rows)
        if not torch.isfinite(e).all():
            raise InputError("local_stability: the embeddings of X contain NaN or inf.")
        p0 = sp.proba(rows, e).double().cpu().numpy()
        c = p0.argmax(1)
        nb = _neighbours(e, mask, k, float(sigma), relative, sampler, gen, torch)
        p = sp.proba(np.repeat(rows, k), nb).double().cpu().numpy().reshape(len(rows), k, -1)
        f_x[rows], lab[rows] = p0[np.arange(len(rows)), c], c
        fnb[rows] = p[np.arange(len(rows)), :, c]
    Z = stability_terms(f_x, np.clip(fnb, 0.0, 1.0))
    var = fnb.var(axis=1)
    return StabilityResult(S=Z.mean(1), f_x=f_x, label=lab, neighbour_mean=fnb.mean(1), neighbour_var=var,
                           bound=bernstein_bound(k, float(eps), var), k=k, sigma=float(sigma), eps=float(eps),
                           space=space if hasattr(model, "_stability_space") else "input",
                           wall_time_s=time.perf_counter() - t0)


def _example() -> dict[str, Any]:
    import torch

    return {"model": torch.nn.Linear(2, 2), "X": [[0.0, 1.0], [1.0, 0.0]]}
