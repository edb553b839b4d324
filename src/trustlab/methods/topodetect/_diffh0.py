"""The differentiable H0 path and per-sample topological features.

H0 persistence of a Rips filtration = the edge lengths of a minimum spanning tree. The tree (the
persistence pairing) is found on detached distances (scipy), and the deaths are recomputed in torch as the
lengths of those critical edges, so gradients flow to the points incident to them (zero-length edges of
duplicated points get a zero gradient, never NaN). Ties make the pairing, and so the gradient, non-unique:
``jitter`` adds tiny fixed noise before the pairing is chosen.

:func:`topo_features` is the paper's per-sample signature ``g(x) = mean over M batches (x + N-1 clean
reference pairs) of d L_TC / d z_x`` with ``L_TC = |TP_H0(images) - TP_H0(texts)|`` (the cross-modal
contrast) or, with ``unimodal=True``, ``L = TP_H0(images)`` (the control).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Boolean, Interval
from trustlab.core.exceptions import InputError
from trustlab.core.optional import require
from trustlab.core.seeding import check_random_state
from trustlab.methods.topodetect._persistence import _mst_edges

torch = require("torch", extra="topo", purpose="trustlab.methods.topodetect")

__all__ = ["h0_persistence_torch", "tp_h0_torch", "topo_features"]


def _pairs(Z: Any, jitter: float) -> tuple[np.ndarray, np.ndarray]:
    from scipy.sparse.csgraph import minimum_spanning_tree
    from scipy.spatial.distance import pdist, squareform

    P = Z.detach().cpu().double().numpy()
    if jitter > 0:
        P = P + jitter * np.random.default_rng(0).standard_normal(P.shape)
    rows, cols, _ = _mst_edges(squareform(pdist(P)), minimum_spanning_tree)
    return rows, cols


def _edge_lengths(Z: Any, rows: Any, cols: Any) -> Any:
    diff = Z[rows] - Z[cols]
    sq = (diff * diff).sum(-1)
    pos = sq > 0
    return torch.where(pos, torch.sqrt(torch.where(pos, sq, torch.ones_like(sq))), torch.zeros_like(sq))


def _check_tensor(Z: Any, name: str, owner: str) -> None:
    if not isinstance(Z, torch.Tensor) or Z.ndim != 2:
        raise InputError(f"The '{name}' argument of {owner} must be a 2-d torch tensor (n, d). Got "
                         f"{type(Z).__name__} {getattr(Z, 'shape', '')} instead.")
    if not bool(torch.isfinite(Z).all()):
        raise InputError(f"The '{name}' argument of {owner} must be finite. Got "
                         f"{int((~torch.isfinite(Z)).sum())} NaN or infinite value(s).")


_TENSOR = ArrayLike(ndim=2)


@validate_args(Z=[_TENSOR], jitter=[Interval(float, 0, None)])
def h0_persistence_torch(Z: Any, jitter: float = 0.0) -> Any:
    """H0 deaths of the Rips filtration of the rows of ``Z`` (a torch tensor), differentiable: the MST's
    edge lengths recomputed in torch (``n - 1`` values, in the tree's order)."""
    _check_tensor(Z, "Z", "h0_persistence_torch")
    if len(Z) < 2:
        return Z.new_zeros(0)
    rows, cols = _pairs(Z, jitter)
    return _edge_lengths(Z, torch.as_tensor(rows), torch.as_tensor(cols))


@validate_args(Z=[_TENSOR], alpha=[Interval(float, 0, None, closed="neither")], jitter=[Interval(float, 0, None)])
def tp_h0_torch(Z: Any, alpha: float = 1.0, jitter: float = 0.0) -> Any:
    """Differentiable H0 total persistence ``sum (death)^alpha`` of the rows of ``Z``."""
    _check_tensor(Z, "Z", "tp_h0_torch")
    return _tp_h0(Z, alpha, jitter)


def _tp_h0(Z: Any, alpha: float, jitter: float) -> Any:
    if len(Z) < 2:
        return Z.new_zeros(())
    rows, cols = _pairs(Z, jitter)
    d = _edge_lengths(Z, torch.as_tensor(rows), torch.as_tensor(cols))
    return (d ** alpha).sum() if alpha != 1.0 else d.sum()


def _unit_t(Z: Any) -> Any:
    return Z / Z.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def _features_example() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {"image_emb": rng.normal(size=(3, 4)), "text_emb": rng.normal(size=(3, 4)),
            "ref_image": rng.normal(size=(8, 4)), "ref_text": rng.normal(size=(8, 4)), "batch_size": 4,
            "n_batches": 2}


@validate_args(_features_example, image_emb=[ArrayLike(ndim=2)], text_emb=[ArrayLike(ndim=2)],
               ref_image=[ArrayLike(ndim=2, min_len=2)], ref_text=[ArrayLike(ndim=2, min_len=2)],
               n_batches=[Interval(int, 1, None)], batch_size=[Interval(int, 2, None)],
               alpha=[Interval(float, 0, None, closed="neither")], unimodal=[Boolean()],
               random_state=["random_state"])
def topo_features(image_emb: Any, text_emb: Any, ref_image: Any, ref_text: Any, *, n_batches: int = 8,
                  batch_size: int = 32, alpha: float = 1.0, unimodal: bool = False, random_state: Any = None
                  ) -> np.ndarray:
    """Per-sample topological features ``g(x)`` (n, d): the mean over ``n_batches`` random batches (x plus
    ``batch_size - 1`` reference pairs drawn without replacement) of the gradient of
    ``|TP^alpha_H0(normalised images) - TP^alpha_H0(normalised texts)|`` with respect to x's embedding
    (``unimodal=True``: of ``TP^alpha_H0(images)``). ``text_emb[i]`` is the text paired with image i (e.g. its
    predicted class's prompt); the reference pairs are clean."""
    img, txt = (np.asarray(a, dtype=np.float64) for a in (image_emb, text_emb))
    rimg, rtxt = (np.asarray(a, dtype=np.float64) for a in (ref_image, ref_text))
    if len(txt) != len(img) or len(rtxt) != len(rimg):
        raise InputError(f"The 'text_emb' and 'ref_text' arguments of topo_features must have one row per image "
                         f"({len(img)}, {len(rimg)}). Got {len(txt)} and {len(rtxt)} instead.")
    if rimg.shape[1] != img.shape[1] or rtxt.shape[1] != txt.shape[1]:
        raise InputError(f"The 'ref_image'/'ref_text' arguments of topo_features must have the dimensions of "
                         f"'image_emb'/'text_emb' ({img.shape[1]}, {txt.shape[1]}). Got {rimg.shape[1]} and "
                         f"{rtxt.shape[1]} instead.")
    if batch_size - 1 > len(rimg):
        raise InputError(f"The 'batch_size' argument of topo_features must be <= len(ref_image) + 1 = "
                         f"{len(rimg) + 1}. Got {batch_size} instead.")
    rng = check_random_state(random_state, owner="topo_features")
    n, m = len(img), n_batches
    idx = np.stack([np.stack([rng.choice(len(rimg), batch_size - 1, replace=False) for _ in range(m)])
                    for _ in range(n)]) if n else np.zeros((0, m, batch_size - 1), dtype=int)
    with torch.enable_grad():
        leaf = torch.tensor(np.repeat(img[:, None, :], m, axis=1), requires_grad=True)
        R = torch.as_tensor(rimg)
        X = torch.cat([leaf[:, :, None, :], R[torch.as_tensor(idx)]], dim=2)  # (n, m, N, d)
        X = _unit_t(X)
        total = leaf.new_zeros(())
        Yall = _unit_t(torch.cat([torch.as_tensor(txt)[:, None, None, :].expand(n, m, 1, txt.shape[1]),
                                  torch.as_tensor(rtxt)[torch.as_tensor(idx)]], dim=2))
        for i in range(n):
            for j in range(m):
                tp_x = _tp_h0(X[i, j], alpha, 0.0)
                if unimodal:
                    total = total + tp_x
                else:
                    tp_y = float(_tp_h0(Yall[i, j], alpha, 0.0))
                    total = total + (tp_x - tp_y).abs()
        if n:
            (grad,) = torch.autograd.grad(total, leaf)
        else:
            grad = leaf.new_zeros(leaf.shape)
    return grad.mean(dim=1).numpy()
