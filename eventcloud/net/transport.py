"""Byte-stream transports: real TCP, and an in-process network of memory streams for tests.

Peers and clients only ever ask a transport to `connect(address)` or to `serve(address,
handler)`; tests swap TCP for :class:`MemoryNetwork` and run a whole overlay in one process
under a mock clock, the way hypercorn and trio-websocket test their servers.
"""

from __future__ import annotations

from typing import Awaitable, Callable, Protocol

import trio
import trio.testing

StreamHandler = Callable[[trio.abc.Stream], Awaitable[None]]


class AddressError(ValueError):
    """An address that is not HOST:PORT."""


class Unreachable(OSError):
    """Nothing answers at that address."""


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise AddressError(f"invalid address {address!r}: expected HOST:PORT, e.g. 127.0.0.1:7000")
    return host.strip("[]"), int(port)


class Transport(Protocol):
    async def connect(self, address: str) -> trio.abc.Stream: ...

    async def serve(
        self, address: str, handler: StreamHandler, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
    ) -> None: ...


class TcpTransport:
    """TCP via trio; `serve` reports the bound address (port 0 picks a free port)."""

    def __init__(self, connect_timeout: float = 5.0) -> None:
        self.connect_timeout = connect_timeout

    async def connect(self, address: str) -> trio.abc.Stream:
        host, port = parse_address(address)
        try:
            with trio.fail_after(self.connect_timeout):
                stream = await trio.open_tcp_stream(host, port)
        except (OSError, trio.TooSlowError) as exc:
            raise Unreachable(f"cannot reach {address}: {exc or 'timed out'}") from None
        stream.setsockopt(__import__("socket").IPPROTO_TCP, __import__("socket").TCP_NODELAY, 1)
        return stream

    async def serve(
        self, address: str, handler: StreamHandler, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
    ) -> None:
        host, port = parse_address(address)
        listeners = await trio.open_tcp_listeners(port, host=host)
        sockname = listeners[0].socket.getsockname()
        bound = f"{host}:{sockname[1]}"
        task_status.started(bound)
        await trio.serve_listeners(handler, listeners)


class MemoryNetwork:
    """An in-process network: addresses map to handlers, connections are memory streams.

    `kill(address)` makes an address unreachable and breaks its open streams, which is how
    fault tests stop a peer without processes.
    """

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
        self._streams.setdefault(address, []).extend([client, server])
        nursery.start_soon(handler, server)
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
            raise OSError(f"address {bound} already in use")
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
