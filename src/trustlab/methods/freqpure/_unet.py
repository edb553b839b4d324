"""A small epsilon-prediction UNet for 16x16 images with a sinusoidal time embedding.

Two resolution levels below the input (16 -> 8 -> 4 for 16x16), one residual block per level, skip
connections by concatenation, GroupNorm + SiLU, the time embedding added inside every residual block.
``EpsUNet(channels=(32, 48))`` has about 200k parameters; ``channels=(16, 24)`` about 50k.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from trustlab.core._declare import takes_any
from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval
from trustlab.core.optional import require

torch = require("torch", purpose="trustlab.methods.freqpure")
nn = torch.nn

__all__ = ["EpsUNet", "sinusoidal_embedding"]


@validate_args(t=[ArrayLike(ndim=1)], dim=[Interval(int, 1, None)],
               max_period=[Interval(float, 0, None, closed="neither")])
def sinusoidal_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """The transformer/DDPM sinusoidal embedding of (integer or real) time steps: shape ``(len(t), dim)``."""
    return _embedding(torch.as_tensor(t), dim, max_period)


def _embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float64) / half)
    args = t.to(torch.float64).reshape(-1, 1) * freqs.reshape(1, -1)
    emb = torch.cat([torch.sin(args), torch.cos(args)], dim=1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros(len(t), 1, dtype=emb.dtype)], dim=1)
    return emb


def _groups(c: int) -> int:
    return next(g for g in (8, 4, 2, 1) if c % g == 0)


class _ResBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, t_dim: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(_groups(c_in), c_in)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.temb = nn.Linear(t_dim, c_out)
        self.norm2 = nn.GroupNorm(_groups(c_out), c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1)
        self.skip = nn.Conv2d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(nn.functional.silu(self.norm1(x)))
        h = h + self.temb(temb)[:, :, None, None]
        h = self.conv2(nn.functional.silu(self.norm2(h)))
        return h + self.skip(x)


class EpsUNet(nn.Module):
    """``forward(x, t) -> eps`` for ``x`` of shape (B, C, H, W) in the diffusion scale [-1, 1] and time
    indices ``t`` (B,) in ``[0, T)``; H and W must be divisible by 4.

    Examples
    --------
    >>> net = EpsUNet(in_channels=1, channels=(16, 24))
    >>> net(torch.zeros(2, 1, 16, 16), torch.tensor([0, 999])).shape
    torch.Size([2, 1, 16, 16])
    """

    def __init__(self, in_channels: int = 1, channels: Sequence[int] = (32, 48), t_dim: int = 64) -> None:
        super().__init__()
        c1, c2 = int(channels[0]), int(channels[1])
        self.in_channels, self.channels, self.t_dim = int(in_channels), (c1, c2), int(t_dim)
        self.time = nn.Sequential(nn.Linear(t_dim, t_dim), nn.SiLU(), nn.Linear(t_dim, t_dim))
        self.inc = nn.Conv2d(in_channels, c1, 3, padding=1)
        self.down1 = _ResBlock(c1, c1, t_dim)
        self.pool1 = nn.Conv2d(c1, c1, 3, stride=2, padding=1)
        self.down2 = _ResBlock(c1, c2, t_dim)
        self.pool2 = nn.Conv2d(c2, c2, 3, stride=2, padding=1)
        self.mid = _ResBlock(c2, c2, t_dim)
        self.up2 = _ResBlock(c2 + c2, c2, t_dim)
        self.up1 = _ResBlock(c2 + c1, c1, t_dim)
        self.out_norm = nn.GroupNorm(_groups(c1), c1)
        self.out = nn.Conv2d(c1, in_channels, 3, padding=1)

    @takes_any(x="tensor on the hot path (every reverse step); shapes checked by the layers",
               t="time indices on the hot path; checked by the embedding")
    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        temb = self.time(_embedding(t, self.t_dim).to(x.dtype))
        h0 = self.inc(x)
        h1 = self.down1(h0, temb)                        # H
        h2 = self.down2(self.pool1(h1), temb)            # H/2
        h = self.mid(self.pool2(h2), temb)               # H/4
        h = nn.functional.interpolate(h, scale_factor=2.0, mode="nearest")
        h = self.up2(torch.cat([h, h2], dim=1), temb)
        h = nn.functional.interpolate(h, scale_factor=2.0, mode="nearest")
        h = self.up1(torch.cat([h, h1], dim=1), temb)
        return self.out(nn.functional.silu(self.out_norm(h)))
