"""ServerApp: trustlab's FedCEOStrategy (t-SVT smoothing of the client uploads) for ``num-server-rounds``.

Every round the ServerApp evaluates the global model on held-out digits (``evaluate_fn``) and reports the
user-level epsilon spent so far by the clients' UDP mechanism (``udp-sigma``, every node sampled each round,
``delta``; Opacus's RDP accountant through :func:`trustlab.methods.fedceo.rdp_epsilon`). With ``out-dir`` set
it writes ``metrics.json`` after every round (round, accuracy, epsilon; atomically) and ``rounds.npz`` at the
end: for every round the node ids, partition ids, uploads and the global model the strategy returned, so the
server step can be checked against ``FedCEO.aggregate`` offline.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.common import log
from flwr.serverapp import Grid, ServerApp

from fedceo_flower.task import accuracy, make_model
from trustlab.core.files import atomic_write, atomic_write_text
from trustlab.methods.fedceo import FedCEOStrategy, rdp_epsilon

app = ServerApp()


class RecordingFedCEO(FedCEOStrategy):
    """FedCEOStrategy that keeps each round's uploads and result (for the deployment test)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.log: dict[str, np.ndarray] = {}

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        arrays, metrics = super().aggregate_train(server_round, replies)
        valid = [m for m in replies if not m.has_error()]
        self.log[f"r{server_round}_ids"] = np.array([int(m.metadata.src_node_id) for m in valid], np.uint64)
        self.log[f"r{server_round}_pids"] = np.array(
            [int(next(iter(m.content.metric_records.values()))["partition-id"]) for m in valid], np.int64)
        for j, m in enumerate(valid):
            for k, v in m.content["arrays"].items():
                self.log[f"r{server_round}_up{j}_{k}"] = v.numpy()
        for k, v in arrays.items():
            self.log[f"r{server_round}_global_{k}"] = v.numpy()
        return arrays, metrics


def evaluator(cfg, out: str, history: list[dict]):
    """``evaluate_fn``: accuracy of the global model on held-out digits and the epsilon spent after the round."""
    sigma, delta, hidden = float(cfg["udp-sigma"]), float(cfg["delta"]), int(cfg["hidden"])

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        acc = accuracy({k: v.numpy() for k, v in arrays.items()}, hidden)
        eps = rdp_epsilon(sigma, 1.0, server_round, delta) if server_round > 0 else 0.0
        history.append({"round": server_round, "accuracy": acc, "epsilon": eps, "delta": delta, "udp_sigma": sigma})
        log(20, "round %d: held-out accuracy %.4f, epsilon spent %.3f (delta %g)", server_round, acc, eps, delta)
        if out:
            atomic_write_text(Path(out) / "metrics.json", json.dumps(history, indent=1))
        return MetricRecord({"accuracy": acc, "epsilon": eps})

    return evaluate


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    model = make_model(int(cfg["hidden"]), int(cfg["model-seed"]))
    initial = ArrayRecord({k: Array(v.detach().numpy()) for k, v in model.state_dict().items()})
    strategy = RecordingFedCEO(lam=float(cfg["lam"]), theta=float(cfg["theta"]), interval=int(cfg["interval"]),
                               fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=int(cfg["min-train-nodes"]),
                               min_available_nodes=int(cfg["min-train-nodes"]))
    out, history = str(cfg["out-dir"]), []
    result = strategy.start(grid=grid, initial_arrays=initial, num_rounds=int(cfg["num-server-rounds"]),
                            timeout=float(cfg["round-timeout"]), train_config=ConfigRecord({"lr": float(cfg["lr"])}),
                            evaluate_fn=evaluator(cfg, out, history))
    if out:
        strategy.log.update({f"initial_{k}": v.numpy() for k, v in initial.items()})
        strategy.log.update({f"final_{k}": v.numpy() for k, v in result.arrays.items()})
        def write(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                np.savez(fh, **strategy.log)

        atomic_write(Path(out) / "rounds.npz", write)
