"""Function vectors (Todd et al., 2024) from a head set, and zero-shot steering with them.

The function vector of task ``t`` for heads ``S`` is ``v_t = sum_{(l,h) in S} W_O^{l,h} a_bar^t_{l,h}``:
each head's mean last-position activation on clean few-shot prompts mapped through its slice of the
output projection, i.e. its mean contribution to the residual stream. Adding ``v_t`` to the residual
stream after block ``layer`` (about ``L / 3``) at the last token of a zero-shot prompt ``"Q: x\\nA:"``
makes the model perform the task when the heads carry the task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.llm.rules import LanguageModel, Tokenizer
from trustlab.methods.iclheads._tasks import ICLTask, _as_tasks, _is_task, format_prompt, target_token


def _is_heads(v: Any) -> bool:
    return isinstance(v, list | tuple) and all(isinstance(p, list | tuple) and len(p) == 2 for p in v)


_TASK_OR_MEANS = Satisfies(lambda v: _is_task(v) or hasattr(v, "shape") or isinstance(v, list),
                           "a task name, an ICLTask or mean activations [n_layers, n_heads, d_head]", [3.5, None],
                           valid="antonym")

__all__ = ["function_vector", "steered_accuracy"]


@validate_args(model=[LanguageModel()],
               heads=[Satisfies(_is_heads, "a list of (layer, head) pairs", ["ab", [(1,)]], valid=[(0, 0)])],
               task=[_TASK_OR_MEANS], n_mean=[Interval(int, 1, None)], n_shots=[Interval(int, 0, None)],
               random_state=["random_state"], tokenizer=[None, Tokenizer()])
def function_vector(
    model: Any,
    heads: Sequence[tuple[int, int]],
    task: ICLTask | str | Any,
    *,
    n_mean: int = 20,
    n_shots: int = 5,
    random_state: int = 0,
    tokenizer: Any = None,
) -> np.ndarray:
    """The function vector ``[d_model]`` of ``task`` (or of given mean activations) for ``heads``.

    Parameters
    ----------
    heads : sequence of (layer, head)
    task : task name, ICLTask, or array [n_layers, n_heads, d_head]
        A task: its mean activations are computed on ``n_mean`` clean ``n_shots``-shot prompts. An array:
        used as the mean activations directly.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> function_vector(model, [(0, 1), (1, 2)], "antonym", n_mean=2, n_shots=1).shape
    (72,)

    References
    ----------
    Todd et al., ICLR 2024 (https://github.com/ericwtodd/function_vectors); Yin & Steinhardt, ICML 2025.
    """
    import torch

    from trustlab.llm import dims
    from trustlab.llm.sites import head_weight, unwrap
    from trustlab.methods.iclheads._fv import mean_head_activations

    inner = unwrap(model)
    d = dims(inner)
    if isinstance(task, str | ICLTask):
        means = mean_head_activations(inner, task, n_mean=n_mean, n_shots=n_shots, random_state=random_state,
                                      tokenizer=tokenizer)
    else:
        means = np.asarray(task, dtype=np.float32)
    if means.shape != (d.n_layers, d.n_heads, d.d_head):
        raise InputError(f"Mean activations must have shape {(d.n_layers, d.n_heads, d.d_head)}. Got {means.shape}.")
    heads = [(int(a), int(b)) for a, b in heads]
    if not heads:
        raise InputError("function_vector needs at least one head. Got an empty set.")
    out = torch.zeros(d.d_model)
    with torch.no_grad():
        for layer, h in heads:
            if not (0 <= layer < d.n_layers and 0 <= h < d.n_heads):
                raise InputError(f"Head {(layer, h)} is outside the model's {d.n_layers} x {d.n_heads} heads.")
            out += head_weight(inner, layer, h).float().cpu() @ torch.as_tensor(means[layer, h])
    return out.numpy()


@validate_args(model=[LanguageModel()],
               task=[Satisfies(_is_task, "a task name, a JSON file path or an ICLTask", [3.5, None], valid="antonym")],
               fv=[None, ArrayLike(ndim=1)], layer=[None, Interval(int, 0, None)], scale=[Interval(float, None, None)],
               tokenizer=[None, Tokenizer()], batch_size=[Interval(int, 1, None)])
def steered_accuracy(
    model: Any,
    task: ICLTask | str,
    fv: Any,
    *,
    layer: int | None = None,
    scale: float = 1.0,
    tokenizer: Any = None,
    batch_size: int = 32,
) -> float:
    """Zero-shot first-token accuracy on ``task`` with ``scale * fv`` added after block ``layer`` (last token).

    ``fv=None`` gives the unsteered zero-shot accuracy. ``layer`` defaults to ``n_layers // 3``.

    Example
    -------
    >>> from trustlab.llm import tiny_random_llama
    >>> model, tok = tiny_random_llama()
    >>> 0.0 <= steered_accuracy(model, "capitalize", None) <= 1.0
    True
    """
    from trustlab.llm import Edit, dims, trace
    from trustlab.llm.sites import unwrap
    from trustlab.methods.iclheads._ablation import first_token_accuracy
    from trustlab.methods.iclheads._fv import _tok

    inner = unwrap(model)
    (task,) = _as_tasks(task)
    tok = _tok(inner, tokenizer)
    d = dims(inner)
    layer = d.n_layers // 3 if layer is None else int(layer)
    if not 0 <= layer < d.n_layers:
        raise InputError(f"The steering layer must be in [0, {d.n_layers - 1}]. Got {layer}.")
    texts = [format_prompt([], x) for x, _ in task.pairs]
    targets = [target_token(tok, y) for _, y in task.pairs]
    edit = None
    if fv is not None:
        v = np.asarray(fv, dtype=np.float32) * float(scale)
        if v.shape != (d.d_model,) or not np.isfinite(v).all():
            raise InputError(f"The function vector must be a finite array of shape ({d.d_model},). Got {v.shape}.")
        import torch

        edit = Edit(f"blocks.{layer}.resid_post", torch.as_tensor(v), "add", positions=-1)
    with trace(inner, (), edit=edit):
        return first_token_accuracy(inner, texts, targets, tokenizer=tok, batch_size=batch_size)
