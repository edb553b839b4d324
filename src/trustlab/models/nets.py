"""Small torch networks for the digits-scale experiments."""

from __future__ import annotations

from collections.abc import Sequence

from trustlab.core._declare import takes_any
from trustlab.core.arguments import SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval
from trustlab.core.optional import require

torch = require("torch", purpose="trustlab.models")
nn = torch.nn

__all__ = ["MLP", "SmallCNN", "make_model"]


class MLP(nn.Module):
    """A fully connected ReLU network; flattens any input shape.

    Examples
    --------
    >>> net = MLP(64, 10, hidden=(32,))
    >>> net(torch.zeros(2, 8, 8)).shape
    torch.Size([2, 10])
    """

    def __init__(self, in_features: int, n_classes: int, hidden: Sequence[int] = (128, 64), dropout: float = 0.0):
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        prev = in_features
        for h in hidden:
            layers += [nn.Linear(prev, h), nn.ReLU()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            prev = h
        layers.append(nn.Linear(prev, n_classes))
        self.net = nn.Sequential(*layers)

    @takes_any(x="a (n, n_features) tensor on the hot path; the shapes are checked by the layers")
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class SmallCNN(nn.Module):
    """Two 3x3 conv blocks and a linear head for 8x8 (or any HxW) single-channel images."""

    def __init__(self, n_classes: int = 10, channels: int = 16, image_size: int = 8):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1), nn.ReLU(),
            nn.Conv2d(channels, 2 * channels, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(2 * channels * (image_size // 2) ** 2, n_classes)

    @takes_any(x="a (n, [1,] H, W) image tensor on the hot path; the shapes are checked by the layers")
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim == 3:
            x = x.unsqueeze(1)
        return self.head(self.features(x).flatten(1))


@validate_args(kind=[InstanceOf(str)], in_shape=[SequenceOf(Interval(int, 1, None))],
               n_classes=[Interval(int, 1, None)])
def make_model(kind: str, in_shape: Sequence[int], n_classes: int, **kwargs: object) -> nn.Module:
    """Build ``"mlp"`` or ``"cnn"`` for inputs of per-sample shape ``in_shape`` (a list or tuple of sizes).

    Examples
    --------
    >>> make_model("mlp", (8, 8), 10, hidden=(16,))(torch.zeros(2, 8, 8)).shape
    torch.Size([2, 10])
    """
    from trustlab.core.exceptions import UnknownNameError, did_you_mean

    if kind == "mlp":
        n_in = 1
        for s in in_shape:
            n_in *= int(s)
        return MLP(n_in, n_classes, **kwargs)  # type: ignore[arg-type]
    if kind == "cnn":
        return SmallCNN(n_classes, image_size=int(in_shape[-1]), **kwargs)  # type: ignore[arg-type]
    raise UnknownNameError(f"Unknown model kind '{kind}'.{did_you_mean(kind, ['mlp', 'cnn'])} Use 'mlp' or 'cnn'.")
