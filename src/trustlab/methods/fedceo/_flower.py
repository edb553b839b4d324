"""FedCEO as a Flower strategy (Message API, flwr >= 1.21) and UDP as a Flower client mod.

This module imports flwr at import time; ``trustlab.methods.fedceo`` loads it only when
``FedCEOStrategy`` or ``udp_mod`` is first used (extra ``fl``).
"""

from __future__ import annotations

from collections.abc import Iterable
from logging import INFO
from typing import Any

import numpy as np

from trustlab.core.arguments import validate_args
from trustlab.core.constraints import (
    AnyValue,
    InstanceOf,
    Interval,
    Satisfies,
    validate_params,
    validate_value,
)
from trustlab.core.exceptions import InputError
from trustlab.core.optional import require
from trustlab.core.seeding import check_random_state, seed_alias
from trustlab.methods.fedceo._aggregators import FedCEO
from trustlab.methods.fedceo._privacy import UDP

require("flwr", purpose="FedCEOStrategy")
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.supercore import log  # noqa: E402

__all__ = ["FedCEOStrategy", "udp_mod"]


def _to_numpy(record: ArrayRecord) -> dict[str, np.ndarray]:
    return {k: np.asarray(v.numpy()) for k, v in record.items()}


def _to_record(arrays: dict[str, np.ndarray]) -> ArrayRecord:
    return ArrayRecord({k: Array(np.ascontiguousarray(v)) for k, v in arrays.items()})


#: Flower's train replies: an iterable of Messages (each checked by FedAvg's _check_and_log_replies)
_REPLIES = Satisfies(lambda v: hasattr(v, "__iter__") and not isinstance(v, str | bytes | dict),
                     "an iterable of Flower Messages", invalid=[None, 3, "replies"])


class FedCEOStrategy(FedAvg):
    """Flower ``FedAvg`` whose server step is a :class:`FedCEO` aggregator.

    Flower's ``server_round`` r = 1, 2, ... is passed to ``FedCEO.aggregate(..., server_round=r,
    client_ids=node_ids)``, which owns the schedule (rounds with r % I == 0 are smoothing events m = r / I,
    ``tau_m = theta**m / (2 lam)``; other rounds average) and the validation of the uploads; clients are placed
    along the FFT axis in ascending node id. Failed replies (Flower's failures) are dropped and the round
    aggregates the rest; fewer than 2 valid replies raise ``InputError``.

    Parameters
    ----------
    lam : float
        lambda > 0.
    theta : float, default=1.0
        vartheta >= 1.
    interval : int, default=1
        I >= 1.
    restart : bool, default=False
        The official restart rule: every node's latest model is stored (its smoothed model after a smoothing
        round, else its upload); in rounds with t % I == 0, t = r - 1 > 0, a sampled node that holds one
        receives it instead of the global model (``configure_train``).
    weighted : bool, default=False
        Weight the global mean by ``weighted_by_key`` (num-examples); the official code does not.
    **fedavg_kwargs
        Passed to ``flwr.serverapp.strategy.FedAvg``.

    Attributes
    ----------
    aggregator : FedCEO
        The server step (its ``tau_``, ``client_models_`` describe the last round).
    client_models : dict node id -> dict
        Stored models for the restart rule.
    taus : dict round -> float or None

    Examples
    --------
    >>> strategy = FedCEOStrategy(lam=1.0, fraction_train=0.5, fraction_evaluate=0.0)  # doctest: +SKIP
    >>> strategy.start(grid=grid, initial_arrays=ArrayRecord(model.state_dict()), num_rounds=3)  # doctest: +SKIP
    """

    def __init__(self, *, lam: float, theta: float = 1.0, interval: int = 1, restart: bool = False,
                 weighted: bool = False, **fedavg_kwargs: Any) -> None:
        validate_params("FedCEOStrategy", {"lam": lam, "theta": theta, "interval": interval}, FedCEO._constraints)
        validate_value("FedCEOStrategy", "restart", restart, ["boolean"])
        validate_value("FedCEOStrategy", "weighted", weighted, ["boolean"])
        super().__init__(**fedavg_kwargs)
        self.lam, self.theta, self.interval = lam, theta, interval
        self.restart, self.weighted = restart, weighted
        self.aggregator = FedCEO(lam=lam, theta=theta, interval=interval, client_models=restart)
        self.client_models: dict[int, dict[str, np.ndarray]] = {}
        self.taus: dict[int, float | None] = {}

    def summary(self) -> None:
        super().summary()
        log(INFO, "\t└──> FedCEO: lam=%s theta=%s interval=%s restart=%s", self.lam, self.theta, self.interval,
            self.restart)

    @validate_args(server_round=[Interval(int, 0, None)])
    def threshold(self, server_round: int) -> float | None:
        """tau for this Flower round (None when the round only averages)."""
        return self.aggregator.threshold(server_round)

    @validate_args(server_round=[Interval(int, 1, None)], arrays=[InstanceOf(ArrayRecord)],
                   config=[InstanceOf(ConfigRecord)],
                   grid=[AnyValue("the Flower Grid of the ServerApp, passed on to FedAvg.configure_train")])
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Any) -> Iterable[Message]:
        messages = list(super().configure_train(server_round, arrays, config, grid))
        t = server_round - 1
        if not (self.restart and t > 0 and t % self.interval == 0):
            return messages
        out = []
        for msg in messages:
            stored = self.client_models.get(msg.metadata.dst_node_id)
            if stored is None:
                out.append(msg)
                continue
            content = RecordDict({self.arrayrecord_key: _to_record(stored),
                                  self.configrecord_key: msg.content[self.configrecord_key]})
            out.append(Message(content=content, message_type=MessageType.TRAIN, dst_node_id=msg.metadata.dst_node_id))
        return out

    @validate_args(server_round=[Interval(int, 1, None)], replies=[_REPLIES])
    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        valid, failed = self._check_and_log_replies(list(replies), is_train=True)
        if len(valid) < 2:
            raise InputError(
                f"FedCEOStrategy round {server_round}: only {len(valid)} valid train repl"
                f"{'y' if len(valid) == 1 else 'ies'} ({len(failed)} failed); FedCEO needs >= 2 clients to smooth. "
                "Lower the failure rate, sample more nodes (min_train_nodes) or raise the timeout."
            )
        ids = [int(m.metadata.src_node_id) for m in valid]
        uploads = [_to_numpy(next(iter(m.content.array_records.values()))) for m in valid]
        w = None
        if self.weighted:
            w = np.array([float(next(iter(m.content.metric_records.values()))[self.weighted_by_key]) for m in valid])
        glob = self.aggregator.aggregate(uploads, w, server_round=server_round, client_ids=ids)
        self.taus[server_round] = self.aggregator.tau_
        if self.restart:
            smoothed = self.aggregator.client_models_
            for j, cid in enumerate(ids):
                self.client_models[cid] = smoothed[j] if smoothed is not None else uploads[j]
        metrics = self.train_metrics_aggr_fn([m.content for m in valid], self.weighted_by_key)
        return _to_record(glob), metrics


@seed_alias
@validate_args(mechanism=[InstanceOf(UDP)], random_state=["random_state"])
def udp_mod(mechanism: UDP, random_state: Any = None) -> Any:
    """A Flower client mod applying UDP to the train reply: clip (reply - received) to C, add noise.

    Use as ``ClientApp(mods=[udp_mod(UDP(sigma=1.0, clip=1.0))])``; like Flower's ``LocalDpMod`` but with
    the paper's noise (std sigma * C per coordinate) so that :meth:`UDP.epsilon` accounts it. The noise is drawn
    from ``random_state`` (``seed=`` is its deprecated name).
    """
    rng = check_random_state(random_state, owner="udp_mod")

    def mod(msg: Message, ctxt: Any, call_next: Any) -> Message:
        if msg.metadata.message_type != MessageType.TRAIN or len(msg.content.array_records) != 1:
            return call_next(msg, ctxt)
        sent = _to_numpy(next(iter(msg.content.array_records.values())))
        reply = call_next(msg, ctxt)
        if reply.has_error() or len(reply.content.array_records) != 1:
            return reply
        key, rec = next(iter(reply.content.array_records.items()))
        trained = _to_numpy(rec)
        if sorted(trained) != sorted(sent):
            return reply
        reply.content[key] = _to_record(mechanism.privatize(sent, trained, rng))
        return reply

    return mod
