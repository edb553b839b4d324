"""DDPM pieces: the linear beta schedule, a model wrapper (epsilon net + schedule), training and weight files.

Levels are 1-based as in the paper's code (``t* = 1000`` is the last level): level ``t`` uses
``alpha_bar[t - 1]`` and the network sees the time index ``t - 1``.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.arguments import PATH, ArrayLike, validate_args
from trustlab.core.constraints import Interval, Satisfies
from trustlab.core.exceptions import AssetNotFoundError, InputError, TrustlabError
from trustlab.core.optional import require
from trustlab.core.seeding import as_seed, isolated_global_rng
from trustlab.methods.freqpure._unet import EpsUNet

torch = require("torch", purpose="trustlab.methods.freqpure")
nn = torch.nn

#: the reverse process calls these methods at every step: declared, not wrapped
_HOT = "tensor on the hot path (every reverse step); shapes checked by the net"
_LEVEL = "1-based noise level on the hot path (every reverse step); set by the purifier's validated schedule"

__all__ = ["DiffusionModel", "DDPMTraining", "train_ddpm", "save_ddpm", "load_ddpm", "linear_betas",
           "ddpm_from_bytes"]


@validate_args(n_steps=[Interval(int, 2, None)], beta_start=[Interval(float, 0, 1, closed="neither")],
               beta_end=[Interval(float, 0, 1, closed="neither")])
def linear_betas(n_steps: int = 1000, beta_start: float = 1e-4, beta_end: float = 0.02) -> np.ndarray:
    """The DDPM linear schedule ``linspace(beta_start, beta_end, n_steps)`` in float64."""
    return np.linspace(beta_start, beta_end, n_steps, dtype=np.float64)


class DiffusionModel(nn.Module):
    """An epsilon-prediction diffusion model: ``net(x_t, t_index) -> eps`` plus its discrete schedule.

    Plug in your own network (any module mapping ``(B, C, H, W)`` inputs in [-1, 1] and ``(B,)`` integer
    time indices to ``(B, C, H, W)`` noise predictions; a learned-variance net with ``2C`` output channels
    is split and its first ``C`` channels used) and its training schedule (``betas``, default the linear
    DDPM schedule with ``n_steps = 1000``).

    Examples
    --------
    >>> m = DiffusionModel(EpsUNet(1, (16, 24)), image_shape=(1, 16, 16))
    >>> m.n_steps, round(m.alpha_bar(1), 6)
    (1000, 0.9999)
    """

    def __init__(self, net: nn.Module, *, image_shape: Sequence[int], betas: Any = None,
                 config: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.net = net
        self.image_shape = tuple(int(s) for s in image_shape)
        b = linear_betas() if betas is None else np.asarray(betas, dtype=np.float64)
        if b.ndim != 1 or len(b) < 2 or not ((b > 0) & (b < 1)).all():
            raise InputError(f"The 'betas' argument of DiffusionModel must be a 1-d schedule in (0, 1). Got {b!r}.")
        self.register_buffer("betas", torch.as_tensor(b), persistent=False)
        self._abar = np.cumprod(1.0 - b)
        self.config = dict(config or {})

    @property
    def n_steps(self) -> int:
        return len(self._abar)

    @takes_any(level=_LEVEL)
    def alpha_bar(self, level: int) -> float:
        """``alpha_bar`` at 1-based ``level`` (``alpha_bar(0) = 1``: the clean image)."""
        return 1.0 if level <= 0 else float(self._abar[level - 1])

    @takes_any(x=_HOT, level=_LEVEL)
    def eps(self, x: Any, level: int) -> Any:
        """The noise prediction at 1-based ``level`` (the net sees time index ``level - 1``)."""
        t = torch.full((x.shape[0],), level - 1, dtype=torch.long)
        out = self.net(x, t)
        c = x.shape[1]
        if out.shape[1] == 2 * c:  # learned-variance models (guided-diffusion): mean part first
            out = out[:, :c]
        if out.shape != x.shape:
            raise TrustlabError(f"The diffusion net returned shape {tuple(out.shape)} for input {tuple(x.shape)}; "
                                f"it must predict the noise with the input's shape (or 2C channels).")
        return out

    @takes_any(x0=_HOT, level=_LEVEL, noise=_HOT)
    def q_sample(self, x0: Any, level: int, noise: Any) -> Any:
        """``x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) noise`` (closed-form forward noising)."""
        a = self.alpha_bar(level)
        return a ** 0.5 * x0 + (1.0 - a) ** 0.5 * noise

    @takes_any(x_t=_HOT, level=_LEVEL, eps=_HOT)
    def x0_from_eps(self, x_t: Any, level: int, eps: Any) -> Any:
        a = self.alpha_bar(level)
        return (x_t - (1.0 - a) ** 0.5 * eps) / a ** 0.5

    @takes_any(x=_HOT, t="time indices on the hot path (every reverse step); checked by the net")
    def forward(self, x: Any, t: Any) -> Any:
        return self.net(x, t)


# -------------------------------------------------------------------------------------------- training
@dataclass
class DDPMTraining:
    """A (resumable) DDPM training run: ``model`` carries the EMA weights (what is shipped), ``net`` the
    raw weights; ``losses`` the mean loss of every epoch; ``optimizer`` and ``generator`` the states to
    resume from."""

    model: DiffusionModel
    net: nn.Module
    ema: dict[str, Any]
    config: dict[str, Any]
    epochs_done: int = 0
    steps_done: int = 0
    losses: list[float] = field(default_factory=list)
    optimizer: dict[str, Any] | None = None
    generator: Any = None
    wall_time_s: float = 0.0
    history: list[dict[str, float]] = field(default_factory=list)

    def checkpoint(self) -> dict[str, Any]:
        """Everything :func:`train_ddpm` needs to resume (save it with ``torch.save``)."""
        return {"net": self.net.state_dict(), "ema": self.ema, "config": self.config, "epochs_done": self.epochs_done,
                "steps_done": self.steps_done, "losses": self.losses, "optimizer": self.optimizer,
                "generator": self.generator, "wall_time_s": self.wall_time_s, "history": self.history}


def _images4d(X: Any, owner: str) -> np.ndarray:
    arr = np.asarray(X, dtype=np.float32)
    if arr.ndim == 3:
        arr = arr[:, None]
    if arr.ndim != 4 or arr.shape[-1] % 4 or arr.shape[-2] % 4:
        raise InputError(f"The 'X' argument of {owner} must be images (n, C, H, W) or (n, H, W) with H and W "
                         f"divisible by 4. Got shape {arr.shape} instead.")
    if arr.size and (arr.min() < 0 or arr.max() > 1):
        raise InputError(f"The 'X' argument of {owner} must hold pixel values in [0, 1]. Got min {arr.min():.3g}, "
                         f"max {arr.max():.3g} instead.")
    return arr


def _build_net(cfg: dict[str, Any]) -> EpsUNet:
    with isolated_global_rng(int(cfg["seed"])):  # module initialisation draws from the global RNG
        return EpsUNet(int(cfg["in_channels"]), tuple(cfg["channels"]), int(cfg["t_dim"]))


def _ddpm_loss(abar: Any, n_steps: int, gen: Any) -> Any:
    """The epsilon loss as a ``train_epoch`` ``loss_fn``; noise and levels come from ``gen``."""
    def loss(net: nn.Module, xb: Any, _y: Any) -> Any:
        x0 = 2.0 * xb - 1.0
        t = torch.randint(0, n_steps, (len(xb),), generator=gen)
        noise = torch.randn(x0.shape, generator=gen)
        a = abar[t].reshape(-1, 1, 1, 1)
        return nn.functional.mse_loss(net(a.sqrt() * x0 + (1 - a).sqrt() * noise, t), noise)

    return loss


_CHANNELS = Satisfies(lambda v: isinstance(v, list | tuple) and len(v) == 2 and all(
    isinstance(c, int) and not isinstance(c, bool) and c >= 4 for c in v), "a pair of ints >= 4",
    [(8,), (8, 2), "8,16"], valid=(8, 8))


@validate_args(X=[ArrayLike(ndim=(3, 4), low=0.0, high=1.0)], epochs=[Interval(int, 1, None)],
               channels=[_CHANNELS], batch_size=[Interval(int, 1, None)], lr=[Interval(float, 0, None, closed="neither")],
               ema_decay=[Interval(float, 0, 1, closed="left")], n_steps=[Interval(int, 2, None)],
               random_state=["random_state"], num_threads=[Interval(int, 1, None), None],
               resume=[dict, None])
def train_ddpm(X: Any, *, epochs: int = 500, channels: Sequence[int] = (24, 32), batch_size: int = 128,
               lr: float = 1e-3, ema_decay: float = 0.999, n_steps: int = 1000, random_state: int = 0,
               num_threads: int | None = None, resume: dict[str, Any] | None = None) -> DDPMTraining:
    """Train an :class:`EpsUNet` DDPM (epsilon loss, linear betas) on images ``X`` in [0, 1].

    ``epochs`` more passes over ``X`` run (on top of ``resume``, a :meth:`DDPMTraining.checkpoint`, whose
    configuration then wins), each one :func:`trustlab.models.train_epoch` with the epsilon loss. The
    returned ``model`` holds an exponential moving average of the weights (decay warmed up as
    ``min(ema_decay, (1 + k) / (10 + k))`` at step ``k``). Deterministic by ``random_state``; resuming gives
    the same weights as one uninterrupted run.
    """
    random_state = as_seed(random_state)  # int seeds unchanged; a Generator is accepted
    from trustlab.core.threads import limit_threads
    from trustlab.models import train_epoch

    arr = _images4d(X, "train_ddpm")
    cfg = dict(resume["config"]) if resume is not None else {
        "in_channels": int(arr.shape[1]), "image_size": [int(arr.shape[2]), int(arr.shape[3])],
        "channels": [int(c) for c in channels], "t_dim": 64, "n_steps": int(n_steps), "beta_start": 1e-4,
        "beta_end": 0.02, "batch_size": int(batch_size), "lr": float(lr), "ema_decay": float(ema_decay),
        "seed": int(random_state)}
    if [arr.shape[1], arr.shape[2], arr.shape[3]] != [cfg["in_channels"], *cfg["image_size"]]:
        raise InputError(f"The 'X' argument of train_ddpm has images of shape {arr.shape[1:]}; the checkpoint was "
                         f"trained on {(cfg['in_channels'], *cfg['image_size'])}.")
    net = _build_net(cfg)
    run = DDPMTraining(None, net, {k: v.detach().clone() for k, v in net.state_dict().items()}, cfg)  # type: ignore[arg-type]
    gen = torch.Generator().manual_seed(int(cfg["seed"]))
    opt = torch.optim.Adam(net.parameters(), lr=cfg["lr"])
    if resume is not None:
        net.load_state_dict(resume["net"])
        run.ema = {k: v.clone() for k, v in resume["ema"].items()}
        run.epochs_done, run.steps_done = int(resume["epochs_done"]), int(resume["steps_done"])
        run.losses, run.history = list(resume["losses"]), list(resume["history"])
        run.wall_time_s = float(resume["wall_time_s"])
        opt.load_state_dict(resume["optimizer"])
        gen.set_state(resume["generator"])
    abar = torch.as_tensor(np.cumprod(1 - linear_betas(cfg["n_steps"], cfg["beta_start"], cfg["beta_end"])),
                           dtype=torch.float32)
    params = dict(net.named_parameters())

    def update_ema(_loss: float) -> None:
        run.steps_done += 1
        d = min(cfg["ema_decay"], (1 + run.steps_done) / (10 + run.steps_done))
        with torch.no_grad():
            for k, p in params.items():
                run.ema[k].mul_(d).add_(p.detach(), alpha=1 - d)

    t0 = time.perf_counter()
    Xt = torch.as_tensor(arr)
    dummy = torch.zeros(len(Xt), dtype=torch.long)
    net.train()
    with limit_threads(num_threads):
        for _ in range(epochs):
            run.losses.append(train_epoch(net, Xt, dummy, opt, generator=gen, batch_size=cfg["batch_size"],
                                          loss_fn=_ddpm_loss(abar, cfg["n_steps"], gen), after_step=update_ema))
            run.epochs_done += 1
    net.eval()
    run.wall_time_s += time.perf_counter() - t0
    run.optimizer, run.generator = copy.deepcopy(opt.state_dict()), gen.get_state()
    run.history.append({"epoch": run.epochs_done, "step": run.steps_done,
                        "loss_last_20_epochs": float(np.mean(run.losses[-20:])), "wall_time_s": run.wall_time_s})
    run.config = {**cfg, "epochs": run.epochs_done, "steps": run.steps_done}
    run.model = _model_from(run.ema, run.config)
    return run


def _model_from(weights: dict[str, Any], cfg: dict[str, Any]) -> DiffusionModel:
    net = _build_net(cfg)
    net.load_state_dict({k: v.clone().float() for k, v in weights.items()})
    betas = linear_betas(cfg["n_steps"], cfg["beta_start"], cfg["beta_end"])
    model = DiffusionModel(net, image_shape=(cfg["in_channels"], *cfg["image_size"]), betas=betas, config=cfg)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


# ----------------------------------------------------------------------------------------------- files
def _save_example() -> dict[str, Any]:
    cfg = {"in_channels": 1, "image_size": [8, 8], "channels": [4, 4], "t_dim": 8, "n_steps": 10, "beta_start": 1e-4,
           "beta_end": 0.02, "seed": 0}
    return {"model": _model_from(_build_net(cfg).state_dict(), cfg), "path": "never-written.safetensors"}


@validate_args(_save_example, model=[DiffusionModel], path=[PATH], metadata=[dict, None])
def save_ddpm(model: DiffusionModel, path: Any, *, metadata: dict[str, Any] | None = None) -> str:
    """Write ``model``'s weights as safetensors (atomically) with its configuration in the header; returns
    the weights' content fingerprint (:func:`trustlab.core.hashing.content_hash`)."""
    from pathlib import Path

    from safetensors.torch import save

    from trustlab.core.hashing import content_hash
    from trustlab.results.result import atomic_write

    if not model.config:
        raise InputError("The 'model' argument of save_ddpm must carry its training config (model.config); "
                         "models built by train_ddpm or load_ddpm do.")
    tensors = {k: v.detach().float().contiguous() for k, v in model.net.state_dict().items()}
    blob = save(tensors, metadata={"config": json.dumps(model.config, sort_keys=True),
                                   "extra": json.dumps(metadata or {}, sort_keys=True)})

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(blob)

    atomic_write(Path(path), write)
    return content_hash(tensors)


def _header(blob: bytes, where: str) -> dict[str, Any]:
    try:
        n = int.from_bytes(blob[:8], "little")
        return json.loads(blob[8:8 + n].decode("utf-8")).get("__metadata__") or {}
    except Exception as exc:  # noqa: BLE001 - any parse failure means a corrupt file
        raise AssetNotFoundError(f"{where} is not a readable safetensors file ({type(exc).__name__}).") from None


@validate_args(blob=[bytes], where=[str], expected_fingerprint=[str, None], rebuild=[str, None])
def ddpm_from_bytes(blob: bytes, where: str = "the weights", *, expected_fingerprint: str | None = None,
                    rebuild: str | None = None) -> DiffusionModel:
    """A :class:`DiffusionModel` from safetensors bytes written by :func:`save_ddpm`; with
    ``expected_fingerprint`` the weights' content hash must match (else the error names ``where`` and
    ``rebuild``)."""
    from safetensors.torch import load

    from trustlab.core.hashing import content_hash

    how = f" Rebuild it with: {rebuild}" if rebuild else ""
    meta = _header(blob, where)
    try:
        tensors = load(blob)
        cfg = json.loads(meta["config"])
    except Exception as exc:  # noqa: BLE001
        raise AssetNotFoundError(f"{where} is corrupt or not a trustlab DDPM file ({type(exc).__name__}: {exc}).{how}"
                                 ) from None
    got = content_hash(tensors)
    if expected_fingerprint is not None and got != expected_fingerprint:
        raise AssetNotFoundError(f"{where} fails its fingerprint check (content hash {got[:16]}..., expected "
                                 f"{expected_fingerprint[:16]}...): the file is corrupt or was replaced.{how}")
    try:
        return _model_from(tensors, cfg)
    except Exception as exc:  # noqa: BLE001 - tensors that do not fit the recorded architecture
        raise AssetNotFoundError(f"{where} does not match its recorded architecture ({exc}).{how}") from None


@validate_args(path=[PATH])
def load_ddpm(path: Any) -> DiffusionModel:
    """A :class:`DiffusionModel` from a file written by :func:`save_ddpm` (e.g. ``trustlab freqpure
    train-ddpm --out PATH``)."""
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise AssetNotFoundError(f"No DDPM weights file at {str(p)!r}.")
    return ddpm_from_bytes(p.read_bytes(), str(p))
