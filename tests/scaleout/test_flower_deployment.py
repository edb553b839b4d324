"""FedCEO on Flower's deployment runtime (marker ``dist``, run by .ci/run): a SuperLink and SuperNodes on
127.0.0.1 (insecure mode, free ports) run examples/fedceo-flower with ``flwr run``. The global model of each
round equals trustlab's FedCEO server step (the simulator's ``aggregate``) on the same uploads; each upload is
exactly the seeded UDP of the client's local training with the run config's ``udp-sigma`` / ``udp-clip`` (and
the plain training when those switch UDP off); the ServerApp reports held-out accuracy and the epsilon spent
each round; a SuperNode process killed mid-run is dropped while the run completes. Services are stopped
afterwards."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.dist]
pytest.importorskip("flwr")
pytest.importorskip("torch")

APP = Path(__file__).resolve().parents[2] / "examples" / "fedceo-flower"


@pytest.fixture(scope="module")
def deploy(monkeypatch_module):
    monkeypatch_module.syspath_prepend(str(APP))  # ServerApp/ClientApp processes get it through PYTHONPATH
    import os

    monkeypatch_module.setenv("PYTHONPATH", os.pathsep.join([str(APP), os.environ.get("PYTHONPATH", "")]))
    spec = importlib.util.spec_from_file_location("fedceo_deploy", APP / "deploy.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fedceo_deploy"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def _rounds(path: Path) -> dict[int, dict]:
    data = np.load(path)
    out: dict[int, dict] = {}
    for r in sorted({int(k[1:].split("_")[0]) for k in data.files if k.startswith("r")}):
        ids = [int(i) for i in data[f"r{r}_ids"]]
        pids = [int(i) for i in data[f"r{r}_pids"]]
        keys = sorted(k.split("_global_")[1] for k in data.files if k.startswith(f"r{r}_global_"))
        ups = [{k: data[f"r{r}_up{j}_{k}"] for k in keys} for j in range(len(ids))]
        out[r] = {"ids": ids, "pids": pids, "uploads": ups, "global": {k: data[f"r{r}_global_{k}"] for k in keys}}
    out[0] = {"global": {k.split("initial_")[1]: data[k] for k in data.files if k.startswith("initial_")}}
    return out


def _check_server_steps(rounds: dict[int, dict], lam: float) -> None:
    from trustlab.methods.fedceo import FedCEO

    agg = FedCEO(lam=lam, theta=1.0, interval=1)
    for r, rec in rounds.items():
        if r == 0:
            continue
        expected = agg.aggregate(rec["uploads"], server_round=r, client_ids=rec["ids"])
        for k, v in rec["global"].items():
            np.testing.assert_allclose(v, expected[k], rtol=1e-6, atol=1e-7, err_msg=f"round {r} {k}")


def _expected_upload(initial: dict, pid: int, n_parts: int, server_round: int, sigma: float, clip: float) -> dict:
    """What client ``pid`` must send: its local training from ``initial``, then UDP seeded as the ClientApp seeds it."""
    from fedceo_flower.task import local_train, partition

    from trustlab.core.seeding import derive_seed
    from trustlab.methods.fedceo import UDP

    X, y = partition(pid, n_parts)
    trained = local_train(initial, X, y, hidden=16, epochs=1, lr=0.1, seed=derive_seed(0, pid, server_round))
    if sigma == 0 and clip > 1e5:
        return trained
    return UDP(sigma=sigma, clip=clip).privatize(initial, trained, derive_seed(0, "udp", pid, server_round))


def _check_round1_uploads(rounds: dict, n_parts: int, sigma: float, clip: float) -> None:
    for pid, up in zip(rounds[1]["pids"], rounds[1]["uploads"], strict=True):
        want = _expected_upload(rounds[0]["global"], pid, n_parts, 1, sigma, clip)
        for k in up:
            np.testing.assert_allclose(up[k], want[k], rtol=1e-5, atol=1e-6, err_msg=f"partition {pid} {k}")


def _run(dep_mod, tmp_path: Path, nodes: int, node_config=None, extra: str = "", during=None,
         **deploy_kw) -> tuple[dict, str]:
    """Deploy, ``flwr run`` (``during(dep, run_thread)`` runs beside it in this thread), stop; the rounds and the log."""
    import threading

    # one value per key: flwr parses the string as TOML, where a repeated key is an error
    values = {"num-server-rounds": "2", "min-train-nodes": "2", "lam": "5.0", "round-timeout": "90.0",
              "out-dir": f"'{tmp_path}'", **dict(kv.split("=", 1) for kv in extra.split())}
    cfg = " ".join(f"{k}={v}" for k, v in values.items())
    with dep_mod.LocalDeployment(nodes, node_config=node_config, log_dir=str(tmp_path), **deploy_kw) as dep:
        box: dict = {}
        th = threading.Thread(target=lambda: box.update(log=_catch(lambda: dep.run(cfg.strip(), timeout_s=600))))
        th.start()
        if during is not None:
            during(dep, th)
        th.join()
        log = box["log"]
        if isinstance(log, BaseException):
            raise log
        procs = list(dep.procs.values())
    assert all(p.poll() is not None for p in procs)  # every service stopped
    return _rounds(tmp_path / "rounds.npz"), log


def _catch(fn):
    try:
        return fn()
    except BaseException as exc:  # noqa: BLE001 - handed back to the test's thread
        return exc


def test_two_supernodes_two_rounds_match_the_fedceo_server_step(deploy, tmp_path):
    rounds, _ = _run(deploy, tmp_path, 2, extra="udp-sigma=0.5 udp-clip=1.0")
    assert sorted(rounds) == [0, 1, 2] and all(len(rounds[r]["ids"]) == 2 for r in (1, 2))
    _check_server_steps(rounds, lam=5.0)
    _check_round1_uploads(rounds, 2, sigma=0.5, clip=1.0)  # seeded UDP with the config's sigma and clip
    from trustlab.methods.fedceo import rdp_epsilon

    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert [m["round"] for m in metrics] == [0, 1, 2]
    assert all(0 <= m["accuracy"] <= 1 for m in metrics)
    assert [m["epsilon"] for m in metrics] == [0.0, rdp_epsilon(0.5, 1.0, 1, 1e-5), rdp_epsilon(0.5, 1.0, 2, 1e-5)]


def test_the_udp_config_keys_take_effect(deploy, tmp_path):
    rounds, _ = _run(deploy, tmp_path, 2, extra="udp-sigma=0.0 udp-clip=1000000.0 num-server-rounds=1")
    _check_round1_uploads(rounds, 2, sigma=0.0, clip=1e6)  # plain local training: no clip, no noise
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics[-1]["epsilon"] == float("inf")  # sigma 0 spends an unbounded budget, and says so


def test_a_supernode_killed_mid_run_is_dropped_and_the_run_completes(deploy, tmp_path):
    def kill_node_2_in_round_2(dep, run_thread):
        deadline = time.monotonic() + 240
        path = tmp_path / "metrics.json"
        # round 1 evaluated: round 2 starts, node 2 sleeps before replying; stop waiting if the run ended
        while time.monotonic() < deadline and run_thread.is_alive():
            if path.exists() and any(m["round"] == 1 for m in json.loads(path.read_text())):
                os.killpg(dep.procs["supernode2"].pid, signal.SIGKILL)
                return
            time.sleep(0.2)

    rounds, _ = _run(deploy, tmp_path, 3, node_config={2: "train-delay=6"}, extra="round-timeout=40.0",
                     during=kill_node_2_in_round_2)
    assert len(rounds[1]["ids"]) == 3 and len(rounds[2]["ids"]) == 2 and 2 not in rounds[2]["pids"]
    _check_server_steps(rounds, lam=5.0)


def test_tls_and_node_authentication_admit_only_registered_supernodes(deploy, tmp_path):
    """SuperLink with TLS (certificates generated here) and SuperNode authentication: two registered SuperNodes
    and a third whose key was never registered; the round runs on the two, byte-for-byte as in insecure mode."""
    import ssl

    def probe_tls(dep, run_thread):
        ctx = ssl.create_default_context(cafile=str(dep.certs.ca_cert))
        with socket.create_connection(("127.0.0.1", dep.port), timeout=10) as raw, \
                ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")  # the CA we generated verifies the SuperLink
        with pytest.raises(ssl.SSLCertVerificationError), \
                socket.create_connection(("127.0.0.1", dep.port), timeout=10) as raw:
            ssl.create_default_context().wrap_socket(raw, server_hostname="127.0.0.1")  # not a public CA's cert

    rounds, _ = _run(deploy, tmp_path, 2, extra="num-server-rounds=1", during=probe_tls, node_auth=True,
                     unregistered=1)
    assert len(rounds[1]["ids"]) == 2 and sorted(rounds[1]["pids"]) == [0, 1]  # the unregistered node is refused
    _check_server_steps(rounds, lam=5.0)
    _check_round1_uploads(rounds, 2, sigma=0.5, clip=1.0)
    assert "Connection attempt failed" in (tmp_path / "supernode2.log").read_text()
