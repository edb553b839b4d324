"""The differentiable H0 path and per-sample topological features.

H0 persistence of a Rips filtration = the edge lengths of a minimum spanning tree. The tree (the
persistence pairing) is found on detached distances (scipy), and the deaths are recomputed in torch as the
lengths of those critical edges, so gradients flow to the points incident to them (zero-length edges of
duplicated points get a zero gradient, never NaN). Ties make the pairing, and so the gradient, non-unique:
``jitter`` adds tiny fixed noise before the pairing is chosen.

:func:`topo_features` is the paper's per-sample signature ``g(x) = mean over M batches (x + N-1 clean
reference pairs) of d L / d z_x``. ``view="joint"`` (default since issue 40): ``L = TP_H0(images and texts
in one cloud)``, so x's gradient sees the text points (its own paired text among them) and the text side moves
with the image; ``"contrast"``: ``L = |TP_H0(images) - TP_H0(texts)|`` (our reading of the paper's contrast:
the text cloud does not depend on z_x, so per batch this is +-1 times the image-only gradient); ``"image"``:
``L = TP_H0(images)`` (the unimodal control).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval, Options
from trustlab.core.exceptions import InputError
from trustlab.core.optional import require
from trustlab.core.seeding import check_random_state
from trustlab.methods.topodetect._persistence import _mst_edges

torch = require("torch", extra="topo", purpose="trustlab.methods.topodetect")

__all__ = ["h0_persistence_torch", "tp_h0_torch", "topo_features"]

#: the clouds :func:`topo_features` differentiates (see the module docstring)
VIEWS = ("joint", "contrast", "image")


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
               alpha=[Interval(float, 0, None, closed="neither")], view=[Options(VIEWS)],
               random_state=["random_state"])
def topo_features(image_emb: Any, text_emb: Any, ref_image: Any, ref_text: Any, *, n_batches: int = 8,
                  batch_size: int = 32, alpha: float = 1.0, view: str = "joint", random_state: Any = None
                  ) -> np.ndarray:
    """Per-sample topological features ``g(x)`` (n, d): the mean over ``n_batches`` random batches (x plus
    ``batch_size - 1`` reference pairs drawn without replacement) of the gradient with respect to x's image
    embedding of: ``view="joint"``, ``TP^alpha_H0`` of the one cloud of the batch's normalised images *and*
    texts (x's paired text included; needs equal dimensions); ``"contrast"``,
    ``|TP^alpha_H0(normalised images) - TP^alpha_H0(normalised texts)|``; ``"image"``, ``TP^alpha_H0(images)``
    (the unimodal control). ``text_emb[i]`` is the text paired with image i (e.g. its predicted class's
    prompt); the reference pairs are clean."""
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
    if view == "joint" and txt.shape[1] != img.shape[1]:
        raise InputError(f"The 'view' argument of topo_features is 'joint', which puts images and texts in one "
                         f"cloud: 'text_emb' must have the images' dimension ({img.shape[1]}). Got "
                         f"{txt.shape[1]} instead; use view='contrast' for towers of different widths.")
    rng = check_random_state(random_state, owner="topo_features")
    return _features(img, txt, rimg, rtxt, n_batches, batch_size, alpha, view, rng)


def _unit(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = np.linalg.norm(X, axis=1, keepdims=True)
    n = np.where(n > 0, n, 1.0)
    return X / n, n[:, 0]


def _dist(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return np.sqrt(np.maximum((A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2 * A @ B.T, 0.0))


def _forest(Ds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Minimum spanning trees of many small clouds at once: the distance matrices ``Ds`` (k, N, N) become one
    block-diagonal graph whose minimum spanning forest (one scipy call) is the set of per-block trees.
    Weights are shifted by ``1 + max`` (scipy drops zero entries; the shift leaves each tree unchanged).
    Returns (block, a, b, length) of every tree edge."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import minimum_spanning_tree

    k, N, _ = Ds.shape
    iu, ju = np.triu_indices(N, 1)
    shift = 1.0 + float(Ds.max()) if Ds.size else 1.0
    off = (np.arange(k) * N)[:, None]
    rows = (off + iu[None, :]).ravel()
    cols = (off + ju[None, :]).ravel()
    data = (Ds[:, iu, ju] + shift).ravel()
    T = minimum_spanning_tree(coo_matrix((data, (rows, cols)), shape=(k * N, k * N)).tocsr()).tocoo()
    block = T.row // N
    return block, T.row % N, T.col % N, T.data - shift


def _batch_distances(d0: np.ndarray, DR: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """(k, N, N) distance matrices of the clouds {x} + refs[idx] from x's distances ``d0`` (k, n_ref) to the
    references and the references' own distances ``DR``."""
    k, n1 = idx.shape
    D = np.zeros((k, n1 + 1, n1 + 1))
    D[:, 1:, 1:] = DR[idx[:, :, None], idx[:, None, :]]
    first = np.take_along_axis(d0, idx, axis=1)
    D[:, 0, 1:] = first
    D[:, 1:, 0] = first
    return D


def _joint_distances(own: np.ndarray, idx: np.ndarray, pre: dict[str, np.ndarray]) -> np.ndarray:
    """(k, 2N, 2N) distance matrices of the joint clouds [x's image, N-1 reference images, x's text, the same
    N-1 reference texts] (``pre``: distances of the samples' images/texts to the references' and among them)."""
    k, n1 = idx.shape
    N = n1 + 1
    D = np.zeros((k, 2 * N, 2 * N))
    ii, jj = idx[:, :, None], idx[:, None, :]
    D[:, 1:N, 1:N] = pre["UU"][ii, jj]
    D[:, N + 1:, N + 1:] = pre["TT"][ii, jj]
    cross = pre["UT"][ii, jj]
    D[:, 1:N, N + 1:] = cross
    D[:, N + 1:, 1:N] = cross.transpose(0, 2, 1)
    for row, cols, key in ((0, slice(1, N), "u_U"), (0, slice(N + 1, None), "u_T"), (N, slice(1, N), "t_U"),
                           (N, slice(N + 1, None), "t_T")):
        v = np.take_along_axis(pre[key][own], idx, axis=1)
        D[:, row, cols] = v
        D[:, cols, row] = v
    D[:, 0, N] = D[:, N, 0] = pre["u_t"][own]
    return D


def _features(img: np.ndarray, txt: np.ndarray, rimg: np.ndarray, rtxt: np.ndarray, m: int, size: int,
              alpha: float, view: str, rng: np.random.Generator, chunk: int = 256) -> np.ndarray:
    """The gradient of the H0 path, written out and vectorised over every (sample, batch): ``d TP / d u_0 =
    sum over tree edges (0, b) of alpha l^(alpha-1) (u_0 - u_b) / l`` (zero-length edges skipped, as the torch
    path's zero gradient), times ``sign(TP_x - TP_y)`` for the contrast, then through the normalisation
    ``u = z / |z|`` (``(I - u u^T) / |z|``). The same numbers as autograd through :func:`tp_h0_torch` (checked
    in the tests); the trees come from scipy's minimum spanning forest, many batches per call."""
    U, norms = _unit(img)
    T, _ = _unit(txt)
    UR, _ = _unit(rimg)
    TR, _ = _unit(rtxt)
    DR, DTR = _dist(UR, UR), _dist(TR, TR)
    n = len(U)
    idx = np.stack([np.stack([rng.choice(len(UR), size - 1, replace=False) for _ in range(m)])
                    for _ in range(n)]).reshape(n * m, size - 1) if n else np.zeros((0, size - 1), dtype=int)
    owner = np.repeat(np.arange(n), m)
    grad_u = np.zeros_like(U)
    dx_all, dt_all = _dist(U, UR), _dist(T, TR)
    joint = view == "joint"
    if joint:
        pre = {"UU": DR, "TT": DTR, "UT": _dist(UR, TR), "u_U": dx_all, "u_T": _dist(U, TR), "t_U": _dist(T, UR),
               "t_T": dt_all, "u_t": np.linalg.norm(U - T, axis=1)}
    for s in range(0, n * m, chunk):
        sl = slice(s, min(s + chunk, n * m))
        own = owner[sl]
        D = _joint_distances(own, idx[sl], pre) if joint else _batch_distances(dx_all[own], DR, idx[sl])
        blk, a, b, ell = _forest(D)
        k = len(own)
        sign = np.ones(k)
        if view == "contrast":
            tp_x = np.bincount(blk, ell ** alpha, minlength=k)
            bt, _, _, lt = _forest(_batch_distances(dt_all[own], DTR, idx[sl]))
            sign = np.sign(tp_x - np.bincount(bt, lt ** alpha, minlength=k))
        hit = ((a == 0) | (b == 0)) & (ell > 0)
        blk, other, ell = blk[hit], np.where(a[hit] == 0, b[hit], a[hit]), ell[hit]
        smp = own[blk]
        vec = _other_points(other, idx[sl][blk], smp, size, UR, T, TR)  # image-only clouds: references only
        coef = sign[blk] * alpha * ell ** (alpha - 1.0) / ell
        np.add.at(grad_u, smp, coef[:, None] * (U[smp] - vec))
    gu = grad_u / m
    return (gu - U * (U * gu).sum(1, keepdims=True)) / norms[:, None]


def _other_points(other: np.ndarray, rows: np.ndarray, smp: np.ndarray, N: int, UR: np.ndarray, T: np.ndarray,
                  TR: np.ndarray) -> np.ndarray:
    """The far end of each tree edge at x's image: a reference image (1..N-1) or, in a joint cloud, x's own text
    (N) or a reference text (N+1..2N-1)."""
    out = np.empty((len(other), UR.shape[1]))
    img, own_txt, ref_txt = other < N, other == N, other > N
    out[img] = UR[rows[img, other[img] - 1]]
    out[own_txt] = T[smp[own_txt]]
    out[ref_txt] = TR[rows[ref_txt, other[ref_txt] - N - 1]]
    return out
