"""trustlab.llm: offline language models, canonical hook sites, tracing, patching, prefix replay, scoring.

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
_EXPORTS: dict[str, str] = {
    # loading
    "DEFAULT_MODEL": "_registry",
    "LoadedModel": "loading",
    "LoadInfo": "loading",
    "ModelEntry": "_registry",
    "available_models": "_registry",
    "load_embedder": "loading",
    "load_model": "loading",
    "load_tokenizer": "loading",
    "register_model": "_registry",
    "tiny_random_llama": "loading",
    # sites
    "ARCHITECTURES": "sites",
    "ArchSpec": "sites",
    "Dims": "sites",
    "Site": "sites",
    "arch_spec": "sites",
    "dims": "sites",
    "resolve_site": "sites",
    "site_names": "sites",
    # hooks
    "Edit": "hooks",
    "Trace": "hooks",
    "trace": "hooks",
    "run_with_cache": "_interventions",
    "patch_activations": "_interventions",
    "ablate_heads": "_interventions",
    "active_hooks": "hooks",
    "HeadPatchResult": "_patching",
    "patch_all_heads": "_patching",
    # batching and positions
    "Activations": "_batching",
    "collect": "_batching",
    "head_means": "_batching",
    "encode_texts": "_batching",
    "pad_batch": "_batching",
    "position_ids_from_mask": "_batching",
    "last_positions": "_batching",
    "valid_positions": "_batching",
    # prefix replay
    "PrefixCache": "prefix",
    # scoring
    "EncodedBatch": "scoring",
    "SequenceScores": "scoring",
    "OptionScores": "scoring",
    "KLResult": "scoring",
    "encode_responses": "scoring",
    "gather_logprobs": "scoring",
    "head_logits": "scoring",
    "token_logprobs": "scoring",
    "sequence_logprobs": "scoring",
    "score_responses": "scoring",
    "score_options": "scoring",
    "sequential_kl": "scoring",
    "generate": "scoring",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
