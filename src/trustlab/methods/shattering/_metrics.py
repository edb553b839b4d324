"""The shattering metric, ring diagnostics, representation extraction and the edit diagnosis.

``R(D*) = ||D* - D0||_F / ||D0||_F`` with ``D`` the pairwise Euclidean distances between entity
representations before (``D0``) and after (``D*``) an edit. It is permutation-sensitive on purpose: row ``i``
of both inputs must be the same entity. Ring diagnostics: Spearman correlation between representation
distance and cyclic distance, nearest-neighbour adjacency, and a 2-D Isomap embedding (scikit-learn).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import InstanceOf, Interval
from trustlab.core.exceptions import InputError
from trustlab.core.threads import limit_threads

__all__ = ["EditDiagnosis", "diagnose_edit", "extract_representations", "isomap_embedding",
           "neighbour_adjacency", "pairwise_distances", "ring_figure", "ring_spearman", "shattering"]

_REPS = [ArrayLike(ndim=2, min_len=2)]


@validate_args(reps=_REPS)
def pairwise_distances(reps: Any) -> np.ndarray:
    """(n, n) Euclidean distances between the rows of ``reps``."""
    x = np.asarray(reps, dtype=np.float64)
    sq = (x * x).sum(1)
    return np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * x @ x.T, 0.0)) * (1 - np.eye(len(x)))


@validate_args(reps_before=_REPS, reps_after=_REPS)
def shattering(reps_before: Any, reps_after: Any) -> float:
    """``R(D*) = ||D* - D0||_F / ||D0||_F``; row ``i`` of both arrays must be the same entity."""
    a, b = np.asarray(reps_before, dtype=np.float64), np.asarray(reps_after, dtype=np.float64)
    if a.shape != b.shape:
        raise InputError(f"The 'reps_after' argument of shattering must have the shape of reps_before {a.shape} "
                         f"(same entities, same order). Got {b.shape} instead.")
    d0 = pairwise_distances(a)
    n0 = float(np.linalg.norm(d0))
    if n0 == 0:
        raise InputError("The 'reps_before' argument of shattering has all rows equal (||D0|| = 0); R(D*) is "
                         "undefined.")
    return float(np.linalg.norm(pairwise_distances(b) - d0) / n0)


def _check_square(distance: Any, n: int, owner: str) -> np.ndarray:
    d = np.asarray(distance, dtype=np.float64)
    if d.shape != (n, n):
        raise InputError(f"The 'distance' argument of {owner} must be ({n}, {n}) (one row per representation). "
                         f"Got {d.shape} instead.")
    return d


@validate_args(reps=_REPS, distance=[ArrayLike(ndim=2)])
def ring_spearman(reps: Any, distance: Any) -> float:
    """Spearman correlation between pairwise representation distances and ``distance`` (e.g. cyclic)."""
    from scipy.stats import spearmanr

    x = np.asarray(reps, dtype=np.float64)
    d = _check_square(distance, len(x), "ring_spearman")
    iu = np.triu_indices(len(x), 1)
    return float(spearmanr(pairwise_distances(x)[iu], d[iu])[0])


@validate_args(reps=_REPS, distance=[ArrayLike(ndim=2)])
def neighbour_adjacency(reps: Any, distance: Any) -> float:
    """Fraction of rows whose nearest representation is at the smallest nonzero ``distance`` (ring neighbour)."""
    x = np.asarray(reps, dtype=np.float64)
    d = _check_square(distance, len(x), "neighbour_adjacency")
    pd = pairwise_distances(x) + np.diag(np.full(len(x), np.inf))
    nn = pd.argmin(1)
    dd = d + np.diag(np.full(len(x), np.inf))
    return float(np.mean(d[np.arange(len(x)), nn] == dd.min(1)))


@validate_args(reps=_REPS, n_neighbors=[Interval(int, 1, None)])
def isomap_embedding(reps: Any, n_neighbors: int = 5) -> np.ndarray:
    """2-D Isomap embedding of the rows (the paper's ring pictures); ``n_neighbors`` capped at n - 1."""
    from sklearn.manifold import Isomap

    x = np.asarray(reps, dtype=np.float64)
    with limit_threads(1):
        return Isomap(n_neighbors=min(n_neighbors, len(x) - 1), n_components=2).fit_transform(x)


def _example_model() -> Any:
    from trustlab.methods.shattering._kg import CyclicKG
    from trustlab.methods.shattering._model import make_kg_model

    return make_kg_model(CyclicKG(16), d_model=8, n_heads=2)


@validate_args(model=[InstanceOf(object)], inputs=[InstanceOf(object)], site=[InstanceOf(str)],
               positions=[ArrayLike(ndim=(0, 1), dtype="integer"), None], n_contexts=[Interval(int, 1, None)],
               batch_size=[Interval(int, 1, None)], allow_first_token=[InstanceOf(bool)],
               _example=lambda: {"model": _example_model(), "inputs": [[1, 2], [3, 4]], "site": "blocks.0.resid_post"})
def extract_representations(model: Any, inputs: Any, *, site: str = "blocks.0.resid_post", positions: Any = None,
                            n_contexts: int = 1, batch_size: int = 512, allow_first_token: bool = False) -> np.ndarray:
    """Activations at ``site`` (a :mod:`trustlab.llm` site name) at one token per input, averaged over
    consecutive groups of ``n_contexts`` inputs: ``(len(inputs) // n_contexts, d)``.

    ``inputs``: token-id sequences (left-padded internally); ``positions``: the token of each input (index into
    that input, may be negative; default its last token). Keep the inputs fixed before and after an edit.
    A position that is an input's first token is refused unless ``allow_first_token=True``: in most LLMs the
    first token is the attention sink, whose activations are dominated by that role rather than by the token
    (on SmolLM2 a month read there drops the month-ring Spearman from about 0.7 to 0.08); put the entity after
    a prefix ("In {}") instead.
    """
    import torch

    from trustlab.llm import trace
    from trustlab.methods.shattering._requests import padded

    seqs = [list(map(int, s)) for s in inputs]
    if not seqs or not all(seqs) or len(seqs) % n_contexts:
        raise InputError(f"The 'inputs' argument of extract_representations must be non-empty sequences, a "
                         f"multiple of n_contexts={n_contexts} of them. Got {len(seqs)}.")
    pos = np.full(len(seqs), -1) if positions is None else np.broadcast_to(np.asarray(positions), (len(seqs),))
    first = [j for j, (s, p) in enumerate(zip(seqs, pos, strict=True)) if int(p) % len(s) == 0]
    if first and not allow_first_token:
        raise InputError(f"The 'positions' argument of extract_representations must not point at an input's first "
                         f"token (the attention sink of most LLMs; pass allow_first_token=True to read it anyway). "
                         f"Got it for {len(first)} input(s), the first at index {first[0]} (position {int(pos[first[0]])}, "
                         f"length {len(seqs[first[0]])}).")
    out = []
    with torch.no_grad(), limit_threads(None):
        for i in range(0, len(seqs), batch_size):
            chunk = seqs[i:i + batch_size]
            ids, mask, pid = padded(chunk)
            width = ids.shape[1]
            idx = torch.tensor([width - len(s) + int(p) % len(s) for s, p in zip(chunk, pos[i:i + batch_size],
                                                                                  strict=True)])
            with trace(model, [site]) as tr:
                model(input_ids=ids, attention_mask=mask, position_ids=pid)
            out.append(tr[site][torch.arange(len(chunk)), idx].double().numpy())
    reps = np.concatenate(out)
    return reps.reshape(-1, n_contexts, reps.shape[1]).mean(1)


@dataclass
class EditDiagnosis:
    """What an edit did to a set of entity representations."""

    shattering: float
    ring_before: float | None
    ring_after: float | None
    reps_before: np.ndarray
    reps_after: np.ndarray
    info: Any

    @validate_args(n_neighbors=[Interval(int, 1, None)])
    def embeddings(self, n_neighbors: int = 5) -> tuple[np.ndarray, np.ndarray]:
        """Isomap 2-D embeddings before and after (each fitted on its own representations)."""
        return isomap_embedding(self.reps_before, n_neighbors), isomap_embedding(self.reps_after, n_neighbors)


@validate_args(model=[InstanceOf(object)], editor=[InstanceOf(object)], inputs=[InstanceOf(object)],
               site=[InstanceOf(str)], n_contexts=[Interval(int, 1, None)],
               positions=[ArrayLike(ndim=(0, 1), dtype="integer"), None],
               distance=[ArrayLike(ndim=2), None], keep=[bool],
               _example=lambda: {"model": _example_model(), "editor": object(), "inputs": [[1, 2], [3, 4]]})
def diagnose_edit(model: Any, editor: Any, inputs: Any, *edit_args: Any, site: str = "blocks.0.resid_post",
                  positions: Any = None, n_contexts: int = 1, distance: Any = None, keep: bool = False,
                  **edit_kwargs: Any) -> EditDiagnosis:
    """Apply ``editor`` (a ModelEdit) to ``model`` and measure R(D*) and ring structure at ``site``.

    ``inputs`` are the entity prompts (``n_contexts`` consecutive inputs per entity, their last token, or
    ``positions``, the entity); ``distance`` an optional (n, n) structural distance for the ring Spearman.
    The edit is undone afterwards unless ``keep=True``.
    """
    if not hasattr(editor, "apply"):
        raise InputError(f"The 'editor' argument of diagnose_edit must be a ModelEdit. Got {type(editor).__name__}.")
    kw = {"site": site, "positions": positions, "n_contexts": n_contexts}
    before = extract_representations(model, inputs, **kw)
    handle = editor.apply(model, *edit_args, **edit_kwargs)
    try:
        after = extract_representations(model, inputs, **kw)
    finally:
        if not keep:
            handle.restore()
    rb = ring_spearman(before, distance) if distance is not None else None
    ra = ring_spearman(after, distance) if distance is not None else None
    return EditDiagnosis(shattering(before, after), rb, ra, before, after, handle.info)


def _diag_example() -> dict[str, Any]:
    x = np.random.default_rng(0).normal(size=(8, 3))
    return {"diagnosis": EditDiagnosis(0.0, None, None, x, x, None)}


@validate_args(diagnosis=[InstanceOf(EditDiagnosis)], labels=[InstanceOf(list), None],
               n_neighbors=[Interval(int, 1, None)], order=[None, ArrayLike(ndim=1, dtype="integer", low=0)],
               _example=_diag_example)
def ring_figure(diagnosis: EditDiagnosis, labels: list[str] | None = None, n_neighbors: int = 5,
                order: Any = None) -> Any:
    """Before/after Isomap picture of one edit (a matplotlib Figure); ``order`` joins points along a cycle."""
    from trustlab.results.plots import new_figure

    fig, _ = new_figure(8.0, 3.8)
    fig.clear()
    axes = fig.subplots(1, 2)
    for ax, emb, title in zip(axes, diagnosis.embeddings(n_neighbors), ("before edit", "after edit"), strict=True):
        seq = np.asarray(order) if order is not None else np.arange(len(emb))
        ring = np.concatenate([seq, seq[:1]])
        ax.plot(emb[ring, 0], emb[ring, 1], "-", color="0.7", lw=0.8)
        ax.scatter(emb[seq, 0], emb[seq, 1], c=np.arange(len(seq)), cmap="hsv", s=18)
        if labels is not None:
            for i, t in enumerate(labels):
                ax.annotate(t, emb[i], fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(f"R(D*) = {diagnosis.shattering:.3f}", fontsize=10)
    return fig
