"""Byte-stream transports: how peers and clients reach each other.

Peers and clients only ever ask a transport to `connect(address)` or to `serve(address,
handler)`. `TcpTransport` is the real one; tests swap in `eventcloud.testing.MemoryNetwork`
and run a whole overlay in one process under a mock clock, the way hypercorn and
trio-websocket test their servers.
"""

from __future__ import annotations

import socket
from typing import Awaitable, Callable, Protocol

import trio

from eventcloud.errors import ErrorCode, InputError, Unreachable

__all__ = ["AddressError", "Unreachable", "StreamHandler", "Transport", "TcpTransport", "parse_address"]

StreamHandler = Callable[[trio.abc.Stream], Awaitable[None]]


class AddressError(InputError):
    """An address that is not HOST:PORT."""

    default_code = ErrorCode.BAD_REQUEST


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
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return stream

    async def serve(
        self, address: str, handler: StreamHandler, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
    ) -> None:
        host, port = parse_address(address)
        try:
            listeners = await trio.open_tcp_listeners(port, host=host)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {address}: {exc.strerror or exc}") from None
        sockname = listeners[0].socket.getsockname()
        bound = f"{host}:{sockname[1]}"
        task_status.started(bound)
        await trio.serve_listeners(handler, listeners)
