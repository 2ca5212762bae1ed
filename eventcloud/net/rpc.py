"""Multiplexed request/reply and pushes over one trio stream (used by peers and clients).

One reader task per connection feeds the sans-I/O decoder and dispatches: replies wake the
caller waiting on that request id, pushes go to the (synchronous) push handler, requests run
in the connection's own nursery, at most `max_inflight` at a time: past that the reader stops
reading, so a client that floods requests is slowed by TCP instead of growing our memory.
Outgoing frames go to an outbox bounded by `max_outbox` bytes, written by one writer task per
connection: frames queued while a write is in progress go out together in the next write, and
a caller cancelled meanwhile (its own timeout) never takes anyone else's frames with it. Garbage or an oversized frame gets
one error frame and closes the connection; a handler's error becomes an error reply with its
code, and a bug becomes `internal` without taking anything else down.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import math
import os
from collections import Counter
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable

import trio

from eventcloud.errors import (
    ConnectionLost, ErrorCode, EventCloudError, LocalProtocolError, ProtocolError, RemoteError,
)
from eventcloud.wire.frames import DEFAULT_MAX_FRAME, FrameDecoder, Kind, Message, encode
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.ops import Op
from eventcloud.wire.schema import Body

if TYPE_CHECKING:
    from eventcloud.net.limits import ConnectionLimits

log = logging.getLogger(__name__)

#: Serves one request: (connection, op, body) -> reply body, or raises an EventCloudError.
RequestHandler = Callable[["RpcConnection", Op, dict[str, Any]], Awaitable[dict[str, Any] | Body]]
#: Takes one push, synchronously, in the reader task (it must not block).
#: Handles a push: called inline when it is a plain function (the SDK's notifications); an
#: async one is served like a request without a reply (its own task, within the in-flight limit).
PushHandler = Callable[["RpcConnection", Op, dict[str, Any]], None | Awaitable[None]]

_BROKEN = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class RpcConnection:
    """Requests, replies and pushes over one stream. Call `run()` in a task; it returns when
    the stream ends (and cancels the handlers still running for it)."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        clock: HybridClock,
        *,
        on_request: RequestHandler | None = None,
        on_push: PushHandler | None = None,
        on_close: Callable[[str], None] | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
        accepted_ops: frozenset[Op] | None = None,
        max_inflight: int = 64,
        max_outbox: int = 8 * 1024 * 1024,
        name: str = "",
        counters: "Counter[str] | None" = None,
        limits: "ConnectionLimits | None" = None,
        idle_timeout: float | None = None,
        frame_timeout: float | None = None,
        first_request_timeout: float | None = None,
        liveness: float | None = None,
        remote: str = "",
    ) -> None:
        self.stream = stream
        self.clock = clock
        self.name = name
        self._on_request = on_request
        self._on_push = on_push
        self._push_async = inspect.iscoroutinefunction(on_push)
        self._on_close = on_close
        self._limits = limits
        self._accounted = 0
        self._frame_began = 0.0
        self._last_read = trio.current_time() if (idle_timeout or frame_timeout or first_request_timeout) else 0.0
        self._watch = trio.Event()        # wakes the watchdog (a frame began)
        self._watching_until = math.inf   # the deadline the watchdog sleeps until
        self._receiving = False           # the reader waits for bytes (deadlines run)
        self._reading = trio.CancelScope()
        self._replies = 0
        self._idle_timeout = idle_timeout      # no message for this long: close (None: never)
        # a new connection's first request must come this soon (an idle one only holds a slot)
        self._first_request_timeout = first_request_timeout
        self._opened = trio.current_time() if first_request_timeout else 0.0
        self._requested = False
        self.remote = remote   # the other side's host, as the server saw it ("" if unknown)
        self.probation = False  # admitted into the slots kept for proven roles: must prove one first
        self._frame_timeout = frame_timeout    # a frame begun must be complete within this (None: never)
        # our requests waiting this long with nothing heard from the other side: it is dead (None: never)
        self._liveness = liveness
        self._heard = trio.current_time()  # when bytes last came in (or our first request went out)
        self._listening = trio.Event()    # wakes the liveness watch: a request waits now
        self._probing = False             # a liveness ping is out
        self._max_frame = max_frame
        self._decoder = FrameDecoder(max_frame, accepted_ops)
        self._ids = itertools.count(1)
        self._waiting: dict[int, _Pending] = {}
        self._inflight = trio.Semaphore(max_inflight)
        self._max_inflight = max_inflight
        self.last_request = trio.current_time()   # when the other side last asked something
        self._evicted: str | None = None          # why the server ends this connection to admit another
        self._outbox: list[bytes] = []
        self._outbox_bytes = 0
        self._outbox_frames = 0           # frames the outbox holds (a chunk may end several)
        self._writing = False             # the writer is in a send
        # a plain TCP socket: frames may be written right away when nothing waits
        self._socket = stream.socket if type(stream) is trio.SocketStream else None
        self._max_outbox = max_outbox
        self._drained = trio.Event()      # the writer took the outbox (room for more)
        self._queued_frames = trio.Event()  # the writer has something to write
        self._written = trio.Event()      # a write completed
        self._queued_count = 0            # frames queued so far / written so far (for `flush`)
        self._written_count = 0
        self._closed = trio.Event()
        self.close_reason: str | None = None
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self.role = "client"   # what the other side proved it is (set by the server's authentication)
        self.end_after_reply = False  # set by a handler that refuses the other side for good

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    @property
    def waiting(self) -> bool:
        """Whether nothing it asked is being served (an idle connection, or one only listening)."""
        return self._inflight.value == self._max_inflight

    @property
    def evicting(self) -> bool:
        """Whether its server is ending it to admit another connection."""
        return self._evicted is not None

    def evict(self, why: str) -> None:
        """End this connection (its server needs the slot): told why, then closed."""
        if self._evicted is None and not self.closed:
            self._evicted = self.close_reason = why
            self._reading.cancel()

    @property
    def reused(self) -> bool:
        """Has a request on it already been answered (so it may be an idle pooled connection)?"""
        return self._replies > 0

    # --- reading ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Read until the stream ends; the writer and request handlers run in a nursery owned by
        this call."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_loop, nursery.cancel_scope)
                with trio.CancelScope() as self._reading:
                    if self._idle_timeout or self._frame_timeout or self._first_request_timeout:
                        nursery.start_soon(self._watchdog)
                    if self._liveness:
                        nursery.start_soon(self._watch_liveness, nursery)
                    await self._read_loop(nursery)
                if self._evicted is not None:
                    await self._send_quietly(Message(Kind.ERROR, None, None, self.clock.now(),
                                                     {"code": ErrorCode.BUSY.value, "message": self._evicted}))
                nursery.cancel_scope.cancel()
        finally:
            self._finish()
            with trio.CancelScope(shield=True):
                with trio.move_on_after(1):
                    await self.stream.aclose()

    def _deadline(self) -> tuple[float, str]:
        """When this connection times out if nothing more arrives, and what it then says."""
        if self._decoder.pending > 0:  # a frame's deadline counts from its first byte
            if self._frame_timeout:
                return self._frame_began + self._frame_timeout, \
                    f"a frame was not completed within {self._frame_timeout:g} s"
            return math.inf, ""
        if self._first_request_timeout and not self._requested:
            return self._opened + self._first_request_timeout, \
                f"no request within {self._first_request_timeout:g} s of connecting"
        if self._idle_timeout:
            return self._last_read + self._idle_timeout, f"no message for {self._idle_timeout:g} s"
        return math.inf, ""

    async def _watchdog(self) -> None:
        """Ends the connection when a frame is not completed in time, or nothing arrives for the
        idle timeout. One task per connection instead of a deadline per read: it sleeps until
        the current deadline, and the reader wakes it only when a frame begins (an earlier
        deadline). Deadlines count only while the reader waits for bytes, not while it waits for
        room to dispatch what it read."""
        while True:
            deadline, what = self._deadline()
            self._watch = trio.Event()
            self._watching_until = deadline
            with trio.move_on_at(deadline):
                await self._watch.wait()
            if not self._receiving:
                self._watch = trio.Event()
                self._watching_until = -math.inf  # the reader wakes us when it reads again
                await self._watch.wait()
                continue
            if trio.current_time() < self._deadline()[0]:
                continue  # something arrived meanwhile
            self.close_reason = what
            await self._send_quietly(Message(Kind.ERROR, None, None, self.clock.now(),
                                             {"code": ErrorCode.TIMEOUT.value, "message": f"closing: {what}"}))
            self._reading.cancel()
            return

    async def _watch_liveness(self, nursery: trio.Nursery) -> None:
        """Ends the connection when our requests wait `liveness` seconds with nothing at all heard
        from the other side (gRPC's keepalive): a peer paused or cut off without a reset keeps
        its TCP connection open, and every request to it would wait for ever. Half-way through
        the silence a ping goes out, which a live peer answers however long its other requests
        take. Silence counts only while our reader waits for bytes (not while our own
        back-pressure stops it)."""
        limit = self._liveness
        assert limit is not None
        while True:
            if not self._waiting:
                self._listening = trio.Event()
                await self._listening.wait()
                continue
            if not self._listening.is_set():
                self._listening.set()     # requests already waited when we started
            now = trio.current_time()
            if not self._receiving:
                self._heard = now
            # the times compared are the times slept until (a difference compared with `limit`
            # may round the other way, and the loop would wake at once, for ever)
            probe_at, dead_at = self._heard + limit / 2, self._heard + limit
            if now >= dead_at:
                self.close_reason = f"nothing heard from the other side for {limit:g} s while requests waited"
                log.info("closing connection %s: %s", self.name, self.close_reason)
                self._reading.cancel()
                return
            if now >= probe_at and not self._probing:
                self._probing = True
                nursery.start_soon(self._probe)
            await trio.sleep_until(dead_at if self._probing else probe_at)

    async def _probe(self) -> None:
        try:
            await self.call(Op.PING, {})
        except EventCloudError:
            pass
        finally:
            self._probing = False

    async def _read_loop(self, nursery: trio.Nursery) -> None:
        limits = self._limits
        while True:
            if not self._decoder.pending:
                self._last_read = trio.current_time()  # idle from now on
            self._receiving = True
            if self._watching_until == -math.inf:
                self._watch.set()
            size = 65536
            if limits is not None:
                if limits.over_budget:
                    # Too many bytes of unfinished frames in this process: this connection waits
                    # (the watchdog still ends it if a frame it began is not completed in time)
                    # rather than memory growing.
                    await limits.below_budget()
                size = limits.reserve(size)  # counted before reading, so concurrent reads cannot all pass
            try:
                try:
                    data = await self.stream.receive_some(size)
                except _BROKEN as exc:
                    self.close_reason = f"connection broken: {exc}"
                    return
            finally:
                self._receiving = False
                if limits is not None:
                    limits.unreserve(size)
            if not data:
                self.close_reason = "closed by the other side"
                return
            self.counters["bytes_in"] += len(data)
            now = self._heard = trio.current_time()
            if not self._decoder.pending:
                self._frame_began = now
            self._decoder.feed(data)
            self._account()
            while True:
                try:
                    message = self._decoder.next_message()
                except ProtocolError as exc:
                    self.close_reason = str(exc)
                    log.warning("closing connection %s: %s", self.name, exc)
                    await self._send_quietly(Message(Kind.ERROR, None, None, self.clock.now(),
                                                     {"code": exc.code.value, "message": exc.message}))
                    return
                if message is None:
                    break
                self._frame_began = now  # the next frame begins with the bytes left
                self._account()
                if not await self._dispatch(message, nursery):
                    return
            if self._decoder.pending and self._frame_timeout and \
                    self._frame_began + self._frame_timeout < self._watching_until:
                self._watch.set()  # a frame began: its deadline is earlier than the watchdog's

    def _account(self) -> None:
        """Tell the process-wide limits how many bytes of unfinished frames this connection holds."""
        if self._limits is not None:
            pending = self._decoder.pending
            self._limits.buffered(pending - self._accounted)
            self._accounted = pending

    async def _dispatch(self, message: Message, nursery: trio.Nursery) -> bool:
        """Route one message; False when the connection must end."""
        if message.hlc:
            self.clock.observe(message.hlc)
        kind = message.kind
        if kind is Kind.REPLY or kind is Kind.ERROR:
            if message.id is None:  # a connection-level error frame from the other side
                self.close_reason = f"{message.body.get('message', 'error')} [{message.body.get('code')}]"
                return False
            pending = self._waiting.pop(message.id, None)
            if pending is not None:
                pending.reply = message
                pending.done.set()
        elif kind is Kind.REQUEST:
            self._requested = True
            self.last_request = trio.current_time()
            await self._admit()  # bounded: past the limit, stop reading this connection
            nursery.start_soon(self._serve_request, message)
        elif self._on_push is not None and self._push_async:
            await self._admit()
            nursery.start_soon(self._serve_push, message)
        elif self._on_push is not None:
            assert message.op is not None
            try:
                self._on_push(self, message.op, message.body)
            except Exception:  # a bug in a push handler must not end the connection
                log.exception("push handler for %s failed", message.op)
        return True

    async def _admit(self) -> None:
        """One more request in flight; waits while `max_inflight` are (the reader yields to the
        scheduler after every read anyway, so the common case takes no extra trip through it)."""
        try:
            self._inflight.acquire_nowait()
        except trio.WouldBlock:
            await self._inflight.acquire()

    async def _serve_request(self, message: Message) -> None:
        assert message.op is not None and message.id is not None
        try:
            if self._on_request is None:
                reply = _error(message.id, ErrorCode.UNKNOWN_OP, f"unknown message type {message.op.value!r}")
            else:
                try:
                    body = await self._on_request(self, message.op, message.body)
                    reply = Message(Kind.REPLY, None, message.id, 0,
                                    body.to_wire() if isinstance(body, Body) else body)
                except EventCloudError as exc:
                    reply = _error(message.id, exc.code, exc.message)
                except ExceptionGroup as group:  # concurrent steps failed: answer with the first typed error
                    typed = _first_typed(group)
                    if typed is None:
                        log.exception("handler for %s failed", message.op)
                        reply = _error(message.id, ErrorCode.INTERNAL, f"{type(group).__name__}: {group}")
                    else:
                        reply = _error(message.id, typed.code, typed.message)
                except Exception as exc:  # a bug in a handler must not take the peer down
                    log.exception("handler for %s failed", message.op)
                    reply = _error(message.id, ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")
            try:
                await self._send(_stamped(reply, self.clock.now()))
            except LocalProtocolError as exc:  # reply too large: tell the caller instead
                await self._send_quietly(_error(message.id, exc.code, exc.message, self.clock.now()))
            except _BROKEN:
                pass
            if self.end_after_reply:
                with trio.move_on_after(1):
                    await self.flush()   # the refusal goes out first
                await self.aclose()
        finally:
            self._inflight.release()

    async def _serve_push(self, message: Message) -> None:
        assert message.op is not None and self._on_push is not None
        try:
            await self._on_push(self, message.op, message.body)  # type: ignore[misc]
        except Exception:  # a bug in a push handler must not end the connection
            log.exception("push handler for %s failed", message.op)
        finally:
            self._inflight.release()

    # --- writing ----------------------------------------------------------------------------

    async def call(self, op: Op, body: dict[str, Any] | Body | None = None) -> dict[str, Any]:
        """Send a request and wait for its reply body; RemoteError or ConnectionLost."""
        if self.closed:
            raise ConnectionLost(f"connection {self.name} is closed ({self.close_reason})")
        ident = next(self._ids)
        pending = self._waiting[ident] = _Pending()
        if self._liveness and not self._listening.is_set():
            self._heard = max(self._heard, trio.current_time())  # silence counts from the first request
            self._listening.set()
        wire = body.to_wire() if isinstance(body, Body) else (body or {})
        try:
            try:
                await self._send(Message(Kind.REQUEST, op, ident, self.clock.now(), wire))
            except _BROKEN as exc:
                raise ConnectionLost(f"connection {self.name} broke: {exc}") from None
            await pending.done.wait()
        finally:
            self._waiting.pop(ident, None)
        reply = pending.reply
        if reply is None:
            raise ConnectionLost(f"connection {self.name} closed before the reply ({self.close_reason})")
        self._replies += 1
        if reply.kind is Kind.ERROR:
            raise RemoteError(reply.error_code, str(reply.body.get("message", "")))
        return reply.body

    async def push(self, op: Op, body: dict[str, Any] | Body) -> None:
        await self.push_all([(op, body)])

    async def push_all(self, pushes: list[tuple[Op, dict[str, Any] | Body]]) -> None:
        """Several pushes (a subscriber's queued notifications) in one write; returns once they
        are written, so a reader that does not keep up slows its pusher (whose own bounded
        queue then overflows) instead of filling this outbox."""
        now = self.clock.now()
        frames = [encode(Message(Kind.PUSH, op, None, now, body.to_wire() if isinstance(body, Body) else body),
                         self._max_frame) for op, body in pushes]
        try:
            await self._send_frames(frames)
        except _BROKEN as exc:
            raise ConnectionLost(f"connection {self.name} broke: {exc}") from None
        await self.flush()
        if self.closed and self._written_count < self._queued_count:
            raise ConnectionLost(f"connection {self.name} closed before the pushes were written ({self.close_reason})")

    async def _send(self, message: Message) -> None:
        await self._send_frames([encode(message, self._max_frame)])

    async def _send_frames(self, frames: list[bytes]) -> None:
        """Queue frames for the writer (waiting while the outbox is full)."""
        while self._outbox_bytes > self._max_outbox and not self.closed:
            await self._drained.wait()  # bounded outbox: wait for the writer to catch up
        if self.closed:
            raise trio.ClosedResourceError(f"connection {self.name} is closed")
        for frame in frames:
            self.counters["bytes_out"] += len(frame)
        self._queued_count += len(frames)
        fd = self._socket.fileno() if self._socket is not None else -1  # -1 once closed
        if fd >= 0 and not self._outbox and not self._writing:
            # Nothing queued and no write under way: try the socket right now, without waking the
            # writer (one task switch less per message). Synchronous, so no cancellation can cut
            # a frame; what the kernel does not take goes to the writer, in order.
            data = frames[0] if len(frames) == 1 else b"".join(frames)
            try:
                sent = os.write(fd, data)
            except OSError:  # full (the writer waits for room), or broken (it ends the connection)
                sent = 0
            if sent == len(data):
                self._written_count += len(frames)
                return
            self._outbox_frames += len(frames)  # counted as written once the writer sends the rest
            frames = [data[sent:]]
        else:
            self._outbox_frames += len(frames)
        for frame in frames:
            self._outbox.append(frame)
            self._outbox_bytes += len(frame)
        self._queued_frames.set()

    async def _write_loop(self, scope: trio.CancelScope) -> None:
        """The one task that writes: whatever is queued goes out in one `send_all` (one system
        call for many small messages). A broken stream ends the connection (its callers get
        ConnectionLost)."""
        while True:
            await self._queued_frames.wait()
            self._queued_frames = trio.Event()
            frames, count = self._outbox, self._outbox_frames
            self._outbox, self._outbox_bytes, self._outbox_frames = [], 0, 0
            self._drained.set()
            self._drained = trio.Event()
            self._writing = True
            try:
                await self.stream.send_all(frames[0] if len(frames) == 1 else b"".join(frames))
            except _BROKEN as exc:
                self.close_reason = self.close_reason or f"connection broken: {exc}"
                scope.cancel()
                return
            except Exception as exc:  # a failing stream ends this connection, never the process
                log.exception("connection %s: writing failed", self.name)
                self.close_reason = self.close_reason or f"writing failed: {type(exc).__name__}: {exc}"
                scope.cancel()
                return
            finally:
                self._writing = False
            self._written_count += count
            self._written.set()
            self._written = trio.Event()

    async def flush(self) -> None:
        """Wait until every frame queued so far is written (or the connection closed)."""
        target = self._queued_count
        if self._written_count >= target:
            await trio.lowlevel.checkpoint()  # written right away: still a checkpoint, as callers expect
        while self._written_count < target and not self.closed:
            await self._written.wait()

    async def _send_quietly(self, message: Message) -> None:
        """Send a last frame (an error before closing) and wait, a second at most, until it is out."""
        with trio.move_on_after(1):
            try:
                await self._send(message)
                await self.flush()
            except Exception:
                pass

    def _finish(self) -> None:
        if self._limits is not None:
            self._limits.buffered(-self._accounted)
            self._accounted = 0
        if self._on_close is not None and not self._closed.is_set():
            self._on_close(self.close_reason or "the connection closed")
        self._closed.set()
        self._drained.set()
        self._written.set()
        for pending in self._waiting.values():
            pending.done.set()  # with no reply: ConnectionLost
        self._waiting.clear()

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            with trio.move_on_after(1):
                await self.stream.aclose()


class _Pending:
    """A request waiting for its reply (None when the connection closed first)."""
    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.reply: Message | None = None


def _first_typed(group: BaseExceptionGroup) -> EventCloudError | None:
    for exc in group.exceptions:
        if isinstance(exc, EventCloudError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first_typed(exc)
            if found is not None:
                return found
    return None


def _error(ident: int, code: ErrorCode, text: str, hlc: int = 0) -> Message:
    return Message(Kind.ERROR, None, ident, hlc, {"code": ErrorCode(code).value, "message": text})


def _stamped(message: Message, hlc: int) -> Message:
    return Message(message.kind, message.op, message.id, hlc, message.body)


@asynccontextmanager
async def open_connection(stream: trio.abc.Stream, clock: HybridClock, **options: Any) -> AsyncIterator[RpcConnection]:
    """An RpcConnection over `stream` whose reader runs for the duration of the block."""
    conn = RpcConnection(stream, clock, **options)
    failure: BaseException | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run)
        try:
            yield conn
        except BaseException as exc:  # re-raised below, not wrapped in the nursery's group
            failure = exc
        finally:
            await conn.aclose()
            nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
