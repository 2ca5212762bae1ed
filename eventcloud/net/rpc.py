"""Multiplexed request/reply and pushes over one trio stream (used by peers and clients).

One reader task per connection feeds the sans-I/O decoder and dispatches: replies wake the
caller waiting on that request id, requests run in the connection's own nursery (so a slow
handler never blocks the reader, and no task outlives the connection), pushes go to the
push handler. Garbage or oversized frames close the connection after an error frame.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from typing import Any, Awaitable, Callable

import trio

from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.frames import (
    DEFAULT_MAX_FRAME,
    ERROR,
    PUSH,
    REPLY,
    REQUEST,
    FrameDecoder,
    Message,
    ProtocolError,
    encode,
)

log = logging.getLogger(__name__)

RequestHandler = Callable[["RpcConnection", str, dict[str, Any]], Awaitable[dict[str, Any]]]
PushHandler = Callable[["RpcConnection", str, dict[str, Any]], Awaitable[None]]


class RemoteError(Exception):
    """The other side answered a request with an error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} [{code}]")
        self.code = code
        self.message = message


class ConnectionLost(Exception):
    """The connection closed or broke before the reply arrived."""


class RpcConnection:
    def __init__(
        self,
        stream: trio.abc.Stream,
        clock: HybridClock,
        *,
        on_request: RequestHandler | None = None,
        on_push: PushHandler | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
        known_ops: frozenset[str] | None = None,
        name: str = "",
        counters: "Counter[str] | None" = None,
    ) -> None:
        self.stream = stream
        self.clock = clock
        self.name = name
        self._on_request = on_request
        self.on_push = on_push  # may be set after construction (the SDK builds its client around the connection)
        self._max_frame = max_frame
        self._decoder = FrameDecoder(max_frame, known_ops)
        self._ids = itertools.count(1)
        self._waiting: dict[int, trio.MemorySendChannel[Message]] = {}
        self._send_lock = trio.Lock()
        self._outbox: list[bytes] = []
        self._closed = trio.Event()
        self.close_reason: str | None = None
        self.counters: Counter[str] = counters if counters is not None else Counter()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def run(self) -> None:
        """Read until the stream ends; handlers run in a nursery owned by this call."""
        try:
            async with trio.open_nursery() as nursery:
                await self._read_loop(nursery)
                nursery.cancel_scope.cancel()
        finally:
            self._finish()
            with trio.CancelScope(shield=True):
                with trio.move_on_after(1):
                    await self.stream.aclose()

    async def _read_loop(self, nursery: trio.Nursery) -> None:
        while True:
            try:
                data = await self.stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                self.close_reason = f"connection broken: {exc}"
                return
            if not data:
                self.close_reason = "closed by the other side"
                return
            self.counters["bytes_in"] += len(data)
            self._decoder.feed(data)
            while True:
                try:
                    message = self._decoder.next_message()
                except ProtocolError as exc:
                    self.close_reason = str(exc)
                    log.warning("closing connection %s: %s", self.name, exc)
                    await self._send_quietly(Message(ERROR, None, None, self.clock.now(), {"code": exc.code, "message": str(exc)}))
                    return
                if message is None:
                    break
                self._dispatch(message, nursery)

    def _dispatch(self, message: Message, nursery: trio.Nursery) -> None:
        if message.hlc:
            self.clock.observe(message.hlc)
        if message.kind in (REPLY, ERROR):
            if message.id is None:  # a connection-level error frame from the other side
                self.close_reason = f"{message.body.get('message', 'error')} [{message.body.get('code')}]"
                return
            channel = self._waiting.pop(message.id, None)
            if channel is not None:
                channel.send_nowait(message)
        elif message.kind == REQUEST:
            nursery.start_soon(self._serve_request, message)
        elif message.kind == PUSH and self.on_push is not None:
            nursery.start_soon(self.on_push, self, message.op, message.body)

    async def _serve_request(self, message: Message) -> None:
        assert message.op is not None and message.id is not None
        if self._on_request is None:
            reply = Message(ERROR, None, message.id, 0, {"code": "unknown-op", "message": f"unknown message type {message.op!r}"})
        else:
            try:
                body = await self._on_request(self, message.op, message.body)
                reply = Message(REPLY, None, message.id, 0, body)
            except ProtocolError as exc:
                reply = Message(ERROR, None, message.id, 0, {"code": exc.code, "message": str(exc)})
            except RemoteError as exc:
                reply = Message(ERROR, None, message.id, 0, {"code": exc.code, "message": exc.message})
            except OperationError as exc:
                reply = Message(ERROR, None, message.id, 0, {"code": exc.code, "message": str(exc)})
            except Exception as exc:  # a bug in a handler must not take the peer down
                log.exception("handler for %s failed", message.op)
                reply = Message(ERROR, None, message.id, 0, {"code": "internal", "message": f"{type(exc).__name__}: {exc}"})
        reply.hlc = self.clock.now()
        try:
            await self._send(reply)
        except ProtocolError as exc:  # reply too large: tell the caller instead
            await self._send_quietly(Message(ERROR, None, message.id, self.clock.now(), {"code": exc.code, "message": str(exc)}))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass

    async def call(self, op: str, body: dict[str, Any]) -> dict[str, Any]:
        """Send a request and wait for its reply body; RemoteError or ConnectionLost."""
        if self.closed:
            raise ConnectionLost(f"connection {self.name} is closed ({self.close_reason})")
        ident = next(self._ids)
        send, receive = trio.open_memory_channel[Message](1)
        self._waiting[ident] = send
        try:
            try:
                await self._send(Message(REQUEST, op, ident, self.clock.now(), body))
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise ConnectionLost(f"connection {self.name} broke: {exc}") from None
            try:
                reply = await receive.receive()
            except trio.EndOfChannel:
                raise ConnectionLost(f"connection {self.name} closed before the reply ({self.close_reason})") from None
        finally:
            self._waiting.pop(ident, None)
        if reply.kind == ERROR:
            raise RemoteError(str(reply.body.get("code", "error")), str(reply.body.get("message", "")))
        return reply.body

    async def push(self, op: str, body: dict[str, Any]) -> None:
        try:
            await self._send(Message(PUSH, op, None, self.clock.now(), body))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise ConnectionLost(f"connection {self.name} broke: {exc}") from None

    async def _send(self, message: Message) -> None:
        frame = encode(message, self._max_frame)
        self.counters["bytes_out"] += len(frame)
        self._outbox.append(frame)
        # Group commit: acquiring the lock yields, so frames queued meanwhile by other
        # tasks go out in the same send_all (one syscall for many small messages).
        async with self._send_lock:
            if not self._outbox:
                return  # a previous holder already sent our frame
            data = b"".join(self._outbox)
            self._outbox.clear()
            await self.stream.send_all(data)

    async def _send_quietly(self, message: Message) -> None:
        with trio.move_on_after(1):
            try:
                await self._send(message)
            except Exception:
                pass

    def _finish(self) -> None:
        self._closed.set()
        for channel in self._waiting.values():
            channel.close()
        self._waiting.clear()

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            with trio.move_on_after(1):
                await self.stream.aclose()


class OperationError(Exception):
    """A handler's typed refusal, sent back to the caller as an error reply."""

    def __init__(self, message: str, code: str = "failed") -> None:
        super().__init__(message)
        self.code = code
