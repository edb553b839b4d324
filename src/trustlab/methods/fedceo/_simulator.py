"""A vectorised in-process FL simulator: all K clients of a round train in one step (torch.func + vmap).

Each round t = 0..T-1 (server round r = t + 1) samples K of the N clients without replacement
(:func:`client_schedule`), trains each locally from the global model (or, with the official restart rule,
from its own stored model), privatises the upload with the client-side mechanism, and lets the server
aggregator (FedCEO, UDPFedAvg, ...) build the next global model from ``aggregate(uploads,
server_round=r, client_ids=sampled)``. Client sampling, batch orders and DP noise come from seeded streams
that do not depend on the aggregator, so two methods run with the same seed see the same clients, batches
and noise draws.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core._declare import takes_any
from trustlab.core.arguments import validate_args
from trustlab.core.constraints import InstanceOf, Interval, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.optional import require
from trustlab.core.seeding import as_seed, derive_seed, isolated_global_rng, seed_alias
from trustlab.core.threads import limit_threads
from trustlab.methods.fedceo._aggregators import FedCEO, UDPFedAvg
from trustlab.methods.fedceo._privacy import DPSGD, UDP, as_mechanism, dp_epsilon

torch = require("torch", purpose="the FedCEO simulator")
nn = torch.nn
F = torch.nn.functional
from torch.func import functional_call, vmap  # noqa: E402

__all__ = ["BiasFreeMLP", "FLHistory", "run_federated", "client_schedule"]


class BiasFreeMLP(nn.Module):
    """The official code's MLP without dropout: ``in -> hidden -> classes``, ReLU, no biases by default."""

    def __init__(self, in_features: int = 64, hidden: int = 128, n_classes: int = 10, bias: bool = False):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden, bias=bias)
        self.fc2 = nn.Linear(hidden, n_classes, bias=bias)

    @takes_any(x="tensor on the hot path; shapes checked by the layers")
    def forward(self, x: Any) -> Any:
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


@dataclass
class FLHistory:
    """What a simulated run produced (accuracies per evaluated round, privacy, timing).

    ``epsilon``: user-level (UDP, RDP accountant) or the worst client's record-level epsilon (DPSGD, RDP
    accountant over the client's composed Opacus histories, kept in ``dp_histories``); ``inf`` without DP.
    """

    rounds: list[int] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    final_params: dict[str, np.ndarray] = field(default_factory=dict)
    epsilon: float = 0.0
    delta: float = 1e-5
    sampled: list[list[int]] = field(default_factory=list)
    taus: list[float | None] = field(default_factory=list)
    restarted: list[int] = field(default_factory=list)
    dp_histories: dict[int, list[tuple[float, float, int]]] = field(default_factory=dict)
    round_time_s: list[float] = field(default_factory=list)
    local_time_s: float = 0.0
    server_time_s: float = 0.0

    def final(self, name: str) -> float:
        return self.metrics[name][-1]


@seed_alias
@validate_args(n_clients=[Interval(int, 1, None)], clients_per_round=[Interval(int, 1, None)],
               rounds=[Interval(int, 1, None)], random_state=["random_state"])
def client_schedule(n_clients: int, clients_per_round: int, rounds: int, random_state: Any = 0) -> list[list[int]]:
    """The clients :func:`run_federated` samples in each round (K of N without replacement, sorted), by seed.

    ``random_state`` (``seed=`` is its deprecated name): the same int gives the schedule ``run_federated`` uses.

    Known in advance, so DP-SGD noise can be calibrated to the busiest client's number of steps.

    Examples
    --------
    >>> client_schedule(5, 2, 3, random_state=0)[0]
    [0, 4]
    """
    if clients_per_round > n_clients:
        raise InputError(f"The 'clients_per_round' argument of client_schedule must be <= n_clients ({n_clients}). "
                         f"Got {clients_per_round} instead.")
    rng = np.random.default_rng(derive_seed(as_seed(random_state), "sampling"))
    return [sorted(rng.choice(n_clients, size=clients_per_round, replace=False).tolist()) for _ in range(rounds)]


def _accuracy(model: Any, params: dict[str, Any], X: Any, y: Any) -> float:
    with torch.no_grad():
        logits = functional_call(model, params, (X,))
    return float((logits.argmax(1) == y).float().mean())


def _local_vectorised(model: Any, start: dict[str, Any], Xp: Any, yp: Any, n: Any, *, epochs: int, bs: int,
                      lr: float, momentum: float, gen: Any) -> dict[str, Any]:
    """Minibatch SGD for K clients at once. start: name -> (K, ...); Xp (K, n_max, ...), n (K,)."""
    k, n_max = yp.shape

    fwd = vmap(lambda p, x: functional_call(model, p, (x,)))

    def g_fn(p: dict[str, Any], x: Any, y: Any, m: Any) -> dict[str, Any]:
        # one forward for all clients (vmap), one backward of the sum of the client losses: each client's
        # parameters only reach its own loss, so the gradient blocks are the per-client gradients
        leaves = {name: v.detach().requires_grad_(True) for name, v in p.items()}
        out = fwd(leaves, x)
        ce = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1), reduction="none").view(y.shape)
        per_client = (ce * m).sum(1) / m.sum(1).clamp(min=1.0)
        gs = torch.autograd.grad(per_client.sum(), list(leaves.values()))
        return dict(zip(leaves, gs))

    params = {k_: v.clone() for k_, v in start.items()}
    bufs = {k_: torch.zeros_like(v) for k_, v in params.items()} if momentum > 0 else None
    ar = torch.arange(n_max)
    for _ in range(epochs):
        keys = torch.rand(k, n_max, generator=gen)
        keys[ar[None, :] >= n[:, None]] = 2.0                 # padding sorts last
        perm = keys.argsort(dim=1)
        for b0 in range(0, int(n.max()), bs):
            idx = perm[:, b0:b0 + bs]
            xb = torch.gather(Xp, 1, idx.view(k, -1, *([1] * (Xp.dim() - 2))).expand(-1, -1, *Xp.shape[2:]))
            yb = torch.gather(yp, 1, idx)
            mb = ((b0 + torch.arange(idx.shape[1]))[None, :] < n[:, None]).float()
            active = (mb.sum(1) > 0).float()
            grads = g_fn(params, xb, yb, mb)
            for name, g in grads.items():
                shape = (k,) + (1,) * (g.dim() - 1)
                if bufs is not None:
                    bufs[name] = torch.where(active.view(shape) > 0, momentum * bufs[name] + g, bufs[name])
                    g = bufs[name]
                params[name] = params[name] - lr * active.view(shape) * g
    return params


def _local_loop(model: Any, start: dict[str, Any], Xp: Any, yp: Any, n: Any, *, epochs: int, bs: int,
                lr: float, momentum: float, gen: Any) -> dict[str, Any]:
    """The same computation as :func:`_local_vectorised`, one client at a time (reference and benchmark)."""
    k, n_max = yp.shape

    def g_fn(p: dict[str, Any], x: Any, y: Any) -> dict[str, Any]:
        leaves = {name: v.detach().requires_grad_(True) for name, v in p.items()}
        loss = F.cross_entropy(functional_call(model, leaves, (x,)), y)
        return dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values()))))

    params = {k_: v.clone() for k_, v in start.items()}
    ar = torch.arange(n_max)
    bufs = {k_: torch.zeros_like(v) for k_, v in params.items()} if momentum > 0 else None
    for _ in range(epochs):
        keys = torch.rand(k, n_max, generator=gen)
        keys[ar[None, :] >= n[:, None]] = 2.0
        perm = keys.argsort(dim=1)
        for i in range(k):
            p_i = {name: v[i] for name, v in params.items()}
            b_i = {name: v[i] for name, v in bufs.items()} if bufs is not None else None
            ni = int(n[i])
            for b0 in range(0, int(n.max()), bs):
                if b0 >= ni:
                    continue
                sel = perm[i, b0:min(b0 + bs, ni)]
                grads = g_fn(p_i, Xp[i, sel], yp[i, sel])
                for name, g in grads.items():
                    if b_i is not None:
                        b_i[name] = momentum * b_i[name] + g
                        g = b_i[name]
                    p_i[name] = p_i[name] - lr * g
            for name in params:
                params[name][i] = p_i[name]
                if bufs is not None and b_i is not None:
                    bufs[name][i] = b_i[name]
    return params


def _dpsgd_client(model: Any, start: dict[str, Any], X: Any, y: Any, mech: DPSGD, *, epochs: int, bs: int,
                  lr: float, momentum: float, seed: int) -> tuple[dict[str, Any], list[tuple[float, float, int]]]:
    """One client's local training under Opacus ``make_private`` (a fresh engine per round, as the official
    ``update.py``): Poisson batches (empty ones included: Opacus still adds the noise), per-sample clipping at
    ``mech.clip``, Gaussian noise ``mech.sigma * clip``. Returns the trained state and the engine's history."""
    opacus = require("opacus", purpose="the 'dpsgd' mechanism")
    net = copy.deepcopy(model)
    with torch.no_grad():
        net.load_state_dict({name: v.clone() for name, v in start.items()}, strict=False)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum)
    g_batch = torch.Generator().manual_seed(derive_seed(seed, "batches"))
    g_noise = torch.Generator().manual_seed(derive_seed(seed, "noise"))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=bs, generator=g_batch)
    with warnings.catch_warnings(), isolated_global_rng(derive_seed(seed, "global")):
        warnings.simplefilter("ignore")  # "Secure RNG turned off": the simulator is for experiments
        engine = opacus.PrivacyEngine(accountant="rdp")
        pnet, popt, ploader = engine.make_private(module=net, optimizer=opt, data_loader=loader,
                                                  noise_multiplier=mech.sigma, max_grad_norm=mech.clip,
                                                  poisson_sampling=True, noise_generator=g_noise)
        pnet.train()
        for _ in range(epochs):
            for xb, yb in ploader:
                popt.zero_grad()
                out = pnet(xb)
                loss = F.cross_entropy(out, yb) if len(yb) else out.sum() * 0.0
                loss.backward()
                popt.step()
    state = {kk.removeprefix("_module."): v.detach() for kk, v in pnet.state_dict().items()}
    return {name: state[name] for name in start}, list(engine.accountant.history)


def _local_dpsgd(model: Any, start: dict[str, Any], data: list[tuple[Any, Any]], mech: DPSGD, *, epochs: int,
                 bs: int, lr: float, momentum: float, seed: int) -> tuple[dict[str, Any], list[list[Any]]]:
    """Opacus DP-SGD for each sampled client in turn; stacked states and each client's history."""
    out: dict[str, list[Any]] = {name: [] for name in start}
    histories = []
    for i, (Xi, yi) in enumerate(data):
        state, hist = _dpsgd_client(model, {name: v[i] for name, v in start.items()}, Xi, yi, mech, epochs=epochs,
                                    bs=bs, lr=lr, momentum=momentum, seed=derive_seed(seed, "client", i))
        for name in start:
            out[name].append(state[name])
        histories.append(hist)
    return {name: torch.stack(v) for name, v in out.items()}, histories


_MODEL = [Satisfies(lambda m: isinstance(m, nn.Module), "a torch.nn.Module", [None, "model", 3.5])]
_CLIENTS = [Satisfies(lambda c: isinstance(c, Sequence) and not isinstance(c, str) and len(c) >= 1
                      and all(isinstance(p, tuple | list) and len(p) == 2 for p in c),
                      "a non-empty list of (X, y) pairs", [[], "xy", [3.0]])]
_MECHANISMS = [InstanceOf(UDP, DPSGD), {"udp", "dpsgd"}, None]


def _fl_example() -> dict[str, Any]:
    X = np.zeros((4, 3), np.float32)
    y = np.array([0, 1, 0, 1])
    return {"model": BiasFreeMLP(3, 2, 2), "clients": [(X, y), (X, y)], "clients_per_round": 2, "rounds": 1}


@seed_alias
@validate_args(_fl_example, model=_MODEL, clients=_CLIENTS, aggregator=[InstanceOf(FedCEO, UDPFedAvg), None],
               mechanism=_MECHANISMS, rounds=[Interval(int, 1, None)], clients_per_round=[Interval(int, 1, None)],
               local_epochs=[Interval(int, 1, None)], batch_size=[Interval(int, 1, None)],
               lr=[Interval("real", 0, None, closed="neither")], momentum=[Interval("real", 0, 1, closed="left")],
               restart=["boolean"], eval_sets=[InstanceOf(dict), None], eval_every=[Interval(int, 1, None)],
               delta=[Interval("real", 0, 1, closed="neither")], random_state=["random_state"],
               vectorised=["boolean"], num_threads=[Interval(int, 1, None), None])
def run_federated(
    model: Any, clients: Sequence[tuple[Any, Any]], *, aggregator: Any = None, mechanism: Any = None,
    rounds: int = 30, clients_per_round: int = 10, local_epochs: int = 1, batch_size: int = 32, lr: float = 0.1,
    momentum: float = 0.0, restart: bool = False, eval_sets: dict[str, tuple[Any, Any]] | None = None,
    eval_every: int = 1, delta: float = 1e-5, random_state: Any = 0, vectorised: bool = True, num_threads: int | None = 1,
) -> FLHistory:
    """Simulate T rounds of FL with client-side DP and a FedCEO or UDPFedAvg server step.

    Parameters
    ----------
    model : torch.nn.Module
        The architecture and the initial global parameters (not modified).
    clients : list of (X, y)
        Each client's local training data (arrays; X float, y integer labels).
    aggregator : FedCEO or UDPFedAvg, optional
        Server step (default UDPFedAvg), called as ``aggregate(uploads, server_round=t + 1,
        client_ids=sampled)``; used in place (a FedCEO keeps ``client_models_``).
    mechanism : UDP, DPSGD, "udp", "dpsgd" or None
        Client-side DP; None trains without noise (the FedAvg upper bound).
    rounds, clients_per_round : int
        T and K (sampled without replacement from the N clients each round, :func:`client_schedule`).
    local_epochs, batch_size, lr, momentum
        Local SGD (cross-entropy); with DPSGD the batches are Opacus' Poisson batches of expected size
        ``batch_size``.
    restart : bool, default=False
        The official code's restart rule: every client's latest model is stored (its smoothed model after a
        smoothing round, else its upload); in rounds t with t % I == 0 and t > 0 (I = the aggregator's
        ``interval``) a sampled client that holds one starts from it, not from the global model. Needs
        ``FedCEO(client_models=True)`` when the aggregator is a FedCEO.
    eval_sets : dict name -> (X, y), optional
        Evaluated on the global model every ``eval_every`` rounds and after the last one.
    random_state : int, numpy Generator or None, default=0
        Seeds client sampling, batch orders and noise streams (independent of the aggregator); a Generator or
        None is turned into one int seed first. ``seed=`` is its deprecated name.
    vectorised : bool, default=True
        One vmapped step for all K clients; False loops over clients (same numbers, for benchmarks).
    num_threads : int or None, default=1
        torch/BLAS threads for the run (restored afterwards).

    Returns
    -------
    FLHistory
    """
    mech = as_mechanism(mechanism)
    agg = aggregator if aggregator is not None else UDPFedAvg()
    if clients_per_round > len(clients):
        raise InputError(f"run_federated cannot sample {clients_per_round} of {len(clients)} clients per round.")
    if restart and isinstance(agg, FedCEO) and not agg.client_models:
        raise InputError("run_federated(restart=True) needs the smoothed client models: use "
                         "FedCEO(client_models=True).")
    with limit_threads(num_threads):
        return _run(model, clients, agg, mech, rounds, clients_per_round, local_epochs, batch_size, lr, momentum,
                    restart, eval_sets or {}, eval_every, delta, as_seed(random_state), vectorised)


def _client_tensors(clients: Sequence[tuple[Any, Any]]) -> tuple[list[tuple[Any, Any]], Any, Any, Any]:
    data = [(torch.as_tensor(np.asarray(X), dtype=torch.float32), torch.as_tensor(np.asarray(y), dtype=torch.long))
            for X, y in clients]
    for i, (X, y) in enumerate(data):
        if len(X) == 0 or len(X) != len(y):
            raise InputError(f"Client {i} of run_federated has {len(X)} samples and {len(y)} labels; need >= 1 each.")
    sizes = torch.tensor([len(y) for _, y in data])
    n_max = int(sizes.max())
    Xall = torch.zeros(len(data), n_max, *data[0][0].shape[1:])
    yall = torch.zeros(len(data), n_max, dtype=torch.long)
    for i, (X, y) in enumerate(data):
        Xall[i, :len(y)], yall[i, :len(y)] = X, y
    return data, Xall, yall, sizes


def _run(model: Any, clients: Sequence[tuple[Any, Any]], agg: Any, mech: Any, rounds: int, k: int, epochs: int,
         bs: int, lr: float, momentum: float, restart: bool, eval_sets: dict[str, Any], eval_every: int,
         delta: float, seed: int, vectorised: bool) -> FLHistory:
    data, Xall, yall, sizes = _client_tensors(clients)
    evals = {name: (torch.as_tensor(np.asarray(X), dtype=torch.float32), torch.as_tensor(np.asarray(y)))
             for name, (X, y) in eval_sets.items()}
    glob = {name: p.detach().clone().float() for name, p in model.named_parameters()}
    interval = int(getattr(agg, "interval", 1))
    stored: dict[int, dict[str, Any]] = {}
    gen = torch.Generator().manual_seed(derive_seed(seed, "batches"))
    hist = FLHistory(delta=delta, metrics={name: [] for name in evals})
    local_fn = _local_vectorised if vectorised else _local_loop
    for t, sampled in enumerate(client_schedule(len(data), k, rounds, seed)):
        t0 = time.perf_counter()
        hist.sampled.append(sampled)
        use_stored = restart and t > 0 and t % interval == 0
        hist.restarted.append(sum(c in stored for c in sampled) if use_stored else 0)
        start = {name: torch.stack([stored[c][name] if use_stored and c in stored else g for c in sampled])
                 for name, g in glob.items()}
        idx = torch.tensor(sampled)
        if isinstance(mech, DPSGD):
            trained, histories = _local_dpsgd(model, start, [data[c] for c in sampled], mech, epochs=epochs, bs=bs,
                                              lr=lr, momentum=momentum, seed=derive_seed(seed, "dpsgd", t))
            for c, h in zip(sampled, histories):
                hist.dp_histories.setdefault(c, []).extend(h)
        else:
            trained = local_fn(model, start, Xall[idx], yall[idx], sizes[idx], epochs=epochs, bs=bs, lr=lr,
                               momentum=momentum, gen=gen)
        if isinstance(mech, UDP):
            trained = _udp_stacked(start, trained, mech, torch.Generator().manual_seed(derive_seed(seed, "udp", t)))
        t1 = time.perf_counter()
        uploads = [{name: v[j].numpy() for name, v in trained.items()} for j in range(k)]
        new = agg.aggregate(uploads, server_round=t + 1, client_ids=sampled)
        hist.taus.append(getattr(agg, "tau_", None))
        glob = {name: torch.as_tensor(np.asarray(v)).float() for name, v in new.items()}
        if restart:
            smoothed = getattr(agg, "client_models_", None)
            for j, c in enumerate(sampled):
                latest = smoothed[j] if smoothed is not None else uploads[j]
                stored[c] = {name: torch.as_tensor(np.asarray(v)).float() for name, v in latest.items()}
        t2 = time.perf_counter()
        hist.local_time_s += t1 - t0
        hist.server_time_s += t2 - t1
        hist.round_time_s.append(t2 - t0)
        if evals and ((t + 1) % eval_every == 0 or t == rounds - 1):
            hist.rounds.append(t + 1)
            for name, (X, y) in evals.items():
                hist.metrics[name].append(_accuracy(model, glob, X, y))
    hist.final_params = {name: v.numpy().copy() for name, v in glob.items()}
    hist.epsilon = _epsilon(mech, hist, rounds, k / len(data), delta)
    return hist


def _epsilon(mech: Any, hist: FLHistory, rounds: int, client_rate: float, delta: float) -> float:
    if isinstance(mech, UDP):
        return mech.epsilon(rounds, client_rate, delta)
    if isinstance(mech, DPSGD):
        return dp_epsilon(hist.dp_histories, delta, accountant="rdp")
    return float("inf")


def _udp_stacked(start: dict[str, Any], trained: dict[str, Any], mech: UDP, gen: Any) -> dict[str, Any]:
    """UDP for K clients at once: clip each client's whole update to C, add N(0, sigma^2 C^2)."""
    deltas = {name: trained[name] - start[name] for name in trained}
    k = next(iter(deltas.values())).shape[0]
    sq = sum(d.reshape(k, -1).pow(2).sum(1) for d in deltas.values())
    factor = torch.clamp(mech.clip / sq.sqrt().clamp(min=1e-12), max=1.0)
    out = {}
    for name, d in deltas.items():
        shape = (k,) + (1,) * (d.dim() - 1)
        noise = torch.randn(d.shape, generator=gen) * (mech.sigma * mech.clip)
        out[name] = start[name] + d * factor.view(shape) + noise
    return out
