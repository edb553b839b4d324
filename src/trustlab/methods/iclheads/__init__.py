"""Which attention heads matter for in-context learning: induction heads vs function-vector heads.

Yin & Steinhardt, "Which Attention Heads Matter for In-Context Learning?", ICML 2025 (arXiv:2502.14010,
https://github.com/kayoyin/icl-heads). Induction scores on repeated random tokens, function-vector (FV)
scores as causal indirect effects from all-heads patching on a shared KV cache, mean/zero head ablation
(:class:`HeadAblation`, a ModelEdit), head sets with exclusion, function vectors and zero-shot steering.
All hooks come from :mod:`trustlab.llm`; importing this package imports no torch.
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "HeadAblation": "_ablation", "PreparedPrompts": "_ablation", "first_token_accuracy": "_ablation",
    "jaccard": "_ablation", "random_scores": "_ablation", "select_heads": "_ablation",
    "induction_scores": "_induction", "induction_pattern_scores": "_induction",
    "random_repeat_tokens": "_induction",
    "FVScores": "_fv", "fv_scores": "_fv", "mean_head_activations": "_fv",
    "function_vector": "_steering", "steered_accuracy": "_steering",
    "EVAL_TASKS": "_tasks", "FV_TASKS": "_tasks", "ICLTask": "_tasks",
    "available_tasks": "_tasks", "build_prompts": "_tasks", "check_disjoint": "_tasks",
    "format_prompt": "_tasks", "load_task": "_tasks", "make_task": "_tasks",
    "single_token_fraction": "_tasks", "target_token": "_tasks",
}

__all__ = sorted(_LAZY)
METHODS.register_exports(__name__, _LAZY, ["HeadAblation"], paper="iclheads", role="model_edit")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
