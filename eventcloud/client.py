"""The Python SDK (trio, async): publish, query and subscribe through any entry peer.

    async with connect("127.0.0.1:7000") as client:
        sub = await client.subscribe("SELECT ?s WHERE { GRAPH ?g { ?s <http://ex/p> ?o } }")
        await client.publish(client.event([(s, p, o)]))
        async for note in sub:
            print(note.event, note.solutions)

One connection carries requests and the notifications pushed for its subscriptions. The
client keeps its own hybrid clock, sent with every request, so a publication issued after
`subscribe` returned is stamped after the subscription (the happen-before property).
Notifications are deduplicated per (subscription, event) before the application sees them.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import OrderedDict
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

import trio

from eventcloud.wire.hlc import HybridClock
from eventcloud.rdf.model import IRI, CompoundEvent, Quad, Term, event_graph
from eventcloud.wire.frames import (
    NOTIFICATION_KINDS,
    ProtocolError,
    event_to_wire,
    pattern_to_wire,
    quad_from_wire,
    term_from_wire,
)
from eventcloud.net.rpc import ConnectionLost, RemoteError, RpcConnection
from eventcloud.net.transport import AddressError, TcpTransport, Transport, Unreachable

KINDS = NOTIFICATION_KINDS


class ClientError(Exception):
    """A request failed; the message says why and what to do."""

    def __init__(self, message: str, code: str = "failed") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Notification:
    subscription: str
    event: str                                   # the compound event's graph IRI
    kind: str                                    # signal | bindings | event
    solutions: tuple[dict[str, Term], ...] = ()  # bindings kind: every distinct solution
    quads: tuple[Quad, ...] = ()                 # event kind: every quad of the event
    published: int = 0                           # hybrid-clock publication time
    error: str | None = None                     # set when the peer could not complete it


@dataclass
class Subscription:
    """An active subscription: an async iterator of its notifications."""

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
            raise StopAsyncIteration from None

    async def receive(self) -> Notification:
        return await self._receive.receive()

    async def unsubscribe(self) -> None:
        await self._client.unsubscribe(self)


@dataclass(frozen=True)
class PublishReceipt:
    graph: str
    published: int
    quads: int


class Client:
    def __init__(self, conn: RpcConnection, source: str) -> None:
        self._conn = conn
        self.source = source
        self._sequence = itertools.count()
        self._subscriptions: dict[str, tuple[trio.MemorySendChannel, OrderedDict]] = {}
        self.duplicates_filtered = 0
        self.dropped = 0

    async def _call(self, op: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self._conn.call(op, body)
        except RemoteError as exc:
            raise ClientError(exc.message, exc.code) from None
        except ConnectionLost as exc:
            raise ClientError(f"connection to the entry peer lost: {exc}", "unreachable") from None
        except ProtocolError as exc:
            raise ClientError(str(exc), exc.code) from None

    # --- publishing ---------------------------------------------------------------------

    def event(self, triples: Iterable[tuple[Term, Term, Term]], graph: IRI | str | None = None) -> CompoundEvent:
        """A compound event from triples; the graph IRI is made from this client's source
        id, the time and a sequence number when none is given."""
        if graph is None:
            graph = event_graph(self.source, int(time.time() * 1000), next(self._sequence))
        elif isinstance(graph, str):
            graph = IRI(graph)
        return CompoundEvent.from_triples(graph, triples)

    async def publish(self, event: CompoundEvent) -> PublishReceipt:
        """Store the event on the overlay; returns once every quad is stored. Publishing the
        same graph IRI again is a retry and never produces a second notification."""
        reply = await self._call("publish", {"ev": event_to_wire(event)})
        return PublishReceipt(reply["g"], reply["t"], reply["n"])

    async def publish_batch(self, events: list[CompoundEvent]) -> list[PublishReceipt]:
        """Publish several events in one request: each stays atomic and idempotent on its
        own, but peers forward them together (one message per hop for the whole batch),
        which is how bulk loads and replays reach high throughput."""
        if not events:
            return []
        reply = await self._call("publish", {"evs": [event_to_wire(e) for e in events]})
        return [PublishReceipt(r["g"], r["t"], r["n"]) for r in reply["receipts"]]

    async def publish_file(self, path: str | Path, format: str | None = None) -> tuple[int, int]:
        """Publish every event of an RDF file; (events, quads). The file is parsed fully
        first, so a malformed file publishes nothing."""
        from eventcloud.rdf.files import read_events

        events = read_events(path, format, source=self.source, sequence=next(self._sequence))
        quads = 0
        for event in events:
            await self.publish(event)
            quads += len(event)
        return len(events), quads

    async def publish_graph(self, graph: Any, iri: IRI | None = None) -> list[PublishReceipt]:
        """Publish an rdflib Graph (one event) or Dataset (one event per named graph)."""
        from eventcloud.rdf.files import events_from_rdflib

        return [await self.publish(e) for e in events_from_rdflib(graph, graph=iri)]

    # --- reading ------------------------------------------------------------------------

    async def find(self, g: Term | None = None, s: Term | None = None, p: Term | None = None,
                   o: Term | None = None) -> list[Quad]:
        reply = await self._call("find", {"p": pattern_to_wire((g, s, p, o))})
        return [quad_from_wire(q) for q in reply["quads"]]

    async def count(self, g: Term | None = None, s: Term | None = None, p: Term | None = None,
                    o: Term | None = None) -> int:
        return (await self._call("count", {"p": pattern_to_wire((g, s, p, o))}))["count"]

    async def query(self, sparql: str) -> Any:
        """One-time SPARQL over everything stored: SELECT/ASK give the SPARQL 1.1 JSON
        results as a dict; CONSTRUCT/DESCRIBE give N-Triples text."""
        reply = await self._call("sparql", {"query": sparql})
        if reply["form"] == "graph":
            return reply["ntriples"]
        return json.loads(reply["json"])

    async def delete(self, graph: IRI | str) -> int:
        value = graph.value if isinstance(graph, IRI) else graph
        return (await self._call("delete", {"g": value}))["removed"]

    async def status(self) -> dict[str, Any]:
        return await self._call("status", {})

    # --- subscribing --------------------------------------------------------------------

    async def subscribe(self, sparql: str, kind: str = "bindings", buffer: int = 100_000) -> Subscription:
        """Register a SPARQL continuous query; returns once every responsible peer stored it.
        `kind`: "signal" (id and event), "bindings" (all distinct solutions) or "event"
        (every quad of the matching compound event)."""
        if kind not in KINDS:
            raise ClientError(f"unknown notification kind {kind!r}: use one of {', '.join(KINDS)}", "bad-request")
        send, receive = trio.open_memory_channel[Notification](buffer)
        reply = await self._call("subscribe", {"sparql": sparql, "kind": kind})
        self._subscriptions[reply["id"]] = (send, OrderedDict())
        return Subscription(reply["id"], sparql, kind, receive, self)

    async def unsubscribe(self, subscription: Subscription | str) -> None:
        """After this returns, no notification for the subscription reaches the application."""
        ident = subscription.id if isinstance(subscription, Subscription) else subscription
        entry = self._subscriptions.pop(ident, None)
        if entry is not None:
            entry[0].close()
        await self._call("unsubscribe", {"id": ident})

    async def _on_push(self, conn: RpcConnection, op: str, body: dict[str, Any]) -> None:
        if op != "notification":
            return
        entry = self._subscriptions.get(body.get("subscription", ""))
        if entry is None:
            return
        send, seen = entry
        event = body.get("event", "")
        if event in seen:
            self.duplicates_filtered += 1
            return
        seen[event] = None
        if len(seen) > 500_000:
            seen.popitem(last=False)
        note = Notification(
            subscription=body["subscription"], event=event, kind=body.get("kind", ""),
            solutions=tuple({k: term_from_wire(v) for k, v in s.items()} for s in body.get("solutions", ())),
            quads=tuple(quad_from_wire(q) for q in body.get("quads", ())),
            published=body.get("t", 0), error=body.get("error"),
        )
        try:
            send.send_nowait(note)
        except (trio.WouldBlock, trio.ClosedResourceError):
            self.dropped += 1

    def _close_all(self) -> None:
        for send, _ in self._subscriptions.values():
            send.close()


@asynccontextmanager
async def connect(address: str, *, transport: Transport | None = None, source: str | None = None,
                  physical_ms=lambda: int(time.time() * 1000)) -> AsyncIterator[Client]:
    """Open a client connection to an entry peer (any peer of the overlay)."""
    transport = transport or TcpTransport()
    try:
        stream = await transport.connect(address)
    except (Unreachable, AddressError) as exc:
        raise ClientError(f"{exc}; is a peer running there? start one with `eventcloud peer` or `eventcloud cluster`",
                          "unreachable") from None
    clock = HybridClock(physical_ms)
    conn = RpcConnection(stream, clock, name=f"client->{address}")
    client = Client(conn, source or f"client-{id(conn):x}")
    conn.on_push = client._on_push
    failure: BaseException | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run)
        try:
            yield client
        except BaseException as exc:  # re-raised below, not wrapped in the nursery's group
            failure = exc
        finally:
            client._close_all()
            await conn.aclose()
            nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
