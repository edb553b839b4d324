"""Model, data partitions and local training shared by the ServerApp and the ClientApp."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits

from trustlab.core.seeding import derive_seed, torch_generator
from trustlab.methods.fedceo import BiasFreeMLP


def make_model(hidden: int, seed: int) -> BiasFreeMLP:
    """The global model every run starts from (the same for the same seed)."""
    torch.manual_seed(seed)  # runs in the ServerApp's own process
    return BiasFreeMLP(64, hidden, 10)


#: rows of the fixed permutation of scikit-learn's digits kept for the server's evaluation
N_TEST = 297


def _rows(idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    X, y = load_digits(return_X_y=True)
    return torch.tensor(X[idx] / 16.0, dtype=torch.float32), torch.tensor(y[idx], dtype=torch.int64)


def _order() -> np.ndarray:
    return np.random.default_rng(0).permutation(1797)


def partition(partition_id: int, num_partitions: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Client ``partition_id``'s share of scikit-learn's digits (bundled, offline) minus the test rows."""
    return _rows(np.array_split(_order()[N_TEST:], num_partitions)[partition_id])


def test_rows() -> tuple[torch.Tensor, torch.Tensor]:
    """The server's held-out evaluation rows (never in a client's partition)."""
    return _rows(_order()[:N_TEST])


def accuracy(params: dict[str, np.ndarray], hidden: int) -> float:
    """Accuracy of the global model ``params`` on :func:`test_rows`."""
    model = BiasFreeMLP(64, hidden, 10)
    model.load_state_dict({k: torch.tensor(v) for k, v in params.items()})
    X, y = test_rows()
    with torch.no_grad():
        return float((model(X).argmax(1) == y).float().mean())


def local_train(params: dict[str, np.ndarray], X: torch.Tensor, y: torch.Tensor, *, hidden: int, epochs: int,
                lr: float, seed: int) -> dict[str, np.ndarray]:
    """Plain local SGD (batch 32) from ``params``; batch order from ``seed``."""
    model = BiasFreeMLP(64, hidden, 10)
    model.load_state_dict({k: torch.tensor(v) for k, v in params.items()})
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    gen = torch_generator(derive_seed(seed, "batches"))
    for _ in range(epochs):
        for idx in torch.randperm(len(y), generator=gen).split(32):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(X[idx]), y[idx]).backward()
            opt.step()
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
