"""ServerApp: trustlab's FedCEOStrategy (t-SVT smoothing of the client uploads) for ``num-server-rounds``.

With ``out-dir`` set it writes ``rounds.npz``: for every round the node ids, their uploads and the global
model the strategy returned, so the server step can be checked against ``FedCEO.aggregate`` offline.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp

from fedceo_flower.task import make_model
from trustlab.core.files import atomic_write
from trustlab.methods.fedceo import FedCEOStrategy

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
        for j, m in enumerate(valid):
            for k, v in m.content["arrays"].items():
                self.log[f"r{server_round}_up{j}_{k}"] = v.numpy()
        for k, v in arrays.items():
            self.log[f"r{server_round}_global_{k}"] = v.numpy()
        return arrays, metrics


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    model = make_model(int(cfg["hidden"]), int(cfg["model-seed"]))
    initial = ArrayRecord({k: Array(v.detach().numpy()) for k, v in model.state_dict().items()})
    strategy = RecordingFedCEO(lam=float(cfg["lam"]), theta=float(cfg["theta"]), interval=int(cfg["interval"]),
                               fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=int(cfg["min-train-nodes"]),
                               min_available_nodes=int(cfg["min-train-nodes"]))
    result = strategy.start(grid=grid, initial_arrays=initial, num_rounds=int(cfg["num-server-rounds"]),
                            timeout=float(cfg["round-timeout"]), train_config=ConfigRecord({"lr": float(cfg["lr"])}))
    out = str(cfg["out-dir"])
    if out:
        strategy.log.update({f"initial_{k}": v.numpy() for k, v in initial.items()})
        strategy.log.update({f"final_{k}": v.numpy() for k, v in result.arrays.items()})
        def write(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                np.savez(fh, **strategy.log)

        atomic_write(Path(out) / "rounds.npz", write)
