"""A real etcd (Debian's `etcd-server`) for tests and fault runs: members on loopback ports, each
with a data directory of its own, stopped (and their processes reaped) on exit."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable

__all__ = ["EtcdCluster", "etcd_binary", "free_port"]


def etcd_binary() -> str | None:
    return shutil.which("etcd")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class EtcdCluster:
    """`members` etcd processes forming one cluster; `url` is the `etcd://…` the peers take."""

    def __init__(self, directory: Path, members: int = 1, host: str = "127.0.0.1", *,
                 hosts: list[str] | None = None, wrap: Callable[[int, list[str]], list[str]] | None = None) -> None:
        """`hosts`: one address per member (each on its own host, ports 2379 and 2380), else all
        on `host` with free ports; `wrap(index, command)`: how to run a member (in a namespace)."""
        self.directory = Path(directory)
        self.names = [f"m{i}" for i in range(len(hosts) if hosts else members)]
        self.hosts = list(hosts) if hosts else [host] * len(self.names)
        self.client_ports = [2379] * len(self.names) if hosts else [free_port(host) for _ in self.names]
        self.peer_ports = [2380] * len(self.names) if hosts else [free_port(host) for _ in self.names]
        self.wrap = wrap or (lambda index, command: command)
        self.processes: list[subprocess.Popen | None] = [None] * len(self.names)

    @property
    def url(self) -> str:
        return "etcd://" + ",".join(f"{h}:{port}" for h, port in zip(self.hosts, self.client_ports))

    def command(self, index: int) -> list[str]:
        binary = etcd_binary()
        if binary is None:
            raise FileNotFoundError("etcd is not installed (Debian's etcd-server package)")
        cluster = ",".join(f"{name}=http://{h}:{port}" for name, h, port in zip(self.names, self.hosts, self.peer_ports))
        host = self.hosts[index]
        client, peer = f"http://{host}:{self.client_ports[index]}", f"http://{host}:{self.peer_ports[index]}"
        return self.wrap(index, [binary, "--name", self.names[index], "--data-dir", str(self.directory / self.names[index]),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", f"eventcloud-{self.client_ports[0]}"])

    def start(self, timeout: float = 30.0) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for index in range(len(self.names)):
            log = open(self.directory / f"{self.names[index]}.log", "ab")
            self.processes[index] = subprocess.Popen(self.command(index), stdout=log, stderr=subprocess.STDOUT)
        self.wait_healthy(timeout)

    def wait_healthy(self, timeout: float) -> None:
        """Until every member answers /health (bounded)."""
        import httpx

        deadline = time.monotonic() + timeout
        for host, port in zip(self.hosts, self.client_ports):
            while True:
                try:
                    if httpx.get(f"http://{host}:{port}/health", timeout=1.0).json().get("health") == "true":
                        break
                except (httpx.HTTPError, ValueError):
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"etcd at {host}:{port} not healthy within {timeout:g} s "
                                       f"(logs in {self.directory})")
                time.sleep(0.1)

    def stop(self) -> None:
        for proc in self.processes:
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for proc in self.processes:
            if proc is not None:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def __enter__(self) -> "EtcdCluster":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
