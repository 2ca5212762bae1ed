"""A peer's on-disk store: its quads, per-event metadata and its subscriptions (pyoxigraph).

Quads live in their own named graph (the event's graph IRI), so one-time SPARQL and
deletion by event are native. Two reserved graphs hold what the overlay needs besides the
data: per event its size and publication time (CSMA reconstruction and the happen-before
check need them for every stored quad), and the subscriptions indexed on this peer, so
both survive a restart. Nothing here knows about zones or the network.

`PeerStore` is synchronous (pyoxigraph on RocksDB blocks); services reach it through
`AsyncStore`, which runs each call in a worker thread, one at a time, so the event loop never
waits on the disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

import pyoxigraph as ox
import trio

from eventcloud.rdf.model import IRI, XSD, Quad, Term
from eventcloud.rdf.oxigraph import quad_from_ox, quad_to_ox, to_ox

META_GRAPH = "urn:eventcloud:meta"
SUBSCRIPTIONS_GRAPH = "urn:eventcloud:subscriptions"
RESERVED_GRAPHS = frozenset({META_GRAPH, SUBSCRIPTIONS_GRAPH})
_SIZE = ox.NamedNode("urn:eventcloud:size")
_PUBLISHED = ox.NamedNode("urn:eventcloud:published")
_RECORD = ox.NamedNode("urn:eventcloud:record")
_META = ox.NamedNode(META_GRAPH)
_SUBS = ox.NamedNode(SUBSCRIPTIONS_GRAPH)
_INTEGER = ox.NamedNode(XSD + "integer")


class PeerStore:
    """The persistent part of one peer. `path=None` keeps everything in memory (tests)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            self._store = ox.Store(str(self.path))
        else:
            self._store = ox.Store()
        self._events: dict[str, tuple[int, int]] = {}
        for quad in self._store.quads_for_pattern(None, None, None, _META):
            size, published = self._events.get(quad.subject.value, (0, 0))
            if quad.predicate == _SIZE:
                size = int(quad.object.value)
            else:
                published = int(quad.object.value)
            self._events[quad.subject.value] = (size, published)

    # --- events and quads -------------------------------------------------------------

    def event_info(self, graph: IRI) -> tuple[int, int] | None:
        """(size, publication time) of an event some of whose quads are stored here."""
        return self._events.get(graph.value)

    def add_quads(self, graph: IRI, quads: Iterable[Quad], size: int, published: int) -> bool:
        """Store quads of one event; returns False if the event was already known here
        (a retry or a second copy: the quads are still added, idempotently)."""
        new = graph.value not in self._events
        batch = [quad_to_ox(q) for q in quads]
        if new:
            node = ox.NamedNode(graph.value)
            batch.append(ox.Quad(node, _SIZE, ox.Literal(str(size), datatype=_INTEGER), _META))
            batch.append(ox.Quad(node, _PUBLISHED, ox.Literal(str(published), datatype=_INTEGER), _META))
            self._events[graph.value] = (size, published)
        self._store.extend(batch)
        return new

    def store_quads(self, graph: IRI, quads: list[Quad], size: int, published: int) -> tuple[list[Quad], bool]:
        """Store quads of one event: (those not stored here before, whether the event is new here).

        Storing again what is already stored is a no-op (a retry, or a second copy on the way)."""
        fresh = quads
        if graph.value in self._events:
            stored = set(self.find(graph, None, None, None))
            fresh = [q for q in quads if q not in stored]
        new = self.add_quads(graph, quads, size, published)
        return fresh, new

    def find_list(self, g: Term | None, s: Term | None, p: Term | None, o: Term | None) -> list[Quad]:
        return list(self.find(g, s, p, o))

    def find(self, g: Term | None, s: Term | None, p: Term | None, o: Term | None) -> Iterator[Quad]:
        """Stored data quads matching a pattern (None = any); never the reserved graphs."""
        if (g is not None and type(g) is not IRI) or (p is not None and type(p) is not IRI):
            return
        graph = ox.NamedNode(g.value) if g is not None else None
        if graph is not None and g.value in RESERVED_GRAPHS:
            return
        for quad in self._store.quads_for_pattern(
            to_ox(s) if s is not None else None,
            ox.NamedNode(p.value) if p is not None else None,
            to_ox(o) if o is not None else None,
            graph,
        ):
            if quad.graph_name.value in RESERVED_GRAPHS:
                continue
            yield quad_from_ox(quad)

    def count(self) -> int:
        return sum(1 for _ in self.find(None, None, None, None))

    def events(self) -> dict[str, tuple[int, int]]:
        return dict(self._events)

    def remove_quads(self, quads: Iterable[Quad]) -> None:
        """Remove quads (after handing them to another peer); drops metadata of events
        that have no quad left here."""
        touched = set()
        for quad in quads:
            self._store.remove(quad_to_ox(quad))
            touched.add(quad.g)
        for graph in touched:
            if not any(True for _ in self.find(graph, None, None, None)):
                self._forget_event(graph)

    def delete_event(self, graph: IRI) -> int:
        quads = list(self.find(graph, None, None, None))
        for quad in quads:
            self._store.remove(quad_to_ox(quad))
        self._forget_event(graph)
        return len(quads)

    def _forget_event(self, graph: IRI) -> None:
        if self._events.pop(graph.value, None) is not None:
            node = ox.NamedNode(graph.value)
            for quad in list(self._store.quads_for_pattern(node, None, None, _META)):
                self._store.remove(quad)

    # --- subscriptions ----------------------------------------------------------------

    def put_subscription(self, ident: str, record: dict[str, Any]) -> None:
        self.remove_subscription(ident)
        node = ox.NamedNode(f"urn:eventcloud:subscription:{ident}")
        self._store.add(ox.Quad(node, _RECORD, ox.Literal(json.dumps(record, sort_keys=True)), _SUBS))

    def remove_subscription(self, ident: str) -> bool:
        node = ox.NamedNode(f"urn:eventcloud:subscription:{ident}")
        found = list(self._store.quads_for_pattern(node, _RECORD, None, _SUBS))
        for quad in found:
            self._store.remove(quad)
        return bool(found)

    def subscriptions(self) -> dict[str, dict[str, Any]]:
        out = {}
        for quad in self._store.quads_for_pattern(None, _RECORD, None, _SUBS):
            out[quad.subject.value.rsplit(":", 1)[1]] = json.loads(quad.object.value)
        return out

    def flush(self) -> None:
        if self.path is not None:
            self._store.flush()

    def close(self) -> None:
        self.flush()
        del self._store


class Offload:
    """Runs blocking calls in worker threads, at most `threads` at once, off the event loop.

    With `enabled=False` calls run inline: for in-memory stores in tests under a mock clock,
    where a thread would let virtual time jump while it works.
    """

    def __init__(self, enabled: bool, threads: int = 1) -> None:
        self.enabled = enabled
        self._limiter = trio.CapacityLimiter(threads)

    async def run(self, fn: Any, *args: Any) -> Any:
        if not self.enabled:
            return fn(*args)
        return await trio.to_thread.run_sync(fn, *args, limiter=self._limiter)


class AsyncStore:
    """A PeerStore whose blocking calls run in a worker thread (one at a time), off the event loop."""

    def __init__(self, store: PeerStore, offload: bool) -> None:
        self.sync = store
        self._offload = Offload(offload, 1)

    async def run(self, fn: Any, *args: Any) -> Any:
        return await self._offload.run(fn, *args)

    # cheap in-memory reads stay synchronous
    def event_info(self, graph: IRI) -> tuple[int, int] | None:
        return self.sync.event_info(graph)

    def events(self) -> dict[str, tuple[int, int]]:
        return self.sync.events()

    async def add_quads(self, graph: IRI, quads: list[Quad], size: int, published: int) -> bool:
        return await self.run(self.sync.add_quads, graph, quads, size, published)

    async def store_quads(self, graph: IRI, quads: list[Quad], size: int, published: int) -> tuple[list[Quad], bool]:
        return await self.run(self.sync.store_quads, graph, quads, size, published)

    async def find(self, g: Term | None, s: Term | None, p: Term | None, o: Term | None) -> list[Quad]:
        return await self.run(self.sync.find_list, g, s, p, o)

    async def count(self) -> int:
        return await self.run(self.sync.count)

    async def remove_quads(self, quads: list[Quad]) -> None:
        await self.run(self.sync.remove_quads, quads)

    async def delete_event(self, graph: IRI) -> int:
        return await self.run(self.sync.delete_event, graph)

    async def put_subscription(self, ident: str, record: dict[str, Any]) -> None:
        await self.run(self.sync.put_subscription, ident, record)

    async def remove_subscription(self, ident: str) -> bool:
        return await self.run(self.sync.remove_subscription, ident)

    async def flush(self) -> None:
        await self.run(self.sync.flush)
