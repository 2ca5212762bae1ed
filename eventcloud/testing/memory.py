"""An in-process network of memory streams, for multi-peer tests without the OS.

Addresses map to handlers and connections are `trio.testing.memory_stream_pair`s, so a
whole overlay runs in one process under `MockClock(autojump_threshold=0)`. `kill(address)`
makes an address unreachable and breaks its open streams, which is how fault tests stop a
peer without processes. `cut(*addresses)` cuts live peers off together (they reach each
other and nothing else, their streams break) until `heal(address)`: a partition. A peer sees the network through
an `endpoint()` of its own, so the network knows where a connection comes from.
"""

from __future__ import annotations

import errno

import trio
import trio.testing

from eventcloud.errors import Unreachable
from eventcloud.net.transport import StreamHandler, parse_address

__all__ = ["Endpoint", "MemoryNetwork"]


class MemoryNetwork:
    """A `Transport` whose addresses live in this process."""

    def __init__(self) -> None:
        self._handlers: dict[str, tuple[StreamHandler, trio.Nursery]] = {}
        self._streams: dict[str, list[trio.abc.Stream]] = {}
        self._next_port = 1
        self._cut: dict[str, int] = {}   # address -> the partition it is in (0, absent: the main one)
        self._partitions = 0

    def endpoint(self) -> "Endpoint":
        """A peer's view of this network (a Transport): what it serves, it connects from."""
        return Endpoint(self)

    def is_cut(self, addresses: set[str]) -> bool:
        """Whether any of these addresses is cut off from the main partition."""
        return any(a in self._cut for a in addresses)

    async def cut(self, *addresses: str) -> None:
        """Cut these addresses off, together, and break their streams, until `heal`: they reach
        each other and nothing else (a minority partition; one address: a host cut off)."""
        self._partitions += 1
        for address in addresses:
            self._cut[address] = self._partitions
        for address in addresses:
            for stream in self._streams.pop(address, []):
                await stream.aclose()

    def heal(self, *addresses: str) -> None:
        for address in addresses:
            self._cut.pop(address, None)

    def _partition(self, addresses) -> int:
        return max((self._cut.get(a, 0) for a in addresses), default=0)

    async def connect(self, address: str, source: frozenset[str] | set[str] = frozenset()) -> trio.abc.Stream:
        await trio.lowlevel.checkpoint()
        if self._cut.get(address, 0) != self._partition(source):
            raise Unreachable(f"cannot reach {address}: the network between is cut")
        entry = self._handlers.get(address)
        if entry is None:
            raise Unreachable(f"cannot reach {address}: nothing listens there")
        handler, nursery = entry
        client, server = trio.testing.memory_stream_pair()
        try:
            nursery.start_soon(handler, server)
        except RuntimeError:  # the server is shutting down: as unreachable as a closed port
            raise Unreachable(f"cannot reach {address}: it is shutting down") from None
        for end in (address, *source):
            self._streams.setdefault(end, []).extend([client, server])
        return client

    async def serve(
        self, address: str, handler: StreamHandler, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
    ) -> None:
        host, port = parse_address(address)
        if port == 0:
            port = self._next_port
            self._next_port += 1
        bound = f"{host}:{port}"
        if bound in self._handlers:
            raise OSError(errno.EADDRINUSE, f"cannot listen on {bound}: address already in use")
        try:
            async with trio.open_nursery() as nursery:
                self._handlers[bound] = (handler, nursery)
                task_status.started(bound)
                await trio.sleep_forever()
        finally:
            self._handlers.pop(bound, None)

    async def kill(self, address: str) -> None:
        """Stop accepting at `address` and close every stream that touched it."""
        self._handlers.pop(address, None)
        for stream in self._streams.pop(address, []):
            await stream.aclose()


class Endpoint:
    """One peer's (or process's) side of a MemoryNetwork: the addresses it serves are where its
    connections come from, so cutting them off cuts both ways."""

    def __init__(self, network: MemoryNetwork) -> None:
        self.network = network
        self.bound: set[str] = set()

    @property
    def cut_off(self) -> bool:
        return self.network.is_cut(self.bound)

    async def connect(self, address: str) -> trio.abc.Stream:
        return await self.network.connect(address, source=self.bound)

    async def serve(self, address: str, handler: StreamHandler, *,
                    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        await self.network.serve(address, handler, task_status=_Bound(self.bound, task_status))


class _Bound:
    """Passes `started(address)` on, noting the address bound."""

    def __init__(self, bound: set[str], task_status: trio.TaskStatus[str]) -> None:
        self.bound, self.task_status = bound, task_status

    def started(self, address: str) -> None:
        self.bound.add(address)
        self.task_status.started(address)
