"""Attacks on watermarked texts, all ``Attack``s (``generate(texts, budget) -> AttackResult``).

* Edit baselines (non-LLM): :class:`WordDeletion`, :class:`TokenShuffle` (words permuted within a
  sentence), :class:`SynonymSwap` (a shipped table of common English words: no WordNet data offline).
  ``budget`` = the largest fraction of words an edit may change (in [0, 1]); ``cost`` = the fraction changed.
* :class:`ParaphraseAttack`: an LLM paraphraser (the untuned one, or a DPO-tuned LoRA, with the paper's
  ``adapter_ratio`` knob W = W_base + ratio * (W_tuned - W_base)). ``budget`` = the most output tokens per
  text; outputs are cut to it and ``cost`` = the output's token count.

``success`` = not flagged by ``watermark`` (when given; texts too short to decide count as not flagged),
else the output differs from the input.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf, Interval
from trustlab.core.exceptions import InputError
from trustlab.core.roles import Attack, AttackResult
from trustlab.llm.rules import LanguageModel, Tokenizer, TorchModule
from trustlab.methods.wmattack._generation import PARAPHRASE_SYSTEM, clean_paraphrase, paraphrase_messages
from trustlab.methods.wmattack._paper import PAPER
from trustlab.methods.wmattack._watermarks import Watermark

__all__ = ["WordDeletion", "TokenShuffle", "SynonymSwap", "ParaphraseAttack", "adapter_ratio", "SYNONYMS"]

#: a small shipped synonym table (common words; both directions are listed where they make sense)
SYNONYMS: dict[str, tuple[str, ...]] = {
    "big": ("large", "huge"), "small": ("little", "tiny"), "large": ("big", "huge"), "little": ("small", "tiny"),
    "happy": ("glad", "joyful"), "sad": ("unhappy", "sorrowful"), "quick": ("fast", "rapid"), "fast": ("quick",),
    "slow": ("sluggish", "unhurried"), "old": ("aged", "ancient"), "new": ("fresh", "novel"), "good": ("fine", "great"),
    "bad": ("poor", "awful"), "beautiful": ("lovely", "pretty"), "begin": ("start", "commence"), "start": ("begin",),
    "end": ("finish", "close"), "finish": ("end", "complete"), "help": ("aid", "assist"), "look": ("glance", "peer"),
    "see": ("notice", "observe"), "said": ("stated", "remarked"), "say": ("state", "tell"), "make": ("create", "build"),
    "build": ("construct", "make"), "find": ("discover", "locate"), "know": ("understand", "realize"),
    "think": ("believe", "suppose"), "want": ("wish", "desire"), "need": ("require",), "show": ("display", "reveal"),
    "often": ("frequently",), "very": ("really", "extremely"), "many": ("numerous", "several"),
    "important": ("significant", "crucial"), "different": ("distinct", "varied"), "strong": ("powerful", "sturdy"),
    "smart": ("clever", "bright"), "clever": ("smart", "bright"), "dark": ("dim", "gloomy"), "bright": ("brilliant",),
    "house": ("home", "dwelling"), "home": ("house",), "city": ("town",), "town": ("city", "village"),
    "story": ("tale", "narrative"), "book": ("volume", "novel"), "journey": ("trip", "voyage"), "trip": ("journey",),
    "friend": ("companion", "pal"), "child": ("kid", "youngster"), "people": ("folks", "individuals"),
    "world": ("globe", "earth"), "idea": ("notion", "concept"), "problem": ("issue", "difficulty"),
    "answer": ("reply", "response"), "ask": ("inquire", "question"), "walk": ("stroll", "wander"),
    "run": ("sprint", "dash"), "quiet": ("silent", "calm"), "calm": ("peaceful", "quiet"), "angry": ("furious", "mad"),
    "afraid": ("scared", "frightened"), "scared": ("afraid", "frightened"), "tired": ("weary", "exhausted"),
    "love": ("adore", "cherish"), "like": ("enjoy",), "whole": ("entire", "complete"), "also": ("too", "as well"),
    "however": ("yet", "still"), "because": ("since", "as"), "about": ("regarding", "concerning"),
    "great": ("excellent", "wonderful"), "wonderful": ("marvelous", "great"), "famous": ("renowned", "celebrated"),
    "visit": ("trip", "stay"), "young": ("youthful",), "began": ("started",), "started": ("began",),
    "found": ("discovered",), "made": ("created",), "looked": ("glanced",), "saw": ("noticed", "spotted"),
    "day": ("daytime",), "night": ("evening",), "way": ("path", "route"), "place": ("spot", "location"),
    "small-town": ("provincial",), "curious": ("inquisitive",), "kind": ("gentle", "caring"), "gentle": ("kind", "soft"),
}

_WORD = re.compile(r"\S+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _texts(owner: str, inputs: Any) -> list[str]:
    texts = [inputs] if isinstance(inputs, str) else inputs
    if not isinstance(texts, list | tuple) or not texts or not all(isinstance(t, str) for t in texts):
        raise InputError(f"The 'inputs' argument of {owner} must be a non-empty list of texts. Got "
                         f"{type(inputs).__name__} instead.")
    return list(texts)


def _success(wm: Watermark | None, texts: list[str], outputs: list[str]) -> np.ndarray:
    if wm is None:
        return np.array([o != t for o, t in zip(outputs, texts, strict=True)])
    return ~wm.detect(outputs, on_short="abstain").decisions


class _EditAttack(Attack):
    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {"stochastic": True}
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "ratio": [Interval(float, 0, 1)], "watermark": [InstanceOf(Watermark), None], "random_state": ["random_state"]}

    def __init__(self, *, ratio: float = 0.3, watermark: Watermark | None = None, random_state: Any = None) -> None:
        self.ratio = ratio
        self.watermark = watermark
        self.random_state = random_state

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        return {"inputs": ["The big dog began to run home because it was very tired.", "A quiet story about a town."],
                "budget": 0.5}

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"ratio": 0.4}]

    def _generate(self, inputs: Any, budget: float) -> AttackResult:
        owner = f"{type(self).__name__}.generate"
        texts = _texts(owner, inputs)
        if budget > 1:
            raise InputError(f"The 'budget' argument of {owner} must be a fraction of words in [0, 1]. Got {budget} "
                             "instead.")
        frac = min(float(self.ratio), budget)
        outs, cost = [], []
        for t in texts:
            words = _words(t)
            k = int(np.floor(frac * len(words) + 1e-9))
            new, changed = self._edit(words, k)
            outs.append(" ".join(new))
            cost.append(changed / max(len(words), 1))
        return AttackResult(outs, budget, np.asarray(cost, dtype=float), _success(self.watermark, texts, outs),
                            {"attack": type(self).__name__, "ratio": frac})

    def _edit(self, words: list[str], k: int) -> tuple[list[str], int]:  # pragma: no cover - abstract
        raise NotImplementedError


class WordDeletion(_EditAttack):
    """Delete ``ratio`` of the words (at random; the paper's baseline uses 0.3)."""

    def _edit(self, words: list[str], k: int) -> tuple[list[str], int]:
        drop = set(self._rng.choice(len(words), size=k, replace=False).tolist()) if k else set()
        return [w for i, w in enumerate(words) if i not in drop], len(drop)


class TokenShuffle(_EditAttack):
    """Permute ``ratio`` of the words among their own positions, within each sentence."""

    def _edit(self, words: list[str], k: int) -> tuple[list[str], int]:
        if k < 2:
            return list(words), 0
        pick = np.sort(self._rng.choice(len(words), size=k, replace=False))
        sent = np.cumsum([0] + [w.endswith((".", "!", "?")) for w in words[:-1]])  # sentence id per word
        new = list(words)
        for s in np.unique(sent[pick]):
            pos = pick[sent[pick] == s]
            perm = self._rng.permutation(pos)
            for a, b in zip(pos, perm, strict=True):
                new[a] = words[b]
        return new, int(sum(n != w for n, w in zip(new, words, strict=True)))


class SynonymSwap(_EditAttack):
    """Swap up to ``ratio`` of the words for a synonym from :data:`SYNONYMS` (a shipped table; the paper
    uses WordNet, which has no offline data here). Words not in the table are kept."""

    def _edit(self, words: list[str], k: int) -> tuple[list[str], int]:
        def key(w: str) -> str:
            return w.lower().strip(".,;:!?\"'()")

        cand = [i for i, w in enumerate(words) if key(w) in SYNONYMS]
        pick = self._rng.permutation(cand)[:k] if cand else []
        new = list(words)
        for i in pick:
            w = words[i]
            core = key(w)
            syn = SYNONYMS[core][int(self._rng.integers(len(SYNONYMS[core])))]
            syn = syn.capitalize() if w[:1].isupper() else syn
            new[i] = w.replace(w.strip(".,;:!?\"'()"), syn, 1) if w.strip(".,;:!?\"'()") else syn
        return new, len(pick)


@validate_args(model=[TorchModule()], ratio=[Interval(float, 0, 1)])
@contextlib.contextmanager
def adapter_ratio(model: Any, ratio: float) -> Iterator[Any]:
    """Scale every LoRA update of a peft ``model`` by ``ratio`` inside the block (W = W_base + ratio * dW,
    the paper's ``adapter_ratio``); restored on exit. A model without adapters is used as is."""
    saved = []
    for m in model.modules():
        sc = getattr(m, "scaling", None)
        if isinstance(sc, dict) and hasattr(m, "lora_A"):
            saved.append((m, dict(sc)))
            for k in sc:
                sc[k] = sc[k] * float(ratio)
    try:
        yield model
    finally:
        for m, sc in saved:
            m.scaling.update(sc)


def _tiny() -> tuple[Any, Any]:
    from trustlab.llm import tiny_random_llama

    m, t = tiny_random_llama()
    return m, t


class ParaphraseAttack(Attack):
    """An LLM paraphraser (``model``/``tokenizer``; a peft LoRA model for the adaptive attack) prompted with
    the paper's copy-editor prompt; sampled at ``temperature`` (0 = greedy) with the LoRA update scaled by
    ``adapter_ratio``. ``budget`` = the most output tokens per text."""

    paper = PAPER
    tags: ClassVar[dict[str, Any]] = {"stochastic": True, "requires": ("torch", "transformers")}
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "model": [LanguageModel()], "tokenizer": [Tokenizer()], "system": [InstanceOf(str)],
        "temperature": [Interval(float, 0, None)], "adapter_ratio": [Interval(float, 0, 1)],
        "batch_size": [Interval(int, 1, None)], "watermark": [InstanceOf(Watermark), None],
        "random_state": ["random_state"]}

    def __init__(self, *, model: Any = None, tokenizer: Any = None, system: str = PARAPHRASE_SYSTEM,
                 temperature: float = 0.7, adapter_ratio: float = 1.0, batch_size: int = 8,
                 watermark: Watermark | None = None, random_state: Any = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.system = system
        self.temperature = temperature
        self.adapter_ratio = adapter_ratio
        self.batch_size = batch_size
        self.watermark = watermark
        self.random_state = random_state

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        return {"inputs": ["A short text about a cat.", "Another text."], "budget": 6}

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        m, t = _tiny()
        return [{"model": m, "tokenizer": t}]

    def _paraphrase(self, texts: Sequence[str], max_new_tokens: int) -> tuple[list[str], np.ndarray]:
        """Raw paraphrases of ``texts`` (markers stripped, cut to ``max_new_tokens`` tokens) and their token counts."""
        from trustlab.llm import generate

        tok = self.tokenizer
        prompts = [paraphrase_messages(t) for t in texts]
        sample = float(self.temperature) > 0
        seed = int(self._rng.integers(2**31))
        was = self.model.training
        self.model.eval()
        try:
            with adapter_ratio(self.model, float(self.adapter_ratio)):
                raw = generate(self.model, tok, prompts, max_new_tokens=int(max_new_tokens), system=self.system,
                               batch_size=int(self.batch_size), do_sample=sample,
                               temperature=float(self.temperature) if sample else 1.0, random_state=seed)
        finally:
            self.model.train(was)
        outs, cost = [], []
        for r in raw:
            ids = tok(clean_paraphrase(r), add_special_tokens=False)["input_ids"][: int(max_new_tokens)]
            outs.append(tok.decode(ids, skip_special_tokens=True).strip())
            cost.append(len(tok(outs[-1], add_special_tokens=False)["input_ids"]))
        return outs, np.asarray(cost, dtype=float)

    def _generate(self, inputs: Any, budget: float) -> AttackResult:
        texts = _texts(f"{type(self).__name__}.generate", inputs)
        k = int(np.floor(budget + 1e-9))
        if k < 1:
            outs, cost = [""] * len(texts), np.zeros(len(texts))
        else:
            outs, cost = self._paraphrase(texts, k)
            over = cost > k  # re-tokenising a cut text can merge differently: cut again until it fits
            for i in np.flatnonzero(over):
                ids = self.tokenizer(outs[i], add_special_tokens=False)["input_ids"]
                while ids and len(self.tokenizer(self.tokenizer.decode(ids), add_special_tokens=False)["input_ids"]) > k:
                    ids = ids[:-1]
                outs[i] = self.tokenizer.decode(ids)
                cost[i] = len(self.tokenizer(outs[i], add_special_tokens=False)["input_ids"])
        return AttackResult(outs, budget, cost, _success(self.watermark, texts, outs),
                            {"attack": type(self).__name__, "adapter_ratio": float(self.adapter_ratio)})
