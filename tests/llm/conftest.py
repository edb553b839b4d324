"""Fixtures for trustlab.llm tests: the tiny random llama (unit tests) and the real SmolLM2 (``llm`` marker).

``tiny``, ``tiny_eager`` and ``smollm2`` live in ``tests/conftest.py`` (shared with the LLM papers' tests),
which also applies the offline / passive-OpenMP environment before torch is imported.
"""

from __future__ import annotations

import importlib.util

import pytest

# without the llm extra there is nothing to test here (the package-level tests cover importability)
if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    collect_ignore_glob = ["test_*.py"]

@pytest.fixture(scope="session")
def tiny4(tiny):
    """A 4-layer variant for stop_after / prefix tests."""
    from trustlab.llm import tiny_random_llama

    return tiny_random_llama(random_state=1, n_layers=4, tokenizer=tiny[1])


@pytest.fixture
def make_tiny(tiny):
    """Factory of fresh tiny llamas (tests that add adapters mutate their model)."""
    from trustlab.llm import tiny_random_llama

    def make(n_layers: int = 4, seed: int = 1):
        return tiny_random_llama(random_state=seed, n_layers=n_layers, tokenizer=tiny[1])[0]

    return make
