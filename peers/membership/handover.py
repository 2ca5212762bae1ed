"""A zone's content changing hands, in chunks far under the frame limit.

A zone may hold more than one frame carries: a split hands the newcomer its quads a chunk at a
time (the first with the grant, the rest fetched with `join_data`), and a graceful leave hands
the heir its first chunk with `take_over`, the heir fetching the rest with `leave_data` before
the zones merge. A zone sent whole in one `take_over` can pass the frame limit (34 and 45 MB
zones on 8 peers holding CityBench), and a peer holding that much could then never leave or
make room.
"""

from __future__ import annotations

from typing import Awaitable, Callable, Sequence

from eventcloud.errors import ErrorCode, RequestError
from eventcloud.overlay import CoordinateSpace, Zone
from eventcloud.rdf.model import IRI, Quad
from eventcloud.wire.codec import point_from_wire, point_to_wire
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import Decision, EventMeta, Handover
from peers.store import mailboxes as mb
from peers.store import AsyncStore, add, decide, notified, remove
from peers.matching import Subscriptions

__all__ = ["HANDOVER_CHUNK", "Outgoing", "items", "zone_content", "receive", "install", "drop_outside"]

#: Bytes of term text per handover chunk, far under the frame limit.
HANDOVER_CHUNK = 4 << 20


class Outgoing:
    """A zone's content being handed over, served a chunk at a time: its quads, then its
    decisions. Decisions are kept for good (one per publication attempt decided in the zone),
    so a zone's grow without bound: all in the first message, a long-running zone's would
    outgrow the frame (about 200 bytes each: 170,000 events' worth). Subscriptions and
    mailboxes, bounded per zone, go with the first chunk."""

    def __init__(self, content: Handover | None = None) -> None:
        content = content or Handover()
        self.quads = content.quads
        self.events = {m.graph: m for m in content.events}
        self.decisions = content.decisions
        self.subscriptions = content.subscriptions
        self.mailboxes = content.mailboxes

    def __len__(self) -> int:
        """The items a chunk offset counts: quads, then decisions."""
        return len(self.quads) + len(self.decisions)

    def chunk(self, offset: int) -> Handover:
        """Items from `offset` on, up to HANDOVER_CHUNK bytes of text (at least one), quads with
        their events' metadata."""
        end, size, nq = offset, 0, len(self.quads)
        while end < len(self) and (end == offset or size < HANDOVER_CHUNK):
            if end < nq:
                size += sum(len(t.value) if isinstance(t, IRI) else len(t.lexical) + 16 for t in self.quads[end]) + 16
            else:
                d = self.decisions[end - nq]
                size += len(d.key) + len(d.decision) + 32 * len(d.point) + 16
            end += 1
        quads = self.quads[offset:end] if offset < nq else ()
        graphs = {q.g.value for q in quads}
        return Handover(tuple(quads), tuple(m for g, m in self.events.items() if g in graphs),
                        decisions=tuple(self.decisions[max(offset, nq) - nq:max(end, nq) - nq]))

    def first(self) -> tuple[Handover, int]:
        """The first message's content (the first chunk, the subscriptions and mailboxes) and
        how many items remain to fetch."""
        data = self.chunk(0) if len(self) else Handover()
        return (Handover(data.quads, data.events, self.subscriptions, data.decisions, self.mailboxes),
                len(self) - items(data))

    def served(self, offset: int, what: str) -> Handover:
        """`chunk(offset)` for a fetch, or a typed error for an offset outside the handover."""
        if not 0 <= offset < len(self):
            raise RequestError(f"offset {offset} outside the {what}'s {len(self)} items", ErrorCode.BAD_REQUEST)
        return self.chunk(offset)


def items(data: Handover) -> int:
    """The chunk offsets `data` covers."""
    return len(data.quads) + len(data.decisions)


def zone_content(store: AsyncStore, subscriptions: Subscriptions, space: CoordinateSpace, zone: Zone,
                 held: Sequence[Quad]) -> tuple[list[Quad], Handover]:
    """The quads of `held` in `zone`, and everything that goes with them: their events' states
    as they are now, the subscriptions, decisions and mailboxes of the zone (all of it in the
    Handover: `Outgoing` sends it a chunk at a time)."""
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


async def receive(first: Handover, remaining: int, fetch: Callable[[int], Awaitable[Handover]],
                  install: Callable[[Handover], Awaitable[None]], installed: list[Quad] | None = None) -> None:
    """Install `first`, then fetch (`fetch(offset)`) and install the `remaining` items after it,
    chunk by chunk; each chunk's quads are added to `installed` before it is installed (what to
    drop if the handover fails)."""
    installed = [] if installed is None else installed
    offset, total, data = 0, items(first) + remaining, first
    while True:
        installed.extend(data.quads)
        await install(data)
        offset += items(data)
        if offset >= total:
            return
        data = await fetch(offset)
        if not items(data):
            raise RequestError(f"the handover stopped at {offset} of {total} items", ErrorCode.UNAVAILABLE)


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
