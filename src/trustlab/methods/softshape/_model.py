"""SoftShape network in torch (Liu et al., ICML 2025), as the official code runs it.

Shape embedding (Conv1d, kernel m, stride q) -> L layers sharing one contribution scorer and one top-1
MoE. A layer with keep ratio < 1 keeps the top ceil(rho*M) score-weighted tokens in temporal order and
merges the rest into one score-weighted token (soft sparsification); then GELU(h + MoE(RMSNorm(h)) +
Inception(RMSNorm(h))), the Inception branch normalised with InstanceNorm (the official ``BN1d``).
Warm-up (keep ratio 1 everywhere) disables sparsification and the MoE. The head is MIL-style: per-token
logits weighted by the final scores and averaged over tokens.

Multivariate input (our extension; the official code is univariate): with ``channels="independent"``
every channel is cut into shapes by the same embedding, a learnable channel embedding is added, and the
C x M tokens of all channels compete in one sequence (so a shape is recognised in whichever channel it
appears, and sparsification picks the most discriminative shapes across channels). ``"mixed"`` embeds all
channels of a window into one token (a Conv1d over all channels). Univariate input is the same either way.

Ablations (``sparsify``): "soft" (merge, the paper), "hard" (drop the non-top-k tokens), "none" (keep
all tokens at all epochs). ``use_moe`` / ``use_inception`` switch the two branches off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["RMSNorm", "InceptionModule", "TopOneMoE", "SoftShapeNet", "InceptionTimeNet", "soft_sparsify",
           "resolve_shape"]


def resolve_shape(n_timepoints: int, shape_size: int, stride: int) -> tuple[int, int, int]:
    """(m, q, M) with the official rules: m <= T; if m <= q then q = min(2, m); q <= m."""
    m = max(1, min(int(shape_size), int(n_timepoints)))
    q = int(stride)
    if m <= q:
        q = min(2, m)
    q = min(q, m)
    n_tokens = (n_timepoints - m) // q + 1
    return m, q, n_tokens


class RMSNorm(nn.Module):
    """normalize(x) * gamma * sqrt(D) over the last dimension."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = dim ** 0.5
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1) * (self.gamma * self.scale)  # one full-size product, not two


class InceptionModule(nn.Module):
    """Inception block over a (B, C, L) sequence: bottleneck 1x1 -> kernels {ks-1, ks/2-1, ks/4-1} (odd),
    plus MaxPool(3) -> 1x1; concatenated to 4*nf channels, normalised, GELU.

    ``norm="batch"`` (BatchNorm, InceptionTime's) or ``"instance"`` (InstanceNorm over the sequence, what
    SoftShape's official code uses on token sequences; a one-token sequence normalises to 0).
    """

    def __init__(self, ni: int, nf: int = 32, ks: int = 40, norm: str = "batch") -> None:
        super().__init__()
        kss = [ks // (2 ** i) for i in range(3)]
        kss = [k if k % 2 else k - 1 for k in kss]
        self.use_bottleneck = ni > 1
        self.bottleneck = nn.Conv1d(ni, nf, 1, bias=False) if self.use_bottleneck else nn.Identity()
        c_in = nf if self.use_bottleneck else ni
        self.convs = nn.ModuleList([nn.Conv1d(c_in, nf, k, padding=k // 2, bias=False) for k in kss])
        self.pool_conv = nn.Sequential(nn.MaxPool1d(3, stride=1, padding=1), nn.Conv1d(ni, nf, 1, bias=False))
        self.norm = norm
        self.bn = nn.BatchNorm1d(4 * nf) if norm == "batch" else None
        self.act = nn.GELU()

    @staticmethod
    def _conv(conv: nn.Conv1d, b: torch.Tensor) -> torch.Tensor:
        """``conv(b)``; on a sequence shorter than the kernel (L tokens, 2L - 1 < k) only the central 2L - 1 taps
        ever meet a token (the others see the zero padding), so only they are run: the same sums without the
        zero terms, and the other taps' gradient is 0 either way."""
        L, k = b.shape[-1], conv.kernel_size[0]
        if 2 * L - 1 >= k:
            return conv(b)
        c = k // 2
        return F.conv1d(b, conv.weight[:, :, c - L + 1:c + L], conv.bias, padding=L - 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = self.bottleneck(x)
        out = torch.cat([self._conv(conv, b) for conv in self.convs] + [self.pool_conv(x)], dim=1)
        if self.bn is not None:
            return self.act(self.bn(out))
        if out.shape[-1] == 1:  # InstanceNorm of one element is (x - x) / sd = 0
            return self.act(torch.zeros_like(out))
        return self.act(F.instance_norm(out))


class _MLP(nn.Module):
    def __init__(self, dim: int, dropout: float) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(F.gelu(self.fc1(x))))


class TopOneMoE(nn.Module):
    """Top-1 mixture of experts with a zero-initialised router and cv^2 load balancing.

    ``forward`` returns ``(GELU(RMSNorm(h + gate * expert(h))), aux_loss, load)`` where ``aux_loss =
    cv2(importance) + cv2(load)`` and ``load`` is the token count per expert (non-differentiable).
    """

    def __init__(self, dim: int, n_experts: int, dropout: float) -> None:
        super().__init__()
        self.n_experts = n_experts
        self.experts = nn.ModuleList([_MLP(dim, dropout) for _ in range(n_experts)])
        self.w_gate = nn.Parameter(torch.zeros(dim, n_experts))
        self.norm = RMSNorm(dim)

    @staticmethod
    def cv_squared(x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] == 1:
            return x.new_zeros(())
        x = x.float()
        return x.var() / (x.mean() ** 2 + 1e-10)

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, N, D = h.shape
        flat = h.reshape(B * N, D)
        probs = torch.softmax(flat @ self.w_gate, dim=1)
        top_p, top_i = probs.topk(1, dim=1)
        gate = top_p / (top_p + 1e-6)  # renormalised top-1 gate (~1), as in the official code
        gates = torch.zeros_like(probs).scatter(1, top_i, gate)
        idx = top_i.squeeze(1)
        load = torch.bincount(idx, minlength=self.n_experts)  # = (gates > 0).sum(0): every gate is > 0
        aux = self.cv_squared(gates.sum(0)) + self.cv_squared(load)
        y = self.norm((flat + self._dispatch(flat, idx, gate, load)).view(B, N, D))
        return F.gelu(y), aux, load.detach()

    def _dispatch(self, flat: torch.Tensor, idx: torch.Tensor, gate: torch.Tensor, load: torch.Tensor
                  ) -> torch.Tensor:
        """``gate * expert_idx(token)`` per token. The experts run in index order, each on its tokens in
        token order (so dropout draws the same masks whichever path runs); one expert holding every token
        (collapsed routing, and always at the zero-initialised router) runs on ``flat`` itself."""
        counts = load.tolist()
        if max(counts) == len(flat):
            return self.experts[counts.index(len(flat))](flat) * gate
        order = torch.argsort(idx, stable=True)  # tokens grouped by expert, ascending within each
        parts = [self.experts[e](flat[sel]) * gate[sel]
                 for e, sel in enumerate(torch.split(order, counts)) if counts[e]]
        return torch.zeros_like(flat).index_copy(0, order, torch.cat(parts))


def soft_sparsify(h: torch.Tensor, s: torch.Tensor, k: int, merge: bool = True
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Keep the top-``k`` tokens of ``h`` (B, N, D) by score ``s`` (B, N, 1), weighted by ``s`` and in
    temporal order; with ``merge`` append one token sum_{i not in top-k} s_i h_i.

    Returns ``(tokens, kept_index (B, k), dropped_mask (B, N))``.
    """
    B, N, D = h.shape
    weighted = h * s
    _, top = torch.topk(s.squeeze(-1), k, dim=1, largest=True, sorted=True)
    kept_idx, _ = torch.sort(top, dim=1)
    kept = torch.gather(weighted, 1, kept_idx.unsqueeze(-1).expand(-1, -1, D))
    dropped = torch.ones(B, N, dtype=torch.bool, device=h.device)
    dropped.scatter_(1, kept_idx, False)
    if not merge:
        return kept, kept_idx, dropped
    merged = (weighted * dropped.unsqueeze(-1).to(h.dtype)).sum(dim=1, keepdim=True)
    return torch.cat([kept, merged], dim=1), kept_idx, dropped


@dataclass
class ForwardInfo:
    """What a forward pass exposes for tests and interpretation (per layer, detached)."""

    n_tokens: list[int] = field(default_factory=list)       # tokens entering the head after each layer
    scores: list[torch.Tensor] = field(default_factory=list)  # (B, N_l) score at each layer's input
    kept_index: list[torch.Tensor | None] = field(default_factory=list)  # (B, k) original-token ids kept
    positions: list[torch.Tensor] = field(default_factory=list)  # (B, N_out) original token id (-1: merged)
    load: list[torch.Tensor] = field(default_factory=list)    # expert token counts per sparsified layer
    end_scores: torch.Tensor | None = None                    # (B, N_final)


class _Layer(nn.Module):
    def __init__(self, dim: int, scorer: nn.Module, moe: TopOneMoE | None, use_inception: bool) -> None:
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.scorer = scorer  # shared module (registered once on the net; here a plain reference)
        self.moe = moe
        self.inception = InceptionModule(dim, dim // 4, norm="instance") if use_inception else None

    def _incep(self, h: torch.Tensor) -> torch.Tensor:
        if self.inception is None:
            return torch.zeros_like(h)
        return self.inception(h.transpose(1, 2)).transpose(1, 2)

    def forward(self, h: torch.Tensor, pos: torch.Tensor, keep: float, sparsify: str
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, ForwardInfo]:
        info = ForwardInfo()
        h = self.norm1(h)
        s = self.scorer(h)
        info.scores.append(s.squeeze(-1).detach())
        aux = h.new_zeros(())
        if keep < 1.0 and sparsify != "none":
            k = math.ceil(keep * h.shape[1])
            h, kept_idx, _ = soft_sparsify(h, s, k, merge=(sparsify == "soft"))
            new_pos = torch.gather(pos, 1, kept_idx)
            if sparsify == "soft":
                new_pos = torch.cat([new_pos, torch.full_like(new_pos[:, :1], -1)], dim=1)
            info.kept_index.append(kept_idx.detach())
            pos = new_pos
            z = self.norm2(h)
            out = h + self._incep(z)
            if self.moe is not None:
                m, aux, load = self.moe(z)
                out = out + m
                info.load.append(load)
            h = out
        else:
            h = h * s
            info.kept_index.append(None)
            h = h + self._incep(self.norm2(h))
        info.n_tokens.append(h.shape[1])
        info.positions.append(pos.detach())
        return h, pos, aux, info


class SoftShapeNet(nn.Module):
    """The SoftShape model. ``forward(x, warm)`` returns ``(logits, moe_loss, info)``.

    ``warm=True`` means the warm-up phase (keep ratio 1 in every layer). ``n_tokens`` is the number of
    shapes per channel (M); with ``channels="independent"`` and C > 1 channels the layers see C x M tokens,
    channel-major (token ``c * M + p`` is shape ``p`` of channel ``c``)."""

    def __init__(self, n_channels: int, n_timepoints: int, n_classes: int, *, shape_size: int = 32,
                 stride: int = 4, d_model: int = 128, depth: int = 2, sparse_rate: float = 0.5,
                 dropout: float = 0.15, sparsify: str = "soft", use_moe: bool = True,
                 use_inception: bool = True, n_experts: int | None = None, channels: str = "independent") -> None:
        super().__init__()
        self.m, self.q, self.n_tokens = resolve_shape(n_timepoints, shape_size, stride)
        self.sparsify = sparsify
        self.n_channels, self.n_timepoints = n_channels, n_timepoints
        self.independent = channels == "independent" and n_channels > 1
        self.embed = nn.Conv1d(1 if self.independent else n_channels, d_model, kernel_size=self.m, stride=self.q)
        self.chan_embed = nn.Parameter(torch.zeros(1, n_channels, 1, d_model)) if self.independent else None
        self.pos_embed = nn.Parameter(torch.zeros(1, self.n_tokens, d_model))
        self.pos_drop = nn.Dropout(dropout)
        self.scorer = nn.Sequential(nn.Linear(d_model, 8), nn.Tanh(), nn.Linear(8, 1), nn.Sigmoid())
        self.moe = TopOneMoE(d_model, n_experts or n_classes, dropout) if use_moe else None
        self.keep = [1.0 - r for r in torch.linspace(0, sparse_rate, depth).tolist()] if depth > 1 else [1.0 - sparse_rate]
        self.layers = nn.ModuleList([_Layer(d_model, self.scorer, self.moe, use_inception) for _ in range(depth)])
        self.out_drop = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, n_classes)
        self.apply(self._init)

    @staticmethod
    def _init(mod: nn.Module) -> None:
        if isinstance(mod, nn.Linear):
            nn.init.trunc_normal_(mod.weight, std=0.02)
            if mod.bias is not None:
                nn.init.zeros_(mod.bias)

    def _tokens(self, x: torch.Tensor) -> torch.Tensor:
        if not self.independent:
            return self.embed(x).transpose(1, 2) + self.pos_embed
        B, C, T = x.shape
        h = self.embed(x.reshape(B * C, 1, T)).transpose(1, 2) + self.pos_embed  # (B*C, M, D)
        h = h.reshape(B, C, self.n_tokens, -1) + self.chan_embed
        return h.reshape(B, C * self.n_tokens, -1)

    def forward(self, x: torch.Tensor, warm: bool = False) -> tuple[torch.Tensor, torch.Tensor, ForwardInfo]:
        h = self.pos_drop(self._tokens(x))
        B, N, _ = h.shape
        pos = torch.arange(N, device=h.device).unsqueeze(0).expand(B, N)
        info = ForwardInfo()
        aux = h.new_zeros(())
        for i, (layer, keep) in enumerate(zip(self.layers, self.keep)):
            h, pos, a, li = layer(h, pos, 1.0 if warm else keep, self.sparsify)
            aux = aux + a
            for name in ("n_tokens", "scores", "kept_index", "positions", "load"):
                getattr(info, name).extend(getattr(li, name))
            if i < len(self.layers) - 1:
                h = F.gelu(h)  # every layer ends with GELU (official code)
        h = self.out_drop(h)  # the last layer: dropout, the final score, then its GELU
        s_end = self.scorer(h)
        info.end_scores = s_end.squeeze(-1).detach()
        logits = (self.head(F.gelu(h)) * s_end).mean(dim=1)
        return logits, aux, info


class InceptionTimeNet(nn.Module):
    """InceptionTime-lite: ``depth`` Inception modules over the raw series (a residual shortcut after the
    third), global average pooling, linear head."""

    def __init__(self, n_channels: int, n_classes: int, *, n_filters: int = 32, depth: int = 3,
                 kernel_size: int = 40) -> None:
        super().__init__()
        self.blocks = nn.ModuleList()
        c = n_channels
        for _ in range(depth):
            self.blocks.append(InceptionModule(c, n_filters, kernel_size))
            c = 4 * n_filters
        self.shortcut = nn.Sequential(nn.Conv1d(n_channels, c, 1, bias=False), nn.BatchNorm1d(c))
        self.head = nn.Linear(c, n_classes)

    def forward(self, x: torch.Tensor, warm: bool = False) -> tuple[torch.Tensor, torch.Tensor, None]:
        h = x
        for i, blk in enumerate(self.blocks):
            h = blk(h)
            if i == 2:
                h = F.gelu(h + self.shortcut(x))
        return self.head(h.mean(dim=2)), h.new_zeros(()), None
