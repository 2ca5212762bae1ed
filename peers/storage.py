"""Publishing, storage side: an event's quads travel to their owners and are stored there.

The entry peer stamps each event with its publication time and routes its quads toward their
owners in one pass: each peer keeps the quads it owns and forwards the others grouped by next
hop, all events of a batch together, so a quad is stored exactly once and each hop costs one
message. Under OSMA every owner needs the whole event to match it, so the whole event travels
once, with the indexes of the quads each subtree stores; under CSMA only the routed quads do.
Once stored, the matcher is told.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace
from typing import Any

import trio

from eventcloud.errors import BadRequest, EventCloudError
from eventcloud.net.rpc import RpcConnection
from eventcloud.overlay import next_hop
from eventcloud.rdf.model import IRI, CompoundEvent, Quad
from eventcloud.sparql.filters.values import canonical_term
from eventcloud.wire.codec import triple_from_wire, triple_to_wire, trusted_iri as _trusted_iri
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import Deliver, Delivery, Empty, Publish, Published, Receipt
from eventcloud.wire.ops import Op
from peers.matcher import Matcher
from peers.router import FAILED, Router
from peers.state import PeerState
from peers.store import AsyncStore

log = logging.getLogger(__name__)

__all__ = ["Storage", "canonical_event"]


def canonical_event(event: CompoundEvent) -> CompoundEvent:
    """Literals of known datatypes in canonical form ("01"^^xsd:integer is stored as "1"),
    so that what the matchers see is exactly what the stores hold and return."""
    quads = tuple(Quad(q.g, canonical_term(q.s), q.p, canonical_term(q.o)) for q in event.quads)
    return event if quads == event.quads else CompoundEvent(event.graph, quads)


class Storage:
    def __init__(self, state: PeerState, router: Router, store: AsyncStore, matcher: Matcher, clock: HybridClock,
                 counters: Counter[str], *, retry_window: float) -> None:
        self.state = state
        self.router = router
        self.store = store
        self.matcher = matcher
        self.clock = clock
        self.counters = counters
        self.retry_window = retry_window

    def handlers(self) -> dict[Op, Any]:
        return {Op.PUBLISH: self._on_publish, Op.DELIVER: self._on_deliver}

    def routed(self) -> dict[Op, Any]:
        return {Op.DELIVER_LOCAL: self._local_deliver}

    async def _on_publish(self, conn: RpcConnection, body: Publish) -> Published:
        """Store events; each stays atomic and idempotent on its own (a batch only shares messages)."""
        if not body.events:
            raise BadRequest("empty batch: give at least one event")
        events = [canonical_event(e) for e in body.events]
        stamped = [(event, self.clock.now()) for event in events]
        self.counters["events_published"] += len(events)
        # Shielded: a publisher that disconnects mid-request must not leave half an event
        # stored. The delivery finishes (bounded by the retry window), or fails as a whole
        # and the publisher retries with the same graph IRI, which is idempotent.
        with trio.CancelScope(shield=True):
            with trio.fail_after(self.retry_window * 4):
                await self.deliver(stamped)
        return Published(tuple(Receipt(e.graph.value, t, len(e)) for e, t in stamped))

    async def deliver(self, stamped: list[tuple[CompoundEvent, int]]) -> None:
        """Store every quad of the events on its owner; returns when all are stored."""
        whole = self.state.algorithm == "osma"
        await self._deliver([
            Delivery(event.graph.value, len(event), published, tuple(triple_to_wire(q) for q in event.quads),
                     whole=whole)
            for event, published in stamped
        ])

    async def _on_deliver(self, conn: RpcConnection, body: Deliver) -> Empty:
        await self._deliver(list(body.deliveries))
        return Empty()

    async def _deliver(self, deliveries: list[Delivery]) -> None:
        """Keep the quads this peer owns; forward the others, all events together, one message per hop."""
        state = self.state
        zone, zones, space = state.zone, state.neighbour_zones(), state.space
        mine: list[tuple[IRI, list[Quad], Delivery, list[Quad]]] = []
        groups: dict[str, list[Delivery]] = {}
        for delivery in deliveries:
            graph = _trusted_iri(delivery.graph)
            # every quad is decoded once: for routing, and (OSMA) as the whole event to match
            quads = [triple_from_wire(graph, q, trusted=True) for q in delivery.quads]
            own: list[Quad] = []
            by_hop: dict[str, list[int]] = {}
            for i in _taken(delivery):
                try:
                    quad = quads[i]
                except (IndexError, TypeError):
                    raise BadRequest(f"delivery of {delivery.graph}: quad index {i!r} out of range") from None
                hop = next_hop(zone, zones, space.point(quad))
                if hop is None:
                    own.append(quad)
                else:
                    by_hop.setdefault(hop, []).append(i)
            if own:
                mine.append((graph, own, delivery, quads))
            for hop, taken in by_hop.items():
                groups.setdefault(hop, []).append(_part(delivery, taken))

        async def forward(hop: str, part: list[Delivery]) -> None:
            neighbour = state.neighbours.get(hop)
            try:
                if neighbour is None:
                    raise FAILED[0]("neighbour vanished")
                await self.router.call(neighbour.address, Op.DELIVER, Deliver(tuple(part)))
            except FAILED as exc:
                log.info("peer %s: delivery via %s failed (%s); routing quads one by one", state.id, hop, exc)
                for delivery in part:
                    graph = _trusted_iri(delivery.graph)
                    for i in _taken(delivery):
                        quad = triple_from_wire(graph, delivery.quads[i], trusted=True)
                        await self.router.route(space.point(quad), Op.DELIVER_LOCAL, _part(delivery, [i]))

        async with trio.open_nursery() as nursery:
            for hop, part in groups.items():
                nursery.start_soon(forward, hop, part)
            for graph, own, delivery, quads in mine:
                await self._store(graph, own, delivery, quads)

    async def _local_deliver(self, body: Delivery) -> dict[str, Any]:
        graph = _trusted_iri(body.graph)
        quads = [triple_from_wire(graph, q, trusted=True) for q in body.quads]
        await self._store(graph, [quads[i] for i in _taken(body)], body, quads)
        return {}

    async def _store(self, graph: IRI, own: list[Quad], delivery: Delivery, quads: list[Quad]) -> None:
        fresh, _ = await self.store.store_quads(graph, own, delivery.size, delivery.published)
        self.counters["quads_stored"] += len(fresh)
        whole = _whole_event(graph, quads) if delivery.whole and fresh else None
        await self.matcher.on_stored(graph, fresh, delivery.size, delivery.published, whole)


def _taken(delivery: Delivery) -> range | tuple[int, ...]:
    return range(len(delivery.quads)) if delivery.take is None else delivery.take


def _part(delivery: Delivery, taken: list[int]) -> Delivery:
    """The same event, for a subtree: OSMA keeps every quad (and says which to store), CSMA only the taken."""
    if delivery.whole:
        return replace(delivery, take=tuple(taken))
    return replace(delivery, quads=tuple(delivery.quads[i] for i in taken), take=None)


def _whole_event(graph: IRI, quads: list[Quad]) -> CompoundEvent:
    """The event as the entry peer validated it (no re-validation on the hot path)."""
    event = object.__new__(CompoundEvent)
    object.__setattr__(event, "graph", graph)
    object.__setattr__(event, "quads", tuple(quads))
    return event
