"""Turn a calibration set (tensor, texts, (prompt, response) pairs, SequenceSet or PolicyForward) into the
``(forward, valid-token mask)`` batches :func:`~trustlab.methods.antidote._wanda.collect_input_norms` runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trustlab.core.exceptions import ConfigError, InputError
from trustlab.methods.antidote._wanda import _layer_of


def _tensor_batches(model: Any, x: Any, batch_size: int) -> list[tuple[Any, Any]]:
    import torch

    x = torch.as_tensor(np.asarray(x, dtype=np.float32)) if not isinstance(x, torch.Tensor) else x.float()
    if x.ndim < 2 or len(x) == 0:
        raise InputError(f"A tensor calibration set must be non-empty with shape [n, ...]. Got {tuple(x.shape)}.")
    if not torch.isfinite(x).all():
        raise InputError("The calibration tensor contains NaN or inf.")

    def run(lo: int, hi: int) -> Any:
        return lambda: (model(x[lo:hi]), hi - lo)[1]

    return [(run(i, min(i + batch_size, len(x))), None) for i in range(0, len(x), batch_size)]


def _tokenizer(model: Any, tokenizer: Any) -> Any:
    from trustlab.llm.sites import unwrap

    tok = tokenizer if tokenizer is not None else getattr(unwrap(model), "trustlab_tokenizer", None)
    if tok is None:
        raise ConfigError("Text calibration needs the model's tokenizer: pass tokenizer=... to apply (load_model "
                          "attaches one).")
    return tok


def _n_ctx(model: Any) -> int:
    from trustlab.llm.sites import dims

    return int(dims(model).n_ctx or 0)


def _texts_to_set(model: Any, texts: Sequence[Any], tokenizer: Any, system: str | None) -> Any:
    from trustlab.llm import SequenceSet, tokenize_pairs

    tok = _tokenizer(model, tokenizer)
    if all(isinstance(t, str) for t in texts):
        ids = [tok(t).input_ids for t in texts]
        empty = [i for i, r in enumerate(ids) if not r]
        if empty:
            raise InputError(f"Calibration text {empty[0]} has no tokens.")
        w = max(len(r) for r in ids)
        arr = np.full((len(ids), w), tok.pad_token_id or 0, dtype=np.int64)
        att = np.zeros((len(ids), w), dtype=np.int64)
        for i, r in enumerate(ids):
            arr[i, : len(r)], att[i, : len(r)] = r, 1
        resp = att.astype(bool)
        resp[:, 0] = False
        return SequenceSet.from_arrays(arr, att, resp, pad_id=int(tok.pad_token_id or 0))
    if not all(isinstance(p, tuple | list) and len(p) == 2 and all(isinstance(s, str) for s in p) for p in texts):
        raise InputError("A calibration list must hold texts (str) or (prompt, response) pairs of str.")
    return tokenize_pairs(tok, [p for p, _ in texts], [r for _, r in texts], system=system)


def _check_forbid(texts: Sequence[Any], forbid: Sequence[str] | None) -> None:
    if not forbid:
        return
    bad = {" ".join(str(f).split()).lower() for f in forbid}
    prompts = [t if isinstance(t, str) else t[0] for t in texts]
    hits = [i for i, p in enumerate(prompts) if " ".join(p.split()).lower() in bad]
    if hits:
        raise InputError(f"{len(hits)} calibration prompt(s) also occur in 'forbid' (the attack / evaluation "
                         f"prompts), e.g. #{hits[0]}: {prompts[hits[0]][:80]!r}. That is leakage; use disjoint prompts.")


def _forward_for(model: Any, seqs: Any, targets: dict[str, Any], replay: bool) -> Any:
    from trustlab.llm import PolicyForward
    from trustlab.llm.sites import dims

    layers = [_layer_of(n) for n in targets]
    k = None
    if replay and all(v is not None for v in layers) and min(layers) > 0:
        k = dims(model).n_layers - min(layers)
    try:
        return PolicyForward(model, seqs, replay=k, share_prompts=False)
    except ConfigError:
        return PolicyForward(model, seqs, replay=None, share_prompts=False)


def _forward_batches(fwd: Any, targets: dict[str, Any], batch_size: int) -> list[tuple[Any, Any]]:
    if fwd.share_prompts:
        raise ConfigError("A PolicyForward used as calibration must be built with share_prompts=False (packed rows "
                          "would mix tokens of different sequences in the statistics).")
    below = [n for n in targets if (lay := _layer_of(n)) is not None and lay < fwd.start]
    if below:
        raise ConfigError(f"The calibration PolicyForward replays blocks {fwd.start}+ only, but {len(below)} prune "
                          f"target(s) sit below them (e.g. {below[0]}); build it with a larger replay K or None.")
    n = len(fwd.sequences)
    if n == 0:
        raise InputError("The calibration set is empty.")

    def run(rows: Any) -> Any:
        return lambda: (fwd.hidden(rows), len(rows))[1]

    chunks = [np.arange(i, min(i + batch_size, n)) for i in range(0, n, batch_size)]
    return [(run(r), fwd.batch(r)[1]) for r in chunks]


def calibration_batches(model: Any, calibration: Any, targets: dict[str, Any], *, tokenizer: Any, batch_size: int,
                        replay: bool, system: str | None, forbid: Sequence[str] | None) -> tuple[list, bool]:
    """The batches to collect statistics on and whether position 0 is skipped (token data: yes)."""
    import torch

    from trustlab.llm import PolicyForward, SequenceSet

    if isinstance(calibration, torch.Tensor | np.ndarray):
        return _tensor_batches(model, calibration, batch_size), False
    if isinstance(calibration, PolicyForward):
        return _forward_batches(calibration, targets, batch_size), True
    if isinstance(calibration, SequenceSet):
        seqs = calibration
    elif isinstance(calibration, list | tuple):
        if len(calibration) == 0:
            raise InputError("The calibration set is empty (0 texts).")
        _check_forbid(calibration, forbid)
        seqs = _texts_to_set(model, calibration, tokenizer, system)
    else:
        raise ConfigError("The 'calibration' of Antidote must be a tensor, a list of texts or (prompt, response) "
                          f"pairs, a SequenceSet or a PolicyForward. Got {type(calibration).__name__}.")
    if len(seqs) == 0:
        raise InputError("The calibration set is empty.")
    width, n_ctx = int(seqs.attention_mask.sum(1).max()), _n_ctx(model)
    if n_ctx and width > n_ctx:
        raise InputError(f"A calibration sequence has {width} tokens, longer than the model's context of {n_ctx}; "
                         "shorten or split the calibration texts.")
    return _forward_batches(_forward_for(model, seqs, targets, replay), targets, batch_size), True
