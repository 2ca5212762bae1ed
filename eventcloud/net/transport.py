"""Byte-stream transports: how peers and clients reach each other.

Peers and clients only ever ask a transport to `connect(address)` or to `serve(address,
handler)`. `TcpTransport` is the real one; tests swap in `eventcloud.testing.MemoryNetwork`
and run a whole overlay in one process under a mock clock, the way hypercorn and
trio-websocket test their servers.
"""

from __future__ import annotations

import socket
import ssl
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
    """TCP via trio, optionally TLS; `serve` reports the bound address (port 0 picks a free port).

    With `server_tls` every accepted connection must complete a TLS handshake within
    `handshake_timeout` (a plain-text or silent client is dropped); with `client_tls` every
    connection made is TLS, and the peer's certificate must match the host of its address."""

    def __init__(self, connect_timeout: float = 5.0, *, server_tls: ssl.SSLContext | None = None,
                 client_tls: ssl.SSLContext | None = None, handshake_timeout: float = 10.0) -> None:
        self.connect_timeout = connect_timeout
        self.server_tls = server_tls
        self.client_tls = client_tls
        self.handshake_timeout = handshake_timeout
        self.failed_handshakes = 0

    async def connect(self, address: str) -> trio.abc.Stream:
        host, port = parse_address(address)
        try:
            with trio.fail_after(self.connect_timeout):
                stream = await trio.open_tcp_stream(host, port)
        except (OSError, trio.TooSlowError) as exc:
            raise Unreachable(f"cannot reach {address}: {exc or 'timed out'}") from None
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.client_tls is None:
            return stream
        secured = trio.SSLStream(stream, self.client_tls, server_hostname=host)
        try:
            with trio.fail_after(self.connect_timeout):
                await secured.do_handshake()
        except (trio.BrokenResourceError, trio.TooSlowError, ssl.SSLError) as exc:
            await trio.aclose_forcefully(stream)
            raise Unreachable(f"cannot reach {address}: TLS handshake failed: {_tls_reason(exc)}") from None
        return secured

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
        await trio.serve_listeners(handler if self.server_tls is None else self._secured(handler), listeners)

    def _secured(self, handler: StreamHandler) -> StreamHandler:
        context = self.server_tls

        async def secured(stream: trio.abc.Stream) -> None:
            tls = trio.SSLStream(stream, context, server_side=True)
            try:
                with trio.fail_after(self.handshake_timeout):
                    await tls.do_handshake()
            except (trio.BrokenResourceError, trio.TooSlowError, ssl.SSLError):
                self.failed_handshakes += 1  # not TLS, a wrong certificate, or silence: dropped
                await trio.aclose_forcefully(stream)
                return
            await handler(tls)

        return secured


def _tls_reason(exc: BaseException) -> str:
    if isinstance(exc, trio.TooSlowError):
        return "no answer (is the peer serving TLS?)"
    cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ else exc
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"the peer's certificate was refused: {cause.verify_message}"
    if isinstance(cause, ssl.SSLError):
        return f"{cause.reason or cause} (is the peer serving TLS?)"
    return f"the connection closed during the handshake ({cause or 'no reason'}; is the peer serving TLS?)"


def remote_host(stream: trio.abc.Stream) -> str:
    """The host a served connection comes from ("" when the stream is no socket, as in tests)."""
    inner = stream.transport_stream if isinstance(stream, trio.SSLStream) else stream
    if isinstance(inner, trio.SocketStream):
        try:
            return str(inner.socket.getpeername()[0])
        except OSError:
            return ""
    return ""
