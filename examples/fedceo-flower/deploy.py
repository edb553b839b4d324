"""Start a Flower deployment on 127.0.0.1 (one SuperLink, N SuperNodes, free local ports), run this app on it
with ``flwr run`` and tear everything down, also on errors or Ctrl-C.

    python examples/fedceo-flower/deploy.py --nodes 2 --rounds 2 --out /tmp/fedceo-run
    python examples/fedceo-flower/deploy.py --tls --node-auth      # TLS and SuperNode authentication

By default the services run in insecure mode (plain gRPC on loopback). With ``tls`` the SuperLink serves TLS
with a certificate from a throw-away CA (``certs.py``) that the SuperNodes and ``flwr`` verify; with
``node_auth`` (implies TLS) the SuperLink admits only SuperNodes whose public keys were registered with
``flwr supernode register`` before they start (``unregistered`` extra nodes get keys that are never registered).

Each service runs in its own process group, which is terminated (then killed) on exit; nothing is left behind.
Flower's own configuration goes to a temporary FLWR_HOME, so the user's ~/.flwr is never touched.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

APP = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode} before listening on 127.0.0.1:{port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.3)
    raise TimeoutError(f"{what} did not listen on 127.0.0.1:{port} within {timeout_s:g} s")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


class LocalDeployment:
    """A SuperLink and ``nodes`` SuperNodes on 127.0.0.1; ``node_config[i]`` adds to node i's config."""

    def __init__(self, nodes: int = 2, node_config: dict[int, str] | None = None, log_dir: str | None = None,
                 tls: bool = False, node_auth: bool = False, unregistered: int = 0):
        self.nodes, self.extra = nodes, dict(node_config or {})
        self.tls, self.node_auth, self.unregistered = tls or node_auth, node_auth, unregistered
        self.certs = None  # certs.TLSFiles once started with TLS
        if unregistered and not node_auth:
            raise ValueError("unregistered SuperNodes need node_auth=True (without it every SuperNode is admitted)")
        self.home = tempfile.mkdtemp(prefix="flwr-home-")
        self.log_dir = Path(log_dir or self.home)
        self.procs: dict[str, subprocess.Popen] = {}
        self.port = free_port()  # flwr >= 1.40: Fleet, Control and Runtime APIs share one HTTP port
        # Flower starts helper commands (flower-superexec, flwr-serverapp, ...) by name: this venv's bin first
        self.env = {**os.environ, "FLWR_HOME": self.home, "FLWR_TELEMETRY_ENABLED": "0",
                    "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}

    def _spawn(self, name: str, cmd: list[str]) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        self.procs[name] = proc
        return proc

    def start(self) -> LocalDeployment:
        security = ["--insecure"]
        if self.tls:
            from certs import make_tls_files

            self.certs = make_tls_files(Path(self.home) / "certs")
            security = [f"--ssl-ca-certfile={self.certs.ca_cert}", f"--ssl-certfile={self.certs.server_cert}",
                        f"--ssl-keyfile={self.certs.server_key}"]
        link = self._spawn("superlink", [
            str(BIN / "flower-superlink"), *security, *(["--enable-supernode-auth"] if self.node_auth else []),
            "--host=127.0.0.1", f"--port={self.port}", f"--health-server-address=127.0.0.1:{free_port()}",
            "--disable-runtime-dependency-installation"])
        _wait_port(self.port, link, 60, "flower-superlink")
        connection = f'root-certificates = "{self.certs.ca_cert}"' if self.tls else "insecure = true"
        Path(self.home, "config.toml").write_text(
            '[superlink]\ndefault = "trustlab-local"\n\n[superlink.trustlab-local]\n'
            f'address = "127.0.0.1:{self.port}"\n{connection}\n')
        for i in range(self.nodes + self.unregistered):
            self._spawn(f"supernode{i}", [str(BIN / "flower-supernode"), f"--superlink=127.0.0.1:{self.port}",
                                          *self._node_security(i), "--host=127.0.0.1", f"--port={free_port()}",
                                          f"--node-config={self._node_config(i)}"])
        return self

    def _node_config(self, i: int) -> str:
        return f"partition-id={i % self.nodes} num-partitions={self.nodes}" + (
            f" {self.extra[i]}" if i in self.extra else "")

    def _node_security(self, i: int) -> list[str]:
        """A SuperNode's TLS and authentication flags; with node_auth, nodes < ``nodes`` are registered first."""
        if not self.tls:
            return ["--insecure"]
        flags = [f"--root-certificates={self.certs.ca_cert}"]
        if self.node_auth:
            from certs import make_node_keys

            private, public = make_node_keys(Path(self.home) / "keys", f"supernode{i}")
            if i < self.nodes:
                self.flwr(["supernode", "register", str(public), "trustlab-local"])
            flags.append(f"--auth-supernode-private-key={private}")
        return flags

    def flwr(self, args: list[str], timeout_s: float = 60) -> str:
        """One ``flwr`` CLI command against this deployment (its FLWR_HOME); raises with its output on failure."""
        done = subprocess.run([str(BIN / "flwr"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout_s, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeError(f"flwr {' '.join(args)} failed ({done.returncode}):\n{done.stdout[-4000:]}\n"
                               f"{done.stderr[-4000:]}")
        return done.stdout + done.stderr

    def run(self, run_config: str = "", timeout_s: float = 300) -> str:
        """``flwr run`` this app (streaming its logs until the run ends); returns the output."""
        return self.flwr(["run", str(APP), "trustlab-local", "--stream",
                          *(["--run-config", run_config] if run_config else [])], timeout_s=timeout_s)

    def alive(self, name: str) -> bool:
        return self.procs[name].poll() is None

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            _stop(proc)
        if self.log_dir != Path(self.home):
            shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> LocalDeployment:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def deployment(nodes: int = 2, **kw: object) -> Iterator[LocalDeployment]:
    with LocalDeployment(nodes, **kw) as dep:  # type: ignore[arg-type]
        yield dep


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="", help="folder for rounds.npz (uploads and global model per round)")
    ap.add_argument("--tls", action="store_true", help="TLS with a throw-away CA (certs.py)")
    ap.add_argument("--node-auth", action="store_true", help="admit only registered SuperNodes (implies --tls)")
    args = ap.parse_args()
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    cfg = f"num-server-rounds={args.rounds} min-train-nodes={min(args.nodes, 2)}"
    if args.out:
        cfg += f" out-dir='{Path(args.out).resolve()}'"
    with deployment(args.nodes, tls=args.tls, node_auth=args.node_auth) as dep:
        print(dep.run(cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
