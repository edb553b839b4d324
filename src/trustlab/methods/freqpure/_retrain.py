"""Rebuild the shipped DDPM (``trustlab freqpure train-ddpm``): resumable, writes only the paths it is given."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import Interval, Satisfies

__all__ = ["retrain_ddpm"]

_PATH = Satisfies(lambda v: isinstance(v, str | Path) and str(v) != "", "a file path", ["", 3, None], valid="x.bin")


@validate_args(out=[_PATH], checkpoint=[_PATH, None], epochs=[Interval(int, 1, None)],
               chunk=[Interval(int, 1, None), None], channels=[Satisfies(lambda v: len(v) == 2, "a pair", [()],
                                                                        valid=(24, 32))],
               batch_size=[Interval(int, 1, None)], lr=[Interval(float, 0, None, closed="neither")],
               seed=[Interval(int, 0, None)], num_threads=[Interval(int, 1, None), None])
def retrain_ddpm(out: Any, *, checkpoint: Any = None, epochs: int = 500, chunk: int | None = None,
                 channels: tuple[int, int] = (24, 32), batch_size: int = 128, lr: float = 1e-3, seed: int = 0,
                 num_threads: int | None = 2) -> dict[str, Any]:
    """Train the 16x16 digits DDPM on the training half of :func:`digits16_split` and, once ``epochs``
    passes are done, write its EMA weights to ``out`` (safetensors) and ``provenance.json`` beside it.

    With ``checkpoint`` the run is resumable: an existing checkpoint is continued, and ``chunk`` caps the
    epochs of this call (the checkpoint is saved after it; call again to go on). Returns a summary dict.
    """
    import torch

    from trustlab.methods.freqpure._diffusion import save_ddpm, train_ddpm
    from trustlab.methods.freqpure._shipped import REBUILD_COMMAND, digits16_split
    from trustlab.results.result import atomic_write, atomic_write_text

    ck = Path(checkpoint) if checkpoint is not None else None
    resume = torch.load(ck, weights_only=False) if ck is not None and ck.is_file() else None
    done = 0 if resume is None else int(resume["epochs_done"])
    todo = min(epochs - done, chunk or epochs)
    Xtr = digits16_split(0)[0]
    if todo > 0:
        run = train_ddpm(Xtr, epochs=todo, channels=channels, batch_size=batch_size, lr=lr, random_state=seed,
                         num_threads=num_threads, resume=resume)
        if ck is not None:
            atomic_write(ck, lambda tmp: torch.save(run.checkpoint(), tmp))
        done, ckpt = run.epochs_done, run.checkpoint()
    else:
        ckpt = resume
    summary = {"epoch": done, "epochs": epochs, "steps": int(ckpt["steps_done"]), "finished": done >= epochs,
               "loss_last_20_epochs": float(np.mean(ckpt["losses"][-20:])), "wall_time_s": ckpt["wall_time_s"]}
    if done < epochs:
        return summary
    from trustlab.methods.freqpure._diffusion import _model_from

    model = _model_from(ckpt["ema"], ckpt["config"])
    outp = Path(out)
    fingerprint = save_ddpm(model, outp, metadata={"trained_epochs": done})
    prov = {"file": outp.name, "fingerprint": fingerprint, "config": ckpt["config"],
            "parameters": int(sum(p.numel() for p in model.parameters())), "size_bytes": outp.stat().st_size,
            "data": f"trustlab.methods.freqpure.digits16_split(0) training half ({len(Xtr)} digits, 16x16); the "
                    "300 test digits are never seen", "loss_last_20_epochs": summary["loss_last_20_epochs"],
            "history": ckpt["history"], "wall_time_s": ckpt["wall_time_s"], "torch": torch.__version__,
            "command": REBUILD_COMMAND + f" --epochs {epochs} --checkpoint CKPT [--chunk N]",
            "created": datetime.date.today().isoformat()}
    atomic_write_text(outp.parent / "provenance.json", json.dumps(prov, indent=2, sort_keys=True) + "\n")
    return {**summary, "fingerprint": fingerprint, "out": str(outp)}

