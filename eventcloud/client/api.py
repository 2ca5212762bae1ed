"""The SDK's client: publish, query and subscribe through the overlay (trio, async).

The client keeps its own hybrid clock, sent with every request, so a publication issued after
`subscribe` returned is stamped after the subscription (the happen-before property). Every
failure is a `ClientError` with a code (`eventcloud.errors.ErrorCode`) and a message saying
what to do. See `eventcloud.client` for an example.
"""

from __future__ import annotations

import itertools
import json
import ssl
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable

import trio

from eventcloud.client.link import LIVENESS, ClientError, Link
from eventcloud.client.results import ResultStream
from eventcloud.client.subscription import Subscription
from eventcloud.errors import ErrorCode, EventCloudError, ModelError
from eventcloud.net.tls import client_context
from eventcloud.net.transport import TcpTransport, Transport
from eventcloud.rdf.model import IRI, CompoundEvent, Quad, Term, event_graph
from eventcloud.sparql.taxonomy import Taxonomy
from eventcloud.wire.codec import quad_from_wire
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import (
    MAX_SUBSCRIBE_MANY, NOTIFICATION_KINDS, Ack, Attach, Attached, Counted, Delete, Deleted, Empty, Find, Left,
    Notification, Publish, Published, Quads, Receipt, Renew, Renewed, SchemaInfo, SchemaLoad, Sparql, SparqlResult,
    Status, Subscribe, SubscribeMany, Subscribed, SubscribedMany, SubscriptionInfo, SubscriptionList, Unsubscribe,
)
from eventcloud.wire.ops import Op

__all__ = ["Client", "connect", "KINDS"]

KINDS = NOTIFICATION_KINDS
#: Errors after which a durable subscription cannot be attached again.
_FINAL = frozenset({ErrorCode.GONE, ErrorCode.NOT_FOUND, ErrorCode.FORBIDDEN, ErrorCode.BAD_REQUEST})


#: Events one merged publish request carries at most.
COALESCED_PUBLISHES = 16


class _PublishBatch:
    __slots__ = ("events", "done", "receipts", "error")

    def __init__(self, events: list[CompoundEvent]) -> None:
        self.events = events
        self.done = trio.Event()
        self.receipts: list[Receipt] = []
        self.error: BaseException | None = None


class Client:
    def __init__(self, source: str, *, publish_retry: float = 30.0) -> None:
        self.source = source
        self.publish_retry = publish_retry  # seconds a publication is retried on transient failures
        self.retries = 0
        self.dropped = 0
        self._sequence = itertools.count()
        self._subscriptions: dict[str, Subscription] = {}
        self.unsubscribed: set[str] = set()
        self.link: Link = None  # type: ignore[assignment]  # set by connect()
        self._nursery: trio.Nursery | None = None
        self._acks = trio.Event()
        self._publishing: _PublishBatch | None = None   # the batch concurrent publishes join
        self.coalesced_retried = 0  # events published alone again after their merged request failed

    @property
    def lost(self) -> str | None:
        """Why the client has no connection any more (None while it has one or is reconnecting)."""
        return self.link.lost

    @property
    def address(self) -> str | None:
        """The entry peer it is connected to now."""
        return self.link.address

    async def call(self, op: Op, body: Any = None) -> dict[str, Any]:
        """One request to the entry peer; ClientError on any failure."""
        return await self.link.call(op, body if body is not None else Empty())

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
        same graph IRI again is a retry and never produces a second notification.

        Publishes that other tasks make on this client in the same scheduling round travel in
        one request (no waiting: at low load a publish goes out at once); each event keeps its
        own receipt, and if that request fails each is published again alone, so each gets its
        own error too."""
        batch = self._publishing
        if batch is not None and len(batch.events) < COALESCED_PUBLISHES:
            index = len(batch.events)
            batch.events.append(event)
            await batch.done.wait()
        else:
            batch, index = _PublishBatch([event]), 0
            self._publishing = batch
            try:
                await trio.lowlevel.checkpoint()  # the other tasks of this round may join
            finally:
                if self._publishing is batch:
                    self._publishing = None
            try:
                batch.receipts = await self.publish_batch(batch.events)
            except ClientError as exc:
                batch.error = exc
            except BaseException as exc:  # this task was cancelled: the others go alone
                batch.error = exc
                raise
            finally:
                batch.done.set()
        if batch.error is None:
            return batch.receipts[index]
        if len(batch.events) == 1:
            raise batch.error
        self.coalesced_retried += 1
        return (await self.publish_batch([event]))[0]

    async def publish_batch(self, events: list[CompoundEvent]) -> list[Receipt]:
        """Publish several events in one request: each stays atomic and idempotent on its own,
        but peers forward them together (one message per hop for the whole batch), which is how
        bulk loads and replays reach high throughput. Transient failures (a peer down, a zone
        being taken over, the entry peer lost) are retried with the same graph IRIs for up to
        `publish_retry` seconds: a retry completes the publication without duplicates."""
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

    # --- the class taxonomy -------------------------------------------------------------------

    async def load_schema(self, taxonomy: Taxonomy | str | Path, format: str | None = None) -> SchemaInfo:
        """Make `taxonomy` (a Taxonomy, or an RDF file of `rdfs:subClassOf` triples) the overlay's
        class taxonomy; the version it got and the peers that hold it already (the others catch
        up from their neighbours). Needs the admin token when the overlay has one."""
        if not isinstance(taxonomy, Taxonomy):
            from eventcloud.rdf.files import guess_format

            path = Path(taxonomy)
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise ClientError(f"cannot read {path}: {exc.strerror or exc}", ErrorCode.BAD_REQUEST) from None
            try:
                taxonomy = Taxonomy.from_rdf(data, format or guess_format(path), name=str(path))
            except EventCloudError as exc:
                raise ClientError(exc.message, exc.code) from None
        return SchemaInfo.from_wire(await self.call(Op.SCHEMA_LOAD, SchemaLoad(taxonomy)))

    async def schema(self) -> SchemaInfo:
        """The overlay's class taxonomy (as the entry peer holds it) and each peer's version."""
        return SchemaInfo.from_wire(await self.call(Op.SCHEMA))

    # --- reading ------------------------------------------------------------------------------

    async def find(self, g: Term | None = None, s: Term | None = None, p: Term | None = None,
                   o: Term | None = None) -> list[Quad]:
        """Every stored quad matching the pattern (None: any term), read page by page."""
        found: list[Quad] = []
        async with await self.find_stream(g, s, p, o) as quads:
            async for page in quads.pages():
                found.extend(page)
        return found

    async def find_stream(self, g: Term | None = None, s: Term | None = None, p: Term | None = None,
                          o: Term | None = None) -> ResultStream:
        """The quads matching the pattern as they come (`async with … as quads: async for quad in
        quads`), however many: neither side holds them all."""
        reply = Quads.from_wire(await self.call(Op.FIND, Find((g, s, p, o), page=True)))
        return ResultStream(self.call, list(reply.quads), reply.cursor, _quad)

    async def count(self, g: Term | None = None, s: Term | None = None, p: Term | None = None,
                    o: Term | None = None) -> int:
        return Counted.from_wire(await self.call(Op.COUNT, Find((g, s, p, o)))).count

    async def query(self, sparql: str) -> Any:
        """One-time SPARQL over everything stored: SELECT/ASK give the SPARQL 1.1 JSON
        results as a dict; CONSTRUCT/DESCRIBE give N-Triples text. A large SELECT is read
        page by page (see `query_stream` to handle its rows as they come)."""
        async with await self.query_stream(sparql) as answer:
            if answer.form == "graph":
                return answer.text
            if answer.form == "boolean":
                return {"head": {}, "boolean": answer.boolean}
            rows = []
            async for page in answer.pages():
                rows.extend(page)
        return {"head": {"vars": list(answer.variables)}, "results": {"bindings": rows}}

    async def query_stream(self, sparql: str) -> ResultStream:
        """A query's answer as it comes: a SELECT's rows (SPARQL 1.1 JSON terms by variable) with
        `async with … as rows: async for row in rows`, however many; `variables` names them.
        An ASK's answer is in `boolean`, a CONSTRUCT's or DESCRIBE's in `text` (N-Triples)."""
        result = SparqlResult.from_wire(await self.call(Op.SPARQL, Sparql(sparql, page=True)))
        if result.form == "graph":
            return ResultStream(self.call, [], "", _same, form="graph", text=result.text)
        if result.form == "boolean":
            return ResultStream(self.call, [], "", _same, form="boolean",
                                boolean=bool(json.loads(result.text).get("boolean")))
        if result.text:   # answered whole
            whole = json.loads(result.text)
            return ResultStream(self.call, whole["results"]["bindings"], "", _same,
                                variables=tuple(whole["head"].get("vars", ())))
        return ResultStream(self.call, list(result.rows), result.cursor, _same, variables=result.variables)

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

    async def subscribe(self, sparql: str, kind: str = "bindings", buffer: int = 100_000, *, durable: bool = False,
                        lease: float = 0.0, auto_ack: bool = True) -> Subscription:
        """Register a SPARQL continuous query; returns once every responsible peer stored it.

        `kind`: "signal" (id and event), "bindings" (all distinct solutions) or "event" (every
        quad of the matching compound event). `durable`: its notifications are kept (numbered)
        until acknowledged and it survives this connection: keep `sub.id` and `sub.ticket` to
        `resume` it from anywhere, `renew` it before `sub.expires` (`lease` seconds; 0: the
        peers' default, a day), or cancel it."""
        _check_kind(kind)
        reply = Subscribed.from_wire(await self.call(Op.SUBSCRIBE, Subscribe(sparql, kind, durable, lease)))
        return await self._made(reply, sparql, kind, buffer, auto_ack)

    async def subscribe_many(self, queries: Iterable[str], kind: str = "bindings", buffer: int = 100_000, *,
                             durable: bool = False, lease: float = 0.0, auto_ack: bool = True) -> list[Subscription]:
        """Register many continuous queries at once, in the order given; returns once every one
        is stored everywhere it must be (each with `subscribe`'s guarantees).

        Far cheaper than one `subscribe` each: one request per MAX_SUBSCRIBE_MANY queries, and
        the entry peer stores them all in one multicast. All or nothing: if any is refused, the
        ones made are cancelled and a ClientError names the first refused (its index and why)."""
        _check_kind(kind)
        texts = list(queries)
        made: list[Subscription] = []
        try:
            for start in range(0, len(texts), MAX_SUBSCRIBE_MANY):
                chunk = texts[start:start + MAX_SUBSCRIBE_MANY]
                reply = SubscribedMany.from_wire(await self.call(Op.SUBSCRIBE_MANY, SubscribeMany(tuple(
                    Subscribe(text, kind, durable, lease) for text in chunk))))
                if len(reply.outcomes) != len(chunk):
                    raise ClientError(f"the entry peer answered {len(reply.outcomes)} outcomes for {len(chunk)} "
                                      f"subscriptions", ErrorCode.INTERNAL)
                refused = None
                for index, outcome in enumerate(reply.outcomes, start):
                    if outcome.subscribed is not None:
                        made.append(await self._made(outcome.subscribed, texts[index], kind, buffer, auto_ack))
                    elif refused is None:
                        refused = ClientError(f"subscription {index} of {len(texts)} refused: {outcome.message}",
                                              outcome.code or ErrorCode.INTERNAL)
                if refused is not None:
                    raise refused
        except BaseException:
            with trio.CancelScope(shield=True), trio.move_on_after(30):
                for sub in made:
                    try:
                        await self.unsubscribe(sub)
                    except EventCloudError:
                        pass  # its lease ends it
            raise
        return made

    async def _made(self, reply: Subscribed, sparql: str, kind: str, buffer: int, auto_ack: bool) -> Subscription:
        sub = Subscription(reply.id, sparql, kind, self, durable=reply.durable, ticket=reply.ticket,
                           expires=reply.expires, auto_ack=auto_ack, buffer=buffer)
        self._subscriptions[sub.id] = sub
        if not sub.durable:
            if self.lost is not None:
                sub.end(ClientError(f"subscription {sub.id} ended: {self.lost}", ErrorCode.UNREACHABLE))
            return sub
        await self._attach(sub, 0)
        return sub

    async def resume(self, ident: str, ticket: str, after: int | None = None, *, buffer: int = 100_000,
                     auto_ack: bool = True) -> Subscription:
        """Attach a durable subscription made elsewhere (another connection, another process):
        notifications numbered after `after` follow (None: after the last one acknowledged)."""
        sub = Subscription(ident, "", "", self, durable=True, ticket=ticket, auto_ack=auto_ack, buffer=buffer)
        self._subscriptions[ident] = sub
        try:
            sub.resumed_after = (await self._attach(sub, after)).after
        except BaseException:
            self._subscriptions.pop(ident, None)
            raise
        return sub

    async def _attach(self, sub: Subscription, after: int | None) -> Attached:
        reply = Attached.from_wire(await self.call(Op.ATTACH, Attach(sub.id, sub.ticket, after)))
        sub.sparql, sub.kind, sub.expires = reply.sparql, reply.kind, reply.expires
        if after is None or reply.after > sub.received:
            sub.received = sub.delivered = reply.after
        sub.acked = max(sub.acked, reply.acked)
        return reply

    async def renew(self, ident: str, ticket: str, lease: float = 0.0) -> int:
        """Extend a durable subscription's lease; the new end (Unix ms)."""
        return Renewed.from_wire(await self.call(Op.RENEW, Renew(ident, ticket, lease))).expires

    async def unsubscribe(self, subscription: Subscription | str, ticket: str = "") -> None:
        """Cancel a subscription. After this returns, no notification for it reaches the
        application. A durable one is cancelled from anywhere with its ticket."""
        sub = subscription if isinstance(subscription, Subscription) else self._subscriptions.get(subscription)
        ident = subscription.id if isinstance(subscription, Subscription) else subscription
        if not ticket and sub is not None:
            ticket = sub.ticket
        self.unsubscribed.add(ident)
        found = self._subscriptions.pop(ident, None)
        if found is not None:
            found.end(None)
        await self.call(Op.UNSUBSCRIBE, Unsubscribe(ident, ticket))

    cancel = unsubscribe

    async def subscriptions(self) -> list[SubscriptionInfo]:
        """Every subscription of the overlay (needs the admin token when the overlay has one)."""
        return list(SubscriptionList.from_wire(await self.call(Op.SUBSCRIPTIONS)).subscriptions)

    # --- what the link reports ------------------------------------------------------------------

    def _on_push(self, op: Op, body: dict[str, Any]) -> None:
        sub = self._subscriptions.get(body.get("subscription", "")) if isinstance(body, dict) else None
        if sub is None:
            return
        if op is Op.ENDED:
            self._subscriptions.pop(sub.id, None)
            sub.end_remotely(body)
            return
        if op is not Op.NOTIFICATION:
            return
        try:
            note = Notification.from_wire(body)
        except EventCloudError:
            self.dropped += 1
            return
        if not sub.push(note):
            self.dropped += 1

    def _on_connection_lost(self) -> None:
        """Non-durable subscriptions end with the connection that made them."""
        for sub in list(self._subscriptions.values()):
            if not sub.durable:
                self._subscriptions.pop(sub.id, None)
                sub.end(ClientError(f"subscription {sub.id} ended: the connection to its entry peer was lost "
                                    f"(a durable subscription keeps its notifications across connections: "
                                    f"durable=True in the SDK, --durable on the command line)",
                                    ErrorCode.UNREACHABLE))

    async def _on_connect(self) -> None:
        """A new connection after a lost one: attach every durable subscription again."""
        for sub in list(self._subscriptions.values()):
            self._reattach_soon(sub)

    def _reattach_soon(self, sub: Subscription) -> None:
        if self._nursery is not None:
            try:
                self._nursery.start_soon(self._reattach, sub)
            except RuntimeError:
                pass  # the client is closing

    async def _reattach(self, sub: Subscription) -> None:
        delay = 0.2
        while sub.ended is None and self.lost is None and self._subscriptions.get(sub.id) is sub:
            try:
                await self._attach(sub, sub.received)
                return
            except ClientError as exc:
                if exc.code in _FINAL:
                    self._subscriptions.pop(sub.id, None)
                    sub.end(ClientError(f"subscription {sub.id} ended: {exc.message}", exc.code))
                    return
            await trio.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _on_lost(self, reason: str) -> None:
        for sub in list(self._subscriptions.values()):
            sub.end(ClientError(f"subscription {sub.id} ended: {reason}", ErrorCode.UNREACHABLE))

    def _acks_wanted(self) -> None:
        self._acks.set()

    async def _send_acks(self) -> None:
        """Acknowledgements in the background: the newest wanted of each durable subscription."""
        while True:
            await self._acks.wait()
            self._acks = trio.Event()
            for sub in list(self._subscriptions.values()):
                if sub.ack_wanted > sub.acked and sub.ended is None:
                    seq = sub.ack_wanted
                    try:
                        await self.call(Op.ACK, Ack(sub.id, seq))
                        sub.acked = max(sub.acked, seq)
                    except ClientError:
                        pass  # not attached right now: acknowledged after the re-attachment
            if any(s.ack_wanted > s.acked and s.ended is None for s in self._subscriptions.values()):
                await trio.sleep(0.5)
                self._acks.set()


def _same(item: Any) -> Any:
    return item


def _quad(item: Any) -> Quad:
    """A quad of a page (the first page's are decoded already). Its terms were checked when it
    was published: only its shape is (checking every IRI again cost 24 µs a quad, a whole
    store's export 4 s per 100,000)."""
    if isinstance(item, Quad):
        return item
    try:
        return quad_from_wire(item, trusted=True)
    except EventCloudError as exc:
        raise ClientError(f"the overlay sent a malformed quad: {exc.message}", ErrorCode.PROTOCOL) from None


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ClientError(f"unknown notification kind {kind!r}: use one of {', '.join(KINDS)}")


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
async def connect(address: str | list[str] | tuple[str, ...], *, transport: Transport | None = None,
                  source: str | None = None, physical_ms: Callable[[], int] = lambda: int(time.time() * 1000),
                  publish_retry: float = 30.0, admin_token: str | None = None, publish_token: str | None = None,
                  tls: ssl.SSLContext | str | Path | bool | None = None, reconnect: float = 60.0,
                  on_event: Callable[[str], None] | None = None,
                  request_timeout: float = 300.0, liveness: float = LIVENESS) -> AsyncIterator[Client]:
    """Open a client connection to the overlay through any of its peers.

    `address`: one HOST:PORT or several (tried in order; more are learned from the overlay).
    When the entry peer is lost, the client reconnects to another for up to `reconnect` seconds
    (0: never), attaches its durable subscriptions again and retries what was in flight that
    can safely run twice; `on_event` hears of each reconnection. A publication that fails for
    a transient reason is retried for up to `publish_retry` seconds (0: never). `admin_token`
    is presented at once (for `leave`, `delete` and `subscriptions` where the overlay requires
    it); `publish_token` likewise, where the overlay has a publish policy (the graph IRI
    namespaces this client may publish under). `tls`: connect with TLS, verifying the peer against a CA file (a path), the system's
    CAs (True), or an `ssl.SSLContext` of your own. `request_timeout`: seconds one request may
    wait for its answer before it fails with a `timeout` ClientError (0: no limit); the peers
    bound their own retries well within it, so it ends only a request a peer never answers.
    `liveness`: seconds a request may wait with nothing heard from the entry peer (a live one
    answers pings while it works) before the connection counts as dead and the client moves on
    to another peer (0: never; a paused or cut-off entry then holds requests until the timeout)."""
    seeds = [address] if isinstance(address, str) else list(address)
    if not seeds:
        raise ClientError("no peer address given")
    if transport is None:
        transport = TcpTransport(client_tls=_tls_context(tls)) if tls else TcpTransport()
    client = Client(source or f"client-{id(seeds):x}", publish_retry=publish_retry)
    client.link = link = Link(seeds, transport, HybridClock(physical_ms), admin_token=admin_token,
                              publish_token=publish_token,
                              reconnect=reconnect, on_push=client._on_push, on_connect=client._on_connect,
                              on_disconnect=client._on_connection_lost, on_lost=client._on_lost, on_event=on_event or (lambda line: None),
                              request_timeout=request_timeout, liveness=liveness)
    failure: BaseException | None = None
    async with trio.open_nursery() as nursery:
        client._nursery = nursery
        try:
            await nursery.start(link.run)
        except BaseException as exc:  # no seed answered: raised below, not wrapped in a group
            failure = exc
            nursery.cancel_scope.cancel()
        if failure is None:
            nursery.start_soon(client._send_acks)
            try:
                yield client
            except BaseException as exc:  # re-raised below, not wrapped in the nursery's group
                failure = exc
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(1):
                    await _flush_acks(client, everything=failure is None)
                await link.close()
                nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure


async def _flush_acks(client: Client, everything: bool) -> None:
    """What the application acknowledged reaches the overlay before the client closes; on a
    clean exit (`everything`), all it was handed (a failure leaves the last one to be redone)."""
    for sub in list(client._subscriptions.values()):
        if everything and sub.durable:
            sub.ack_wanted = max(sub.ack_wanted, sub.delivered)
        if sub.durable and sub.ack_wanted > sub.acked and sub.ended is None and client.lost is None:
            try:
                await client.call(Op.ACK, Ack(sub.id, sub.ack_wanted))
            except ClientError:
                pass


def _tls_context(tls: ssl.SSLContext | str | Path | bool) -> ssl.SSLContext:
    if isinstance(tls, ssl.SSLContext):
        return tls
    try:
        return client_context(None if tls is True else tls)
    except EventCloudError as exc:
        raise ClientError(exc.message, exc.code) from None
