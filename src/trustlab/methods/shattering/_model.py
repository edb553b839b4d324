"""The small from-scratch decoder for the cyclic knowledge graph, its training objective and fact accuracy.

The model is a 2-layer pre-norm Llama-architecture decoder built from a config (no weights are downloaded),
so every hook site and editor of :mod:`trustlab.llm` serves it exactly as it serves SmolLM2. It is trained
with the shared loop :func:`trustlab.llm.train` on random walks (loss on entity positions only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Boolean, InstanceOf, Interval, RandomStateRule
from trustlab.core.exceptions import InputError
from trustlab.core.seeding import as_seed, derive_seed, seed_alias
from trustlab.core.threads import limit_threads
from trustlab.methods.shattering._kg import CyclicKG

__all__ = ["FactAccuracy", "fact_accuracy", "make_kg_model", "query_tokens", "train_kg_model"]

_KG = [InstanceOf(CyclicKG)]


def _kg_example() -> dict[str, Any]:
    return {"kg": CyclicKG(16)}


@seed_alias
@validate_args(kg=_KG, d_model=[Interval(int, 4, None)], n_layers=[Interval(int, 1, None)],
               n_heads=[Interval(int, 1, None)], d_mlp=[Interval(int, 1, None), None],
               n_ctx=[Interval(int, 4, None)], tie_embeddings=[Boolean()], random_state=[RandomStateRule()],
               _example=_kg_example)
def make_kg_model(kg: CyclicKG, *, d_model: int = 64, n_layers: int = 2, n_heads: int = 4, d_mlp: int | None = None,
                  n_ctx: int = 32, tie_embeddings: bool = False, random_state: Any = 0) -> Any:
    """A fresh pre-norm Llama decoder over the graph's vocabulary (entities + relations), fp32 on CPU.

    ``d_mlp`` defaults to ``4 * d_model``. The initial weights are seeded from ``random_state`` (``seed=`` is its
    deprecated name); the global torch RNG is left untouched.
    """
    import torch
    import transformers as tf

    if d_model % n_heads:
        raise InputError(f"The 'd_model' argument of make_kg_model must be divisible by n_heads={n_heads}. "
                         f"Got {d_model} instead.")
    config = tf.LlamaConfig(
        vocab_size=kg.vocab_size, hidden_size=d_model, intermediate_size=d_mlp or 4 * d_model,
        num_hidden_layers=n_layers, num_attention_heads=n_heads, num_key_value_heads=n_heads,
        head_dim=d_model // n_heads, max_position_embeddings=n_ctx, rms_norm_eps=1e-5, initializer_range=0.05,
        tie_word_embeddings=tie_embeddings, bos_token_id=None, eos_token_id=None, pad_token_id=None,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, attn_implementation="sdpa")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(as_seed(random_state))
        model = tf.LlamaForCausalLM(config)
    return model.float().eval()


class WalkObjective:
    """Next-token cross-entropy on the entity positions of random walks (an objective for ``llm.train``)."""

    def __init__(self, model: Any, tokens: np.ndarray, mask: np.ndarray, n_entities: int) -> None:
        import torch

        self.model = model
        self.tokens = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
        self.mask = torch.as_tensor(np.asarray(mask), dtype=torch.bool)
        self.n_entities = int(n_entities)

    @property
    def n_items(self) -> int:
        return int(self.tokens.shape[0])

    def __call__(self, rows: Any) -> Any:
        import torch

        idx = torch.as_tensor(np.asarray(rows), dtype=torch.long)
        tok, m = self.tokens[idx], self.mask[idx]
        logits = self.model(input_ids=tok).logits[:, :-1, : self.n_entities]
        tgt, sel = tok[:, 1:], m[:, 1:]
        return torch.nn.functional.cross_entropy(logits[sel], tgt[sel])


@validate_args(model=[InstanceOf(object)], kg=_KG, steps=[Interval(int, 1, None)],
               batch_size=[Interval(int, 1, None)], lr=[Interval(float, 0, None, closed="neither")],
               weight_decay=[Interval(float, 0, None)], n_walks=[Interval(int, 1, None)],
               walk_length=[Interval(int, 3, None)], composition=[Interval(float, 0, 1)],
               random_state=[RandomStateRule()], threads=[Interval(int, 1, None), None],
               eval_every=[Interval(int, 1, None), None], evaluate=[None, "callable"],
               _example=lambda: {"model": make_kg_model(CyclicKG(16), d_model=8, n_heads=2), "kg": CyclicKG(16),
                                 "steps": 2})
def train_kg_model(model: Any, kg: CyclicKG, *, steps: int = 3000, batch_size: int = 128, lr: float = 3e-3,
                   weight_decay: float = 0.1, n_walks: int = 20000, walk_length: int = 16,
                   composition: float = 0.1, random_state: Any = 0, threads: int | None = None,
                   eval_every: int | None = None, evaluate: Any = None) -> Any:
    """Train ``model`` on fresh random walks of ``kg`` with :func:`trustlab.llm.train` (AdamW, cosine).

    Returns the loop's :class:`~trustlab.llm.FitHistory`. The walks are seeded from ``random_state``.
    """
    from trustlab.llm import train

    seed = derive_seed(random_state, "walks")
    tokens, mask = kg.walks(n_walks, walk_length, composition=composition, random_state=seed)
    model.train()
    try:
        hist = train(model, WalkObjective(model, tokens, mask, kg.n_entities), steps=steps, batch_size=batch_size,
                     lr=lr, weight_decay=weight_decay, warmup_steps=min(100, steps // 10), schedule="cosine",
                     random_state=derive_seed(random_state, "order"), device="cpu", threads=threads,
                     eval_every=eval_every, evaluate=evaluate)
    finally:
        model.eval()
    return hist


@validate_args(kg=_KG, facts=[InstanceOf(np.ndarray)], context_hops=[Interval(int, 0, None)],
               n_contexts=[Interval(int, 1, None)], random_state=[RandomStateRule()],
               _example=lambda: {"kg": CyclicKG(16), "facts": CyclicKG(16).facts()[:3]})
def query_tokens(kg: CyclicKG, facts: np.ndarray, *, context_hops: int = 3, n_contexts: int = 4,
                 random_state: Any = 0) -> np.ndarray:
    """Query sequences for facts: a backward walk of ``context_hops`` hops ending in the subject, then the
    relation token; ``(len(facts) * n_contexts, 2 * context_hops + 2)`` tokens, fact-major.

    The contexts are a function of (subject, context index, seed) only, so the same query tokens are used
    before and after an edit.
    """
    f = np.asarray(facts, dtype=np.int64)
    if f.ndim != 2 or f.shape[1] != 3:
        raise InputError(f"The 'facts' argument of query_tokens must be an (m, 3) int array. Got shape {f.shape}.")
    subjects = np.unique(f[:, 0])
    ctx = {c: dict(zip(subjects.tolist(), kg.contexts(subjects, context_hops, random_state=derive_seed(
        random_state, "ctx", c)), strict=True)) for c in range(n_contexts)}
    rows = [np.concatenate([ctx[c][int(x)], [kg.n_entities + int(r)]]) for x, r, _ in f for c in range(n_contexts)]
    return np.stack(rows) if rows else np.zeros((0, 2 * context_hops + 2), dtype=np.int64)


@dataclass
class FactAccuracy:
    """Per-fact top-1 accuracy (mean over contexts) and mean probability of the correct entity."""

    correct: np.ndarray
    prob: np.ndarray

    @property
    def accuracy(self) -> float:
        return float(self.correct.mean()) if self.correct.size else float("nan")


@validate_args(model=[InstanceOf(object)], kg=_KG, facts=[InstanceOf(np.ndarray)],
               context_hops=[Interval(int, 0, None)], n_contexts=[Interval(int, 1, None)],
               random_state=[RandomStateRule()], batch_size=[Interval(int, 1, None)],
               tokens=[None, ArrayLike(ndim=2, dtype="integer", low=0, min_len=0)],
               _example=lambda: {"model": make_kg_model(CyclicKG(16), d_model=8, n_heads=2), "kg": CyclicKG(16),
                                 "facts": CyclicKG(16).facts()[:3]})
def fact_accuracy(model: Any, kg: CyclicKG, facts: np.ndarray, *, context_hops: int = 3, n_contexts: int = 4,
                  random_state: Any = 0, batch_size: int = 4096, tokens: np.ndarray | None = None) -> FactAccuracy:
    """Top-1 accuracy (over entity tokens) of ``model`` on ``facts``, averaged over fixed contexts.

    Pass ``tokens`` (from :func:`query_tokens`) to reuse the same query sequences across calls.
    """
    import torch

    f = np.asarray(facts, dtype=np.int64)
    q = query_tokens(kg, f, context_hops=context_hops, n_contexts=n_contexts, random_state=random_state) \
        if tokens is None else np.asarray(tokens)
    if len(q) != len(f) * n_contexts:
        raise InputError(f"The 'tokens' argument of fact_accuracy must hold {len(f) * n_contexts} rows "
                         f"(facts x n_contexts). Got {len(q)} instead.")
    if not len(f):
        return FactAccuracy(np.zeros(0), np.zeros(0))
    out = []
    with torch.no_grad(), limit_threads(None):
        for i in range(0, len(q), batch_size):
            logits = model(input_ids=torch.as_tensor(q[i:i + batch_size])).logits[:, -1, : kg.n_entities]
            out.append(torch.softmax(logits.float(), -1).numpy())
    p = np.concatenate(out).reshape(len(f), n_contexts, kg.n_entities)
    target = f[:, 2]
    correct = (p.argmax(-1) == target[:, None]).mean(axis=1)
    prob = p[np.arange(len(f)), :, target].mean(axis=1)
    return FactAccuracy(correct, prob)
