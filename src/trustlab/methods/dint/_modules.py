"""The intervention modules (torch) and the prompt-position rule they are applied at.

LoReFT (Wu et al. 2024): ``phi(h) = h + R^T (W h + b - R h)`` with ``R`` (r x d) of orthonormal rows
(:func:`torch.nn.utils.parametrizations.orthogonal`). D-ReFT (the released ``VIBreftIntervention``):
the source ``W h + b`` becomes ``z = mu + sigma * eps`` with ``mu = W_mu h + b_mu`` and a per-dimension
``sigma`` from a second linear map. ``sigma_param="official_clamp"`` is the released code
(``logvar.clamp(-14, -3.2)``, then ``std.clamp(0.001, 0.2)``: on real activations ``logvar > -3.2``, the
clamp's gradient is zero and sigma stays 0.2); ``"bounded_sigmoid"`` learns
``log sigma = log lo + (log hi - log lo) * sigmoid(W_s h + b_s)``, started at sigma = 0.2 everywhere.
"""

from __future__ import annotations

import math
import re
from typing import Any

from trustlab.core.exceptions import ConfigError
from trustlab.core.optional import require

torch = require("torch", purpose="trustlab.methods.dint interventions")

__all__ = ["LoReFTModule", "DReFTModule", "parse_positions", "select_positions"]

_POS_RE = re.compile(r"^(?:f(\d+))?(?:\+?l(\d+))?$")
OFFICIAL_LOGVAR = (-14.0, -3.2)
OFFICIAL_STD = (0.001, 0.2)
INIT_SIGMA = 0.2


def parse_positions(spec: str) -> tuple[int, int]:
    """``"f4+l4"`` -> (4, 4): the first f and last l prompt tokens (``"f3"``, ``"l2"`` also valid)."""
    m = _POS_RE.match(spec) if isinstance(spec, str) else None
    if not spec or m is None:
        raise ConfigError(f"The 'positions' argument must match 'f<int>+l<int>' (e.g. 'f4+l4', 'f3', 'l2'). "
                          f"Got {spec!r} instead.")
    f, last = int(m.group(1) or 0), int(m.group(2) or 0)
    if f + last == 0:
        raise ConfigError(f"The 'positions' argument selects no token (f + l = 0). Got {spec!r} instead.")
    return f, last


def select_positions(valid: Any, first: int, last: int) -> tuple[Any, Any]:
    """Masks ``[B, T]`` of the first ``first`` and the last ``last`` True entries of ``valid`` per row.

    ``valid`` marks the prompt tokens (pads and response tokens False), so left and right padding give the
    same tokens. A prompt shorter than ``first + last`` has overlapping sets; callers apply each position
    once (the union, or the "first" module where the weights are not shared).
    """
    v = valid.bool()
    rank = torch.cumsum(v.long(), dim=1)  # 1-based rank among valid tokens
    from_end = v.long().sum(1, keepdim=True) - rank + 1
    return v & (rank <= first), v & (from_end <= last)


class LoReFTModule(torch.nn.Module):
    """``h + R^T (W h + b - R h)`` on the last dimension (R with orthonormal rows)."""

    kind = "loreft"

    def __init__(self, d_model: int, rank: int) -> None:
        super().__init__()
        self.rotate = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(d_model, rank, bias=False))
        self.source = torch.nn.Linear(d_model, rank)

    @property
    def R(self) -> Any:  # noqa: N802 - the paper's name
        try:
            return self.rotate.weight
        except AttributeError as exc:
            raise RuntimeError(str(exc)) from exc

    def target(self, h: Any) -> Any:
        return self.source(h)

    def forward(self, h: Any) -> Any:
        r = self.R
        return h + (self.target(h) - h @ r.T) @ r


class DReFTModule(LoReFTModule):
    """LoReFT whose source is Gaussian: ``z = mu(h) + sigma(h) * eps`` (mean inference: ``z = mu``)."""

    kind = "dreft"

    def __init__(self, d_model: int, rank: int, sigma_param: str = "official_clamp",
                 sigma_bounds: tuple[float, float] = (1e-3, 1.0)) -> None:
        super().__init__(d_model, rank)
        self.sigma_param, self.sigma_bounds = sigma_param, (float(sigma_bounds[0]), float(sigma_bounds[1]))
        self.scale = torch.nn.Linear(d_model, rank)  # logvar (official) or the sigmoid's input
        if sigma_param == "bounded_sigmoid":
            lo, hi = (math.log(b) for b in self.sigma_bounds)
            frac = min(max((math.log(INIT_SIGMA) - lo) / (hi - lo), 1e-4), 1 - 1e-4)
            with torch.no_grad():
                self.scale.weight.zero_()
                self.scale.bias.fill_(math.log(frac / (1 - frac)))
        self.inference = "sample"
        self.generator: Any = None
        self.last_kl: Any = None

    def sigma(self, h: Any) -> Any:
        """Per-dimension standard deviation ``[..., r]`` at states ``h``."""
        raw = self.scale(h)
        if self.sigma_param == "official_clamp":
            logvar = raw.clamp(*OFFICIAL_LOGVAR)
            return torch.exp(0.5 * logvar).clamp(*OFFICIAL_STD)
        lo, hi = (math.log(b) for b in self.sigma_bounds)
        return torch.exp(lo + (hi - lo) * torch.sigmoid(raw))

    def target(self, h: Any) -> Any:
        mu = self.source(h)
        if self.inference == "mean" and not self.training:
            self.last_kl = None
            return mu
        std = self.sigma(h)
        eps = torch.randn(mu.shape, generator=self.generator, device=mu.device, dtype=mu.dtype)
        if self.training:
            self.last_kl = 0.5 * (mu.pow(2) + std.pow(2) - 1 - 2 * torch.log(std)).sum(-1).mean()
        return mu + std * eps

    def __getstate__(self) -> dict[str, Any]:  # a torch.Generator does not pickle
        state = dict(self.__dict__)
        state["generator"], state["last_kl"] = None, None
        return state
