"""LLM text watermarks with one interface: KGW (green list from the previous token), Unigram (one fixed green
list) and EXP (Aaronson-Kirchner exponential sampling), plus threshold calibration at a target FPR.

Every watermark has ``processor(model)`` (a transformers ``LogitsProcessor`` for ``model.generate``; EXP
needs greedy decoding: its processor makes the sampling choice), ``detect(texts) -> Detection`` (scores,
p-values, decisions at the watermark's threshold ``alpha_`` on the p-value) and ``calibrate(null_texts,
fpr)``. p-values are analytic: the one-sided z-test for KGW/Unigram, the Gamma(T, 1) tail for EXP.

KGW follows the reference implementation (lm-watermarking; transformers' ``WatermarkLogitsProcessor``,
"lefthash"): the green list after token ``t`` is the first ``int(gamma * V)`` entries of
``torch.randperm(V)`` drawn from a ``torch.Generator`` seeded with ``key * t``, so our green counts equal
transformers' ``WatermarkDetector`` on the same key and ids (tested).
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, takes_any, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Options, Satisfies, validate_value
from trustlab.core.exceptions import ConfigError, InputError, UnknownNameError, did_you_mean
from trustlab.core.hashing import content_hash
from trustlab.core.optional import require
from trustlab.llm.rules import LanguageModel, Tokenizer
from trustlab.methods.wmattack._keys import WatermarkKey

torch = require("torch", purpose="trustlab.methods.wmattack watermarks")
_tf = require("transformers", purpose="trustlab.methods.wmattack watermarks")

__all__ = ["Detection", "Calibration", "Watermark", "KGW", "Unigram", "EXP", "make_watermark",
           "calibrate_threshold", "WATERMARKS", "CalibrationWarning"]

_CACHE_MAX = 512
_TEXTS = SequenceOf(InstanceOf(str))
_ON_SHORT = [Options(["raise", "abstain"])]
_N_TOKENS = [Interval(int, 0, None)]


def _is_id_row(row: Any) -> bool:
    return not isinstance(row, str | bytes) and all(isinstance(t, numbers.Integral) for t in row)


#: token ids of the watermark's tokenizer: one row (a list of ints) per text
_ID_ROW = Satisfies(_is_id_row, "a list of token ids (ints)", ["ids", [0.5], None], valid=[1, 2])
_ID_ROWS = Satisfies(lambda v: isinstance(v, list | tuple | np.ndarray) and all(_is_id_row(r) for r in v),
                     "a list of token-id rows (each a list of ints)", ["ids", [3], [["a"]]], valid=[[1, 2]])


class CalibrationWarning(UserWarning):
    """Too few unwatermarked texts for an empirical threshold: the analytic one is used."""


@dataclass(frozen=True)
class Detection:
    """Per text: ``scores`` (z for KGW/Unigram, the EXP statistic), one-sided ``p_values``, ``decisions``
    (p < ``alpha``), tokens scored ``n_scored`` and ``decided`` (False only where ``on_short="abstain"``
    let a too-short text through: its score and p-value are NaN and its decision False)."""

    scores: np.ndarray
    p_values: np.ndarray
    decisions: np.ndarray
    n_scored: np.ndarray
    decided: np.ndarray
    alpha: float
    watermark: str
    key_id: str

    @property
    def detection_rate(self) -> float:
        """Fraction of texts flagged as watermarked (undecided texts count as not flagged)."""
        return float(np.mean(self.decisions)) if len(self.decisions) else float("nan")


@dataclass(frozen=True)
class Calibration:
    """A p-value threshold ``alpha`` for a target ``fpr``; ``method`` is "empirical" or "analytic"."""

    alpha: float
    fpr: float
    method: str
    n_null: int
    observed_fpr: float


@validate_args(null_p_values=[SequenceOf(Interval(float, 0, 1)), InstanceOf(np.ndarray)],
               fpr=[Interval(float, 0, 1, closed="neither")], method=[Options(["auto", "empirical", "analytic"])])
def calibrate_threshold(null_p_values: Any, fpr: float = 0.01, method: str = "auto") -> Calibration:
    """The p-value threshold giving false-positive rate ``fpr`` on unwatermarked texts' p-values.

    ``"empirical"``: the largest ``alpha`` with at most ``floor(fpr * n)`` null p-values below it;
    ``"analytic"``: ``alpha = fpr`` (exact when the null distribution is known, as for the z-test and
    the Gamma test); ``"auto"`` uses the empirical one when there are at least ``ceil(1 / fpr)`` null
    texts and the analytic one otherwise (with a :class:`CalibrationWarning`).

    Example
    -------
    >>> calibrate_threshold([0.5, 0.2, 0.9], fpr=0.01).method
    'analytic'
    """
    p = np.sort(np.asarray(null_p_values, dtype=float).ravel())
    if p.size == 0 or not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1:
        raise InputError("The 'null_p_values' argument of calibrate_threshold must be a non-empty list of p-values "
                         f"in [0, 1]. Got {p.size} value(s) instead.")
    need = math.ceil(1.0 / fpr - 1e-9)
    if method == "auto":
        method = "empirical" if p.size >= need else "analytic"
        if method == "analytic":
            warnings.warn(f"calibrate_threshold: {p.size} unwatermarked texts < 1/fpr = {need}; using the analytic "
                          f"threshold alpha = {fpr}.", CalibrationWarning, stacklevel=2)
    alpha = float(fpr) if method == "analytic" else float(p[int(math.floor(fpr * p.size))])
    return Calibration(alpha, float(fpr), method, int(p.size), float(np.mean(p < alpha)))


def _vocab_fingerprint(tok: Any) -> str:
    vocab = tok.get_vocab()
    return content_hash(sorted(vocab.items()))[:16]


class Watermark:
    """Base class: a keyed watermark bound to the tokenizer it was built with.

    Parameters (shared): ``tokenizer`` (the generator's), ``key`` (:class:`WatermarkKey`), ``min_tokens``
    (fewest scored tokens for a decision; shorter texts raise "too short to decide" unless
    ``on_short="abstain"``), ``alpha`` (p-value threshold before :meth:`calibrate`; default the paper's
    default decision rule).
    """

    name = "base"
    requires_greedy = False
    default_alpha = 1e-4

    def __init__(self, tokenizer: Any, key: WatermarkKey, *, min_tokens: int = 16, alpha: float | None = None) -> None:
        owner = type(self).__name__
        validate_value(owner, "tokenizer", tokenizer, [Tokenizer()])
        validate_value(owner, "key", key, [InstanceOf(WatermarkKey)])
        validate_value(owner, "min_tokens", min_tokens, [Interval(int, 1, None)])
        validate_value(owner, "alpha", alpha, [Interval(float, 0, 1, closed="neither"), None])
        self.tokenizer = tokenizer
        self.key = key
        self.min_tokens = int(min_tokens)
        self.vocab_size = len(tokenizer)
        self.alpha_ = float(self.default_alpha if alpha is None else alpha)
        self.calibration_: Calibration | None = None
        self._fp = _vocab_fingerprint(tokenizer)
        self._checked_tok: Any = tokenizer

    @property
    def key_id(self) -> str:
        return self.key.key_id

    def __repr__(self) -> str:
        return f"{type(self).__name__}(key={self.key!r}, vocab={self.vocab_size})"

    # -- checks ---------------------------------------------------------------------------------------
    @validate_args(tokenizer=[Tokenizer()])
    def check_tokenizer(self, tokenizer: Any) -> None:
        """Raise InputError when ``tokenizer`` differs from the one this watermark was built with."""
        if tokenizer is self._checked_tok:
            return
        same = len(tokenizer) == self.vocab_size and _vocab_fingerprint(tokenizer) == self._fp
        if not same:
            raise InputError(f"The 'tokenizer' argument of {type(self).__name__} must be the tokenizer the watermark "
                             f"was built with (vocab {self.vocab_size}, fingerprint {self._fp}). Got a tokenizer with "
                             f"vocab {len(tokenizer)} instead: detect with the generator's tokenizer.")
        self._checked_tok = tokenizer

    @validate_args(model=[LanguageModel()])
    def check_model(self, model: Any) -> None:
        """Raise InputError when the model's output vocabulary differs from the watermark's."""
        emb = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        n = int(emb.weight.shape[0]) if emb is not None else int(getattr(model.config, "vocab_size", -1))
        if n != self.vocab_size:
            raise InputError(f"The 'model' argument of {type(self).__name__}.processor must output the watermark's "
                             f"vocabulary of {self.vocab_size} tokens. Got a model with {n} outputs instead (a "
                             "different tokenizer).")

    # -- embed ----------------------------------------------------------------------------------------
    @validate_args(model=[None, LanguageModel()])
    def processor(self, model: Any = None) -> Any:
        """A transformers ``LogitsProcessor`` that embeds the watermark (checks ``model``'s vocab if given)."""
        if model is not None:
            self.check_model(model)
        return _Processor(self)

    def _process(self, input_ids: Any, scores: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- detect ---------------------------------------------------------------------------------------
    def _score(self, ids: list[int]) -> tuple[float, float, int]:  # pragma: no cover - abstract
        raise NotImplementedError

    @validate_args(n_tokens=_N_TOKENS)
    def n_scorable(self, n_tokens: int) -> int:
        """Tokens scored in a text of ``n_tokens`` tokens."""
        return n_tokens

    @validate_args(texts=[SequenceOf(InstanceOf(str), min_len=0)])
    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of ``texts`` under the watermark's tokenizer (no special tokens; strip the prompt first)."""
        return [list(self.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]

    @validate_args(texts=[str, _TEXTS], tokenizer=[None, Tokenizer()], on_short=_ON_SHORT)
    def detect(self, texts: Sequence[str], *, tokenizer: Any = None, on_short: str = "raise") -> Detection:
        """Score ``texts`` (the generated continuation only, never the prompt; one str is one text) and decide
        at ``alpha_``."""
        owner = f"{type(self).__name__}.detect"
        if isinstance(texts, str):
            texts = [texts]
        if tokenizer is not None:
            self.check_tokenizer(tokenizer)
        return self.detect_ids(self.encode(texts), on_short=on_short, _owner=owner, _texts=texts)

    @validate_args(ids=[_ID_ROWS], on_short=_ON_SHORT, _owner=[str], _texts=[None, _TEXTS])
    def detect_ids(self, ids: Sequence[Sequence[int]], *, on_short: str = "raise", _owner: str = "",
                   _texts: Sequence[str] | None = None) -> Detection:
        """As :meth:`detect`, on token ids of the watermark's tokenizer."""
        owner = _owner or f"{type(self).__name__}.detect_ids"
        n = len(ids)
        scores, pv, ns = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n, dtype=int)
        for i, row in enumerate(ids):
            row = [int(t) for t in row]
            if row and (min(row) < 0 or max(row) >= self.vocab_size):
                raise InputError(f"The ids of text {i} in {owner} must be in [0, {self.vocab_size}). Got "
                                 f"{min(row)}..{max(row)} instead (another tokenizer?).")
            k = self.n_scorable(len(row))
            ns[i] = max(k, 0)
            if k < self.min_tokens:
                if on_short == "raise":
                    what = "empty" if (_texts is not None and not _texts[i].strip()) or not row else \
                        f"{len(row)} tokens long ({max(k, 0)} scored)"
                    raise InputError(f"Text {i} passed to {owner} is too short to decide: it is {what}; a decision "
                                     f"needs at least min_tokens={self.min_tokens} scored tokens. Pass "
                                     "on_short='abstain' to mark such texts undecided instead.")
                continue
            scores[i], pv[i], ns[i] = self._score(row)
        decided = np.isfinite(pv)
        dec = np.zeros(n, dtype=bool)
        dec[decided] = pv[decided] < self.alpha_
        return Detection(scores, pv, dec, ns, decided, self.alpha_, self.name, self.key_id)

    @validate_args(null_texts=[SequenceOf(InstanceOf(str))], fpr=[Interval(float, 0, 1, closed="neither")],
                   method=[Options(["auto", "empirical", "analytic"])])
    def calibrate(self, null_texts: Sequence[str], fpr: float = 0.01, method: str = "auto") -> Calibration:
        """Set ``alpha_`` for false-positive rate ``fpr`` on unwatermarked ``null_texts``; returns the
        :class:`Calibration` (empirical with >= 1/fpr texts, else analytic with a warning)."""
        det = self.detect(null_texts, on_short="abstain")
        p = det.p_values[det.decided]
        if p.size == 0:
            raise InputError(f"Every text passed to {type(self).__name__}.calibrate is too short to decide.")
        cal = calibrate_threshold(p.tolist(), fpr=fpr, method=method)
        self.alpha_, self.calibration_ = cal.alpha, cal
        return cal


class _Processor(_tf.LogitsProcessor):
    def __init__(self, wm: Watermark) -> None:
        self.wm = wm

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if scores.shape[-1] != self.wm.vocab_size:
            raise InputError(f"The model's logits have {scores.shape[-1]} entries but the {self.wm.name} watermark "
                             f"was built for a vocabulary of {self.wm.vocab_size} (a different tokenizer).")
        return self.wm._process(input_ids, scores)


def _z(green: float, n: int, gamma: float) -> tuple[float, float]:
    from scipy.stats import norm

    z = (green - gamma * n) / math.sqrt(n * gamma * (1 - gamma))
    return float(z), float(norm.sf(z))


class _ZTestWatermark(Watermark):
    default_alpha = 3.167124183311998e-05  # z > 4 (the reference implementations' default)

    def __init__(self, tokenizer: Any, key: WatermarkKey, *, gamma: float = 0.25, delta: float = 2.0,
                 min_tokens: int = 16, alpha: float | None = None) -> None:
        owner = type(self).__name__
        validate_value(owner, "gamma", gamma, [Interval(float, 0, 1, closed="neither")])
        validate_value(owner, "delta", delta, [Interval(float, 0, None)])
        super().__init__(tokenizer, key, min_tokens=min_tokens, alpha=alpha)
        self.gamma, self.delta = float(gamma), float(delta)
        self.green_size = int(self.vocab_size * self.gamma)
        if not 0 < self.green_size < self.vocab_size:
            raise ConfigError(f"The 'gamma' parameter of {owner} gives a green list of {self.green_size} of "
                              f"{self.vocab_size} tokens; it must leave both lists non-empty.")

    def _perm_mask(self, seed: int) -> Any:
        g = torch.Generator().manual_seed(seed % (2**64 - 1))
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        mask[torch.randperm(self.vocab_size, generator=g)[: self.green_size]] = True
        return mask


class KGW(_ZTestWatermark):
    """Kirchenbauer et al.'s watermark ("lefthash", context 1): add ``delta`` to the green list seeded by
    ``key * previous token``; detect with the z-test over all tokens after the first.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama  # doctest: +SKIP
    >>> wm = KGW(tiny_random_llama()[1], WatermarkKey(7))  # doctest: +SKIP
    """

    name = "kgw"

    def __init__(self, tokenizer: Any, key: WatermarkKey, *, gamma: float = 0.25, delta: float = 2.0,
                 min_tokens: int = 16, alpha: float | None = None) -> None:
        super().__init__(tokenizer, key, gamma=gamma, delta=delta, min_tokens=min_tokens, alpha=alpha)
        self._cache: dict[int, Any] = {}

    @takes_any(prev="the previous token id, once per generated token on the hot path; int(prev) keys the cache")
    def green_mask(self, prev: int) -> Any:
        """Boolean mask over the vocabulary: the green list after token ``prev``."""
        m = self._cache.get(prev)
        if m is None:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.pop(next(iter(self._cache)))
            m = self._cache[prev] = self._perm_mask(self.key.reveal() * int(prev))
        return m

    @validate_args(n_tokens=_N_TOKENS)
    def n_scorable(self, n_tokens: int) -> int:
        return n_tokens - 1

    def _process(self, input_ids: Any, scores: Any) -> Any:
        out = scores.clone()
        for b in range(input_ids.shape[0]):
            out[b, self.green_mask(int(input_ids[b, -1]))] += self.delta
        return out

    @validate_args(ids=[_ID_ROW])
    def green_count(self, ids: Sequence[int]) -> int:
        """Green tokens among ``ids[1:]`` (each scored against the green list of its predecessor)."""
        return int(sum(bool(self.green_mask(int(p))[int(t)]) for p, t in zip(ids[:-1], ids[1:], strict=True)))

    def _score(self, ids: list[int]) -> tuple[float, float, int]:
        n = len(ids) - 1
        z, p = _z(self.green_count(ids), n, self.gamma)
        return z, p, n

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": {}}


class Unigram(_ZTestWatermark):
    """Zhao et al.'s Unigram watermark: one fixed green list from the key (context-free); z-test over all tokens."""

    name = "unigram"

    def __init__(self, tokenizer: Any, key: WatermarkKey, *, gamma: float = 0.25, delta: float = 2.0,
                 min_tokens: int = 16, alpha: float | None = None) -> None:
        super().__init__(tokenizer, key, gamma=gamma, delta=delta, min_tokens=min_tokens, alpha=alpha)
        self.mask = self._perm_mask(self.key.reveal())
        self._np_mask = self.mask.numpy()
        self._bias = self.delta * self.mask.to(torch.float32)  # one bias row, added in place of a masked add

    def _process(self, input_ids: Any, scores: Any) -> Any:
        return scores + self._bias.to(scores.dtype)

    def _score(self, ids: list[int]) -> tuple[float, float, int]:
        z, p = _z(float(self._np_mask[np.asarray(ids)].sum()), len(ids), self.gamma)
        return z, p, len(ids)


class EXP(Watermark):
    """Aaronson-Kirchner exponential watermark: ``r ~ U[0,1]^V`` from a generator seeded with
    ``key * (prod of the last `context` ids mod V + 1)``; emit ``argmax_v r_v^(1/p_v)`` (greedy decoding
    required: the processor leaves only that token); score ``s = sum -log(1 - r_{x_t})``, p = Gamma(T, 1)
    tail. The ``+ 1`` keeps a zero product from giving every key the same draw (our choice)."""

    name = "exp"
    requires_greedy = True

    def __init__(self, tokenizer: Any, key: WatermarkKey, *, context: int = 4, min_tokens: int = 16,
                 alpha: float | None = None) -> None:
        validate_value("EXP", "context", context, [Interval(int, 1, None)])
        super().__init__(tokenizer, key, min_tokens=min_tokens, alpha=alpha)
        self.context = int(context)

    def _r(self, ctx: Sequence[int]) -> Any:
        h = 1
        for t in ctx:
            h = (h * int(t)) % self.vocab_size
        g = torch.Generator().manual_seed((self.key.reveal() * (h + 1)) % (2**63 - 1))
        return torch.rand(self.vocab_size, generator=g, dtype=torch.float64)

    @validate_args(n_tokens=_N_TOKENS)
    def n_scorable(self, n_tokens: int) -> int:
        return n_tokens - self.context

    def _process(self, input_ids: Any, scores: Any) -> Any:
        probs = torch.softmax(scores.double(), dim=-1)
        out = torch.full_like(scores, -math.inf)
        for b in range(input_ids.shape[0]):
            r = self._r(input_ids[b, -self.context:].tolist())
            choice = int(torch.argmax(torch.log(r) / probs[b].clamp_min(1e-300)))
            out[b, choice] = 0.0
        return out

    def _score(self, ids: list[int]) -> tuple[float, float, int]:
        from scipy.stats import gamma as gamma_dist

        c = self.context
        s = sum(-math.log1p(-float(self._r(ids[t - c:t])[ids[t]])) for t in range(c, len(ids)))
        n = len(ids) - c
        return float(s), float(gamma_dist.sf(s, a=n)), n


WATERMARKS: dict[str, type[Watermark]] = {"kgw": KGW, "unigram": Unigram, "exp": EXP}


def _register_synthid() -> None:
    from trustlab.methods.wmattack._synthid import SynthID

    WATERMARKS["synthid"] = SynthID


def _example() -> dict[str, Any]:
    from trustlab.llm import tiny_random_llama

    return {"name": "kgw", "tokenizer": tiny_random_llama()[1], "key": WatermarkKey(7)}


@validate_args(_example, name=[InstanceOf(str)], tokenizer=[Tokenizer()], key=[InstanceOf(WatermarkKey)])
def make_watermark(name: str, tokenizer: Any, key: WatermarkKey, **params: Any) -> Watermark:
    """A watermark by name (``"kgw"``, ``"unigram"``, ``"exp"``, ``"synthid"``) for ``tokenizer`` and ``key``.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> make_watermark("kgw", tiny_random_llama()[1], WatermarkKey(7), gamma=0.5).gamma
    0.5
    """
    _register_synthid()
    cls = WATERMARKS.get(name.lower())
    if cls is None:
        raise UnknownNameError(f"Unknown watermark {name!r}; known: {sorted(WATERMARKS)}."
                               f"{did_you_mean(name.lower(), WATERMARKS)}")
    return cls(tokenizer, key, **params)
