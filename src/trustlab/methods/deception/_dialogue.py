"""Dialogues with per-message detection flags, labels, and detection masks from the chat template.

A :class:`Dialogue` is a list of :class:`Message` (role, content, ``detect``) with a :data:`Label`
(honest / deceptive / ambiguous / skip). The detection mask of a dialogue is the set of tokens of the
rendered chat transcript that lie inside messages with ``detect=True``, found through the fast
tokenizer's character offsets (not by re-tokenising fragments), optionally widened by ``padding``
tokens on the left and right (Apollo's ``padding``; 0/0 for instructed pairs and roleplay).

Consecutive messages with the same role are concatenated into one turn before rendering (as in the
official code), so an assistant turn can be an undetected answer prefix followed by a detected answer.

References
----------
Goldowsky-Dill et al., "Detecting Strategic Deception Using Linear Probes", ICML 2025 (arXiv:2502.03407);
official code https://github.com/ApolloResearch/deception-detection
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.exceptions import InputError

__all__ = ["LABELS", "Message", "Dialogue", "TokenizedDialogues", "tokenize_dialogues", "render"]

LABELS = ("honest", "deceptive", "ambiguous", "skip")
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Message:
    """One chat message; ``detect=True`` marks the tokens the probe reads."""

    role: str
    content: str
    detect: bool = False

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InputError(f"The 'role' of a Message must be one of {list(ROLES)}. Got {self.role!r} instead.")
        if not isinstance(self.content, str):
            raise InputError(f"The 'content' of a Message must be a str. Got {type(self.content).__name__}.")


@dataclass(frozen=True)
class Dialogue:
    """A labelled chat transcript.

    Parameters
    ----------
    messages : sequence of Message
    label : {"honest", "deceptive", "ambiguous", "skip"}
    meta : dict
        Free-form provenance (dataset, pair id, ...).

    Example
    -------
    >>> d = Dialogue([Message("user", "Hi"), Message("assistant", "Hello there.", detect=True)], "honest")
    >>> d.detected_text
    'Hello there.'
    """

    messages: tuple[Message, ...]
    label: str = "honest"
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))
        if not self.messages:
            raise InputError("A Dialogue needs at least one message. Got none.")
        if not all(isinstance(m, Message) for m in self.messages):
            raise InputError("A Dialogue's messages must be Message objects.")
        if self.label not in LABELS:
            raise InputError(f"The 'label' of a Dialogue must be one of {list(LABELS)}. Got {self.label!r} instead.")

    @property
    def detected_text(self) -> str:
        """The concatenated content of the detected messages (what a text-only baseline may read)."""
        return "".join(m.content for m in self.messages if m.detect)

    @property
    def full_text(self) -> str:
        """The whole transcript as plain text (role: content lines)."""
        return "\n".join(f"{r}: {c}" for r, c, _ in _merge(self.messages))

    def to_dict(self) -> dict[str, Any]:
        return {"messages": [[m.role, m.content, m.detect] for m in self.messages], "label": self.label,
                "meta": dict(self.meta)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Dialogue:
        return cls(tuple(Message(r, c, bool(d)) for r, c, d in data["messages"]), data["label"],
                   dict(data.get("meta", {})))


def _merge(messages: Sequence[Message]) -> list[tuple[str, str, list[tuple[int, int]]]]:
    """Concatenate consecutive same-role messages; returns (role, content, detected char spans in content)."""
    out: list[tuple[str, str, list[tuple[int, int]]]] = []
    for m in messages:
        if out and out[-1][0] == m.role:
            role, text, spans = out[-1]
            if m.detect and m.content:
                spans.append((len(text), len(text) + len(m.content)))
            out[-1] = (role, text + m.content, spans)
        else:
            out.append((m.role, m.content, [(0, len(m.content))] if m.detect and m.content else []))
    return out


def render(tokenizer: Any, dialogue: Dialogue) -> tuple[str, list[tuple[int, int]]]:
    """Render ``dialogue`` with the tokenizer's chat template; returns (text, detected char spans).

    The template may add boilerplate (SmolLM2 adds a default system prompt when there is none); message
    contents are located in order in the rendered text, so they must appear verbatim.
    """
    merged = _merge(dialogue.messages)
    chat = [{"role": r, "content": c} for r, c, _ in merged]
    text = tokenizer.apply_chat_template(chat, tokenize=False)
    spans: list[tuple[int, int]] = []
    cursor = 0
    for role, content, det in merged:
        at = text.find(content, cursor) if content else cursor
        if at < 0:
            raise InputError(
                f"The chat template changed the content of a {role!r} message, so its tokens cannot be located. "
                "Avoid leading/trailing whitespace in message contents."
            )
        spans += [(at + a, at + b) for a, b in det]
        cursor = at + len(content)
    return text, spans


@dataclass
class TokenizedDialogues:
    """Token ids and detection masks of a list of dialogues (unpadded, one row per dialogue)."""

    input_ids: list[list[int]]
    masks: list[np.ndarray]
    texts: list[str]

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def n_detected(self) -> np.ndarray:
        return np.array([int(m.sum()) for m in self.masks])


def tokenize_dialogues(
    tokenizer: Any,
    dialogues: Iterable[Dialogue],
    *,
    padding: tuple[int, int] = (0, 0),
    n_ctx: int | None = None,
) -> TokenizedDialogues:
    """Tokenise dialogues through the chat template and build their detection masks.

    A token is detected when its character span overlaps a detected message; the mask is then widened
    by ``padding = (left, right)`` tokens (clipped to the sequence).

    Raises
    ------
    InputError
        If a dialogue has no detected token (empty detection mask) or is longer than ``n_ctx`` tokens.

    Example
    -------
    >>> from trustlab.llm import load_tokenizer  # doctest: +SKIP
    >>> d = Dialogue([Message("user", "Hi"), Message("assistant", "Hello there.", detect=True)])
    >>> td = tokenize_dialogues(load_tokenizer(), [d])  # doctest: +SKIP
    """
    if not (isinstance(padding, tuple | list) and len(padding) == 2
            and all(isinstance(p, int | np.integer) and not isinstance(p, bool) and p >= 0 for p in padding)):
        raise InputError(f"The 'padding' argument must be a pair of ints >= 0 (left, right). Got {padding!r}.")
    ids_out, masks, texts = [], [], []
    for i, d in enumerate(dialogues):
        if not isinstance(d, Dialogue):
            raise InputError(f"Item {i} is a {type(d).__name__}, not a Dialogue.")
        text, spans = render(tokenizer, d)
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids = list(enc["input_ids"])
        offs = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        mask = np.zeros(len(ids), dtype=bool)
        for a, b in spans:
            mask |= (offs[:, 0] < b) & (offs[:, 1] > a) & (offs[:, 1] > offs[:, 0])
        if not mask.any():
            raise InputError(
                f"Dialogue {i} has an empty detection mask: no message with detect=True has any token. "
                "Mark the message the probe should read with detect=True."
            )
        left, right = int(padding[0]), int(padding[1])
        if left or right:
            where = np.nonzero(mask)[0]
            for p in where:
                mask[max(0, p - left): p + right + 1] = True
        if n_ctx is not None and len(ids) > n_ctx:
            raise InputError(
                f"Dialogue {i} has {len(ids)} tokens, more than the model's context of {n_ctx}. "
                "Shorten or drop it."
            )
        ids_out.append(ids)
        masks.append(mask)
        texts.append(text)
    if not ids_out:
        raise InputError("tokenize_dialogues needs at least one dialogue. Got none.")
    return TokenizedDialogues(ids_out, masks, texts)
