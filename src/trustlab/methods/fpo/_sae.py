"""A sparse autoencoder (TopK or ReLU + L1) on residual-stream activations, its trainer, and collection.

:class:`SparseAutoencoder` encodes ``c = sigma(W_enc (s x - b_dec) + b_enc)`` and decodes
``x_hat = (W_dec c + b_dec) / s``, where ``s`` is the input scale that gives the training activations unit
mean squared norm (stored with the SAE, so features do not depend on the activation norm of the model).
``kind="topk"`` keeps the k largest pre-activations (after ReLU); ``kind="relu"`` is the paper's Eq. 6
(ReLU with an L1 penalty). :func:`train_sae` fits one with Adam and reports the fraction of variance
explained, L0 and the dead fraction on held-back activations; :func:`collect_activations` gathers the
last block's (pre-final-norm) outputs at response tokens through :mod:`trustlab.llm` (position 0 and pads
excluded). SAEs are saved as safetensors with a content fingerprint.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import PATH, ArrayLike, takes_any, validate_args
from trustlab.core.constraints import Boolean, Interval, Options, Satisfies
from trustlab.core.exceptions import AssetNotFoundError, ConfigError, InputError
from trustlab.core.hashing import content_hash
from trustlab.core.optional import require
from trustlab.core.seeding import check_random_state, isolated_global_rng, spawn_seed

torch = require("torch", purpose="trustlab.methods.fpo sparse autoencoders")

__all__ = ["SAEReport", "SparseAutoencoder", "collect_activations", "sae_report", "train_sae"]

_FORMAT = "1"
_POS_INT = [Interval(int, 1, None)]
#: the ``rows`` of a SequenceSet (None: all), as ``np.asarray(rows, dtype=np.int64).reshape(-1)`` reads them
ROWS = [None, ArrayLike(dtype="integer", min_len=0)]
#: activations entering the SAE in the training and FPO loops: not validated per call (``_check_input`` is)
_HOT_X = "activations [..., d_in] on the training hot path; _check_input refuses a non-tensor or a wrong width"


def _acts_rule() -> Any:
    return [Satisfies(lambda x: isinstance(x, torch.Tensor) and x.ndim == 2 and x.is_floating_point()
                      and x.shape[0] >= 2, "a floating-point torch tensor [n_tokens >= 2, d_in]",
                      invalid=["acts", None], valid=NotImplemented)]


class SparseAutoencoder(torch.nn.Module):
    """A TopK or ReLU + L1 sparse autoencoder with its input scale.

    Parameters
    ----------
    d_in : int
        Width of the activations (the model's hidden size).
    width : int
        Number of features.
    k : int, default=32
        Active features per token for ``kind="topk"`` (1 <= k <= width).
    kind : {"topk", "relu"}, default="topk"
    scale : float, default=1.0
        Input scale ``s`` (set by :func:`train_sae` to give unit mean squared norm).

    Examples
    --------
    >>> import torch
    >>> sae = SparseAutoencoder(8, 32, k=4)
    >>> c = sae.encode(torch.randn(5, 8))
    >>> (c != 0).sum(-1).tolist()
    [4, 4, 4, 4, 4]
    """

    @validate_args(d_in=_POS_INT, width=_POS_INT, k=_POS_INT, kind=[Options(("topk", "relu"))],
                   scale=[Interval(float, 0, None, closed="neither")])
    def __init__(self, d_in: int, width: int, *, k: int = 32, kind: str = "topk", scale: float = 1.0) -> None:
        super().__init__()
        if kind == "topk" and k > width:
            raise ConfigError(f"The 'k' argument of SparseAutoencoder must be an int in [1, width={width}]. "
                              f"Got {k} instead.")
        self.d_in, self.width, self.k, self.kind = int(d_in), int(width), int(k), kind
        self.W_enc = torch.nn.Parameter(torch.zeros(d_in, width))
        self.b_enc = torch.nn.Parameter(torch.zeros(width))
        self.W_dec = torch.nn.Parameter(torch.zeros(width, d_in))
        self.b_dec = torch.nn.Parameter(torch.zeros(d_in))
        self.register_buffer("scale", torch.tensor(float(scale)))

    @classmethod
    @validate_args(_example=lambda: {"state": {"W_enc": np.zeros((4, 8)), "W_dec": np.zeros((8, 4))}, "k": 2},
                   state=[dict], k=_POS_INT, kind=[Options(("topk", "relu"))],
                   scale=[None, Interval(float, 0, None, closed="neither")])
    def from_state_dict(cls, state: dict[str, Any], *, k: int = 32, kind: str = "topk",
                        scale: float | None = None) -> SparseAutoencoder:
        """An SAE from a pretrained state dict: ``W_enc [d_in, width]``, ``W_dec [width, d_in]``, ``b_enc``,
        ``b_dec`` (SAELens-style; an optional ``scale``), or ``encoder.weight [width, d_in]``, ``encoder.bias``,
        ``decoder.weight [d_in, width]``, ``decoder.bias`` (two ``torch.nn.Linear``). ``scale`` (default: the
        dict's, else 1) multiplies the activations before encoding."""
        t = {key: torch.as_tensor(v, dtype=torch.float32) for key, v in state.items()
             if not isinstance(v, str | bytes)}
        if {"W_enc", "W_dec"} <= set(t):
            w_enc, w_dec = t["W_enc"], t["W_dec"]
            b_enc, b_dec = t.get("b_enc"), t.get("b_dec")
        elif {"encoder.weight", "decoder.weight"} <= set(t):
            w_enc, w_dec = t["encoder.weight"].T, t["decoder.weight"].T
            b_enc, b_dec = t.get("encoder.bias"), t.get("decoder.bias")
        else:
            raise InputError("The 'state' argument of SparseAutoencoder.from_state_dict must hold W_enc and W_dec "
                             "(or encoder.weight and decoder.weight). Got keys "
                             f"{sorted(state)[:8]!r} instead.")
        d_in, width = w_enc.shape if w_enc.ndim == 2 else (0, 0)
        if w_enc.ndim != 2 or tuple(w_dec.shape) != (width, d_in):
            raise InputError(f"SparseAutoencoder.from_state_dict: W_enc {tuple(w_enc.shape)} and W_dec "
                             f"{tuple(w_dec.shape)} must be [d_in, width] and [width, d_in].")
        s = float(scale) if scale is not None else float(t.get("scale", 1.0))
        sae = cls(int(d_in), int(width), k=min(int(k), int(width)), kind=kind, scale=s)
        with torch.no_grad():
            sae.W_enc.copy_(w_enc)
            sae.W_dec.copy_(w_dec)
            sae.b_enc.copy_(b_enc if b_enc is not None else torch.zeros(width))
            sae.b_dec.copy_(b_dec if b_dec is not None else torch.zeros(d_in))
        return sae

    def _check_input(self, x: Any) -> None:
        if not isinstance(x, torch.Tensor) or x.shape[-1] != self.d_in:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise InputError(f"This SparseAutoencoder takes activations of width d_in={self.d_in} (the model's "
                             f"hidden size it was trained on). Got {got}.")

    @takes_any(x=_HOT_X)
    def pre_activations(self, x: Any) -> Any:
        """``W_enc (s x - b_dec) + b_enc`` (before the sparsifying non-linearity)."""
        self._check_input(x)
        w = self.W_enc
        return (x.to(w.dtype) * self.scale - self.b_dec) @ w + self.b_enc

    @takes_any(x=_HOT_X)
    def encode(self, x: Any) -> Any:
        """Feature activations ``[..., width]`` (>= 0; exactly ``k`` non-zero per token for TopK in general)."""
        pre = torch.relu(self.pre_activations(x))
        if self.kind == "relu":
            return pre
        v, i = pre.topk(self.k, dim=-1)
        return torch.zeros_like(pre).scatter(-1, i, v)

    @takes_any(c="feature activations [..., width] on the training hot path; the matmul with W_dec checks the width")
    def decode(self, c: Any) -> Any:
        """Reconstruction in the input's units."""
        return (c @ self.W_dec + self.b_dec) / self.scale

    @takes_any(x=_HOT_X)
    def forward(self, x: Any) -> Any:
        return self.decode(self.encode(x))

    @validate_args(units=[Options(("raw", "normalised"))])
    def distance_units(self, units: str) -> float:
        """Factor that puts a squared feature difference in ``units``: ``"raw"`` (``1 / s^2``, features of the
        un-normalised activations, the scale of an SAE such as Gemma Scope that reads raw residuals, where the
        paper's alpha = 0.5 was set) or ``"normalised"`` (1, features of the unit-norm inputs)."""
        return 1.0 / float(self.scale) ** 2 if units == "raw" else 1.0

    # ------------------------------------------------------------------------------------- identity
    def config(self) -> dict[str, Any]:
        return {"d_in": self.d_in, "width": self.width, "k": self.k, "kind": self.kind}

    def fingerprint(self) -> str:
        """Content hash of the configuration and every tensor (scale included)."""
        tensors = {n: t.detach().cpu().contiguous().numpy().tobytes() for n, t in self.state_dict().items()}
        return content_hash({"config": self.config(), "tensors": {n: content_hash(b) for n, b in tensors.items()}})

    @validate_args(path=[PATH])
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the SAE as one safetensors file (atomically); config and fingerprint in its metadata."""
        from safetensors.torch import save_file

        from trustlab.results.result import atomic_write

        tensors = {n: t.detach().cpu().contiguous() for n, t in self.state_dict().items()}
        meta = {"config": json.dumps(self.config()), "fingerprint": self.fingerprint(), "format": _FORMAT,
                "kind": "trustlab-sae"}
        return atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=meta))

    @classmethod
    @validate_args(path=[PATH])
    def load(cls, path: str | os.PathLike[str]) -> SparseAutoencoder:
        """Read an SAE written by :meth:`save`; a file whose tensors do not match its fingerprint is refused."""
        from safetensors import safe_open

        p = Path(path).expanduser()
        if not p.is_file():
            raise AssetNotFoundError(f"No sparse autoencoder file at {str(p)!r}.")
        with safe_open(str(p), framework="pt") as fh:
            meta = fh.metadata() or {}
            tensors = {k: fh.get_tensor(k) for k in fh.keys()}
        if meta.get("kind") != "trustlab-sae" or meta.get("format") != _FORMAT:
            raise InputError(f"The file {str(p)!r} is not a trustlab sparse autoencoder.")
        sae = cls(**json.loads(meta["config"]))
        sae.load_state_dict(tensors)
        if sae.fingerprint() != meta.get("fingerprint"):
            raise InputError(f"The sparse autoencoder {str(p)!r} does not match its stored fingerprint "
                             "(the file was changed or is corrupt).")
        return sae


@dataclass(frozen=True)
class SAEReport:
    """Quality of an SAE on a set of activations.

    ``fve``: fraction of variance explained ``1 - sum |x - x_hat|^2 / sum |x - mean|^2``; ``l0``: mean
    number of active features per token; ``dead_fraction``: share of features never active on the set;
    ``loss``: the last training losses (mean of the final 10 steps; nan when not trained here).
    """

    fve: float
    l0: float
    dead_fraction: float
    n_tokens: int
    loss: float = float("nan")
    steps: int = 0


@validate_args(sae=[SparseAutoencoder], acts=_acts_rule(), batch_size=_POS_INT,
               _example=lambda: {"sae": SparseAutoencoder(4, 8, k=2), "acts": torch.randn(6, 4)})
def sae_report(sae: SparseAutoencoder, acts: Any, *, batch_size: int = 4096) -> SAEReport:
    """FVE, L0 and dead fraction of ``sae`` on ``acts`` ``[n, d_in]``.

    Examples
    --------
    >>> import torch
    >>> sae_report(SparseAutoencoder(4, 8, k=2), torch.randn(6, 4)).l0 <= 2
    True
    """
    sae._check_input(acts)
    err = tot = act_count = 0.0
    alive = torch.zeros(sae.width, dtype=torch.bool)
    mean = acts.double().mean(0)
    with torch.no_grad():
        for s in range(0, len(acts), batch_size):
            x = acts[s : s + batch_size]
            c = sae.encode(x)
            err += float(((x.double() - sae.decode(c).double()) ** 2).sum())
            tot += float(((x.double() - mean) ** 2).sum())
            nz = c != 0
            act_count += float(nz.sum())
            alive |= nz.any(0).cpu()
    return SAEReport(fve=1.0 - err / max(tot, 1e-30), l0=act_count / len(acts),
                     dead_fraction=float(1.0 - alive.double().mean()), n_tokens=int(len(acts)))


def _init(sae: SparseAutoencoder, xs: Any, gen: Any) -> None:
    with torch.no_grad():
        w = torch.randn(sae.width, sae.d_in, generator=gen)
        w /= w.norm(dim=1, keepdim=True)
        sae.W_dec.copy_(w)
        sae.W_enc.copy_(w.T)
        sae.b_dec.copy_(xs.mean(0))
        sae.b_enc.zero_()


@validate_args(acts=_acts_rule(), width=_POS_INT, k=_POS_INT, kind=[Options(("topk", "relu"))],
               l1=[Interval(float, 0, None)], steps=_POS_INT, batch_size=_POS_INT,
               lr=[Interval(float, 0, None, closed="neither")], eval_fraction=[Interval(float, 0, 1, closed="left")],
               random_state=["random_state"], _example=lambda: {"acts": torch.randn(8, 4)})
def train_sae(acts: Any, *, width: int = 2048, k: int = 32, kind: str = "topk", l1: float = 1e-3, steps: int = 600,
              batch_size: int = 256, lr: float = 1e-3, eval_fraction: float = 0.1,
              random_state: Any = 0) -> tuple[SparseAutoencoder, SAEReport]:
    """Fit a sparse autoencoder on activations ``[n_tokens, d_in]``; returns it and its report.

    The input scale is set first (unit mean squared norm of the training activations); decoder rows are
    kept at unit norm. The report is measured on the last ``eval_fraction`` of a seeded permutation of
    the tokens (held back from training; the whole set when it is 0).

    Examples
    --------
    >>> import torch
    >>> sae, rep = train_sae(torch.randn(64, 8), width=16, k=4, steps=5, batch_size=16)
    >>> rep.l0 <= 4
    True
    """
    if kind == "topk" and k > width:
        raise ConfigError(f"The 'k' argument of train_sae must be an int in [1, width={width}]. Got {k} instead.")
    x = acts.detach().float().cpu()
    if not bool(torch.isfinite(x).all()):
        raise InputError("The 'acts' argument of train_sae holds NaN or Inf values.")
    rng = check_random_state(random_state)
    seed = int(random_state) if isinstance(random_state, int | np.integer) else spawn_seed(rng)
    perm = np.random.default_rng(seed).permutation(len(x))
    n_eval = int(round(eval_fraction * len(x)))
    tr, ev = x[perm[: len(x) - n_eval]], x[perm[len(x) - n_eval :]] if n_eval else x
    if len(tr) < 2:
        raise InputError(f"train_sae needs at least 2 training tokens after holding back eval_fraction. Got {len(tr)}.")
    scale = float(1.0 / (tr.pow(2).sum(1).mean().sqrt() + 1e-12))
    sae = SparseAutoencoder(x.shape[1], width, k=min(k, width), kind=kind, scale=scale)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    with isolated_global_rng(seed):
        _init(sae, tr * scale, gen)
        opt = torch.optim.Adam(sae.parameters(), lr=lr)
        for _ in range(steps):
            b = tr[torch.randint(0, len(tr), (min(batch_size, len(tr)),), generator=gen)]
            c = sae.encode(b)
            rec = c @ sae.W_dec + sae.b_dec
            loss = ((rec - b * sae.scale) ** 2).sum(-1).mean()
            if kind == "relu":
                loss = loss + l1 * (c * sae.W_dec.norm(dim=1)).sum(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.no_grad():
                sae.W_dec /= sae.W_dec.norm(dim=1, keepdim=True).clamp(min=1e-8)
            losses.append(float(loss.detach()))
    sae.requires_grad_(False)
    rep = sae_report(sae, ev)
    return sae, SAEReport(rep.fve, rep.l0, rep.dead_fraction, rep.n_tokens, float(np.mean(losses[-10:])), steps)


def _forward_rule() -> Any:
    from trustlab.llm import PolicyForward

    return [PolicyForward]


def _fwd_example() -> dict[str, Any]:
    from trustlab.llm import PolicyForward, tiny_random_llama, tokenize_pairs

    model, tok = tiny_random_llama()
    return {"forward": PolicyForward(model, tokenize_pairs(tok, ["Hi"], ["Hello"]), replay=None)}


@validate_args(forward=_forward_rule(), rows=ROWS, batch_size=_POS_INT, site=[Options(("resid", "final_norm"))],
               reference=[Boolean()], _example=_fwd_example)
def collect_activations(forward: Any, rows: Any = None, *, batch_size: int = 16, site: str = "resid",
                        reference: bool = True) -> Any:
    """Last-block activations at the response tokens of ``rows`` (default: all), ``[n_tokens, d]`` float32 CPU.

    ``site="resid"`` is the last block's output before the final norm (where a residual SAE belongs);
    ``"final_norm"`` is the normed state (``hidden_states[-1]`` in HF, what the official FPO code encodes).
    Position 0 and pad positions are never included (response masks exclude both). With ``reference``
    the adapters of a peft model are disabled (the reference policy's activations).

    Examples
    --------
    >>> from trustlab.llm import PolicyForward, tiny_random_llama, tokenize_pairs
    >>> model, tok = tiny_random_llama()
    >>> fwd = PolicyForward(model, tokenize_pairs(tok, ["Hi"], ["Hello there"]), replay=None)
    >>> collect_activations(fwd).shape[1]
    72
    """
    import contextlib

    from trustlab.llm import is_adapted

    n = len(forward.sequences)
    idx = np.arange(n) if rows is None else np.asarray(rows, dtype=np.int64).reshape(-1)
    ctx = forward.model.disable_adapter() if reference and is_adapted(forward.model) else contextlib.nullcontext()
    out = []
    was = forward.model.training
    forward.model.eval()
    try:
        with torch.no_grad(), ctx:
            for s in range(0, len(idx), batch_size):
                r = idx[s : s + batch_size]
                h = forward.hidden(r, final_norm=site == "final_norm")
                _, att, resp = forward.batch(r)
                mask = resp.bool() & att.bool()
                mask[:, 0] = False
                out.append(h[mask.to(h.device)].float().cpu())
    finally:
        forward.model.train(was)
    acts = torch.cat(out) if out else torch.zeros(0, 0)
    if len(acts) == 0:
        raise InputError("collect_activations found no response token in the given rows.")
    if not bool(torch.isfinite(acts).all()):
        raise InputError("collect_activations got NaN or Inf activations from the model.")
    return acts
