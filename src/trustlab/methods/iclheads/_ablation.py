"""Head ablation (a ModelEdit), head-set builders with exclusion, and fast first-token ICL accuracy.

:class:`HeadAblation` overwrites the chosen heads' slices of the ``o_proj`` input with the task-averaged
mean activation (``kind="mean"``, the official few-shot protocol) or zeros, at the last position only
(``positions="last"``; inside ``generate`` every new token is then ablated too, as in the official hook)
or at every position. :func:`select_heads` ranks heads by a score, optionally after removing the top
``exclude_size`` heads of another score (the paper's "induction heads that are not FV heads").
:func:`first_token_accuracy` runs each prompt's prefix once and replays only the last token under each
edit, which is exact for last-position edits.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import Interval, Options, Satisfies
from trustlab.core.exceptions import ConfigError, InputError, TrustlabError
from trustlab.core.roles import EditHandle, EditInfo, ModelEdit
from trustlab.llm.rules import LanguageModel, Tokenizer
from trustlab.methods.iclheads._paper import PAPER

__all__ = ["HeadAblation", "PreparedPrompts", "first_token_accuracy", "jaccard", "random_scores", "select_heads"]


def _is_pairs(v: Any) -> bool:
    if isinstance(v, str | bytes) or not isinstance(v, Sequence):
        return False
    for p in v:
        if not isinstance(p, Sequence) or isinstance(p, str) or len(p) != 2:
            return False
        if any(isinstance(x, bool) or not isinstance(x, int | np.integer) or x < 0 for x in p):
            return False
    return True


class _TraceHook:
    """Adapts an entered :class:`trustlab.llm.hooks.Trace` to the ``.remove()`` protocol of EditHandle."""

    def __init__(self, tr: Any) -> None:
        self.tr = tr

    def remove(self) -> None:
        self.tr.__exit__(None, None, None)


@dataclass
class HeadAblationInfo(EditInfo):
    """``handle.info`` of a head ablation: the (layer, head) pairs ablated."""

    heads: list[tuple[int, int]] = field(default_factory=list)


class HeadAblation(ModelEdit):
    """Ablate attention heads at the last position (or everywhere) by their mean activation or zeros.

    Parameters
    ----------
    heads : sequence of (layer, head), default=()
        Heads to ablate; an empty set is the identity.
    kind : {"mean", "zero"}, default="mean"
        ``"mean"`` needs ``means`` ``[n_layers, n_heads, d_head]`` at :meth:`apply` (e.g.
        ``FVScores.mean_activations``, averaged over the FV-scoring tasks as in the official code).
    positions : {"last", "all"}, default="last"
        ``"last"`` edits position -1 of every forward: batch prompts with *left* padding.

    Example
    -------
    >>> import torch
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> ids = tok(["Q: a\\nA:"], return_tensors="pt").input_ids
    >>> with HeadAblation(heads=[(0, 1), (1, 4)], kind="zero").apply(model):
    ...     logits = model(ids).logits

    References
    ----------
    Yin & Steinhardt, ICML 2025 (https://github.com/kayoyin/icl-heads, ``src/ablate.py``).
    """

    paper = PAPER
    _modifies_weights: ClassVar[bool] = False
    _info_class = HeadAblationInfo
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "heads": [Satisfies(_is_pairs, "a sequence of (layer, head) pairs of ints >= 0",
                            ["__invalid__", [(1,)], [(0, -1)]])],
        "kind": [Options(["mean", "zero"])],
        "positions": [Options(["last", "all"])],
    }

    def __init__(self, *, heads: Sequence[tuple[int, int]] = (), kind: str = "mean", positions: str = "last"):
        self.heads = heads
        self.kind = kind
        self.positions = positions

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"heads": [(0, 1), (1, 3)], "kind": "zero"}, {"heads": [(1, 0)], "kind": "mean", "positions": "all"}]

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        import torch

        from trustlab.llm import tiny_random_llama

        means = np.random.default_rng(0).normal(size=(2, 9, 8)).astype(np.float32)
        return {"model": lambda: tiny_random_llama(0)[0], "args": (), "kwargs": {"means": means},
                "forward_input": {"input_ids": torch.tensor([[5, 17, 301, 12, 9]])}}

    def _apply(self, model: Any, handle: EditHandle, means: Any = None) -> None:
        from trustlab.llm import ablate_heads, dims

        heads = [(int(a), int(b)) for a, b in self.heads]
        handle.info.heads = heads
        if not heads:
            return
        d = dims(model)
        m = None
        if self.kind == "mean":
            if means is None:
                raise ConfigError("HeadAblation(kind='mean').apply needs means=[n_layers, n_heads, d_head] "
                                  "(e.g. FVScores.mean_activations) or use kind='zero'.")
            m = np.asarray(means, dtype=np.float32)
            if m.shape != (d.n_layers, d.n_heads, d.d_head):
                raise InputError(f"The 'means' of HeadAblation.apply must have shape "
                                 f"{(d.n_layers, d.n_heads, d.d_head)}. Got {m.shape} instead.")
            if not np.isfinite(m).all():
                raise InputError("The 'means' of HeadAblation.apply contain NaN or inf.")
        tr = ablate_heads(model, heads, method=self.kind, positions=-1 if self.positions == "last" else None,
                          means=m)
        tr.__enter__()
        handle.add_hook(_TraceHook(tr))


def _n_of(size: float | int, n_total: int, what: str) -> int:
    if isinstance(size, bool) or not isinstance(size, int | float | np.integer | np.floating):
        raise InputError(f"The {what} must be a fraction in (0, 1) or a count >= 1. Got {size!r}.")
    if isinstance(size, int | np.integer):
        n = int(size)
    elif 0.0 < size < 1.0:
        n = int(size * n_total)
    else:
        raise InputError(f"The {what} must be a fraction in (0, 1) or an int count. Got {size!r}.")
    if n < 1:
        raise InputError(f"The {what} {size!r} gives {n} of {n_total} heads; use a larger fraction or a count >= 1.")
    if n > n_total:
        raise InputError(f"The {what} {size!r} asks for {n} heads but the model has {n_total}.")
    return n


_SIZE = [Interval(int, 1, None), Interval(float, 0, 1, closed="neither")]
_HEADS = Satisfies(_is_pairs, "a list of (layer, head) pairs of ints >= 0", ["ab", [(1,)], [(0, -1)]], valid=[])


@validate_args(scores=[ArrayLike(ndim=2)], size=_SIZE, exclude_scores=[None, ArrayLike(ndim=2)],
               exclude_size=_SIZE)
def select_heads(
    scores: Any, size: float | int, *, exclude_scores: Any = None, exclude_size: float | int = 0.02
) -> list[tuple[int, int]]:
    """Top heads by ``scores`` ``[n_layers, n_heads]``, after removing the top ``exclude_size`` of another score.

    Parameters
    ----------
    scores : array [n_layers, n_heads]
    size : float in (0, 1) or int
        Fraction of all heads (``int(size * n)``, which must be >= 1) or a count.
    exclude_scores : array [n_layers, n_heads], optional
        The *other* score; its top ``exclude_size`` heads are excluded before ranking.
    exclude_size : float or int, default=0.02

    Raises
    ------
    InputError
        When a size gives 0 heads or the exclusion leaves fewer heads than requested.

    Example
    -------
    >>> import numpy as np
    >>> s = np.array([[0.9, 0.1], [0.5, 0.7]])
    >>> select_heads(s, 2), select_heads(s, 2, exclude_scores=-s, exclude_size=1)
    ([(0, 0), (1, 1)], [(0, 0), (1, 1)])
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or not np.isfinite(s).all():
        raise InputError(f"The 'scores' of select_heads must be a finite [n_layers, n_heads] array. Got {s.shape}.")
    n_total = s.size
    k = _n_of(size, n_total, "head-set size")
    excluded: set[int] = set()
    if exclude_scores is not None:
        e = np.asarray(exclude_scores, dtype=np.float64)
        if e.shape != s.shape:
            raise InputError(f"The 'exclude_scores' must have the shape of 'scores' {s.shape}. Got {e.shape}.")
        n_ex = _n_of(exclude_size, n_total, "exclusion size")
        excluded = set(np.argsort(-e.ravel(), kind="stable")[:n_ex].tolist())
        if k > n_total - len(excluded):
            raise InputError(f"Excluding {len(excluded)} heads leaves {n_total - len(excluded)}, fewer than the "
                             f"{k} requested.")
    order = [i for i in np.argsort(-s.ravel(), kind="stable").tolist() if i not in excluded][:k]
    return [(int(i // s.shape[1]), int(i % s.shape[1])) for i in order]


def _is_shape(v: Any) -> bool:
    return (isinstance(v, tuple | list) and len(v) == 2
            and all(isinstance(x, int | np.integer) and not isinstance(x, bool) and x >= 1 for x in v))


@validate_args(shape=[Satisfies(_is_shape, "a pair of ints >= 1 (n_layers, n_heads)", [(0, 2), (3,), "ab"],
                                valid=(2, 3))], random_state=["random_state"])
def random_scores(shape: tuple[int, int], random_state: int | np.random.Generator | None = 0) -> np.ndarray:
    """Uniform random head scores (the random baseline of the official code, seeded)."""
    return np.random.default_rng(random_state).random(shape)


@validate_args(a=[_HEADS], b=[_HEADS])
def jaccard(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> float:
    """Jaccard index of two head sets.

    Example
    -------
    >>> jaccard([(0, 1), (2, 3)], [(2, 3)])
    0.5
    """
    sa, sb = {tuple(x) for x in a}, {tuple(x) for x in b}
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def _check_targets(model: Any, targets: Sequence[int], owner: str) -> np.ndarray:
    """Target token ids as an int array; ids outside the model's vocabulary are refused (they can never match)."""
    from trustlab.llm import dims

    t = np.asarray(targets)
    if t.ndim != 1 or (t.size and t.dtype.kind not in "iu"):
        raise InputError(f"The 'targets' argument of {owner} must be a list of token ids (ints). Got {t.dtype} "
                         f"of shape {t.shape}.")
    vocab = dims(model).vocab
    bad = np.nonzero((t < 0) | (t >= vocab))[0]
    if bad.size:
        raise InputError(f"The 'targets' argument of {owner} must be token ids in [0, {vocab - 1}] (the model's "
                         f"vocabulary). Got {int(t[bad[0]])} at position {int(bad[0])} instead.")
    return t.astype(np.int64)


class PreparedPrompts:
    """Prompts encoded once: their prefixes run once with a KV cache, then any edit replays the last token."""

    def __init__(self, model: Any, texts: Sequence[str], targets: Sequence[int], *, tokenizer: Any,
                 batch_size: int = 16) -> None:
        import torch

        from trustlab.llm import encode_texts, pad_batch, position_ids_from_mask

        if len(texts) != len(targets) or not len(texts):
            raise InputError(f"Got {len(texts)} prompts and {len(targets)} targets; need the same number >= 1.")
        self.model, self.targets = model, _check_targets(model, targets, "PreparedPrompts")
        seqs = encode_texts(list(texts), model=model, tokenizer=tokenizer, owner="first_token_accuracy")
        if min(len(s) for s in seqs) < 2:
            raise InputError("Every prompt needs at least 2 tokens.")
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.batches = []
        from trustlab.llm.sites import base_model

        base = base_model(model)
        with torch.no_grad():
            for b0 in range(0, len(seqs), batch_size):
                ids, mask = pad_batch(seqs[b0 : b0 + batch_size], pad, side="left")
                pos = position_ids_from_mask(mask)
                out = base(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=pos[:, :-1],
                           use_cache=True)
                cache = getattr(out, "cache", None)
                cache = cache if cache is not None else out.past_key_values
                self.batches.append((ids, mask, pos, cache))

    @validate_args(capture_heads=["boolean"])
    def last_logits(self, capture_heads: bool = False) -> Any:
        """Last-position logits ``[N, vocab]`` (and optionally head outputs ``[N, L, H, d_head]``) under the
        edits active now; each batch replays only its last token on the cached prefix."""
        import torch

        from trustlab.llm import dims, head_logits, trace
        from trustlab.llm.sites import base_model

        base = base_model(self.model)
        key = "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
        logits, heads = [], []
        sites = [f"blocks.{i}.head_out" for i in range(dims(self.model).n_layers)] if capture_heads else []
        with torch.no_grad():
            for ids, mask, pos, cache in self.batches:
                T = ids.shape[1]
                with trace(self.model, sites) as tr:
                    h = base(input_ids=ids[:, -1:], attention_mask=mask, position_ids=pos[:, -1:],
                             use_cache=True, **{key: cache}).last_hidden_state[:, -1]
                cache.crop(-1)  # drop the replayed last token again
                if cache.get_seq_length() != T - 1:
                    raise TrustlabError("PreparedPrompts: the KV cache was not restored to the prefix length.")
                logits.append(head_logits(self.model, h).float().cpu().numpy())
                if capture_heads:
                    heads.append(torch.stack([tr[s][:, -1] for s in sites], 1).float().cpu().numpy())
        out = np.concatenate(logits)
        return (out, np.concatenate(heads)) if capture_heads else out

    def predict(self) -> np.ndarray:
        """Greedy first-token predictions under the edits active now."""
        return self.last_logits().argmax(-1)

    def accuracy(self) -> float:
        """First-token exact-match accuracy under whatever edits are active."""
        return float(np.mean(self.predict() == self.targets))


@validate_args(model=[LanguageModel()], texts=[SequenceOf(str)], targets=[ArrayLike(ndim=1, dtype="integer")],
               tokenizer=[None, Tokenizer()], batch_size=[Interval(int, 1, None)])
def first_token_accuracy(model: Any, texts: Sequence[str], targets: Sequence[int], *, tokenizer: Any = None,
                         batch_size: int = 16) -> float:
    """Greedy first-token accuracy of ``model`` on prompts: one left-padded full forward per batch.

    Edits active around the call apply as in any forward (position -1 is each prompt's last token). For
    many edit conditions on the same prompts, :class:`PreparedPrompts` is faster (prefix run once).

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> 0.0 <= first_token_accuracy(model, ["Q: a\\nA:"], [5], tokenizer=tok) <= 1.0
    True
    """
    import torch

    from trustlab.llm import encode_texts, head_logits, pad_batch, position_ids_from_mask
    from trustlab.llm.sites import base_model, unwrap

    tok = tokenizer if tokenizer is not None else getattr(unwrap(model), "trustlab_tokenizer", None)
    if len(texts) != len(targets) or not len(texts):
        raise InputError(f"Got {len(texts)} prompts and {len(targets)} targets; need the same number >= 1.")
    target_ids = _check_targets(model, targets, "first_token_accuracy")
    seqs = encode_texts(list(texts), model=model, tokenizer=tok, owner="first_token_accuracy")
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    base = base_model(model)
    preds = []
    with torch.no_grad():
        for b0 in range(0, len(seqs), batch_size):
            ids, mask = pad_batch(seqs[b0 : b0 + batch_size], pad, side="left")
            h = base(input_ids=ids, attention_mask=mask, position_ids=position_ids_from_mask(mask),
                     use_cache=False).last_hidden_state[:, -1]
            preds.append(head_logits(model, h).argmax(-1).cpu().numpy())
    return float(np.mean(np.concatenate(preds) == target_ids))
