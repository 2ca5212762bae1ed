"""Live subscriptions over HTTP: Server-Sent Events streams and WebSocket sessions.

Every subscription made through the gateway is *durable* in the overlay: its notifications are
numbered 1, 2, 3, … and kept by the subscription's home until acknowledged, so a subscriber
that reconnects continues exactly after the last number it saw (SSE: `Last-Event-ID`,
WebSocket: `resume` with `after`).

When is a notification acknowledged (and forgotten by the overlay)? HTTP says nothing about
what a client received, so the gateway acknowledges a number only once it was written to
the stream at least `ack_delay` seconds (30) earlier, or when the client itself says so: an
SSE reconnection with `Last-Event-ID: N`, a WebSocket `ack`. A client that comes back
within `ack_delay` of a broken connection therefore loses nothing, whatever was in flight.

A stream opened with the subscription as a parameter (`GET /subscriptions/stream?query=…`)
creates an *ad-hoc* subscription that this gateway remembers (`Streams`): reconnecting to
the same URL with `Last-Event-ID` resumes it (a cookie tells apart several streams of one
query); one left without a subscriber for `linger` seconds (300) is cancelled. Subscriptions
created with `POST /subscriptions` are the caller's to keep (id and ticket), resumable from
any gateway, until their lease ends or they are cancelled.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import trio

from eventcloud.client import Client, ClientError, Subscription
from eventcloud.web import sse
from eventcloud.web.http import HttpError, from_code
from eventcloud.web.messages import WsError, notification_json, parse_ws, ws_error, ws_notification
from eventcloud.web.overlay import Overlay, translated

log = logging.getLogger(__name__)

__all__ = ["Streams", "DelayedAcks", "Held", "Send", "Receive", "stream_key"]

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]
#: What opens (or resumes) a stream's subscription on its own connection: (subscription, the
#: `subscribed` event's data).
Opener = Callable[[Client], Awaitable[tuple[Subscription, dict[str, Any]]]]


class DelayedAcks:
    """Which numbers may be acknowledged: those written at least `delay` seconds ago."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._written: deque[tuple[float, int]] = deque()

    def written(self, seq: int, now: float) -> None:
        if seq:
            self._written.append((now, seq))

    def due(self, now: float) -> int | None:
        highest = None
        while self._written and self._written[0][0] <= now - self.delay:
            highest = self._written.popleft()[1]
        return highest


@dataclass
class Held:
    """An ad-hoc subscription this gateway made for an SSE stream and keeps for its return."""

    id: str
    ticket: str
    key: str                       # hash of (query, kind, principal): which URL it answers
    attached: bool = True
    left_at: float = 0.0           # trio time the stream ended
    last_sent: int = 0
    renewed_at: float = field(default=0.0)


def stream_key(query: str, kind: str, principal: str) -> str:
    return hashlib.sha256("\x00".join((query, kind, principal)).encode("utf-8")).hexdigest()[:16]


class Streams:
    def __init__(self, overlay: Overlay, *, ack_delay: float = 30.0, linger: float = 300.0,
                 lease: float = 3600.0, keepalive: float = 15.0, retry_ms: int = 2000) -> None:
        self.overlay = overlay
        self.ack_delay = ack_delay
        self.linger = linger
        self.lease = lease
        self.keepalive = keepalive
        self.retry_ms = retry_ms
        self.release_wait = 5.0
        self.held: dict[str, Held] = {}
        self.attached: set[str] = set()     # subscription ids streamed through this gateway now
        self.notifications = 0              # sent over SSE and WebSocket, for /status

    # --- ad-hoc subscriptions ---------------------------------------------------------------------

    async def find(self, key: str, cookie: str | None) -> Held | None:
        """The ad-hoc subscription a reconnecting stream of `key` continues (None: none is kept);
        409 when several could be. A reconnection may overtake the end of the stream it replaces:
        the one candidate still streamed is waited for (`release_wait` seconds)."""
        if cookie and cookie in self.held and self.held[cookie].key == key:
            return self.held[cookie]
        candidates = [h for h in self.held.values() if h.key == key]
        waiting = [h for h in candidates if not h.attached]
        if len(waiting) > 1:
            raise HttpError(409, f"{len(waiting)} streams of this query await their subscriber: reconnect to "
                                 f"/subscriptions/ID/stream with the id and ticket of the `subscribed` event")
        if waiting:
            return waiting[0]
        return candidates[0] if len(candidates) == 1 else None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Cancel ad-hoc subscriptions left alone past `linger`; renew the leases of attached ones."""
        task_status.started()
        while True:
            await trio.sleep(min(5.0, self.linger / 2))
            now = trio.current_time()
            for held in list(self.held.values()):
                try:
                    if not held.attached and now - held.left_at >= self.linger:
                        self.held.pop(held.id, None)
                        with self.overlay.request():
                            await self.overlay.client().unsubscribe(held.id, held.ticket)
                    elif held.attached and now - held.renewed_at >= self.lease / 2:
                        with self.overlay.request():
                            await self.overlay.client().renew(held.id, held.ticket, self.lease)
                        held.renewed_at = now
                except HttpError as exc:
                    log.info("gateway: subscription %s: %s", held.id, exc.message)

    async def claim(self, ident: str) -> None:
        """Mark a subscription streamed here; a stream of it that is ending is waited for, one
        still going after `release_wait` seconds makes this 409."""
        with trio.move_on_after(self.release_wait):
            while ident in self.attached:
                await trio.sleep(0.05)
        if ident in self.attached:
            raise HttpError(409, f"subscription {ident} is already streamed through this gateway; close that "
                                 f"stream first")
        self.attached.add(ident)
        if ident in self.held:
            self.held[ident].attached = True

    def release(self, ident: str, last_sent: int) -> None:
        self.attached.discard(ident)
        held = self.held.get(ident)
        if held is not None:
            held.attached = False
            held.left_at = trio.current_time()
            held.last_sent = max(held.last_sent, last_sent)

    # --- Server-Sent Events -----------------------------------------------------------------------

    async def sse(self, send: Send, receive: Receive, opener: Opener, headers: list[tuple[str, str]],
                  on_open: Callable[[Subscription, dict[str, Any]], None] | None = None,
                  ident: str | None = None) -> None:
        """Open the subscription on a connection of its own, then stream until the client leaves or
        the subscription ends. Failures before the first byte are raised as HttpError. `ident`:
        the subscription's id when known before opening it (a resumption)."""
        if ident is not None:
            await self.claim(ident)
        claimed = ident
        try:
            async with self.overlay.session() as client:
                with translated():
                    sub, header = await opener(client)
                if claimed is None:
                    await self.claim(sub.id)
                    claimed = sub.id
                if on_open is not None:
                    on_open(sub, header)
                last = header.get("after", 0) or 0
                try:
                    await send({"type": "http.response.start", "status": 200, "headers": [
                        (k.encode("latin-1"), v.encode("latin-1")) for k, v in
                        [("content-type", "text/event-stream; charset=utf-8"), *sse.HEADERS, *headers]]})
                    await send({"type": "http.response.body", "more_body": True,
                                "body": sse.event(header, id=last, name="subscribed", retry_ms=self.retry_ms)})
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(_watch_disconnect, receive, nursery.cancel_scope)
                        last = await self._pump_sse(send, sub, last)
                        nursery.cancel_scope.cancel()
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                finally:
                    self.release(sub.id, last)
        finally:
            if claimed is not None and claimed in self.attached:
                self.release(claimed, 0)

    async def _pump_sse(self, send: Send, sub: Subscription, last: int) -> int:
        acks = DelayedAcks(self.ack_delay)
        while True:
            with trio.move_on_after(self.keepalive) as waited:
                try:
                    note = await sub.__anext__()
                except StopAsyncIteration:
                    return last
                except ClientError as exc:
                    await send({"type": "http.response.body", "more_body": True, "body": sse.event(
                        {"subscription": sub.id, "code": exc.code.value, "reason": exc.message}, name="end")})
                    return last
            if waited.cancelled_caught:
                await send({"type": "http.response.body", "body": sse.comment("keep-alive"), "more_body": True})
            else:
                await send({"type": "http.response.body", "more_body": True,
                            "body": sse.event(notification_json(note), id=note.seq)})
                self.notifications += 1
                last = max(last, note.seq)
                acks.written(note.seq, trio.current_time())
            due = acks.due(trio.current_time())
            if due is not None:
                sub.ack(due)

    # --- WebSocket --------------------------------------------------------------------------------

    async def websocket(self, send: Send, receive: Receive, authorized: Callable[[str | None], str | None]) -> None:
        """One WebSocket session (already accepted): SEPA-like JSON messages (eventcloud.web.messages).
        `authorized(authorization)` returns None when allowed, else why not."""
        lock = trio.Lock()

        async def say(text: str) -> None:
            async with lock:
                await send({"type": "websocket.send", "text": text})

        try:
            async with self.overlay.session() as client:
                await _WsSession(self, client, say, receive, authorized).run()
        except HttpError as exc:  # no connection to the overlay
            await say(ws_error(exc.status, exc.code or "unreachable", exc.message))
            await send({"type": "websocket.close", "code": 1011})


class _WsSession:
    def __init__(self, streams: Streams, client: Client, say: Callable[[str], Awaitable[None]], receive: Receive,
                 authorized: Callable[[str | None], str | None]) -> None:
        self.streams, self.client, self.say, self.receive, self.authorized = streams, client, say, receive, authorized
        self.subs: dict[str, tuple[Subscription, Any, bool, trio.CancelScope]] = {}

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                while True:
                    message = await self.receive()
                    if message["type"] == "websocket.disconnect":
                        break
                    if message["type"] != "websocket.receive":
                        continue
                    text = message.get("text") if message.get("text") is not None else message.get("bytes", b"")
                    try:
                        await self.handle(parse_ws(text))
                    except WsError as exc:
                        await self.say(ws_error(exc.status, exc.code, exc.message, exc.alias))
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                for ident, (sub, _, durable, _) in list(self.subs.items()):
                    self.streams.release(ident, sub.received)
                    if not durable:  # the socket's own subscriptions end with it
                        try:
                            await self.client.unsubscribe(sub)
                        except ClientError:
                            pass

    async def handle(self, request: Any) -> None:
        why = self.authorized(request.authorization)
        if why is not None and request.action != "ack":
            raise WsError(why, request.alias, 401 if "missing" in why else 403,
                          "unauthorized" if "missing" in why else "forbidden")
        try:
            if request.action in ("subscribe", "resume"):
                await self.open(request)
            elif request.action == "unsubscribe":
                await self.close(request)
            else:
                found = self.subs.get(request.spuid)
                if found is None:
                    raise WsError(f"no subscription {request.spuid} on this socket", request.alias, 404, "not-found")
                found[0].ack(request.sequence)
        except (HttpError, ClientError) as exc:
            status = exc.status if isinstance(exc, HttpError) else from_code(exc.code, exc.message).status
            code = exc.code if isinstance(exc, HttpError) else exc.code.value
            raise WsError(exc.message, request.alias, status, code or "bad-request") from None

    async def open(self, request: Any) -> None:
        if request.action == "subscribe":
            sub = await self.client.subscribe(request.sparql, kind=request.kind, durable=True,
                                              lease=self.streams.lease, auto_ack=False)
            after = 0
        else:
            if request.spuid in self.subs:
                raise WsError(f"subscription {request.spuid} is already open on this socket", request.alias, 409,
                              "conflict")
            sub = await self.client.resume(request.spuid, request.ticket, request.after, auto_ack=False)
            after = sub.resumed_after
            if request.after is not None:
                sub.ack(request.after)
        await self.streams.claim(sub.id)
        scope = trio.CancelScope()
        self.subs[sub.id] = (sub, request.alias, request.durable, scope)
        body = {"spuid": sub.id, "alias": request.alias, "kind": sub.kind, "durable": request.durable,
                "ticket": sub.ticket, "after": after, "expires": sub.expires}
        await self.say(_json({"subscribed": body}))
        self.nursery.start_soon(self.pump, sub, request.alias, scope)

    async def close(self, request: Any) -> None:
        found = self.subs.pop(request.spuid, None)
        if found is None:
            raise WsError(f"no subscription {request.spuid} on this socket", request.alias, 404, "not-found")
        sub, alias, _, scope = found
        scope.cancel()
        self.streams.release(sub.id, sub.received)
        await self.client.unsubscribe(sub)
        await self.say(_json({"unsubscribed": {"spuid": sub.id, "alias": alias}}))

    async def pump(self, sub: Subscription, alias: Any, scope: trio.CancelScope) -> None:
        acks = DelayedAcks(self.streams.ack_delay)
        with scope:
            while True:
                note = None
                with trio.move_on_after(self.streams.keepalive):  # the wait only: never a send cut short
                    try:
                        note = await sub.__anext__()
                    except StopAsyncIteration:
                        return
                    except ClientError as exc:
                        self.subs.pop(sub.id, None)
                        self.streams.release(sub.id, sub.received)
                        status = from_code(exc.code, exc.message).status
                        await self.say(ws_error(status, exc.code.value, exc.message, alias))
                        return
                if note is not None:
                    await self.say(ws_notification(note, alias))
                    self.streams.notifications += 1
                    acks.written(note.seq, trio.current_time())
                due = acks.due(trio.current_time())
                if due is not None:
                    sub.ack(due)


async def _watch_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)

