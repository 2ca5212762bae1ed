"""A zone's content changing hands, in chunks far under the frame limit.

A zone may hold more than one frame carries: a split hands the newcomer its quads a chunk at a
time (the first with the grant, the rest fetched with `join_data`), and a graceful leave hands
the heir its first chunk with `take_over`, the heir fetching the rest with `leave_data` before
the zones merge. A leave used to send the whole zone in one `take_over`: with 8 real peers on
CityBench, take-overs of 34 and 45 MB were refused at the 32 MiB limit, and the peers holding
that much could never leave or make room (2026-11-26).
"""

from __future__ import annotations

from typing import Awaitable, Callable, Mapping, Sequence

from eventcloud.errors import ErrorCode, RequestError
from eventcloud.overlay import CoordinateSpace, Zone
from eventcloud.rdf.model import IRI, Quad
from eventcloud.wire.codec import point_from_wire, point_to_wire
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import Decision, EventMeta, Handover
from peers import mailboxes as mb
from peers.async_store import AsyncStore
from peers.store import add, decide, notified, remove
from peers.subscriptions import Subscriptions

__all__ = ["HANDOVER_CHUNK", "chunk", "zone_content", "fetch_rest", "install", "drop_outside"]

#: Bytes of term text per handover chunk, far under the frame limit.
HANDOVER_CHUNK = 4 << 20


def chunk(quads: Sequence[Quad], events: Mapping[str, EventMeta], offset: int) -> Handover:
    """`quads` from `offset` on, up to HANDOVER_CHUNK bytes of text (at least one quad), with
    their events' metadata."""
    end, size = offset, 0
    while end < len(quads) and (end == offset or size < HANDOVER_CHUNK):
        size += sum(len(t.value) if isinstance(t, IRI) else len(t.lexical) + 16 for t in quads[end]) + 16
        end += 1
    taken = tuple(quads[offset:end])
    graphs = {q.g.value for q in taken}
    return Handover(taken, tuple(m for g, m in events.items() if g in graphs))


def zone_content(store: AsyncStore, subscriptions: Subscriptions, space: CoordinateSpace, zone: Zone,
                 held: Sequence[Quad]) -> tuple[list[Quad], Handover]:
    """The quads of `held` in `zone`, and everything that goes with them: their events' states
    as they are now, the subscriptions, decisions and mailboxes of the zone (all quads in the
    Handover; callers send it a chunk at a time)."""
    quads = [q for q in held if zone.contains(space.point(q))]
    events = {}
    for q in quads:
        info = store.event_info(q.g)
        if info is not None:
            events[q.g.value] = EventMeta(q.g.value, info.size, info.published, info.committed, info.notified, info.tx)
    decisions = tuple(Decision(key, decision, point_from_wire(point))
                      for key, (decision, point) in store.sync.decisions().items()
                      if zone.contains(point_from_wire(point)))
    mailboxes = tuple(box.pack() for box in store.sync.mailboxes.all()
                      if zone.contains(point_from_wire(box.record["home"])))
    return quads, Handover(tuple(quads), tuple(events.values()), tuple(subscriptions.export(zone)), decisions,
                           mailboxes)


async def fetch_rest(first: int, total: int, fetch: Callable[[int], Awaitable[Handover]],
                     install: Callable[[Handover], Awaitable[None]]) -> None:
    """Fetch quads `first`… `total` of a handover chunk by chunk (`fetch(offset)`), installing each."""
    offset = first
    while offset < total:
        data = await fetch(offset)
        if not data.quads:
            raise RequestError(f"the handover stopped at {offset} of {total} quads", ErrorCode.UNAVAILABLE)
        await install(data)
        offset += len(data.quads)


async def install(store: AsyncStore, subscriptions: Subscriptions, clock: HybridClock, data: Handover) -> None:
    """Take (part of) a zone's content: quads with their events' state, decisions, mailboxes,
    subscriptions."""
    events = {m.graph: m for m in data.events}
    mutations = []
    for graph, quads in _by_graph(data.quads).items():
        meta = events.get(graph) or EventMeta(graph, len(quads), 0)
        mutations.append(add(graph, quads, meta.size, meta.published, committed=meta.committed, tx=meta.tx))
        if meta.notified:
            mutations.append(notified(graph))
    mutations += [decide(d.key, d.decision, point_to_wire(d.point)) for d in data.decisions]
    mutations += [mb.install(packed) for packed in data.mailboxes]
    # Our clock must pass every stamp we take over: events arriving later are stamped after
    # the subscriptions and events handed to us (what matching compares).
    stamps = [m.published for m in data.events] + [r.t for r in data.subscriptions]
    if stamps:
        clock.observe(max(stamps))
    if mutations:
        await store.write(mutations)
    await subscriptions.install(data.subscriptions)


async def drop_outside(store: AsyncStore, subscriptions: Subscriptions, zone: Zone, quads: Sequence[Quad]) -> None:
    """Drop `quads` (handed over, or a failed take-over's), and the mailboxes and subscriptions
    not homed in `zone`."""
    by_graph = _by_graph(quads)
    moved = [mb.forget(box.id) for box in store.sync.mailboxes.all()
             if not zone.contains(point_from_wire(box.record["home"]))]
    if by_graph or moved:
        await store.write([remove(g, qs) for g, qs in by_graph.items()] + moved)
    await subscriptions.prune(zone)


def _by_graph(quads: Sequence[Quad]) -> dict[str, list[Quad]]:
    out: dict[str, list[Quad]] = {}
    for quad in quads:
        out.setdefault(quad.g.value, []).append(quad)
    return out
