"""A local cluster: N real peer processes on this machine, joined one after the other.

Used by `eventcloud cluster`, the demo, the experiment scripts and the multi-process tests.
Each peer is `python -m eventcloud peer …` with its own data directory; the cluster reads
the address each one prints once it serves (so port 0 works), and stops them with SIGTERM.
Each peer's standard input is a pipe the cluster holds (`--stop-with-stdin`): if the cluster's
process dies without stopping them (kill -9, a crash), the kernel closes the pipes and the
peers stop as on SIGTERM, instead of serving on as orphans nobody will stop.
With `authority="local"` (`eventcloud cluster` and the demo) the ownership authority the peers
share is served from this process (`AuthorityHost`): the machine fails as a whole anyway, and
nothing more needs installing; an `etcd://…` URL names an etcd instead; "hosted": the first peer
hosts it, as a lone `eventcloud peer` would; None: no authority (`--authority none`).
"""

from __future__ import annotations

import os
import re
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from peers.supervisor.authority_host import AuthorityHost

_LISTENING = re.compile(r"listening on (\S+)")


class ClusterError(RuntimeError):
    """A peer process failed to start or stop."""


class LocalCluster:
    def __init__(self, peers: int, *, data_dir: str | Path | None = None, port: int = 0,
                 algorithm: str = "osma", mapping: str = "local-name", host: str = "127.0.0.1",
                 start_timeout: float = 60.0, log_level: str = "warning", seed: int | None = None,
                 replicas: int = 2, fsync: bool = True, extra: list[str] | None = None, secure: bool = True,
                 tls: tuple[Path, Path, Path | None] | None = None, cwd: str | Path | None = None,
                 authority: str | None = None) -> None:
        if peers < 1:
            raise ClusterError("a cluster needs at least one peer")
        self.size = peers
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="eventcloud-"))
        self.port = port
        self.algorithm = algorithm
        self.mapping = mapping
        self.host = host
        self.start_timeout = start_timeout
        self.log_level = log_level
        self.seed = seed
        self.replicas = replicas
        self.fsync = fsync
        self.extra = list(extra or [])  # more `eventcloud peer` options for every peer
        self.secure = secure            # a generated cluster secret and admin token (kept in data_dir)
        self.secret_file = self.data_dir / "cluster.secret"
        self.admin_token_file = self.data_dir / "admin.token"
        self.tls = tls                  # (certificate, key, CA) every peer serves and verifies with
        self.cwd = cwd                  # where peers start: another checkout runs its own code there
        self.authority = authority      # the peers' ownership authority: "local" (served here), "hosted", etcd://…, or None
        self._authority_host: AuthorityHost | None = None
        self.processes: list[subprocess.Popen] = []
        self.addresses: list[str] = []
        self.commands: list[list[str]] = []

    @property
    def entry(self) -> str:
        return self.addresses[0]

    @property
    def admin_token(self) -> str | None:
        return self.admin_token_file.read_text().strip() if self.secure else None

    def _credentials(self) -> list[str]:
        """Options giving every peer the cluster's secret and admin token, made once (0600)."""
        options: list[str] = []
        if self.secure:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            for path in (self.secret_file, self.admin_token_file):
                if not path.exists():
                    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(descriptor, "w") as handle:
                        handle.write(secrets.token_hex(32) + "\n")
            options += ["--secret-file", str(self.secret_file), "--admin-token-file", str(self.admin_token_file)]
        if self.tls is not None:
            cert, key, ca = self.tls
            options += ["--tls-cert", str(cert), "--tls-key", str(key), *(["--tls-ca", str(ca)] if ca else [])]
        return options

    def command(self, index: int) -> list[str]:
        port = 0 if self.port == 0 else self.port + index
        cmd = [sys.executable, "-m", "eventcloud", "peer", "--listen", f"{self.host}:{port}",
               "--data-dir", str(self.data_dir / f"peer-{index}"), "--algorithm", self.algorithm,
               "--mapping", self.mapping, "--log-level", self.log_level, "--replicas", str(self.replicas),
               *([] if self.fsync else ["--no-fsync"]), *self._credentials(), *self.extra]
        if index > 0:
            cmd += ["--join", self.addresses[0]]
        if self.seed is not None:
            cmd += ["--seed", str(self.seed + index)]
        if self._knows("--stop-with-stdin"):
            cmd.append("--stop-with-stdin")
        if self.authority == "hosted":
            pass   # the first peer hosts it, the others learn it from the peer they join
        elif self.authority is not None and self._knows("--authority"):
            cmd += ["--authority", self._authority_url()]
        elif self.authority is None and self._knows("'none'"):   # (older code decides alone by default)
            cmd += ["--authority", "none"]
        return cmd

    def _knows(self, flag: str) -> bool:
        """Whether the peers' code has `flag` (another checkout's may be older)."""
        if self.cwd is None:
            return True
        parser = Path(self.cwd) / "eventcloud" / "cli" / "parser.py"
        return parser.exists() and flag in parser.read_text()

    def _authority_url(self) -> str:
        if self.authority != "local":
            return self.authority
        if self._authority_host is None:
            self._authority_host = AuthorityHost(self.host if self.host not in ("0.0.0.0", "::") else "127.0.0.1")
            try:
                self._authority_host.start()
            except RuntimeError as exc:
                raise ClusterError(str(exc)) from None
        assert self._authority_host.url is not None
        return self._authority_host.url

    def start(self, progress=None) -> None:
        for index in range(self.size):
            self.start_peer(index)
            if progress is not None:
                progress(index + 1, self.size)

    def start_peer(self, index: int, command: list[str] | None = None) -> str:
        """Start peer `index` (again, with the same command, after a stop)."""
        cmd = command or (self.commands[index] if index < len(self.commands) else self.command(index))
        # a session of its own: Ctrl-C in a terminal reaches the cluster's owner, which stops the
        # peers in order, and never a peer still starting Python (a fatal error in site.py)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True, cwd=self.cwd)
        address = self._await_address(proc, index)
        if index < len(self.processes):
            _close_stdin(self.processes[index])  # the process it replaces has ended
            self.processes[index] = proc
            self.addresses[index] = address
        else:
            self.processes.append(proc)
            self.addresses.append(address)
            self.commands.append(cmd)
        return address

    def _await_address(self, proc: subprocess.Popen, index: int) -> str:
        assert proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                _close_stdin(proc)
                raise ClusterError(f"peer {index} exited with code {proc.returncode} before serving "
                                   f"(see its messages above)")
            if selector.select(timeout=0.2):
                line = proc.stdout.readline()
                match = _LISTENING.search(line)
                if match:
                    return match.group(1)
        proc.kill()
        _close_stdin(proc)
        raise ClusterError(f"peer {index} did not start within {self.start_timeout:g} s")

    def stop_peer(self, index: int, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        proc = self.processes[index]
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _close_stdin(proc)
        return proc.returncode

    def stop(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for index in range(len(self.processes)):
            self.stop_peer(index)
        if self._authority_host is not None:   # after the peers: their last writes need their leases
            self._authority_host.stop()
            self._authority_host = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "LocalCluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _close_stdin(proc: subprocess.Popen) -> None:
    """Close the cluster's end of a finished peer's stdin pipe (one descriptor per peer started)."""
    if proc.stdin is not None:
        try:
            proc.stdin.close()
        except OSError:  # a peer that died with data unread: nothing to flush, nothing lost
            pass
