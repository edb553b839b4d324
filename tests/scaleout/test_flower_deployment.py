"""FedCEO on Flower's deployment runtime (marker ``dist``, run by .ci/run): a SuperLink and SuperNodes on
127.0.0.1 (insecure mode, free ports) run examples/fedceo-flower with ``flwr run``. The global model of each
round equals trustlab's FedCEO server step (the simulator's ``aggregate``) on the same uploads, and a client
that dies mid-round is dropped by the strategy while the run completes. Services are stopped afterwards."""

from __future__ import annotations

import importlib.util
import sys
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
        keys = sorted(k.split("_global_")[1] for k in data.files if k.startswith(f"r{r}_global_"))
        ups = [{k: data[f"r{r}_up{j}_{k}"] for k in keys} for j in range(len(ids))]
        out[r] = {"ids": ids, "uploads": ups, "global": {k: data[f"r{r}_global_{k}"] for k in keys}}
    return out


def _check_server_steps(rounds: dict[int, dict], lam: float) -> None:
    from trustlab.methods.fedceo import FedCEO

    agg = FedCEO(lam=lam, theta=1.0, interval=1)
    for r, rec in rounds.items():
        expected = agg.aggregate(rec["uploads"], server_round=r, client_ids=rec["ids"])
        for k, v in rec["global"].items():
            np.testing.assert_allclose(v, expected[k], rtol=1e-6, atol=1e-7, err_msg=f"round {r} {k}")


def _run(dep_mod, tmp_path: Path, nodes: int, node_config=None) -> tuple[dict, str]:
    with dep_mod.LocalDeployment(nodes, node_config=node_config, log_dir=str(tmp_path)) as dep:
        log = dep.run(f"num-server-rounds=2 min-train-nodes=2 lam=5.0 round-timeout=90.0 out-dir='{tmp_path}'",
                      timeout_s=600)
        procs = list(dep.procs.values())
    assert all(p.poll() is not None for p in procs)  # every service stopped
    return _rounds(tmp_path / "rounds.npz"), log


def test_two_supernodes_two_rounds_match_the_fedceo_server_step(deploy, tmp_path):
    rounds, _ = _run(deploy, tmp_path, 2)
    assert sorted(rounds) == [1, 2] and all(len(r["ids"]) == 2 for r in rounds.values())
    _check_server_steps(rounds, lam=5.0)
    # the uploads differ from the global model (clients trained and added UDP noise)
    assert not np.allclose(rounds[1]["uploads"][0]["fc1.weight"], rounds[1]["global"]["fc1.weight"])


def test_a_client_killed_mid_round_is_dropped_and_the_run_completes(deploy, tmp_path):
    rounds, log = _run(deploy, tmp_path, 3, node_config={2: "crash-round=2"})
    assert len(rounds[1]["ids"]) == 3 and len(rounds[2]["ids"]) == 2
    _check_server_steps(rounds, lam=5.0)
