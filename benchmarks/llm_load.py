"""Where a fresh process spends its time loading SmolLM2 from the trustlab cache (issue 31, item 6).

Run: ``.venv/bin/python benchmarks/llm_load.py [--repeats 3]`` (after one ``trustlab doctor --warm``). Each
repeat is a fresh Python process that times, in order: ``import trustlab.llm``, ``import torch``,
``import transformers`` (and resolving ``AutoModelForCausalLM``), then the cache-hit load three ways:

* ``load_model()``: what users call (manifest sizes, weights via ``from_pretrained`` while a thread checks
  every file's sha256, tokenizer);
* ``from_pretrained`` alone on the cache folder (no hashing, no tokenizer);
* ``safetensors`` straight into the model class: the config, ``LlamaForCausalLM`` built on the meta device
  and ``load_state_dict(assign=True)`` from ``safetensors.torch.load_file``.

Prints medians and writes the "SmolLM2 fresh-process load" section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

from trustlab.core.seeding import set_runtime_env

set_runtime_env()  # before torch: no busy-waiting on 2 shared cores, offline, no telemetry

import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))

import _harness  # noqa: E402

_CHILD = r"""
import json, sys, time
out = {}
t = time.perf_counter(); import trustlab.llm as L; out["import trustlab.llm"] = time.perf_counter() - t
t = time.perf_counter(); import torch; out["import torch"] = time.perf_counter() - t
t = time.perf_counter(); import transformers; transformers.AutoModelForCausalLM; transformers.LlamaForCausalLM
out["import transformers (+ model classes)"] = time.perf_counter() - t
how = sys.argv[1]
t = time.perf_counter()
if how == "load_model":
    lm = L.load_model()
    assert lm.info.cache_hit, "run 'trustlab doctor --warm' first"
    out["folder"] = lm.info.cache_path
    out[how] = time.perf_counter() - t
    from pathlib import Path
    from trustlab.llm._cache import verify_entry
    t = time.perf_counter(); verify_entry(Path(lm.info.cache_path), full=True); out["sha256 of the entry"] = time.perf_counter() - t
    t = time.perf_counter(); transformers.AutoTokenizer.from_pretrained(lm.info.cache_path, local_files_only=True)
    out["tokenizer"] = time.perf_counter() - t
    print(json.dumps(out)); sys.exit(0)
elif how == "from_pretrained":
    m = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[2], dtype=torch.float32, local_files_only=True)
elif how == "safetensors":
    from safetensors.torch import load_file
    cfg = transformers.AutoConfig.from_pretrained(sys.argv[2], local_files_only=True)
    with torch.device("meta"):
        m = transformers.LlamaForCausalLM(cfg)
    state = load_file(sys.argv[2] + "/model.safetensors")
    missing, unexpected = m.load_state_dict(state, strict=False, assign=True)
    if "lm_head.weight" in missing:
        m.tie_weights()
    m.eval()
out[how] = time.perf_counter() - t
print(json.dumps(out))
"""


def _child(how: str, folder: str = "") -> dict[str, float]:
    res = subprocess.run([sys.executable, "-c", _CHILD, how, folder], capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-2000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


IMPORTS = ["import trustlab.llm", "import torch", "import transformers (+ model classes)"]


def run(bench: _harness.Bench) -> None:
    repeats = bench.result["params"]["repeats"]
    folder = _child("load_model")["folder"]  # warm-up, and where the cache entry is
    runs: dict[str, list[dict[str, float]]] = {h: [] for h in ("load_model", "from_pretrained", "safetensors")}
    for _ in range(repeats):
        for how in runs:  # the three ways alternate, each a fresh process
            runs[how].append(_child(how, folder))
    bench.put(runs=runs)
    total = _total(bench.result)
    bench.print_ratio("fresh-process load (imports + load_model) / 3 s target", total / 3.0, "<= 1", total <= 3.0)


def _med(r: dict[str, Any], how: str, key: str) -> float:
    return statistics.median(x[key] for x in r["values"]["runs"][how])


def _total(r: dict[str, Any]) -> float:
    return sum(_med(r, "load_model", k) for k in IMPORTS) + _med(r, "load_model", "load_model")


def render(r: dict[str, Any]) -> str:
    rows = [(k, _med(r, "load_model", k)) for k in IMPORTS]
    rows += [("load_model() cache hit: sha256 check, weights, tokenizer", _med(r, "load_model", "load_model")),
             ("  of which: sha256 of every cached file (in a thread beside the weights)",
              _med(r, "load_model", "sha256 of the entry")),
             ("  of which: tokenizer", _med(r, "load_model", "tokenizer")),
             ("from_pretrained on the cache folder (weights only)", _med(r, "from_pretrained", "from_pretrained")),
             ("safetensors straight into LlamaForCausalLM (meta device, assign)", _med(r, "safetensors", "safetensors"))]
    total = _total(r)
    rows.append((f"fresh process total: imports + load_model() (target <= 3 s: {'met' if total <= 3 else 'missed'})",
                 total))
    n = len(r["values"]["runs"]["load_model"])
    table = [f"| step (fresh process, median of {n}) | seconds |", "|---|---|"]
    table += [f"| {name} | {sec:.2f} |" for name, sec in rows]
    return "\n".join(["## SmolLM2 fresh-process load (issues 31, 45)", "", "Target: a fresh Python process loads "
                      "SmolLM2-135M-Instruct from the trustlab cache in <= 3 s. `benchmarks/llm_load.py` (each repeat "
                      "a fresh process; cache warmed first with `trustlab doctor --warm`):", "", *table, "",
                      _harness.setting_line(r), "", NOTES])


NOTES = """Reading it (earlier runs, on the previous machine: 7.75 s at load average 2.9, 6.60 s at 2.2): the target is
**missed** and cannot be met by changing how we load. Imports are most of the total and lie outside our code:
`import torch`, then transformers' model classes, which import `torch.distributed.tensor` (0.76 s, via
`transformers.integrations.hub_kernels` -> `conversion_mapping` -> `core_model_loading` ->
`distributed.sharding_utils`), `torch._dynamo` (0.51 s, via `transformers.masking_utils`), `scipy.optimize` (0.37 s,
via `transformers.loss` for object-detection losses) and run a dependency-version check (0.37 s) before any weight
is read (`python -X importtime`, previous machine). `trustlab.llm` itself adds 0.01 s. `from_pretrained` reads the
weights; reading the safetensors straight into `LlamaForCausalLM` built on the meta device is faster (table), so it
would save a few tenths of a second, at the price of re-implementing transformers' weight tying and
per-architecture key mapping; we keep `from_pretrained`. The sha256 check of the 540 MB entry (in a thread beside
the read; kept, since issue 15 asks for content verification by default; `verify="size"` skips it) and the
tokenizer make up the rest. Inside a process that has torch and transformers imported (every LLM experiment), a
cache hit takes about 1.3 s: that is the setting where the 3 s target is met."""


if __name__ == "__main__":
    ap = _harness.parser(__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    _harness.main("llm-load", ap.parse_args(), run, render)
