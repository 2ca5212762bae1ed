"""Peers on a host list over SSH, Grid'5000 style: one peer per host.

Requirements (docs/experiments.md): passwordless SSH (BatchMode) from this machine to every
host; EventCloud installed at the same path on every host (`--remote-dir`, default this
checkout's path, using its `.venv`); the chosen port open between hosts. The first host is
the seed; the others join through it. `ssh_command` can be replaced (tests use a shim that
runs the remote command locally).
"""

from __future__ import annotations

import shlex
import signal
import subprocess
from pathlib import Path

from peers.supervisor import ClusterError, LocalCluster


def read_hosts(path: str | Path) -> list[str]:
    """Host names, one per line; blank lines and # comments ignored."""
    hosts = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            hosts.append(line)
    if not hosts:
        raise SystemExit(f"{path} lists no hosts")
    return hosts


class SshCluster(LocalCluster):
    """A LocalCluster whose peers run on remote hosts (one each) through SSH."""

    def __init__(self, hosts: list[str], *, algorithm: str = "osma", port: int = 7700,
                 remote_dir: str | None = None, data_root: str = "/tmp/eventcloud-experiment",
                 ssh_command: list[str] | None = None, **kwargs) -> None:
        super().__init__(len(hosts), algorithm=algorithm, port=port, **kwargs)
        self.hosts = hosts
        self.remote_dir = remote_dir or str(Path(__file__).resolve().parents[1])
        self.data_root = data_root
        self.ssh_command = ssh_command or ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]

    def command(self, index: int) -> list[str]:
        host = self.hosts[index]
        remote = [f"{self.remote_dir}/.venv/bin/eventcloud", "peer", "--listen", f"0.0.0.0:{self.port}",
                  "--advertise", f"{host}:{self.port}", "--data-dir", f"{self.data_root}/{self.algorithm}-{index}",
                  "--algorithm", self.algorithm, "--mapping", self.mapping]
        if index > 0:
            remote += ["--join", self.addresses[0]]
        script = f"rm -rf {shlex.quote(self.data_root)}/{self.algorithm}-{index} && exec " + shlex.join(remote)
        return [*self.ssh_command, host, script]

    def stop_peer(self, index: int, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        # Closing the SSH session does not always stop the remote process: ask it to.
        host = self.hosts[index]
        subprocess.run([*self.ssh_command, host, f"pkill -TERM -f {shlex.quote(self.data_root)}/{self.algorithm}-{index}"],
                       timeout=30, capture_output=True)
        try:
            return super().stop_peer(index, sig, timeout)
        except ClusterError:
            return -1
