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

import os

from trustlab.core.seeding import set_runtime_env

set_runtime_env()  # before torch: no busy-waiting on 2 shared cores, offline, no telemetry

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- llm-load:start -->", "<!-- llm-load:end -->"

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    folder = _child("load_model")["folder"]  # warm-up, and where the cache entry is
    runs: dict[str, list[dict[str, float]]] = {h: [] for h in ("load_model", "from_pretrained", "safetensors")}
    for _ in range(args.repeats):
        for how in runs:
            runs[how].append(_child(how, folder))

    def med(how: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[how])

    imports = ["import trustlab.llm", "import torch", "import transformers (+ model classes)"]
    rows = [(k, med("load_model", k)) for k in imports]
    rows += [("load_model() cache hit: sha256 check, weights, tokenizer", med("load_model", "load_model")),
             ("  of which: sha256 of every cached file (in a thread beside the weights)",
              med("load_model", "sha256 of the entry")),
             ("  of which: tokenizer", med("load_model", "tokenizer")),
             ("from_pretrained on the cache folder (weights only)", med("from_pretrained", "from_pretrained")),
             ("safetensors straight into LlamaForCausalLM (meta device, assign)", med("safetensors", "safetensors"))]
    total = sum(med("load_model", k) for k in imports) + med("load_model", "load_model")
    rows.append(("fresh process total: imports + load_model()", total))
    load_avg = os.getloadavg()[0]
    table = [f"| step (fresh process, median of {args.repeats}) | seconds |", "|---|---|"]
    table += [f"| {name} | {sec:.2f} |" for name, sec in rows]
    import torch
    import transformers

    setting = (f"Setting: torch {torch.__version__}, transformers {transformers.__version__}, Python "
               f"{platform.python_version()}, {os.cpu_count()} CPUs, OMP_WAIT_POLICY=PASSIVE, load average "
               f"{load_avg:.1f}. Regenerate with `.venv/bin/python benchmarks/llm_load.py`.")
    text = "\n".join(table) + "\n\n" + setting
    print(text)
    if not args.no_write and DOC.is_file():
        from _docsection import write_section

        write_section(START, END, f"{START}\n{text}\n{END}", heading="## SmolLM2 fresh-process load (issue 31)\n\n")


if __name__ == "__main__":
    main()
