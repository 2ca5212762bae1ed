"""The SDK's connection to the overlay: one entry peer at a time, another when it dies.

A `Link` is given seed addresses, connects to the first that answers (presenting the admin
token if it has one) and learns more entry points from it (its neighbours). When the
connection ends, the link reconnects, with backoff, to the next address that answers, for up
to `reconnect` seconds; requests wait meanwhile, and those that can safely run twice (reads,
publications of the same graph IRIs, attach, ack) run again on the new connection. Whoever
uses the link learns of each change through `on_event` (a line for people) and `on_connect`
(to re-attach durable subscriptions), and of the end through `on_lost`.
"""

from __future__ import annotations

import math

import logging
import random
from typing import Any, Awaitable, Callable

import trio

from eventcloud.errors import ConnectionLost, ErrorCode, EventCloudError, RemoteError
from eventcloud.net.rpc import RpcConnection, open_connection
from eventcloud.net.transport import AddressError, Transport
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import Admin, Empty, OverlayInfo, Publisher
from eventcloud.wire.ops import Op

log = logging.getLogger(__name__)

__all__ = ["ClientError", "Link", "IDEMPOTENT"]

#: Operations a link runs again on a new connection when the old one died before the reply.
IDEMPOTENT = frozenset({Op.PING, Op.OVERLAY_INFO, Op.PUBLISH, Op.FIND, Op.COUNT, Op.SPARQL, Op.STATUS, Op.ATTACH,
                        Op.ACK, Op.RENEW, Op.DELETE, Op.SUBSCRIPTIONS})
#: Seconds between pings on an otherwise quiet connection: peers close connections idle for
#: minutes, and a subscriber that only listens learns this way of an entry peer gone silent.
KEEPALIVE = 15.0
#: Seconds a request may wait with nothing at all heard from the entry peer (a live one answers
#: a ping however long the request takes) before the connection counts as dead: requests that
#: can run twice run again through another peer (`RpcConnection`'s liveness).
LIVENESS = 10.0


class ClientError(EventCloudError):
    """A request failed; the message says why and what to do, the code what kind of failure."""

    default_code = ErrorCode.BAD_REQUEST


#: Seconds a new connection may take to answer its first requests: a server that accepts and
#: never answers (an HTTP server waiting for a request line) is reported, not waited on forever.
HANDSHAKE_TIMEOUT = 10.0


class Link:
    def __init__(self, seeds: list[str], transport: Transport, clock: HybridClock, *, admin_token: str | None,
                 publish_token: str | None = None,
                 reconnect: float, on_push: Callable[[Op, dict[str, Any]], None],
                 on_connect: Callable[[], Awaitable[None]], on_disconnect: Callable[[], None],
                 on_lost: Callable[[str], None], on_event: Callable[[str], None],
                 request_timeout: float = 0.0, liveness: float = LIVENESS) -> None:
        self.addresses = list(dict.fromkeys(seeds))   # seeds first, then what the overlay told us
        self.request_timeout = request_timeout         # seconds one request may wait for its answer (0: no limit)
        self.liveness = liveness                       # seconds of silence from the entry while requests wait: dead
        self.transport = transport
        self.clock = clock
        self.admin_token = admin_token
        self.publish_token = publish_token
        self.reconnect = reconnect
        self.on_push = on_push
        self.on_connect = on_connect
        self.on_disconnect = on_disconnect
        self.on_lost = on_lost
        self.on_event = on_event
        self.conn: RpcConnection | None = None
        self.address: str | None = None
        self.lost: str | None = None       # set once for good: closed, or no peer answered in time
        self.closing = False
        self.reconnects = 0
        self._ready = trio.Event()
        self._tried: str | None = None   # the address the link dialled last
        self._rng = random.Random()

    # --- the supervisor -------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep a connection until closed; `started` once the first one is up (ClientError if no
        seed answers)."""
        first = True
        reason = ""
        try:
            while not self.closing:
                stream, address = await self._dial(first, reason)
                if stream is None:
                    return
                reason = await self._serve(stream, address, task_status if first else None)
                first = False
                if self.closing:
                    return
                self.on_event(f"connection to {address} lost ({reason}); reconnecting")
        finally:
            self._give_up(self.lost or "the client was closed")

    async def _dial(self, first: bool, reason: str) -> tuple[Any, str]:
        """A stream to the next address that answers; (None, "") when the time is up."""
        if not first and self.reconnect <= 0:
            self.lost = f"connection to the entry peer lost ({reason})"
            return None, ""
        deadline = trio.current_time() + (0 if first else self.reconnect)
        delay = 0.1
        errors: dict[str, str] = {}
        # after the address tried last: one that accepts but refuses (a peer rejoining serves no
        # zone yet) must not be the only one tried, round after round
        tried = self._tried or self.address
        start = 0 if first or tried not in self.addresses else self.addresses.index(tried) + 1
        while True:
            order = self.addresses[start:] + self.addresses[:start]
            for address in order:
                self._tried = address
                try:
                    return await self.transport.connect(address), address
                except (ConnectionLost, AddressError) as exc:
                    errors[address] = exc.message
            if first:
                tried = "; ".join(errors.values())
                raise ClientError(f"{tried}; is a peer running there? start one with `eventcloud peer` or "
                                  f"`eventcloud cluster`", ErrorCode.UNREACHABLE)
            if trio.current_time() + delay > deadline:
                self.lost = (f"connection to the overlay lost ({reason}) and no peer answered within "
                             f"{self.reconnect:g} s (tried {', '.join(order)})")
                return None, ""
            await trio.sleep(delay * (0.5 + self._rng.random()))
            delay = min(delay * 2, 2.0)

    async def _serve(self, stream: trio.abc.Stream, address: str, task_status: Any) -> str:
        """Use one connection until it closes; the reason it closed."""
        closed: list[str] = []

        def on_close(why: str) -> None:
            closed.append(why)
            if self._ready.is_set():  # requests wait for the next connection; those waiting already
                self._ready = trio.Event()  # keep waiting on the event it will set (not a fresh one)
            self.on_disconnect()

        async with open_connection(stream, self.clock, on_push=lambda conn, op, body: self.on_push(op, body),
                                   on_close=on_close, name=f"client->{address}",
                                   liveness=self.liveness or None) as conn:
            try:
                with trio.fail_after(HANDSHAKE_TIMEOUT):
                    if self.admin_token is not None:
                        await conn.call(Op.ADMIN, Admin(self.admin_token))
                    if self.publish_token is not None:
                        await conn.call(Op.PUBLISHER, Publisher(self.publish_token))
                    info = OverlayInfo.from_wire(await conn.call(Op.OVERLAY_INFO, Empty()))
            except trio.TooSlowError:
                message = (f"{address} accepted the connection but did not answer within {HANDSHAKE_TIMEOUT:g} s: "
                           f"is it an EventCloud peer (not an HTTP server or another service)?")
                if task_status is not None:
                    raise ClientError(message, ErrorCode.UNREACHABLE) from None
                return message
            except RemoteError as exc:
                if task_status is not None:
                    raise ClientError(exc.message, exc.code) from None
                return exc.message
            except ConnectionLost as exc:
                if task_status is not None:
                    hint = "" if getattr(self.transport, "client_tls", None) is not None or "HTTP" in exc.message else (
                        "; if the overlay serves TLS, connect with --tls-ca FILE (SDK: tls=…)")
                    raise ClientError(f"{address}: {exc.message}{hint}", ErrorCode.UNREACHABLE) from None
                return exc.message
            for known in info.peers:
                if known not in self.addresses:
                    self.addresses.append(known)
            self.conn, self.address = conn, address
            if not closed:
                self._ready.set()
            if task_status is None:
                self.reconnects += 1
                self.on_event(f"reconnected to {address}")
            else:
                task_status.started()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._keepalive, conn)
                if task_status is None:
                    nursery.start_soon(self.on_connect)
                await conn.wait_closed()
                nursery.cancel_scope.cancel()
        return closed[0] if closed else "closed"

    def _give_up(self, reason: str) -> None:
        if self.lost is None:
            self.lost = reason
        self._ready.set()  # waiting requests wake up and fail
        self.on_lost(self.lost)

    async def _keepalive(self, conn: RpcConnection) -> None:
        while not conn.closed:
            await trio.sleep(KEEPALIVE)
            try:
                await conn.call(Op.PING, Empty())
            except EventCloudError:
                return

    async def close(self) -> None:
        self.closing = True
        self.lost = self.lost or "the client was closed"
        if self.conn is not None:
            await self.conn.aclose()

    # --- requests -------------------------------------------------------------------------------

    async def connection(self) -> RpcConnection:
        """The current connection, waiting while the link reconnects; ClientError once it gave up."""
        await self._ready.wait()
        if self.lost is not None or self.conn is None:
            raise ClientError(f"no connection to the overlay: {self.lost}", ErrorCode.UNREACHABLE)
        return self.conn

    async def call(self, op: Op, body: Any) -> dict[str, Any]:
        """One request; run again on the next connection if the connection died first and the
        operation is idempotent. ClientError on any failure; a `timeout` one after
        `request_timeout`, whatever it waited for (the answer, a connection, a reconnection)."""
        with trio.move_on_after(self.request_timeout or math.inf):
            return await self._call(op, body)
        raise ClientError(f"no answer to {op.value} within {self.request_timeout:g} s (request_timeout); "
                          f"it may still be done: retry it if running it twice is harmless", ErrorCode.TIMEOUT)

    async def _call(self, op: Op, body: Any) -> dict[str, Any]:
        while True:
            conn = await self.connection()
            try:
                return await conn.call(op, body)
            except RemoteError as exc:
                raise ClientError(exc.message, exc.code) from None
            except ConnectionLost as exc:
                if op not in IDEMPOTENT or self.closing or self.reconnect <= 0:
                    raise ClientError(f"connection to the entry peer lost: {exc.message}",
                                      ErrorCode.UNREACHABLE) from None
                await conn.wait_closed()
            except EventCloudError as exc:
                raise ClientError(exc.message, exc.code) from None
