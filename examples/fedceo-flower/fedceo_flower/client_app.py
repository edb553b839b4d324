"""ClientApp: local SGD on the node's partition; UDP (clip + Gaussian noise on the update) as a Flower mod.

The UDP mechanism comes from the run config (``udp-sigma``, ``udp-clip``) and its noise is seeded from
``model-seed``, the node's ``partition-id`` and the round, so a rerun with the same config sends the same
uploads. Node config (``flower-supernode --node-config``): ``partition-id``, ``num-partitions`` and, for fault
tests, ``train-delay`` (seconds to wait before replying) and ``crash-round`` (the ClientApp process exits
without replying when it receives that round's train message).
"""

from __future__ import annotations

import os
import time

from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from fedceo_flower.task import local_train, partition
from trustlab.core.seeding import derive_seed
from trustlab.methods.fedceo import UDP, udp_mod


def config_udp(msg: Message, ctxt: Context, call_next):
    """UDP from the run config, its noise seeded per (model-seed, partition, round): trustlab's ``udp_mod``."""
    run, node = ctxt.run_config, ctxt.node_config
    mechanism = UDP(sigma=float(run["udp-sigma"]), clip=float(run["udp-clip"]))
    server_round = int(msg.content["config"]["server-round"]) if "config" in msg.content else 0
    seed = derive_seed(int(run["model-seed"]), "udp", int(node["partition-id"]), server_round)
    return udp_mod(mechanism, random_state=seed)(msg, ctxt, call_next)


app = ClientApp(mods=[config_udp])


@app.train()
def train(msg: Message, context: Context) -> Message:
    node, cfg, run = context.node_config, msg.content["config"], context.run_config
    pid, n_parts = int(node["partition-id"]), int(node["num-partitions"])
    server_round = int(cfg["server-round"])
    if int(node.get("crash-round", -1)) == server_round:
        os._exit(3)  # a client dying mid-round: no reply
    time.sleep(float(node.get("train-delay", 0.0)))
    X, y = partition(pid, n_parts)
    params = {k: v.numpy() for k, v in msg.content["arrays"].items()}
    trained = local_train(params, X, y, hidden=int(run["hidden"]), epochs=int(run["local-epochs"]),
                          lr=float(run["lr"]), seed=derive_seed(int(run["model-seed"]), pid, server_round))
    content = RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in trained.items()}),
                          "metrics": MetricRecord({"num-examples": len(y), "partition-id": pid})})
    return Message(content, reply_to=msg)
