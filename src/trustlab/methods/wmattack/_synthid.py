"""SynthID-Text through transformers (``SynthIDTextWatermarkLogitsProcessor``): tournament sampling, our key
object, and a mean-g-value z-test detector (the spec's ``detector_type: mean``).

Slow on CPU (every step hashes the whole vocabulary at every tournament layer); generation must sample.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Interval, validate_value
from trustlab.core.optional import require
from trustlab.llm.rules import LanguageModel
from trustlab.methods.wmattack._keys import WatermarkKey
from trustlab.methods.wmattack._watermarks import Watermark

torch = require("torch", purpose="trustlab.methods.wmattack SynthID")
_tf = require("transformers", purpose="trustlab.methods.wmattack SynthID")

__all__ = ["SynthID"]


class SynthID(Watermark):
    """SynthID-Text (transformers' processor) with ``depth`` keys drawn from ``key``; n-gram length
    ``ngram_len``; detection: the mean g-value over non-repeated n-grams and all layers, z-tested against
    the sampling table's own mean (analytic; calibrate empirically where the independence assumption
    matters). Generation must sample (``do_sample=True``)."""

    name = "synthid"
    requires_sampling = True
    default_alpha = 3.167124183311998e-05

    def __init__(self, tokenizer: Any, key: WatermarkKey, *, ngram_len: int = 5, depth: int = 30,
                 sampling_table_size: int = 2**16, context_history_size: int = 1024, min_tokens: int = 16,
                 alpha: float | None = None) -> None:
        for name, v, lo in (("ngram_len", ngram_len, 2), ("depth", depth, 1), ("sampling_table_size",
                                                                                sampling_table_size, 2),
                            ("context_history_size", context_history_size, 1)):
            validate_value("SynthID", name, v, [Interval(int, lo, None)])
        super().__init__(tokenizer, key, min_tokens=min_tokens, alpha=alpha)
        rng = np.random.default_rng(key.reveal())
        self._keys = [int(k) for k in rng.integers(1, 2**31, size=depth)]
        self._table_seed = int(rng.integers(1, 2**31))
        self.ngram_len, self.depth = int(ngram_len), int(depth)
        self.sampling_table_size, self.context_history_size = int(sampling_table_size), int(context_history_size)
        self._det = self._new()
        self._p0 = float(self._det.sampling_table.double().mean())

    def _new(self) -> Any:
        return _tf.SynthIDTextWatermarkLogitsProcessor(
            ngram_len=self.ngram_len, keys=self._keys, sampling_table_size=self.sampling_table_size,
            sampling_table_seed=self._table_seed, context_history_size=self.context_history_size, device="cpu")

    @validate_args(model=[None, LanguageModel()])
    def processor(self, model: Any = None) -> Any:
        """A fresh transformers SynthID processor (it keeps per-generation state: one per ``generate``)."""
        if model is not None:
            self.check_model(model)
        return self._new()

    @validate_args(n_tokens=[Interval(int, 0, None)])
    def n_scorable(self, n_tokens: int) -> int:
        return n_tokens - (self.ngram_len - 1)

    def _score(self, ids: list[int]) -> tuple[float, float, int]:
        from scipy.stats import norm

        x = torch.tensor([ids], dtype=torch.long)
        g = self._det.compute_g_values(x)[0].double()  # (T - n + 1, depth)
        mask = self._det.compute_context_repetition_mask(x)[0].bool()
        n = int(mask.sum())
        if n == 0:
            return float("nan"), float("nan"), 0
        mean_g = float(g[mask].mean())
        big_n = n * self.depth
        z = (mean_g - self._p0) * math.sqrt(big_n) / math.sqrt(self._p0 * (1 - self._p0))
        return mean_g, float(norm.sf(z)), n
