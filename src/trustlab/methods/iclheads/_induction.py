"""Induction scores of every attention head on repeated random token sequences.

Each sequence is ``[BOS, r_1 .. r_n, r_1 .. r_n]`` with ``r_i`` drawn without replacement from the
non-special vocabulary. The *classic* score (Olsson et al., 2022) of a head is its mean attention from the
second occurrence of ``r_i`` to the token right after the first occurrence (``r_{i+1}``), i.e.
``A[q, q - n + 1]`` averaged over the ``n`` second-half queries and the sequences. The TransformerLens
variant (``variant="tl"``) is ``sum(A * P) / sum(A)`` with the detection pattern
``P[q, k] = 1`` iff ``token[k - 1] == token[q]`` (``k - 1 != q``, ``k <= q``), averaged over *all* query
rows, which is what ``detect_head`` computes for a list of prompts (about half the classic score).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval, Options
from trustlab.core.exceptions import ConfigError, InputError
from trustlab.llm.rules import LanguageModel, Tokenizer

__all__ = ["induction_pattern_scores", "induction_scores", "random_repeat_tokens"]



@validate_args(tokenizer=[Tokenizer()], n_seqs=[Interval(int, 1, None)], seq_len=[Interval(int, 1, None)],
               vocab=[None, Interval(int, 1, None)], random_state=["random_state"], prepend_bos=["boolean"])
def random_repeat_tokens(
    tokenizer: Any, n_seqs: int, seq_len: int, *, vocab: int | None = None, random_state: int = 0,
    prepend_bos: bool = True,
) -> np.ndarray:
    """``[n_seqs, (1) + 2 * seq_len]`` ids: BOS (optional) then ``seq_len`` distinct random tokens, twice.

    Special and added tokens (BOS, EOS, ``<|im_start|>``, ...) are never drawn.

    Example
    -------
    >>> from trustlab.llm import load_tokenizer
    >>> ids = random_repeat_tokens(load_tokenizer(), 2, 5)
    >>> ids.shape, bool((ids[:, 1:6] == ids[:, 6:]).all())
    ((2, 11), True)
    """
    vocab = int(vocab if vocab is not None else len(tokenizer))
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    special |= {int(i) for i in (getattr(tokenizer, "added_tokens_decoder", {}) or {})}
    allowed = np.setdiff1d(np.arange(vocab), np.fromiter(special, dtype=np.int64, count=len(special)))
    if allowed.size < seq_len:
        raise InputError(f"Only {allowed.size} non-special tokens for seq_len={seq_len}.")
    rng = np.random.default_rng(random_state)
    body = np.stack([rng.choice(allowed, size=seq_len, replace=False) for _ in range(n_seqs)])
    seqs = np.concatenate([body, body], axis=1)
    if prepend_bos:
        bos = getattr(tokenizer, "bos_token_id", None)
        bos = bos if bos is not None else getattr(tokenizer, "eos_token_id", 0)
        seqs = np.concatenate([np.full((n_seqs, 1), int(bos)), seqs], axis=1)
    return seqs.astype(np.int64)


@validate_args(pattern=[ArrayLike(ndim=4)], tokens=[ArrayLike(ndim=2, dtype="integer")],
               seq_len=[Interval(int, 1, None)], variant=[Options(["classic", "tl"])])
def induction_pattern_scores(pattern: Any, tokens: Any, seq_len: int, *, variant: str = "classic") -> np.ndarray:
    """Induction score per sequence and head from attention patterns ``[B, H, T, T]`` of repeated sequences.

    ``tokens`` ``[B, T]`` ends with the two copies of length ``seq_len`` (anything before is a prefix such
    as BOS). Returns ``[B, H]``.

    Example
    -------
    >>> import numpy as np
    >>> T, n = 7, 3
    >>> A = np.zeros((1, 1, T, T)); A[0, 0, np.arange(T), 0] = 1.0  # all attention on BOS
    >>> for q in range(4, 7): A[0, 0, q] = 0; A[0, 0, q, q - n + 1] = 1.0  # planted induction
    >>> induction_pattern_scores(A, np.array([[0, 5, 6, 7, 5, 6, 7]]), n).tolist()
    [[1.0]]
    """
    A = np.asarray(pattern, dtype=np.float64)
    tok = np.asarray(tokens)
    if A.ndim != 4 or A.shape[-1] != A.shape[-2] or tok.shape != (A.shape[0], A.shape[-1]):
        raise InputError(
            f"induction_pattern_scores needs pattern [B, H, T, T] and tokens [B, T]. Got {A.shape} and {tok.shape}."
        )
    T = A.shape[-1]
    if 2 * seq_len > T:
        raise InputError(f"seq_len={seq_len} does not fit twice in {T} positions.")
    if variant == "classic":
        q = np.arange(T - seq_len, T)
        return A[:, :, q, q - seq_len + 1].mean(-1)
    if variant == "tl":
        P = (tok[:, None, :-1] == tok[:, :, None]).astype(np.float64)  # P[b, q, k'] with k' = k - 1
        P = np.concatenate([np.zeros((tok.shape[0], T, 1)), P], axis=2)  # shift to key index k
        idx = np.arange(T)
        P[:, idx[:, None] == idx[None, :] - 1] = 0.0  # k - 1 == q never counts
        P = np.tril(P)
        return (A * P[:, None]).sum((-1, -2)) / A.sum((-1, -2))
    raise ConfigError(f"The 'variant' must be 'classic' or 'tl'. Got {variant!r} instead.")


@validate_args(model=[LanguageModel()], n_seqs=[Interval(int, 1, None)], seq_len=[Interval(int, 2, None)],
               variant=[Options(["classic", "tl"])], batch_size=[Interval(int, 1, None)], tokenizer=[None, Tokenizer()],
               random_state=["random_state"], switch_to_eager=["boolean"])
def induction_scores(
    model: Any,
    n_seqs: int = 32,
    seq_len: int = 50,
    *,
    variant: str = "classic",
    batch_size: int = 8,
    tokenizer: Any = None,
    random_state: int = 0,
    switch_to_eager: bool = True,
) -> np.ndarray:
    """Induction score of every head, ``[n_layers, n_heads]``.

    Parameters
    ----------
    model : causal LM (a supported architecture of :mod:`trustlab.llm`)
    n_seqs : int, default=32
        Random sequences (the official code uses 1000; rankings are stable far earlier).
    seq_len : int, default=50
        Length of the random block that is repeated.
    variant : {"classic", "tl"}, default="classic"
        ``"classic"``: mean attention ``A[q, q - n + 1]`` over second-half queries; ``"tl"``: the
        TransformerLens ``detect_head`` value for a list of prompts (``"mul"`` error measure).
    batch_size : int, default=8
    tokenizer : optional
        Defaults to the tokenizer attached by :func:`trustlab.llm.load_model`.
    random_state : int, default=0
    switch_to_eager : bool, default=True
        Attention weights need eager attention. True switches an ``sdpa`` model to eager for this call
        and back; False raises :class:`ConfigError` instead.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> induction_scores(model, n_seqs=2, seq_len=8).shape
    (2, 9)

    References
    ----------
    Yin & Steinhardt, "Which Attention Heads Matter for In-Context Learning?", ICML 2025
    (https://github.com/kayoyin/icl-heads, ``src/find_induction_heads.py``); Olsson et al., 2022.
    """
    import torch

    from trustlab.llm import dims, trace
    from trustlab.llm.sites import model_device, unwrap

    inner = unwrap(model)
    tok = tokenizer if tokenizer is not None else getattr(inner, "trustlab_tokenizer", None)
    if tok is None:
        raise ConfigError("induction_scores needs a tokenizer (pass tokenizer=... or use trustlab.llm.load_model).")
    d = dims(inner)
    if d.n_ctx and 2 * seq_len + 1 > d.n_ctx:
        raise InputError(f"2 * seq_len + 1 = {2 * seq_len + 1} exceeds the model context of {d.n_ctx}.")
    impl = getattr(inner.config, "_attn_implementation", None)
    if impl != "eager" and not switch_to_eager:
        raise ConfigError(
            f"induction_scores needs attention weights, which attn_implementation={impl!r} does not return. "
            "Load the model with attn_implementation='eager' or pass switch_to_eager=True."
        )
    ids = random_repeat_tokens(tok, n_seqs, seq_len, vocab=d.vocab, random_state=random_state)
    sites = [f"blocks.{layer}.pattern" for layer in range(d.n_layers)]
    scores = np.zeros((n_seqs, d.n_layers, d.n_heads))
    switched = impl != "eager"
    if switched:
        inner.set_attn_implementation("eager")
    try:
        for b0 in range(0, n_seqs, batch_size):
            batch = torch.as_tensor(ids[b0 : b0 + batch_size], device=model_device(inner))
            with torch.no_grad(), trace(inner, sites, stop_after="auto") as tr:
                tr.run(batch, use_cache=False, logits_to_keep=1)
            for layer, site in enumerate(sites):
                scores[b0 : b0 + batch.shape[0], layer] = induction_pattern_scores(
                    tr[site].float().cpu().numpy(), ids[b0 : b0 + batch_size], seq_len, variant=variant
                )
    finally:
        if switched:
            inner.set_attn_implementation(impl)
    return scores.mean(0)
