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

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import AnyValue, Interval, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.llm.rules import Tokenizer

__all__ = ["LABELS", "Message", "Dialogue", "TokenizedDialogues", "tokenize_dialogues"]

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
        if not isinstance(self.detect, bool | np.bool_):  # 'yes' or 0/1 from a JSON file is not a flag
            raise InputError(f"The 'detect' of a Message must be True or False. Got {self.detect!r} "
                             f"({type(self.detect).__name__}).")


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
        """``{"messages": [{"role", "content", "detect"}, ...], "label", "meta"}`` (what :meth:`from_dict` reads)."""
        return {"messages": [{"role": m.role, "content": m.content, "detect": m.detect} for m in self.messages],
                "label": self.label, "meta": dict(self.meta)}

    @classmethod
    @validate_args(data=[AnyValue("a dict or a list of messages: the body checks it and its messages, and its "
                                  "InputError names where the dialogue came from (file and line)")], where=[str])
    def from_dict(cls, data: Any, *, where: str = "") -> Dialogue:
        """A Dialogue from the usual chat format.

        ``data`` is ``{"messages": [...], "label": ..., "meta": {...}}`` (or just the list of messages).
        Each message is ``{"role": "system"|"user"|"assistant", "content": str}`` with an optional
        ``"detect": bool`` (extra keys such as ``"name"`` are ignored), or a ``[role, content, detect]``
        list. When no message carries a ``detect`` flag, the last assistant message is detected (the
        response under test). A missing label means ``"skip"`` (unlabelled: scored, left out of metrics).

        Example
        -------
        >>> d = Dialogue.from_dict({"messages": [{"role": "user", "content": "Hi"},
        ...                                      {"role": "assistant", "content": "Hello."}], "label": "honest"})
        >>> d.detected_text
        'Hello.'
        """
        at = f" ({where})" if where else ""
        if isinstance(data, list):
            data = {"messages": data}
        if not isinstance(data, dict) or "messages" not in data:
            raise InputError(f"A dialogue{at} must be a dict with a 'messages' list (or the list itself). "
                             f"Got {_short(data)} instead.")
        raw = data["messages"]
        if not isinstance(raw, list) or not raw:
            raise InputError(f"The 'messages' of a dialogue{at} must be a non-empty list. Got {_short(raw)} instead.")
        parsed = [_parse_message(m, i, at) for i, m in enumerate(raw)]
        if not any(flag is not None for _, _, flag in parsed):
            last = max((i for i, (r, _, _) in enumerate(parsed) if r == "assistant"), default=None)
            parsed = [(r, c, i == last) for i, (r, c, _) in enumerate(parsed)]
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise InputError(f"The 'meta' of a dialogue{at} must be a dict. Got {_short(meta)} instead.")
        return cls(tuple(Message(r, c, bool(f)) for r, c, f in parsed), data.get("label", "skip"), dict(meta))


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def _parse_message(m: Any, i: int, at: str) -> tuple[str, str, bool | None]:
    if isinstance(m, dict):
        if "role" not in m or "content" not in m:
            raise InputError(f"Message {i} of a dialogue{at} must have the keys 'role' and 'content' (and optionally "
                             f"'detect'). Got the keys {sorted(m)} instead.")
        role, content, flag = m["role"], m["content"], m.get("detect")
    elif isinstance(m, list | tuple) and len(m) in (2, 3):
        role, content, flag = m[0], m[1], (m[2] if len(m) == 3 else None)
    else:
        raise InputError(f"Message {i} of a dialogue{at} must be a {{'role': ..., 'content': ...}} dict or a "
                         f"[role, content, detect] list. Got {_short(m)} instead.")
    if role not in ROLES:
        raise InputError(f"The 'role' of message {i} of a dialogue{at} must be one of {list(ROLES)}. "
                         f"Got {_short(role)} instead.")
    if not isinstance(content, str):
        raise InputError(f"The 'content' of message {i} of a dialogue{at} must be a str. Got {_short(content)}.")
    if flag is not None and not isinstance(flag, bool | np.bool_):
        raise InputError(f"The 'detect' flag of message {i} of a dialogue{at} must be true or false. "
                         f"Got {_short(flag)} instead.")
    return role, content, None if flag is None else bool(flag)


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


def _render(tokenizer: Any, dialogue: Dialogue) -> tuple[str, list[tuple[int, int]]]:
    """Render ``dialogue`` with the tokenizer's chat template; returns (text, detected char spans).

    The template may add boilerplate (SmolLM2 adds a default system prompt when there is none); message
    contents are located in order in the rendered text, so they must appear verbatim.
    """
    merged = _merge(dialogue.messages)
    chat = [{"role": r, "content": c} for r, c, _ in merged]
    if getattr(tokenizer, "chat_template", "") is None:
        raise InputError(
            "The tokenizer has no chat template (a base model?), so dialogues cannot be rendered. Set "
            "tokenizer.chat_template to a Jinja template (e.g. the instruct model's) before extracting."
        )
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


def _is_padding(p: Any) -> bool:
    return (isinstance(p, tuple | list) and len(p) == 2
            and all(isinstance(v, int | np.integer) and not isinstance(v, bool) and v >= 0 for v in p))


def _has_chat_template(tok: Any) -> bool:
    return callable(getattr(tok, "apply_chat_template", None)) and callable(tok)


def _is_dialogues(v: Any) -> bool:
    return isinstance(v, Dialogue) or (hasattr(v, "__iter__") and not isinstance(v, str | bytes | dict))


@validate_args(_example=lambda: {"tokenizer": Tokenizer().valid_example(), "dialogues": [Dialogue(
                   (Message("user", "a"), Message("assistant", "cat", detect=True)))]},
               tokenizer=[Satisfies(_has_chat_template, "a tokenizer with a chat template (callable, with "
                                    "apply_chat_template)", [None, "tokenizer", 3])],
               dialogues=[Satisfies(_is_dialogues, "a Dialogue or an iterable of Dialogues (each item checked)",
                                    [None, 3, "a dialogue"])],
               padding=[Satisfies(_is_padding, "a pair of ints >= 0 (left, right)", [(1,), (-1, 0), "ab"],
                                 valid=(0, 0))],
               n_ctx=[None, Interval(int, 1, None)])
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
    if not _has_chat_template(tokenizer):
        raise InputError("The 'tokenizer' argument of tokenize_dialogues must be a tokenizer with a chat template "
                         f"(apply_chat_template). Got {type(tokenizer).__name__} instead.")
    if isinstance(dialogues, Dialogue):
        dialogues = [dialogues]
    ids_out, masks, texts = [], [], []
    for i, d in enumerate(dialogues):
        if not isinstance(d, Dialogue):
            raise InputError(f"Item {i} is a {type(d).__name__}, not a Dialogue.")
        text, spans = _render(tokenizer, d)
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
