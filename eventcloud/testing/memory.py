"""An in-process network of memory streams, for multi-peer tests without the OS.

Addresses map to handlers and connections are `trio.testing.memory_stream_pair`s, so a
whole overlay runs in one process under `MockClock(autojump_threshold=0)`. `kill(address)`
makes an address unreachable and breaks its open streams, which is how fault tests stop a
peer without processes.
"""

from __future__ import annotations

import errno

import trio
import trio.testing

from eventcloud.errors import Unreachable
from eventcloud.net.transport import StreamHandler, parse_address

__all__ = ["MemoryNetwork"]


class MemoryNetwork:
    """A `Transport` whose addresses live in this process."""

    def __init__(self) -> None:
        self._handlers: dict[str, tuple[StreamHandler, trio.Nursery]] = {}
        self._streams: dict[str, list[trio.abc.Stream]] = {}
        self._next_port = 1

    async def connect(self, address: str) -> trio.abc.Stream:
        await trio.lowlevel.checkpoint()
        entry = self._handlers.get(address)
        if entry is None:
            raise Unreachable(f"cannot reach {address}: nothing listens there")
        handler, nursery = entry
        client, server = trio.testing.memory_stream_pair()
        try:
            nursery.start_soon(handler, server)
        except RuntimeError:  # the server is shutting down: as unreachable as a closed port
            raise Unreachable(f"cannot reach {address}: it is shutting down") from None
        self._streams.setdefault(address, []).extend([client, server])
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
