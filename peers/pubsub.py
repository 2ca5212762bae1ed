"""Publish/subscribe on a peer: indexing subscriptions, CSMA chains, the OSMA rule, and the
entry-side delivery to subscribers (dedup, reconstruction, bounded buffers).

Timing rule (MISSION §3): the entry peer first reads every peer's hybrid clock (a
whole-space multicast) and stamps the subscription t_S above all of them, so every
publication that completed before `subscribe` was called has t_P < t_S. It then stores the
subscription with a second whole-space multicast (peers outside the indexing box only merge
the clock), so once `subscribe` returns every peer's clock is past t_S and any later
publication, from any client, gets t_P > t_S. A pair counts only when t_P >= t_S.
When a subscription reaches a peer after qualifying quads (a concurrent publication), the
peer starts CSMA chains from its stored quads: the OSMA fallback and CSMA's own rule.
All matching runs in worker tasks fed by a bounded channel, so publishing returns once
quads are stored and a slow chain never blocks the connection that brought it.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import trio

from eventcloud.overlay.zones import Box, Zone
from eventcloud.matching.index import SubscriptionIndex
from eventcloud.matching.reference import PartialMatch, advance, is_complete, next_pattern, notifier_index, results, start
from eventcloud.rdf.model import IRI, CompoundEvent, Quad
from eventcloud.wire.frames import (NOTIFICATION_KINDS, ProtocolError, event_from_wire, field_of, quad_to_wire,
                                 term_to_wire)
from eventcloud.net.rpc import ConnectionLost, OperationError, RemoteError, RpcConnection
from eventcloud.sparql.subscription import Subscription, SubscriptionError, parse_subscription
from eventcloud.net.transport import Unreachable
from peers.node import Peer
from peers.queries import Queries

log = logging.getLogger(__name__)

REWRITTEN_TTL = 120.0          # seconds a CSMA rewritten subscription waits for its event's quads
TOMBSTONE_TTL = 300.0
SUBSCRIBER_BUFFER = 10_000     # notifications queued per subscriber connection before dropping
SEEN_LIMIT = 200_000           # (subscription, event) pairs remembered per subscription for dedup
RECONSTRUCT_DEADLINE = 30.0
OSMA_CHECKED_LIMIT = 100_000   # recent events whose OSMA candidates this peer remembers


@dataclass
class Indexed:
    record: dict[str, Any]
    sub: Subscription

    @property
    def id(self) -> str:
        return self.record["id"]

    @property
    def t(self) -> int:
        return self.record["t"]


@dataclass
class Subscriber:
    """Entry-side state of one subscriber connection."""

    conn: RpcConnection
    send: trio.MemorySendChannel
    receive: trio.MemoryReceiveChannel
    subscriptions: dict[str, Indexed] = field(default_factory=dict)
    seen: dict[str, OrderedDict] = field(default_factory=dict)


@lru_cache(maxsize=4096)
def parse_cached(text: str) -> Subscription:
    """Parsing costs ~15 ms (rdflib); a Subscription is immutable, so identical texts
    (popular subscriptions, or many peers in one test process) share one parse."""
    return parse_subscription(text)


def _wire_solutions(solutions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: term_to_wire(v) for k, v in s.items()} for s in solutions]


class PubSub:
    def __init__(self, peer: Peer, queries: Queries, workers: int = 4) -> None:
        self.peer = peer
        self.queries = queries
        self.workers = workers
        self.subs: dict[str, Indexed] = {}
        # Shared index of the subscriptions stored here: OSMA asks it which subscriptions an
        # event matches, CSMA which ones a quad starts; cost grows with the matches.
        self.index = SubscriptionIndex()
        # CSMA rewritten subscriptions waiting here, by event graph then subscription id.
        self.rewritten: dict[str, dict[str, list[tuple[PartialMatch, float]]]] = {}
        self._chain_records: dict[str, dict[str, Any]] = {}
        self._osma_checked: OrderedDict[str, set[str]] = OrderedDict()
        self.tombstones: dict[str, float] = {}
        self._parsed: dict[str, Subscription] = {}
        self.subscribers: dict[RpcConnection, Subscriber] = {}
        self.by_id: dict[str, Subscriber] = {}
        self.work_send, self.work_receive = trio.open_memory_channel[tuple](65536)
        queries.on_stored = self.on_stored
        peer.handlers.update({"subscribe": self._on_subscribe, "unsubscribe": self._on_unsubscribe,
                              "notify": self._on_notify})
        peer.local_ops.update({"clock": self._local_clock, "store_sub": self._local_store_sub, "remove_sub": self._local_remove_sub,
                               "csma_sub": self._local_csma_sub})
        peer.export_subscriptions = self.export
        peer.prune_subscriptions = self.prune
        peer.install_subscription = self.install
        for record in peer.store.subscriptions().values():
            self._add(record, persist=False)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(self.workers):
                nursery.start_soon(self._worker, self.work_receive.clone())
            nursery.start_soon(self._expire_loop)
            task_status.started()

    # --- subscription bookkeeping ---------------------------------------------------------

    def parse(self, record: dict[str, Any]) -> Subscription:
        sub = self._parsed.get(record["id"])
        if sub is None:
            sub = parse_cached(record["sparql"])
            self._parsed[record["id"]] = sub
        return sub

    def box(self, sub: Subscription) -> Box:
        return self.peer.space.pattern_box(sub.pattern_terms(0))

    def _add(self, record: dict[str, Any], persist: bool = True) -> Indexed:
        entry = Indexed(record, self.parse(record))
        self.subs[entry.id] = entry
        self.index.add(entry.id, entry.sub)
        if persist:
            self.peer.store.put_subscription(entry.id, record)
        self.peer.counters["subscriptions"] = len(self.subs)
        return entry

    def export(self, zone: Zone) -> list[dict[str, Any]]:
        return [e.record for e in self.subs.values() if zone.intersects(self.box(e.sub))]

    def prune(self, zone: Zone) -> None:
        for entry in list(self.subs.values()):
            if not zone.intersects(self.box(entry.sub)):
                del self.subs[entry.id]
                self.index.remove(entry.id)
                self.peer.store.remove_subscription(entry.id)
        self.peer.counters["subscriptions"] = len(self.subs)

    def install(self, record: dict[str, Any]) -> None:
        if record["id"] not in self.tombstones:
            self._add(record)

    # --- entry side: subscribe / unsubscribe ----------------------------------------------

    async def _on_subscribe(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        peer = self.peer
        sparql = field_of(body, "sparql", str)
        kind = body.get("kind", "bindings")
        if kind not in NOTIFICATION_KINDS:
            raise OperationError(f"unknown notification kind {kind!r}: use one of {', '.join(NOTIFICATION_KINDS)}",
                                 code="bad-request")
        try:
            sub = parse_cached(sparql)
        except SubscriptionError as exc:
            raise OperationError(str(exc), code="bad-subscription") from None
        ident = uuid.uuid4().hex
        # Phase 1: read every peer's clock, so t_S exceeds the publication time of every
        # publication that completed before this call (whichever entry peer stamped it).
        clocks = await peer.multicast(peer.space.whole_space(), "clock", {})
        peer.clock.observe(max(clocks))
        record = {"id": ident, "sparql": sparql, "kind": kind, "entry": peer.address, "t": peer.clock.now()}
        self._parsed[ident] = sub
        subscriber = self._subscriber(conn)
        entry = Indexed(record, sub)
        subscriber.subscriptions[ident] = entry
        subscriber.seen[ident] = OrderedDict()
        self.by_id[ident] = subscriber
        try:
            await peer.multicast(peer.space.whole_space(), "store_sub", {"rec": record})
        except (OperationError, RemoteError) as exc:
            self._forget_local(ident)
            with trio.move_on_after(peer.retry_window):
                try:
                    await peer.multicast(peer.space.whole_space(), "remove_sub", {"id": ident})
                except Exception:
                    pass
            raise OperationError(f"subscription not stored on every peer, rolled back: {exc}", code="unreachable") from None
        peer.counters["subscribe"] += 1
        return {"id": ident, "t": record["t"], "patterns": len(sub.patterns)}

    async def _on_unsubscribe(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        ident = field_of(body, "id", str)
        subscriber = self.by_id.get(ident)
        if subscriber is None or subscriber.conn is not conn:
            raise OperationError(f"no subscription {ident} on this connection", code="not-found")
        self._forget_local(ident)
        await self.peer.multicast(self.peer.space.whole_space(), "remove_sub", {"id": ident})
        return {"id": ident}

    def _subscriber(self, conn: RpcConnection) -> Subscriber:
        subscriber = self.subscribers.get(conn)
        if subscriber is None:
            send, receive = trio.open_memory_channel[dict](SUBSCRIBER_BUFFER)
            subscriber = Subscriber(conn, send, receive)
            self.subscribers[conn] = subscriber
            assert self.peer.nursery is not None
            self.peer.nursery.start_soon(self._pump, subscriber)
        return subscriber

    def _forget_local(self, ident: str) -> None:
        subscriber = self.by_id.pop(ident, None)
        if subscriber is not None:
            subscriber.subscriptions.pop(ident, None)
            subscriber.seen.pop(ident, None)

    async def _pump(self, subscriber: Subscriber) -> None:
        """Push queued notifications to one subscriber; ends with its connection."""
        async with subscriber.receive:
            async for notification in subscriber.receive:
                try:
                    await subscriber.conn.push("notification", notification)
                    self.peer.counters["notifications_pushed"] += 1
                except ConnectionLost:
                    break

    async def connection_closed(self, conn: RpcConnection) -> None:
        """A client connection ended: its subscriptions end with it."""
        subscriber = self.subscribers.pop(conn, None)
        if subscriber is None:
            return
        subscriber.send.close()
        for ident in list(subscriber.subscriptions):
            self._forget_local(ident)
            with trio.move_on_after(self.peer.retry_window * 2):
                try:
                    await self.peer.multicast(self.peer.space.whole_space(), "remove_sub", {"id": ident})
                except Exception as exc:
                    log.warning("could not remove subscription %s of a closed connection: %s", ident, exc)

    # --- storing subscriptions on peers ---------------------------------------------------

    async def _local_clock(self, body: dict[str, Any]) -> int:
        return self.peer.clock.now()

    async def _local_store_sub(self, body: dict[str, Any]) -> int:
        record = field_of(body, "rec", dict)
        if record.get("id") in self.tombstones:
            return 0
        try:
            sub = self.parse(record)
        except SubscriptionError as exc:
            raise OperationError(str(exc), code="bad-subscription") from None
        if not self.peer.zone.intersects(self.box(sub)):
            return 0
        entry = self._add(record)
        # Quads stored before the subscription arrived but published after it was made.
        terms = sub.pattern_terms(0)
        for quad in self.peer.store.find(*terms):
            info = self.peer.store.event_info(quad.g)
            if info is not None and info[1] >= entry.t:
                await self.work_send.send(("first", entry.id, quad, info[0], info[1]))
        return 1

    async def _local_remove_sub(self, body: dict[str, Any]) -> int:
        ident = field_of(body, "id", str)
        self.tombstones[ident] = trio.current_time() + TOMBSTONE_TTL
        self._parsed.pop(ident, None)
        self._chain_records.pop(ident, None)
        for waiting in self.rewritten.values():
            waiting.pop(ident, None)
        removed = self.subs.pop(ident, None) is not None
        self.index.remove(ident)
        if removed:
            self.peer.store.remove_subscription(ident)
            self.peer.counters["subscriptions"] = len(self.subs)
        return int(removed)

    async def _local_csma_sub(self, body: dict[str, Any]) -> int:
        record = field_of(body, "rec", dict)
        if record.get("id") in self.tombstones:
            return 0
        sub = self.parse(record)
        try:
            partial = PartialMatch.from_wire(body.get("pm"))
        except ValueError as exc:
            raise ProtocolError(f"invalid partial match: {exc}", code="bad-request") from None
        graph = field_of(body, "g", str)
        size, published = field_of(body, "n", int), field_of(body, "t", int)
        self.rewritten.setdefault(graph, {}).setdefault(record["id"], []).append(
            (partial, trio.current_time() + REWRITTEN_TTL))
        self._chain_records[record["id"]] = record
        index = next_pattern(sub, partial)
        for quad in self.peer.store.find(*sub.pattern_terms(index, dict(partial.bindings))):
            await self.work_send.send(("next", record, partial, index, quad, size, published))
        return 1

    # --- matching -------------------------------------------------------------------------

    async def on_stored(self, graph: IRI, fresh: list[Quad], size: int, published: int,
                        whole: dict[str, Any] | None, new: bool) -> None:
        if whole is not None and self.subs and fresh:
            # OSMA: this peer can only be the notifier of a subscription whose indexing
            # pattern matches one of the quads it owns, so those quads' candidates are the
            # only subscriptions to check (and the whole event is decoded only if any).
            # An event whose quads arrive here in several deliveries is checked once per
            # subscription: `checked` remembers which were already decided for it.
            checked = self._osma_checked.setdefault(graph.value, set())
            if len(self._osma_checked) > OSMA_CHECKED_LIMIT:
                self._osma_checked.popitem(last=False)
            candidates = []
            for quad in fresh:
                for ident in self.index.first_pattern_candidates(quad):
                    if ident not in checked:
                        checked.add(ident)
                        candidates.append(ident)
            if candidates:
                await self.work_send.send(("osma", event_from_wire(whole, trusted=True), size, published,
                                           candidates))
        waiting = self.rewritten.get(graph.value, {})
        for quad in fresh:
            if whole is None:
                for ident in self.index.first_pattern_candidates(quad):
                    entry = self.subs.get(ident)
                    if entry is not None and published >= entry.t:
                        await self.work_send.send(("first", ident, quad, size, published))
            for ident, items in list(waiting.items()):
                record = self._chain_records.get(ident)
                sub = self._parsed.get(ident)
                if record is None or sub is None:
                    continue
                for partial, _ in list(items):
                    await self.work_send.send(("next", record, partial, next_pattern(sub, partial), quad, size, published))

    async def _worker(self, receive: trio.MemoryReceiveChannel) -> None:
        async with receive:
            async for item in receive:
                try:
                    await self._process(item)
                except (OperationError, RemoteError, ConnectionLost, Unreachable) as exc:
                    self.peer.counters["matching_errors"] += 1
                    log.warning("peer %s: matching step failed: %s", self.peer.id, exc)
                except Exception:
                    self.peer.counters["matching_errors"] += 1
                    log.exception("peer %s: matching step failed", self.peer.id)

    async def _process(self, item: tuple) -> None:
        kind = item[0]
        if kind == "osma":
            _, event, size, published, candidates = item
            matched = set(self.index.match_event(event))  # the shared joins decide the matches
            for ident in candidates:
                entry = self.subs.get(ident)
                if ident not in matched or entry is None or published < entry.t:
                    continue
                index = notifier_index(entry.sub, event)
                if index is None or not self.peer.zone.contains(self.peer.space.point(event.quads[index])):
                    continue
                await self.notify(entry.record, entry.sub, event.graph.value, size, published, whole=event)
        elif kind == "first":
            _, ident, quad, size, published = item
            entry = self.subs.get(ident)
            if entry is None:
                return
            partial = advance(entry.sub, start(entry.sub), 0, quad)
            if partial is not None:
                await self._chain(entry.record, entry.sub, partial, quad.g.value, size, published)
        elif kind == "next":
            _, record, partial, index, quad, size, published = item
            if record["id"] in self.tombstones:
                return
            sub = self.parse(record)
            if index not in partial.remaining:
                return
            advanced = advance(sub, partial, index, quad)
            if advanced is not None:
                await self._chain(record, sub, advanced, quad.g.value, size, published)
        elif kind == "reconstruct":
            await self._reconstruct(*item[1:])

    async def _chain(self, record: dict[str, Any], sub: Subscription, partial: PartialMatch,
                     graph: str, size: int, published: int) -> None:
        """One CSMA step done: notify if nothing is left, else route the rewritten
        subscription to the peers of its next pattern."""
        self._chain_records[record["id"]] = record
        if is_complete(partial):
            await self.notify(record, sub, graph, size, published)
            return
        index = next_pattern(sub, partial)
        box = self.peer.space.pattern_box(sub.pattern_terms(index, dict(partial.bindings)))
        self.peer.counters["csma_rewrites"] += 1
        await self.peer.multicast(box, "csma_sub", {"rec": record, "pm": partial.to_wire(), "g": graph,
                                                    "n": size, "t": published})

    async def notify(self, record: dict[str, Any], sub: Subscription, graph: str, size: int, published: int,
                     whole: CompoundEvent | None = None) -> None:
        body: dict[str, Any] = {"sub": record["id"], "g": graph, "n": size, "t": published}
        if whole is None:
            body["csma"] = 1
        elif record["kind"] == "bindings":
            body["solutions"] = _wire_solutions(results(sub, whole))
        elif record["kind"] == "event":
            body["quads"] = [quad_to_wire(q) for q in whole.quads]
        self.peer.counters["notifications_sent"] += 1
        if record["entry"] == self.peer.address:
            await self.deliver(body)
            return
        try:
            await self.peer.call(record["entry"], "notify", body)
        except (Unreachable, ConnectionLost, RemoteError) as exc:
            self.peer.counters["notifications_undeliverable"] += 1
            log.warning("peer %s: cannot reach entry %s of subscription %s: %s",
                        self.peer.id, record["entry"], record["id"], exc)

    # --- entry side: delivering notifications -----------------------------------------------

    async def _on_notify(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        await self.deliver(body)
        return {}

    async def deliver(self, body: dict[str, Any]) -> None:
        ident = field_of(body, "sub", str)
        graph = field_of(body, "g", str)
        subscriber = self.by_id.get(ident)
        if subscriber is None or ident not in subscriber.subscriptions:
            self.peer.counters["notifications_unknown_subscription"] += 1
            return
        seen = subscriber.seen[ident]
        if graph in seen:
            self.peer.counters["duplicates_filtered"] += 1
            return
        seen[graph] = None
        if len(seen) > SEEN_LIMIT:
            seen.popitem(last=False)
        entry = subscriber.subscriptions[ident]
        kind = entry.record["kind"]
        if body.get("csma") and kind != "signal":
            await self.work_send.send(("reconstruct", subscriber, entry, graph, field_of(body, "n", int), body["t"]))
            return
        self._enqueue(subscriber, {"subscription": ident, "event": graph, "kind": kind, "t": body["t"],
                                   **({"solutions": body["solutions"]} if "solutions" in body else {}),
                                   **({"quads": body["quads"]} if "quads" in body else {})})

    async def _reconstruct(self, subscriber: Subscriber, entry: Indexed, graph: str, size: int, published: int) -> None:
        """CSMA: gather the event's quads (g, ?, ?, ?) until all `size` are there, then
        evaluate the subscription on the whole event for exact solutions."""
        deadline = trio.current_time() + RECONSTRUCT_DEADLINE
        delay = 0.02
        quads: list[Quad] = []
        while True:
            quads = await self.queries.find((IRI(graph), None, None, None))
            if len(quads) >= size or trio.current_time() > deadline:
                break
            await trio.sleep(delay)
            delay = min(delay * 2, 0.5)
        note: dict[str, Any] = {"subscription": entry.id, "event": graph, "kind": entry.record["kind"], "t": published}
        if len(quads) < size:
            note["error"] = (f"could not reconstruct event {graph}: {len(quads)} of {size} quads found "
                             f"after {RECONSTRUCT_DEADLINE:g} s")
            self.peer.counters["reconstruction_failures"] += 1
        else:
            event = CompoundEvent(IRI(graph), tuple(quads))
            if entry.record["kind"] == "bindings":
                solutions = results(entry.sub, event)
                if not solutions:
                    self.peer.counters["reconstruction_mismatch"] += 1
                    return
                note["solutions"] = _wire_solutions(solutions)
            else:
                note["quads"] = [quad_to_wire(q) for q in event.quads]
        if entry.id in subscriber.subscriptions:
            self._enqueue(subscriber, note)

    def _enqueue(self, subscriber: Subscriber, note: dict[str, Any]) -> None:
        try:
            subscriber.send.send_nowait(note)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            self.peer.counters["notifications_dropped"] += 1

    async def _expire_loop(self) -> None:
        while True:
            await trio.sleep(10)
            now = trio.current_time()
            for graph, waiting in list(self.rewritten.items()):
                for ident, items in list(waiting.items()):
                    kept = [(p, exp) for p, exp in items if exp > now]
                    if kept:
                        waiting[ident] = kept
                    else:
                        del waiting[ident]
                if not waiting:
                    del self.rewritten[graph]
            for ident, exp in list(self.tombstones.items()):
                if exp <= now:
                    del self.tombstones[ident]
