"""Small torch models and the train/evaluate loop."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trustlab.core.exceptions import ConfigError, InputError, UnknownNameError  # noqa: E402
from trustlab.models import MLP, SmallCNN, TrainConfig, evaluate, fit_model, make_model, predict_proba  # noqa: E402


def _data(n=120):
    rng = np.random.default_rng(0)
    X = rng.random((n, 8, 8)).astype(np.float32)
    y = (X[:, :4].mean((1, 2)) > X[:, 4:].mean((1, 2))).astype(int)
    return X, y


def _weights(m):
    return [p.detach().clone() for p in m.parameters()]


def test_training_is_deterministic_under_a_seed():
    X, y = _data()
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        m = MLP(64, 2, hidden=(16,))
        fit_model(m, X, y, TrainConfig(epochs=3, seed=1))
        runs.append(_weights(m))
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_training_learns_and_evaluates():
    X, y = _data(300)
    m = SmallCNN(n_classes=2, channels=4)
    hist = fit_model(m, X[:200], y[:200], TrainConfig(epochs=15, lr=3e-3), X_val=X[200:], y_val=y[200:])
    loss, acc = evaluate(m, X[200:], y[200:])
    assert acc > 0.7 and len(hist.val_acc) == 15 and hist.train_loss[-1] < hist.train_loss[0]
    p = predict_proba(m, X[:5])
    assert p.shape == (5, 2) and np.allclose(p.sum(1), 1)


def test_early_stopping_restores_best():
    X, y = _data(200)
    rng = np.random.default_rng(1)
    y_noise = rng.integers(0, 2, len(y))  # unlearnable validation labels: val loss rises quickly
    m = MLP(64, 2, hidden=(64,))
    hist = fit_model(m, X[:150], y[:150], TrainConfig(epochs=60, lr=1e-2, patience=2), X_val=X[150:], y_val=y_noise[150:])
    assert hist.stopped_early and len(hist.val_loss) < 60
    assert np.isclose(evaluate(m, X[150:], y_noise[150:])[0], min(hist.val_loss), rtol=1e-5)


def test_num_threads_respected_and_restored():
    before = torch.get_num_threads()
    seen = []

    class Spy(MLP):
        def forward(self, x):
            seen.append(torch.get_num_threads())
            return super().forward(x)

    X, y = _data(40)
    fit_model(Spy(64, 2, hidden=(4,)), X, y, TrainConfig(epochs=1, num_threads=1))
    assert set(seen) == {1} and torch.get_num_threads() == before


def test_bad_config_and_inputs():
    X, y = _data(20)
    with pytest.raises(ConfigError, match="'epochs' parameter of TrainConfig"):
        fit_model(MLP(64, 2), X, y, TrainConfig(epochs=0))
    with pytest.raises(InputError, match="same number of samples"):
        fit_model(MLP(64, 2), X, y[:-1])
    with pytest.raises(ValueError, match="X_val"):
        fit_model(MLP(64, 2), X, y, TrainConfig(patience=2))
    with pytest.raises(UnknownNameError):
        make_model("rnn", (8, 8), 2)
    assert make_model("cnn", (8, 8), 3)(torch.zeros(2, 8, 8)).shape == (2, 3)
