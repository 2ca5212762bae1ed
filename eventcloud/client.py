"""The Python SDK (trio, async): publish, query and subscribe through any entry peer.

    async with connect("127.0.0.1:7000") as client:
        sub = await client.subscribe("SELECT ?s WHERE { GRAPH ?g { ?s <http://ex/p> ?o } }")
        await client.publish(client.event([(s, p, o)]))
        async for note in sub:
            print(note.event, note.solutions)

One connection carries requests and the notifications pushed for its subscriptions. The
client keeps its own hybrid clock, sent with every request, so a publication issued after
`subscribe` returned is stamped after the subscription (the happen-before property). The
entry peer delivers each (subscription, event) pair once. Every failure is a `ClientError`
with a code (`eventcloud.errors.ErrorCode`) and a message saying what to do.
"""

from __future__ import annotations

import itertools
import json
import ssl
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

import trio

from eventcloud.errors import ConnectionLost, ErrorCode, EventCloudError, ModelError, RemoteError
from eventcloud.net.rpc import RpcConnection, open_connection
from eventcloud.net.tls import client_context
from eventcloud.net.transport import AddressError, TcpTransport, Transport
from eventcloud.rdf.model import IRI, CompoundEvent, Quad, Term, event_graph
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import (
    NOTIFICATION_KINDS, Admin, Counted, Delete, Deleted, Empty, Find, Left, Notification, Publish, Published, Quads,
    Receipt, Sparql, SparqlResult, Status, Subscribe, Subscribed, Unsubscribe,
)
from eventcloud.wire.ops import Op

__all__ = ["ClientError", "Client", "Subscription", "Notification", "PublishReceipt", "connect", "KINDS"]

KINDS = NOTIFICATION_KINDS
PublishReceipt = Receipt


class ClientError(EventCloudError):
    """A request failed; the message says why and what to do, the code what kind of failure."""

    default_code = ErrorCode.BAD_REQUEST


@dataclass
class Subscription:
    """An active subscription: an async iterator of its notifications.

    The iteration ends after `unsubscribe`; it raises ClientError when the connection to the
    entry peer is lost (so a subscriber never waits silently on a dead connection)."""

    id: str
    sparql: str
    kind: str
    _receive: trio.MemoryReceiveChannel = field(repr=False)
    _client: "Client" = field(repr=False)

    def __aiter__(self) -> "Subscription":
        return self

    async def __anext__(self) -> Notification:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            reason = self._client.lost
            if reason is not None and self.id not in self._client.unsubscribed:
                raise ClientError(f"subscription {self.id} ended: {reason}", ErrorCode.UNREACHABLE) from None
            raise StopAsyncIteration from None

    async def receive(self) -> Notification:
        return await self.__anext__()

    async def unsubscribe(self) -> None:
        await self._client.unsubscribe(self)


class Client:
    def __init__(self, conn: RpcConnection, source: str, *, publish_retry: float = 30.0) -> None:
        self._conn = conn
        self.source = source
        self.publish_retry = publish_retry  # seconds a publication is retried on transient failures
        self.retries = 0
        self._sequence = itertools.count()
        self._subscriptions: dict[str, trio.MemorySendChannel[Notification]] = {}
        self.unsubscribed: set[str] = set()
        self.dropped = 0
        self.lost: str | None = None

    async def call(self, op: Op, body: Any = None) -> dict[str, Any]:
        """One request to the entry peer; ClientError on any failure."""
        try:
            return await self._conn.call(op, body if body is not None else Empty())
        except RemoteError as exc:
            raise ClientError(exc.message, exc.code) from None
        except ConnectionLost as exc:
            raise ClientError(f"connection to the entry peer lost: {exc.message}", ErrorCode.UNREACHABLE) from None
        except EventCloudError as exc:
            raise ClientError(exc.message, exc.code) from None

    # --- publishing ---------------------------------------------------------------------------

    def event(self, triples: Iterable[tuple[Term, Term, Term]], graph: IRI | str | None = None) -> CompoundEvent:
        """A compound event from triples; the graph IRI is made from this client's source id,
        the time and a sequence number when none is given."""
        try:
            if graph is None:
                graph = event_graph(self.source, int(time.time() * 1000), next(self._sequence))
            elif isinstance(graph, str):
                graph = IRI(graph)
            return CompoundEvent.from_triples(graph, triples)
        except ModelError as exc:
            raise ClientError(exc.message, exc.code) from None

    async def publish(self, event: CompoundEvent) -> Receipt:
        """Store the event on the overlay; returns once every quad is stored. Publishing the
        same graph IRI again is a retry and never produces a second notification."""
        return (await self.publish_batch([event]))[0]

    async def publish_batch(self, events: list[CompoundEvent]) -> list[Receipt]:
        """Publish several events in one request: each stays atomic and idempotent on its
        own, but peers forward them together (one message per hop for the whole batch),
        which is how bulk loads and replays reach high throughput."""
        if not events:
            return []
        body = _encodable(Publish(tuple(events)))
        deadline = trio.current_time() + self.publish_retry
        delay = 0.1
        while True:
            try:
                reply = await self.call(Op.PUBLISH, body)
                return list(Published.from_wire(reply).receipts)
            except ClientError as exc:
                # Transient (a peer down, a zone being taken over): the same graph IRIs again is a
                # retry, which completes the publication without duplicates.
                if not exc.transient or self.lost is not None or trio.current_time() + delay > deadline:
                    raise
            self.retries += 1
            await trio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def publish_file(self, path: str | Path, format: str | None = None) -> tuple[int, int]:
        """Publish every event of an RDF file; (events, quads). The file is parsed fully
        first, so a malformed file publishes nothing."""
        from eventcloud.rdf.files import read_events

        events = read_events(path, format, source=self.source, sequence=next(self._sequence),
                             timestamp_ms=int(time.time() * 1000))
        for event in events:
            await self.publish(event)
        return len(events), sum(len(e) for e in events)

    async def publish_graph(self, graph: Any, iri: IRI | None = None) -> list[Receipt]:
        """Publish an rdflib Graph (one event) or Dataset (one event per named graph)."""
        from eventcloud.rdf.files import events_from_rdflib

        events = events_from_rdflib(graph, graph=iri, timestamp_ms=int(time.time() * 1000))
        return [await self.publish(e) for e in events]

    # --- reading ------------------------------------------------------------------------------

    async def find(self, g: Term | None = None, s: Term | None = None, p: Term | None = None,
                   o: Term | None = None) -> list[Quad]:
        return list(Quads.from_wire(await self.call(Op.FIND, Find((g, s, p, o)))).quads)

    async def count(self, g: Term | None = None, s: Term | None = None, p: Term | None = None,
                    o: Term | None = None) -> int:
        return Counted.from_wire(await self.call(Op.COUNT, Find((g, s, p, o)))).count

    async def query(self, sparql: str) -> Any:
        """One-time SPARQL over everything stored: SELECT/ASK give the SPARQL 1.1 JSON
        results as a dict; CONSTRUCT/DESCRIBE give N-Triples text."""
        result = SparqlResult.from_wire(await self.call(Op.SPARQL, Sparql(sparql)))
        return result.text if result.form == "graph" else json.loads(result.text)

    async def delete(self, graph: IRI | str) -> int:
        try:
            iri = graph if isinstance(graph, IRI) else IRI(graph)
        except ModelError as exc:
            raise ClientError(exc.message, exc.code) from None
        return Deleted.from_wire(await self.call(Op.DELETE, Delete(iri))).removed

    async def status(self) -> Status:
        return Status.from_wire(await self.call(Op.STATUS))

    async def leave(self) -> str:
        """Make the entry peer leave the overlay (its zone goes to a neighbour); the heir's id."""
        return Left.from_wire(await self.call(Op.LEAVE)).heir

    # --- subscribing --------------------------------------------------------------------------

    async def subscribe(self, sparql: str, kind: str = "bindings", buffer: int = 100_000) -> Subscription:
        """Register a SPARQL continuous query; returns once every responsible peer stored it.
        `kind`: "signal" (id and event), "bindings" (all distinct solutions) or "event"
        (every quad of the matching compound event)."""
        if kind not in KINDS:
            raise ClientError(f"unknown notification kind {kind!r}: use one of {', '.join(KINDS)}")
        send, receive = trio.open_memory_channel[Notification](buffer)
        reply = Subscribed.from_wire(await self.call(Op.SUBSCRIBE, Subscribe(sparql, kind)))
        if self.lost is not None:
            send.close()
        self._subscriptions[reply.id] = send
        return Subscription(reply.id, sparql, kind, receive, self)

    async def unsubscribe(self, subscription: Subscription | str) -> None:
        """After this returns, no notification for the subscription reaches the application."""
        ident = subscription.id if isinstance(subscription, Subscription) else subscription
        self.unsubscribed.add(ident)
        send = self._subscriptions.pop(ident, None)
        if send is not None:
            send.close()
        await self.call(Op.UNSUBSCRIBE, Unsubscribe(ident))

    def _on_push(self, conn: RpcConnection, op: Op, body: dict[str, Any]) -> None:
        if op is not Op.NOTIFICATION:
            return
        send = self._subscriptions.get(body.get("subscription", ""))
        if send is None:
            return
        try:
            note = Notification.from_wire(body)
        except EventCloudError:
            self.dropped += 1
            return
        try:
            send.send_nowait(note)
        except (trio.WouldBlock, trio.ClosedResourceError):
            self.dropped += 1

    def _connection_ended(self, reason: str) -> None:
        self.lost = reason
        for send in self._subscriptions.values():
            send.close()


def _encodable(body: Publish) -> Publish:
    """Refuse, with a ClientError, what msgpack cannot carry (e.g. a lone surrogate in a literal)."""
    for event in body.events:
        for quad in event.quads:
            for term in quad:
                text = term.value if type(term) is IRI else term.lexical  # type: ignore[union-attr]
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise ClientError(f"event {event.graph.value}: {term.n3()[:60]} is not valid Unicode text "
                                      f"({exc.reason})", ErrorCode.BAD_REQUEST) from None
    return body


@asynccontextmanager
async def connect(address: str, *, transport: Transport | None = None, source: str | None = None,
                  physical_ms=lambda: int(time.time() * 1000), publish_retry: float = 30.0,
                  admin_token: str | None = None, tls: ssl.SSLContext | str | Path | bool | None = None,
                  ) -> AsyncIterator[Client]:
    """Open a client connection to an entry peer (any peer of the overlay).

    A publication that fails for a transient reason (a peer down, its zone being taken over) is
    retried with backoff for up to `publish_retry` seconds (0: never) before the error is raised.
    `admin_token` is presented at once, for `leave` and `delete` on overlays that require it.
    `tls`: connect with TLS, verifying the peer against a CA file (a path), the system's CAs
    (True), or an `ssl.SSLContext` of your own."""
    if transport is None:
        transport = TcpTransport(client_tls=_tls_context(tls)) if tls else TcpTransport()
    try:
        stream = await transport.connect(address)
    except (ConnectionLost, AddressError) as exc:
        raise ClientError(f"{exc.message}; is a peer running there? start one with `eventcloud peer` or "
                          f"`eventcloud cluster`", ErrorCode.UNREACHABLE) from None
    clock = HybridClock(physical_ms)
    client: Client | None = None

    def on_push(conn: RpcConnection, op: Op, body: dict[str, Any]) -> None:
        if client is not None:
            client._on_push(conn, op, body)

    def on_close(reason: str) -> None:
        if client is not None and client.lost is None:
            client._connection_ended(reason)

    async with open_connection(stream, clock, on_push=on_push, on_close=on_close, name=f"client->{address}") as conn:
        client = Client(conn, source or f"client-{id(conn):x}", publish_retry=publish_retry)
        if admin_token is not None:
            await client.call(Op.ADMIN, Admin(admin_token))
        failure: BaseException | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_keepalive, conn)
            try:
                yield client
            except BaseException as exc:  # re-raised below, not wrapped in the nursery's group
                failure = exc
            finally:
                client._connection_ended("the client was closed")
                nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure


def _tls_context(tls: ssl.SSLContext | str | Path | bool) -> ssl.SSLContext:
    if isinstance(tls, ssl.SSLContext):
        return tls
    try:
        return client_context(None if tls is True else tls)
    except EventCloudError as exc:
        raise ClientError(exc.message, exc.code) from None


#: Seconds between pings on an otherwise quiet connection (peers close connections idle for minutes).
KEEPALIVE = 60.0


async def _keepalive(conn: RpcConnection) -> None:
    while not conn.closed:
        await trio.sleep(KEEPALIVE)
        try:
            await conn.call(Op.PING, Empty())
        except EventCloudError:
            return
