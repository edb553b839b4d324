"""Watermarked generation, the paraphrase prompt (the paper's copy-editor prompt) and the shipped text prompts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Boolean, InstanceOf, Interval
from trustlab.core.exceptions import ConfigError
from trustlab.core.seeding import check_random_state
from trustlab.llm.rules import TEXTS, LanguageModel, Tokenizer
from trustlab.methods.wmattack._watermarks import Watermark

__all__ = ["generate_watermarked", "paraphrase_messages", "clean_paraphrase", "text_prompts", "PARAPHRASE_SYSTEM",
           "N_TEXT_PROMPTS"]

#: the copy-editor system prompt of the paper's paraphrasers (shortened)
PARAPHRASE_SYSTEM = ("You are an expert copy-editor. Please rewrite the following text in your own voice and "
                     "paraphrase all sentences. Ensure that the final output contains the same information as the "
                     "original text and has roughly the same length. Do not leave out any important details. "
                     "Output only the rewritten text.")

_NOUNS = ("lighthouse keeper", "robot", "baker", "dragon", "lost dog", "violinist", "gardener", "pirate", "clockmaker",
          "astronaut", "detective", "fisherman", "librarian", "painter", "fox", "train driver", "beekeeper",
          "mountain guide", "street musician", "young chess player", "ghost", "shy giant", "time traveller", "nurse")
_TITLES = ("The Old Man and the Sea", "Pride and Prejudice", "Moby-Dick", "Treasure Island", "Frankenstein",
           "The Hobbit", "Little Women", "Dracula", "Jane Eyre", "The Time Machine", "Robinson Crusoe", "Emma")
_PEOPLE = (("a famous chef", "Paris"), ("the mayor", "Tokyo"), ("a young inventor", "Nairobi"),
           ("a retired astronaut", "Lima"), ("a chess champion", "Oslo"), ("a marine biologist", "Sydney"),
           ("a jazz pianist", "Chicago"), ("a children's author", "Dublin"))
_TOPICS = ("rainbows", "volcanoes", "honey bees", "ocean tides", "the moon", "thunderstorms", "bicycles", "bread",
           "snowflakes", "the first airplanes", "coral reefs", "libraries", "clocks", "deserts", "recycling", "maps",
           "owls", "glaciers", "the printing press", "trains", "mushrooms", "lighthouses", "kites", "the post office")


def _pool() -> list[str]:
    """Every distinct shipped prompt (issue 47 grew the pool from 52 to 264: the wmattack experiment needs >= 248
    distinct prompts for its training texts and 200 unwatermarked calibration texts under greedy decoding)."""
    base = [f"Write a short story about a {x}." for x in _NOUNS]
    base += [f"Write a short book report about '{t}'." for t in _TITLES]
    base += [f"Write a short news article about {p}'s visit to {c}." for p, c in _PEOPLE]
    base += [f"Write a short news article about a festival in {c}." for _, c in _PEOPLE]
    base += [f"Write a short diary entry by a {x}." for x in _NOUNS]
    base += [f"Write a short letter from a {x} to an old friend." for x in _NOUNS]
    base += [f"Write a short news article about a {x} who won a prize." for x in _NOUNS]
    base += [f"Describe a day in the life of a {x}." for x in _NOUNS]
    base += [f"Write a short fable about a {x} that learns a lesson." for x in _NOUNS]
    base += [f"Write a short essay about why people should read '{t}'." for t in _TITLES]
    base += [f"Write a short interview with {p} about life in {c}." for p, c in _PEOPLE]
    base += [f"Explain {t} to a ten-year-old." for t in _TOPICS]
    base += [f"Write a short encyclopedia entry about {t}." for t in _TOPICS]
    base += [f"Write a short opinion piece about {t}." for t in _TOPICS]
    return base


#: how many distinct prompts :func:`text_prompts` ships
N_TEXT_PROMPTS = len(_pool())
#: the prompts shipped before issue 47 (stories, book reports, two kinds of news): the first block of :func:`_pool`
_N_FIRST = len(_NOUNS) + len(_TITLES) + 2 * len(_PEOPLE)


@validate_args(n=[Interval(int, 1, None)], random_state=["random_state"])
def text_prompts(n: int, random_state: Any = 0) -> list[str]:
    """``n`` prompts from the shipped templates (stories, book reports, invented news; MarkMyWords-style),
    shuffled by ``random_state``: the 52 prompts shipped first (stories, book reports, news), in the same order as
    before issue 47, then the other 212 (diaries, letters, fables, interviews, explanations); cycles through the
    :data:`N_TEXT_PROMPTS` (264) distinct prompts when ``n`` is larger.

    Example
    -------
    >>> text_prompts(2, random_state=0)[0].startswith("Write")
    True
    """
    base, rng = _pool(), check_random_state(random_state, owner="text_prompts")
    k = _N_FIRST  # the prompts shipped before issue 47 first, in the order they had
    pool = [base[i] for i in rng.permutation(k)] + [base[k + i] for i in rng.permutation(len(base) - k)]
    return [pool[i % len(pool)] for i in range(n)]


@validate_args(text=[InstanceOf(str)])
def paraphrase_messages(text: str) -> str:
    """The paraphraser's user message for ``text`` (the paper's ``[[START OF TEXT]]`` framing)."""
    return f"[[START OF TEXT]]\n{text}\n[[END OF TEXT]]"


@validate_args(text=[InstanceOf(str)])
def clean_paraphrase(text: str) -> str:
    """Strip the paraphrase markers: drop a leading ``[[START OF PARAPHRASE]]`` and cut at ``[[END OF``."""
    t = text.split("[[END OF", 1)[0]
    t = t.replace("[[START OF PARAPHRASE]]", "").replace("[[START OF TEXT]]", "")
    return t.strip()


def _example() -> dict[str, Any]:
    from trustlab.llm import tiny_random_llama

    return dict(zip(("model", "tokenizer"), tiny_random_llama(), strict=True)) | {"prompts": ["Hi"]}


@validate_args(_example, model=[LanguageModel()], tokenizer=[Tokenizer()], prompts=[TEXTS],
               watermark=[InstanceOf(Watermark), None], max_new_tokens=[Interval(int, 1, None)],
               batch_size=[Interval(int, 1, None)], system=[InstanceOf(str), None], chat=[Boolean()],
               do_sample=[Boolean()], temperature=[Interval(float, 0, None, closed="neither")],
               random_state=["random_state"])
def generate_watermarked(model: Any, tokenizer: Any, prompts: Sequence[str], watermark: Watermark | None = None, *,
                         max_new_tokens: int = 96, batch_size: int = 8, system: str | None = None, chat: bool = True,
                         do_sample: bool = False, temperature: float = 1.0, random_state: Any = None) -> list[str]:
    """Continuations of ``prompts`` (prompt stripped), watermarked by ``watermark`` (None: unwatermarked).

    Greedy by default (EXP requires it: its processor makes the choice; SynthID requires sampling).
    Sampling is seeded from ``random_state``; global RNG states are left unchanged.
    """
    from trustlab.llm import generate

    if watermark is not None:
        watermark.check_tokenizer(tokenizer)
        watermark.check_model(model)
        if watermark.requires_greedy and do_sample:
            raise ConfigError(f"The 'do_sample' argument of generate_watermarked must be False for the "
                              f"{watermark.name} watermark (its processor picks the token). Got True instead.")
        if getattr(watermark, "requires_sampling", False) and not do_sample:
            raise ConfigError(f"The 'do_sample' argument of generate_watermarked must be True for the "
                              f"{watermark.name} watermark (tournament sampling). Got False instead.")
    proc = (lambda: [watermark.processor()]) if watermark is not None else None  # noqa: E731
    seed = int(check_random_state(random_state, owner="generate_watermarked").integers(2**31)) if do_sample else None
    return generate(model, tokenizer, list(prompts), max_new_tokens=max_new_tokens, chat=chat, system=system,
                    batch_size=batch_size, do_sample=do_sample, temperature=float(temperature),
                    random_state=seed, logits_processor=proc)


def n_tokens(tokenizer: Any, texts: Sequence[str]) -> np.ndarray:
    """Token counts of ``texts`` (no special tokens)."""
    return np.array([len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts], dtype=int)
