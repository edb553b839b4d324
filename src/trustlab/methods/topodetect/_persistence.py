"""Persistence diagrams of point clouds and the topological-contrastive losses (TP and MK).

* :func:`persistence_diagrams` -- Vietoris-Rips diagrams H0..maxdim from ripser (scikit-tda), the infinite H0
  bar dropped; :func:`h0_deaths` -- the H0 deaths as minimum-spanning-tree edge lengths (scipy; the same
  numbers as ripser's H0, much faster).
* :func:`total_persistence` ``Pers^a_k = sum (d - b)^a``; :func:`tp_loss` ``sum_k |Pers^a_k(X) - Pers^a_k(Y)|``.
* :func:`mk_kernel` -- the persistence scale-space ("multi-scale") kernel of Reininghaus et al. (CVPR 2015),
  vectorised (``persim.heat`` is its square-root distance, used as the test oracle); :func:`mk_loss` -- the
  squared RKHS distance summed over homology dimensions and the sigma set.
* :func:`contrast_clouds` -- the two clouds a loss compares (``view='embedding'``: image embeddings vs text
  embeddings of the classes; ``view='logits'``: rows of the image-text alignment matrix vs its columns), and
  :func:`topo_losses` -- every loss of one batch plus the unimodal control (image embeddings alone).

Distances are Euclidean. X and Y may have different dimensions (distances stay within a cloud).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import Boolean, Interval, Options
from trustlab.core.exceptions import InputError

__all__ = ["persistence_diagrams", "h0_deaths", "total_persistence", "tp_loss", "mk_kernel", "mk_loss",
           "contrast_clouds", "topo_losses", "TopoLosses"]

#: H1 (Rips) above this many points takes seconds to minutes (spec 2.6); refuse and suggest subsampling
MAX_POINTS_H1 = 512
_CLOUD = ArrayLike(ndim=2)
_ALPHA = Interval(float, 0, None, closed="neither")
_SIGMA = Interval(float, 0, None, closed="neither")


def _cloud(X: np.ndarray, name: str, owner: str) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or not np.isfinite(X).all():
        raise InputError(f"The '{name}' argument of {owner} must be a finite 2-d point cloud (n, d). Got shape "
                         f"{X.shape} with {int((~np.isfinite(X)).sum())} non-finite value(s).")
    return X


def _enough(n: int, dim: int, owner: str) -> bool:
    need = 2 if dim == 0 else 4
    if n < need:
        warnings.warn(f"{owner}: a cloud of {n} point(s) has an empty H{dim} diagram (needs >= {need} points); "
                      "its persistence is 0.", stacklevel=3)
        return False
    return True


@validate_args(X=[_CLOUD])
def h0_deaths(X: np.ndarray) -> np.ndarray:
    """H0 death times of the Rips filtration: the edge lengths of a Euclidean minimum spanning tree
    (``n - 1`` values, sorted; duplicated points give zero-length bars). Births are all 0."""
    from scipy.sparse.csgraph import minimum_spanning_tree
    from scipy.spatial.distance import pdist, squareform

    X = _cloud(X, "X", "h0_deaths")
    if not _enough(len(X), 0, "h0_deaths"):
        return np.zeros(0)
    return np.sort(_mst_edges(squareform(pdist(X)), minimum_spanning_tree)[2])


def _mst_edges(D: np.ndarray, mst: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, cols, lengths) of an MST of the distance matrix ``D``. scipy reads zero (and near-zero) entries
    as missing edges, so every off-diagonal weight is shifted by ``1 + max D`` (a spanning tree always has
    n - 1 edges, so the minimum tree is unchanged) and duplicated points keep their zero-length edges."""
    n = len(D)
    W = D + (1.0 + float(D.max()))
    np.fill_diagonal(W, 0.0)
    T = mst(W).tocoo()  # type: ignore[operator]
    rows, cols = T.row.astype(np.int64), T.col.astype(np.int64)
    if len(rows) != n - 1:  # pragma: no cover - a connected complete graph always has n-1 tree edges
        raise RuntimeError(f"minimum spanning tree has {len(rows)} edges for {n} points")
    return rows, cols, D[rows, cols]


@validate_args(X=[_CLOUD], maxdim=[Interval(int, 0, None)], allow_slow=[Boolean()])
def persistence_diagrams(X: np.ndarray, maxdim: int = 1, *, allow_slow: bool = False) -> list[np.ndarray]:
    """Rips persistence diagrams ``[D_0, ..., D_maxdim]`` (each ``(m, 2)`` birth/death) from ripser; the
    infinite H0 bar is dropped. ``maxdim > 1`` on more than 64 points needs ``allow_slow=True`` (H2 grows
    as n^3); H1 on more than :data:`MAX_POINTS_H1` points is refused (subsample first)."""
    ripser = _ripser()
    X = _cloud(X, "X", "persistence_diagrams")
    n = len(X)
    if maxdim > 1 and n > 64 and not allow_slow:
        raise InputError(f"The 'maxdim' argument of persistence_diagrams must be <= 1 for {n} > 64 points unless "
                         f"allow_slow=True (H2 explodes). Got {maxdim} instead.")
    if maxdim >= 1 and n > MAX_POINTS_H1 and not allow_slow:
        raise InputError(f"The 'X' argument of persistence_diagrams must have <= {MAX_POINTS_H1} points for H1 "
                         f"(Rips H1 takes minutes beyond that; subsample the cloud). Got {n} points instead.")
    out = [np.zeros((0, 2)) for _ in range(maxdim + 1)]
    if n < 2:
        _enough(n, 0, "persistence_diagrams")
        return out
    dgms = ripser(X, maxdim=maxdim)["dgms"]
    for k, d in enumerate(dgms):
        d = np.asarray(d, dtype=np.float64).reshape(-1, 2)
        out[k] = d[np.isfinite(d[:, 1])]
    return out


def _ripser() -> object:
    from trustlab.core.optional import require

    return require("ripser", extra="topo", purpose="persistence diagrams (trustlab.methods.topodetect)").ripser


@validate_args(diagram=[ArrayLike(ndim=2, min_len=0)], alpha=[_ALPHA])
def total_persistence(diagram: np.ndarray, alpha: float = 1.0) -> float:
    """``sum over bars of (death - birth)^alpha`` (0 for an empty diagram)."""
    d = np.asarray(diagram, dtype=np.float64).reshape(-1, 2)
    return float(np.sum(np.maximum(d[:, 1] - d[:, 0], 0.0) ** alpha))


def _diagrams(X: np.ndarray, dims: Sequence[int], owner: str) -> dict[int, np.ndarray]:
    X = _cloud(X, "X", owner)
    out: dict[int, np.ndarray] = {}
    if max(dims) >= 1:
        if len(X) < 4:
            _enough(len(X), 1, owner)
        dg = persistence_diagrams(X, maxdim=max(dims))
        out = {k: dg[k] for k in dims}
    if 0 in dims:  # H0 from the MST (same values as ripser's H0; exact floats)
        h0 = h0_deaths(X)
        out[0] = np.column_stack([np.zeros_like(h0), h0])
    return out


_DIMS = SequenceOf(Options((0, 1)), unique=True)


@validate_args(X=[_CLOUD], Y=[_CLOUD], alpha=[_ALPHA], dims=[_DIMS])
def tp_loss(X: np.ndarray, Y: np.ndarray, alpha: float = 1.0, dims: Sequence[int] = (0,)) -> float:
    """Total-persistence loss ``sum_k |Pers^alpha_k(X) - Pers^alpha_k(Y)|`` over homology ``dims``."""
    dx, dy = _diagrams(X, dims, "tp_loss"), _diagrams(Y, dims, "tp_loss")
    return float(sum(abs(total_persistence(dx[k], alpha) - total_persistence(dy[k], alpha)) for k in dims))


@validate_args(F=[ArrayLike(ndim=2, min_len=0)], G=[ArrayLike(ndim=2, min_len=0)], sigma=[_SIGMA])
def mk_kernel(F: np.ndarray, G: np.ndarray, sigma: float) -> float:
    """Persistence scale-space kernel ``(8 pi s)^-1 sum_p sum_q [exp(-|p-q|^2/8s) - exp(-|p-qbar|^2/8s)]``,
    ``qbar = (death, birth)`` (Reininghaus et al. 2015)."""
    F = np.asarray(F, dtype=np.float64).reshape(-1, 2)
    G = np.asarray(G, dtype=np.float64).reshape(-1, 2)
    if not len(F) or not len(G):
        return 0.0
    d1 = ((F[:, None, :] - G[None, :, :]) ** 2).sum(-1)
    d2 = ((F[:, None, :] - G[None, :, ::-1]) ** 2).sum(-1)
    return float((np.exp(-d1 / (8 * sigma)) - np.exp(-d2 / (8 * sigma))).sum() / (8 * np.pi * sigma))


@validate_args(X=[_CLOUD], Y=[_CLOUD], sigmas=[SequenceOf(_SIGMA)], dims=[_DIMS])
def mk_loss(X: np.ndarray, Y: np.ndarray, sigmas: Sequence[float] = (1e-3, 1e-2, 1e-1),
            dims: Sequence[int] = (0,)) -> float:
    """Multi-scale kernel loss: ``sum_k sum_sigma [k(DkX, DkX) + k(DkY, DkY) - 2 k(DkX, DkY)]`` (the squared
    RKHS distance; ``persim.heat`` returns its square root for one sigma)."""
    dx, dy = _diagrams(X, dims, "mk_loss"), _diagrams(Y, dims, "mk_loss")
    return float(sum(mk_kernel(dx[k], dx[k], s) + mk_kernel(dy[k], dy[k], s) - 2 * mk_kernel(dx[k], dy[k], s)
                     for k in dims for s in sigmas))


def _contrast_example() -> dict[str, object]:
    rng = np.random.default_rng(0)
    return {"image_emb": rng.normal(size=(6, 3)), "text_emb": rng.normal(size=(6, 3))}


@validate_args(_contrast_example, image_emb=[_CLOUD], text_emb=[_CLOUD], view=[Options(("embedding", "logits"))],
               temperature=[Interval(float, 0, None, closed="neither")], normalize=[Boolean()])
def contrast_clouds(image_emb: np.ndarray, text_emb: np.ndarray, view: str = "embedding", temperature: float = 1.0,
                    normalize: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The two clouds a topological-contrastive loss compares, for N (image, text) pairs (row i of
    ``text_emb`` = the text paired with image i, e.g. its predicted class's prompt embedding).

    ``view='embedding'``: (L2-normalised) image embeddings vs text embeddings. ``view='logits'``: rows of
    ``L = temperature * I T^T`` (image -> text) vs rows of ``L^T`` (text -> image); needs equal dimensions."""
    img, txt = _cloud(image_emb, "image_emb", "contrast_clouds"), _cloud(text_emb, "text_emb", "contrast_clouds")
    if len(img) != len(txt):
        raise InputError(f"The 'text_emb' argument of contrast_clouds must have one row per image ({len(img)}). Got "
                         f"{len(txt)} rows instead.")
    if normalize:
        img, txt = _unit(img), _unit(txt)
    if view == "embedding":
        return img, txt
    if img.shape[1] != txt.shape[1]:
        raise InputError(f"The 'text_emb' argument of contrast_clouds must have the image dimension "
                         f"{img.shape[1]} for view='logits'. Got {txt.shape[1]} instead.")
    L = temperature * img @ txt.T
    return L, L.T.copy()


def _unit(X: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(n > 0, n, 1.0)


@dataclass(frozen=True)
class TopoLosses:
    """Every topological-contrastive loss of one batch (``tp_h0``, ``tp_h1``, ``mk_h0``, ``mk_h1``) and the
    unimodal control: the image cloud's own total persistence (``image_tp_h0``, ``image_tp_h1``)."""

    tp_h0: float
    tp_h1: float
    mk_h0: float
    mk_h1: float
    image_tp_h0: float
    image_tp_h1: float


@validate_args(_contrast_example, image_emb=[_CLOUD], text_emb=[_CLOUD], view=[Options(("embedding", "logits"))],
               alpha=[_ALPHA], sigmas=[SequenceOf(_SIGMA)], h1=[Boolean()])
def topo_losses(image_emb: np.ndarray, text_emb: np.ndarray, view: str = "embedding", alpha: float = 1.0,
                sigmas: Sequence[float] = (1e-3, 1e-2, 1e-1), h1: bool = True) -> TopoLosses:
    """TP and MK losses between the clouds of :func:`contrast_clouds` (H0 always, H1 when ``h1``) and the
    unimodal control (total persistence of the normalised image embeddings alone)."""
    X, Y = contrast_clouds(image_emb, text_emb, view=view)
    dims = (0, 1) if h1 else (0,)
    dx, dy = _diagrams(X, dims, "topo_losses"), _diagrams(Y, dims, "topo_losses")
    img = _diagrams(_unit(np.asarray(image_emb, dtype=np.float64)), dims, "topo_losses") if view != "embedding" \
        else dx

    def tp(k: int) -> float:
        return abs(total_persistence(dx[k], alpha) - total_persistence(dy[k], alpha)) if k in dims else 0.0

    def mk(k: int) -> float:
        if k not in dims:
            return 0.0
        return float(sum(mk_kernel(dx[k], dx[k], s) + mk_kernel(dy[k], dy[k], s) - 2 * mk_kernel(dx[k], dy[k], s)
                         for s in sigmas))

    return TopoLosses(tp(0), tp(1), mk(0), mk(1), total_persistence(img[0], alpha),
                      total_persistence(img[1], alpha) if 1 in dims else 0.0)
