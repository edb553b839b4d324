"""trustlab.llm: offline language models, hook sites, tracing, patching, prefix replay, scoring, fine-tuning.

Importing this package imports neither torch nor transformers; every name below is loaded on first use.

Example
-------
>>> from trustlab.llm import tiny_random_llama, trace
>>> model, tok = tiny_random_llama()
>>> ids = tok(["Hello world"], return_tensors="pt").input_ids
>>> with trace(model, ["blocks.0.resid_post"]) as tr:
...     _ = model(ids)
>>> tuple(tr["blocks.0.resid_post"].shape)[-1]
72
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports

#: public name -> submodule that defines it
_LAZY: dict[str, str] = {
    # loading



    "ModelEntry": "_registry",
    "available_models": "_registry",
    "load_embedder": "_small",
    "load_model": "loading",
    "load_tokenizer": "loading",
    "register_model": "_registry",
    "tiny_random_llama": "_small",
    "cache_root": "_cache",
    "file_sha256": "_cache",
    "cached_arrays": "_arraycache",
    "model_fingerprint": "_arraycache",
    # sites




    "arch_spec": "sites",
    "dims": "sites",
    "resolve_site": "sites",
    "site_names": "sites",
    "use_generic_sites": "sites",
    # hooks
    "Edit": "_edits",
    "trace": "hooks",
    "run_with_cache": "_interventions",
    "patch_activations": "_interventions",
    "ablate_heads": "_interventions",
    "active_hooks": "hooks",
    "patch_all_heads": "_patching",
    # batching and positions
    "collect": "_batching",
    "head_means": "_batching",
    "encode_texts": "_batching",
    "pad_batch": "_positions",
    "position_ids_from_mask": "_positions",
    "last_positions": "_positions",
    "valid_positions": "_positions",
    # prefix replay
    "PrefixCache": "prefix",
    # scoring




    "encode_responses": "scoring",
    "gather_logprobs": "scoring",
    "head_logits": "scoring",
    "token_logprobs": "scoring",
    "sequence_logprobs": "scoring",
    "score_responses": "scoring",
    "score_options": "scoring",
    "sequential_kl": "scoring",
    "generate": "_generate",
    # fine-tuning: data, adapters, replay forward, losses, reference cache, trainer, evaluation, resources
    "SequenceSet": "_tokenize_pairs",
    "PreferencePairs": "_tokenize_pairs",
    "tokenize_pairs": "_tokenize_pairs",
    "tokenize_preferences": "_tokenize_pairs",
    "add_lora": "adapters",
    "adapter_layers": "adapters",
    "is_adapted": "adapters",
    "load_adapter": "adapters",
    "merge_adapter": "adapters",
    "reference_policy": "adapters",
    "reset_lora": "adapters",
    "resolve_layers": "adapters",
    "save_adapter": "adapters",
    "save_merged": "adapters",
    "weights_fingerprint": "adapters",
    "PolicyForward": "policy",
    "replay_depth": "policy",
    "dpo_loss": "losses",
    "ipo_loss": "losses",
    "length_normalized_dpo_loss": "losses",
    "preference_loss": "losses",
    "preference_margins": "losses",
    "sequence_kl": "losses",
    "sft_loss": "losses",
    "simpo_loss": "losses",
    "token_kl": "losses",
    "topk_kl": "losses",
    "ReferenceCache": "refcache",
    "FitHistory": "trainer",
    "PreferenceObjective": "objectives",
    "SFTObjective": "objectives",
    "StepOutput": "objectives",
    "train": "trainer",


    "preference_accuracy": "evaluate",
    "evaluate_generations": "evaluate",
    "distinct_n": "evaluate",


    "measure_peak_rss": "resources",
    "median_step_time": "resources",
    "time_steps": "resources",
    "peak_rss_mb": "resources",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
