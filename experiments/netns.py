"""Hosts on one machine: a network namespace each, on a Linux bridge, for fault experiments.

Each host gets a namespace `<prefix>-<name>` and a veth pair: `<prefix>v-<name>` in the root
namespace (on the bridge) and `eth0` inside, with 10.77.0.N/24. The root namespace holds
10.77.0.1 on the bridge, so this process (the harness, its clients) reaches every host. What a
real network does to a host is done to its root-side link:

* `cut(name)`: the link goes down: the host reaches nobody and nobody reaches it;
* `isolate(names)`: the hosts move to a bridge of their own (no address of the harness on it):
  they reach each other and nothing else, a minority partition;
* `slow(name, "16kbit")`: a token bucket (`tc … tbf`) on the link, both directions.

Needs root and iproute2. Everything made is removed by `close()` (and `remove_leftovers()`
removes what a killed harness left, by prefix).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

__all__ = ["Hosts", "remove_leftovers"]

SUBNET = "10.77.0"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def _tc(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["tc", *args], check=check, capture_output=True, text=True)


def remove_leftovers(prefix: str = "ecf") -> list[str]:
    """Delete every namespace and link named with `prefix`, killing what still runs in them (a
    harness killed before its cleanup left its peers and etcd members)."""
    removed = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(f"{prefix}-"):
            for pid in _ip("netns", "pids", name, check=False).stdout.split():   # its peers and etcd members
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _ip("netns", "del", name, check=False)
            removed.append(name)
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            link = parts[1].strip().split("@")[0]
            if link.startswith(prefix):
                _ip("link", "del", link, check=False)
                removed.append(link)
    return removed


class Hosts:
    def __init__(self, prefix: str = "ecf", subnet: str = SUBNET) -> None:
        self.prefix = prefix
        self.subnet = subnet
        self.bridge = f"{prefix}br0"
        self.island = f"{prefix}br1"   # the minority's bridge while isolated
        self.addresses: dict[str, str] = {}
        self._slowed: set[str] = set()
        remove_leftovers(prefix)
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{subnet}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        _ip("link", "add", self.island, "type", "bridge")
        _ip("link", "set", self.island, "up")

    def namespace(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def link(self, name: str) -> str:
        return f"{self.prefix}v-{name}"[:15]   # interface names: at most 15 characters

    def add(self, name: str) -> str:
        """A new host; its address."""
        ns, link = self.namespace(name), self.link(name)
        address = f"{self.subnet}.{10 + len(self.addresses)}"
        _ip("netns", "add", ns)
        _ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", link, "master", self.bridge, "up")
        _ip("netns", "exec", ns, "ip", "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("netns", "exec", ns, "ip", "link", "set", "eth0", "up")
        _ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
        self.addresses[name] = address
        self._await_forwarding(name, 10.0)
        return address

    def run(self, name: str, command: list[str]) -> list[str]:
        """`command` run inside the host's namespace (`ip netns exec` execs it: same pid)."""
        return ["ip", "netns", "exec", self.namespace(name), *command]

    def cut(self, name: str) -> None:
        _ip("link", "set", self.link(name), "down")

    def heal(self, name: str, within: float = 10.0) -> None:
        """The host's link back on the main bridge, returning once it forwards again.

        `ip link set … up` returns before the kernel has the carrier up at both ends of the veth
        and the bridge port forwarding (link events are deferred, by up to a second, longer on a
        loaded machine); a probe sent in that gap is dropped, so "healed" waits for all three.
        """
        _ip("link", "set", self.link(name), "master", self.bridge)
        _ip("link", "set", self.link(name), "up")
        self._await_forwarding(name, within)
        # Addresses probed while the link was down are marked unreachable (FAILED) in the
        # neighbour tables at both ends: forgotten, so the first packet after healing resolves
        # them afresh instead of waiting out their retry timers (CI, once: a healed host still
        # unreachable 3 s on).
        _ip("netns", "exec", self.namespace(name), "ip", "neigh", "flush", "dev", "eth0", check=False)
        _ip("neigh", "flush", "to", self.addresses[name], check=False)

    def _await_forwarding(self, name: str, within: float) -> None:
        deadline = time.monotonic() + within
        while not self._forwarding(name):
            if time.monotonic() > deadline:
                raise RuntimeError(f"host {name!r}: link {self.link(name)} not forwarding {within} s after coming up")
            time.sleep(0.05)

    def _forwarding(self, name: str) -> bool:
        link = self.link(name)
        inside = _ip("netns", "exec", self.namespace(name), "ip", "-o", "link", "show", "dev", "eth0", check=False).stdout
        outside = _ip("-o", "link", "show", "dev", link, check=False).stdout
        port = Path(f"/sys/class/net/{link}/brport/state")
        forwarding = port.exists() and port.read_text().strip() == "3"   # BR_STATE_FORWARDING
        return "LOWER_UP" in inside and "LOWER_UP" in outside and forwarding

    def isolate(self, names: list[str]) -> None:
        for name in names:
            _ip("link", "set", self.link(name), "master", self.island)
        for name in names:
            self._await_forwarding(name, 10.0)

    def slow(self, name: str, rate: str = "16kbit") -> None:
        """Both directions of the host's link limited to `rate` (a token bucket, not a delay)."""
        _tc("qdisc", "add", "dev", self.link(name), "root", "tbf", "rate", rate, "burst", "1600", "latency", "400ms")
        subprocess.run(["ip", "netns", "exec", self.namespace(name), "tc", "qdisc", "add", "dev", "eth0", "root",
                        "tbf", "rate", rate, "burst", "1600", "latency", "400ms"], check=True, capture_output=True)
        self._slowed.add(name)

    def unslow(self, name: str) -> None:
        _tc("qdisc", "del", "dev", self.link(name), "root", check=False)
        subprocess.run(["ip", "netns", "exec", self.namespace(name), "tc", "qdisc", "del", "dev", "eth0", "root"],
                       check=False, capture_output=True)
        self._slowed.discard(name)

    def close(self) -> None:
        for name in list(self.addresses):
            _ip("netns", "del", self.namespace(name), check=False)   # takes eth0 and its veth peer with it
            _ip("link", "del", self.link(name), check=False)
        for bridge in (self.bridge, self.island):
            _ip("link", "del", bridge, check=False)
        self.addresses.clear()

    def __enter__(self) -> "Hosts":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
