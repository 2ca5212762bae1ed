"""The fault harness's hosts (experiments/netns.py) are real network namespaces: a host reaches
the harness over the bridge, a cut host does not, a healed one does again, an isolated pair
reach each other only, and closing removes every namespace and link made."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from experiments.netns import Hosts

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                reason="needs root and iproute2 (network namespaces)")

PREFIX, SUBNET = "ect", "10.78.0"


def _reaches(hosts: Hosts, name: str, address: str, port: int) -> bool:
    """A TCP connection from inside host `name` within 3 s (the first SYN and two retransmissions)."""
    probe = ("import socket, sys\n"
             "try:\n"
             f"    socket.create_connection(({address!r}, {port}), timeout=3).close()\n"
             "except OSError:\n"
             "    sys.exit(1)\n")
    return subprocess.run(hosts.run(name, [sys.executable, "-c", probe]), capture_output=True, timeout=30).returncode == 0


def test_hosts_are_cut_healed_isolated_and_removed():
    with socket.socket() as listener:
        hosts = Hosts(PREFIX, SUBNET)
        try:
            a, b = hosts.add("a"), hosts.add("b")
            listener.bind((f"{SUBNET}.1", 0))
            listener.listen(8)
            port = listener.getsockname()[1]
            assert _reaches(hosts, "a", f"{SUBNET}.1", port)
            hosts.cut("a")
            assert not _reaches(hosts, "a", f"{SUBNET}.1", port)
            assert _reaches(hosts, "b", f"{SUBNET}.1", port)
            hosts.heal("a")
            assert any(_reaches(hosts, "a", f"{SUBNET}.1", port) for _ in range(2))   # 6 s at most
            # a listener inside b; a and b isolated together still reach each other, not the harness
            server = subprocess.Popen(hosts.run("b", [sys.executable, "-c",
                                                      "import socket, time\n"
                                                      f"s = socket.create_server(({b!r}, 7001)); time.sleep(30)"]))
            try:
                deadline = time.monotonic() + 20
                while not _reaches(hosts, "a", b, 7001) and time.monotonic() < deadline:
                    time.sleep(0.1)   # the listener's interpreter still starting
                hosts.isolate(["a", "b"])
                assert _reaches(hosts, "a", b, 7001)
                assert not _reaches(hosts, "a", f"{SUBNET}.1", port)
            finally:
                server.kill()
                server.wait()
            assert a != b
        finally:
            hosts.close()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert f"{PREFIX}-" not in names and f" {PREFIX}" not in links
