"""Client operations on stored data: publish (storage side), find, count, one-time SPARQL,
delete and status.

Publishing routes an event's quads toward their owners in one pass: each peer keeps the
quads it owns and forwards the others grouped by next hop, so a quad is stored exactly
once. One-time SPARQL gathers, for each triple pattern of the query, the candidate quads
from the zones that cover the pattern's box, loads them into an in-memory store and
evaluates the query there (pyoxigraph), so every SPARQL 1.1 form is available.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Awaitable, Callable

import pyoxigraph as ox
import trio

from eventcloud.sparql.filters.values import canonical_term
from eventcloud.overlay.zones import next_hop
from eventcloud.rdf.model import IRI, CompoundEvent, Quad
from eventcloud.wire.frames import (
    ProtocolError,
    event_from_wire,
    event_to_wire,
    field_of,
    pattern_from_wire,
    quad_from_wire,
    quad_to_wire,
    term_from_wire,
    term_to_wire,
)
from eventcloud.net.rpc import ConnectionLost, OperationError, RpcConnection
from eventcloud.sparql.query_plan import QueryPlanError, candidate_patterns
from eventcloud.net.transport import Unreachable
from peers.node import Peer
from peers.store import quad_to_ox

log = logging.getLogger(__name__)

#: Called with (graph, fresh quads stored here, size, publication time, the whole event in
#: wire form under OSMA (decoded only if some subscription needs it) or None, first time
#: this peer sees the event); the pub/sub engine plugs in here.
StoredHook = Callable[[IRI, list[Quad], int, int, "dict[str, Any] | None", bool], Awaitable[None]]


def canonical_event(event: CompoundEvent) -> CompoundEvent:
    """Literals of known datatypes in canonical form ("01"^^xsd:integer is stored as "1"),
    so that what the matchers see is exactly what the stores hold and return."""
    quads = tuple(Quad(q.g, canonical_term(q.s), q.p, canonical_term(q.o)) for q in event.quads)
    return event if quads == event.quads else CompoundEvent(event.graph, quads)


async def _ignore(*args: Any) -> None:
    return None


class Queries:
    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self.on_stored: StoredHook = _ignore
        peer.handlers.update({
            "overlay_info": self._on_info,
            "publish": self._on_publish,
            "deliver": self._on_deliver,
            "find": self._on_find,
            "count": self._on_count,
            "sparql": self._on_sparql,
            "delete": self._on_delete,
            "status": self._on_status,
        })
        peer.local_ops.update({
            "deliver_local": self._local_deliver,
            "find_local": self._local_find,
            "count_local": self._local_count,
            "delete_local": self._local_delete,
            "status_local": self._local_status,
        })

    async def _on_info(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        peer = self.peer
        return {"id": peer.id, "address": peer.address, "space": peer.space.to_dict(), "algorithm": peer.state.algorithm}

    # --- publishing -----------------------------------------------------------------------

    async def _on_publish(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        """`ev`: one event, or `evs`: a batch (each event still atomic and idempotent on its
        own; a batch only shares messages between peers)."""
        if "evs" in body:
            wires = field_of(body, "evs", list)
        else:
            wires = [body.get("ev")]
        events = [canonical_event(event_from_wire(w)) for w in wires]
        if not events:
            raise ProtocolError("empty batch: give at least one event", code="bad-request")
        stamped = [(event, self.peer.clock.now()) for event in events]
        self.peer.counters["events_published"] += len(events)
        # Shielded: a publisher that disconnects mid-request must not leave half an event
        # stored. The delivery finishes (bounded by the retry window), or fails as a whole
        # and the publisher retries with the same graph IRI, which is idempotent.
        with trio.CancelScope(shield=True):
            with trio.fail_after(self.peer.retry_window * 4):
                await self.deliver(stamped)
        receipts = [{"g": e.graph.value, "t": t, "n": len(e)} for e, t in stamped]
        return receipts[0] if "evs" not in body else {"receipts": receipts}

    async def deliver(self, stamped: list[tuple[CompoundEvent, int]]) -> None:
        """Store every quad of the events on its owner; returns when all are stored."""
        osma = self.peer.state.algorithm == "osma"
        bodies = []
        for event, published in stamped:
            body = {"g": event.graph.value, "n": len(event), "t": published,
                    "q": [[term_to_wire(q.s), q.p.value, term_to_wire(q.o)] for q in event.quads]}
            if osma:
                body["ce"] = event_to_wire(event)
            bodies.append(body)
        await self._deliver(bodies)

    async def _on_deliver(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        await self._deliver(field_of(body, "e", list))
        return {}

    async def _deliver(self, bodies: list[dict[str, Any]]) -> None:
        """Keep the quads this peer owns; forward the others, all events together, one
        message per next hop."""
        peer = self.peer
        zones = peer.neighbour_zones()
        mine: list[tuple[IRI, list[Quad], dict[str, Any]]] = []
        groups: dict[str, list[dict[str, Any]]] = {}
        for body in bodies:
            if not isinstance(body, dict):
                raise ProtocolError("invalid event in delivery", code="bad-request")
            graph = term_from_wire(field_of(body, "g", str), True)
            own: list[Quad] = []
            by_hop: dict[str, list[Any]] = {}
            for item in field_of(body, "q", list):
                if not isinstance(item, list) or len(item) != 3:
                    raise ProtocolError("invalid triple in delivery", code="bad-request")
                quad = Quad(graph, term_from_wire(item[0], True), term_from_wire(item[1], True),
                            term_from_wire(item[2], True))
                hop = next_hop(peer.zone, zones, peer.space.point(quad))
                if hop is None:
                    own.append(quad)
                else:
                    by_hop.setdefault(hop, []).append(item)
            if own:
                mine.append((graph, own, body))
            for hop, items in by_hop.items():
                groups.setdefault(hop, []).append({**body, "q": items})

        async def forward(hop: str, part: list[dict[str, Any]]) -> None:
            neighbour = peer.state.neighbours.get(hop)
            try:
                if neighbour is None:
                    raise Unreachable("neighbour vanished")
                await peer.call(neighbour.address, "deliver", {"e": part})
            except (Unreachable, ConnectionLost) as exc:
                log.info("peer %s: delivery via %s failed (%s); routing quads one by one", peer.id, hop, exc)
                for body in part:
                    graph = term_from_wire(body["g"], True)
                    for item in body["q"]:
                        quad = Quad(graph, term_from_wire(item[0], True), term_from_wire(item[1], True),
                                    term_from_wire(item[2], True))
                        await peer.route(peer.space.point(quad), "deliver_local", {**body, "q": [item]})

        async with trio.open_nursery() as nursery:
            for hop, part in groups.items():
                nursery.start_soon(forward, hop, part)
            for graph, own, body in mine:
                await self._store(graph, own, body)

    async def _local_deliver(self, body: dict[str, Any]) -> dict[str, Any]:
        graph = IRI(field_of(body, "g", str))
        quads = [Quad(graph, term_from_wire(i[0], True), term_from_wire(i[1], True), term_from_wire(i[2], True))
                 for i in field_of(body, "q", list)]
        await self._store(graph, quads, body)
        return {}

    async def _store(self, graph: IRI, quads: list[Quad], body: dict[str, Any]) -> None:
        peer = self.peer
        size = field_of(body, "n", int)
        published = field_of(body, "t", int)
        known = peer.store.event_info(graph) is not None
        fresh = quads
        if known:
            stored = set(peer.store.find(graph, None, None, None))
            fresh = [q for q in quads if q not in stored]
        new = peer.store.add_quads(graph, quads, size, published)
        peer.counters["quads_stored"] += len(fresh)
        await self.on_stored(graph, fresh, size, published, body.get("ce"), new)

    # --- finding and counting -------------------------------------------------------------

    async def find(self, pattern: tuple[Any, Any, Any, Any]) -> list[Quad]:
        box = self.peer.space.pattern_box(pattern)
        results = await self.peer.multicast(box, "find_local", {"p": [None if t is None else term_to_wire(t) for t in pattern]})
        return [quad_from_wire(q) for chunk in results for q in chunk]

    async def _on_find(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        quads = await self.find(pattern_from_wire(body.get("p")))
        return {"quads": [quad_to_wire(q) for q in quads]}

    async def _local_find(self, body: dict[str, Any]) -> list[Any]:
        pattern = pattern_from_wire(body.get("p"))
        zone, space = self.peer.zone, self.peer.space
        return [quad_to_wire(q) for q in self.peer.store.find(*pattern) if zone.contains(space.point(q))]

    async def _on_count(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        pattern = pattern_from_wire(body.get("p", [None] * 4))
        box = self.peer.space.pattern_box(pattern)
        counts = await self.peer.multicast(box, "count_local", {"p": body.get("p", [None] * 4)})
        return {"count": sum(counts)}

    async def _local_count(self, body: dict[str, Any]) -> int:
        pattern = pattern_from_wire(body.get("p"))
        zone, space = self.peer.zone, self.peer.space
        return sum(1 for q in self.peer.store.find(*pattern) if zone.contains(space.point(q)))

    # --- one-time SPARQL ------------------------------------------------------------------

    async def _on_sparql(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        text = field_of(body, "query", str)
        try:
            patterns = candidate_patterns(text)
        except QueryPlanError as exc:
            raise OperationError(str(exc), code="bad-query") from None
        started = time.perf_counter()
        gathered: set[Quad] = set()
        if any(p == (None, None, None, None) for p in patterns) or not patterns:
            patterns = [(None, None, None, None)]
        for pattern in patterns:
            gathered.update(await self.find(pattern))
        store = ox.Store()
        store.extend([quad_to_ox(q) for q in gathered])
        try:
            result = store.query(text, use_default_graph_as_union=True)
        except (SyntaxError, ValueError, OSError) as exc:
            raise OperationError(f"query failed: {exc}", code="bad-query") from None
        reply: dict[str, Any] = {"candidates": len(gathered), "seconds": time.perf_counter() - started}
        if isinstance(result, ox.QueryTriples):
            reply["form"] = "graph"
            reply["ntriples"] = result.serialize(format=ox.RdfFormat.N_TRIPLES).decode()
        else:
            reply["form"] = "boolean" if isinstance(result, ox.QueryBoolean) else "solutions"
            reply["json"] = result.serialize(format=ox.QueryResultsFormat.JSON).decode()
        return reply

    # --- deleting ---------------------------------------------------------------------------

    async def _on_delete(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        graph = term_from_wire(field_of(body, "g", str))
        box = self.peer.space.pattern_box((graph, None, None, None))
        removed = await self.peer.multicast(box, "delete_local", {"g": graph.value})
        return {"removed": sum(removed)}

    async def _local_delete(self, body: dict[str, Any]) -> int:
        return self.peer.store.delete_event(IRI(field_of(body, "g", str)))

    # --- status -----------------------------------------------------------------------------

    async def _on_status(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        peers = await self.peer.multicast(self.peer.space.whole_space(), "status_local", {})
        return {"peers": sorted(peers, key=lambda p: p["id"]), "space": self.peer.space.to_dict(),
                "algorithm": self.peer.state.algorithm}

    async def _local_status(self, body: dict[str, Any]) -> dict[str, Any]:
        peer = self.peer
        return {
            "id": peer.id,
            "address": peer.address,
            "zone": peer.zone.to_wire(),
            "quads": peer.store.count(),
            "events": len(peer.store.events()),
            "subscriptions": int(peer.counters.get("subscriptions", 0)),
            "neighbours": {k: n.address for k, n in sorted(peer.state.neighbours.items())},
            "counters": {k: v for k, v in sorted(peer.counters.items()) if k != "subscriptions"},
        }
