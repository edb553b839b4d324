"""ClientApp: local SGD on the node's partition; UDP (clip + Gaussian noise on the update) as a Flower mod.

Node config (``flower-supernode --node-config``): ``partition-id``, ``num-partitions`` and, for fault tests,
``crash-round`` (the ClientApp process exits without replying when it receives that round's train message).
"""

from __future__ import annotations

import os

from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from fedceo_flower.task import local_train, partition
from trustlab.core.seeding import derive_seed
from trustlab.methods.fedceo import UDP, udp_mod


def _mods() -> list:
    # one UDP mechanism per ClientApp process; its noise seed comes from the process (each round is a new one)
    return [udp_mod(UDP(sigma=0.5, clip=1.0))]


app = ClientApp(mods=_mods())


@app.train()
def train(msg: Message, context: Context) -> Message:
    node, cfg, run = context.node_config, msg.content["config"], context.run_config
    pid, n_parts = int(node["partition-id"]), int(node["num-partitions"])
    server_round = int(cfg["server-round"])
    if int(node.get("crash-round", -1)) == server_round:
        os._exit(3)  # a client dying mid-round: no reply
    X, y = partition(pid, n_parts)
    params = {k: v.numpy() for k, v in msg.content["arrays"].items()}
    trained = local_train(params, X, y, hidden=int(run["hidden"]), epochs=int(run["local-epochs"]),
                          lr=float(run["lr"]), seed=derive_seed(int(run["model-seed"]), pid, server_round))
    content = RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in trained.items()}),
                          "metrics": MetricRecord({"num-examples": len(y)})})
    return Message(content, reply_to=msg)
