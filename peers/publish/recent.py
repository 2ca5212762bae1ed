"""The events an entry peer published lately, kept whole: CSMA reconstruction asks here first.

A CSMA notification carries the peer an event was published at (its *origin*); whoever
completes the notification asks that peer for the whole event (`event_get`), one request where
a multicast over the event's graph would otherwise gather it from its owners.
"""

from __future__ import annotations

from collections import OrderedDict

from eventcloud.rdf.model import CompoundEvent, Quad
from eventcloud.wire.messages import EventGet, Quads

__all__ = ["KEPT_PUBLICATIONS", "RecentPublications"]

#: Events published here kept whole for the entries that reconstruct them (a few MB at most).
KEPT_PUBLICATIONS = 8192


class RecentPublications:
    """The last events acknowledged as published at this peer, whole, for `event_get`."""

    def __init__(self, kept: int = KEPT_PUBLICATIONS) -> None:
        self.kept = kept
        self._events: OrderedDict[str, tuple[Quad, ...]] = OrderedDict()

    def add(self, event: CompoundEvent) -> None:
        self._events[event.graph.value] = event.quads
        self._events.move_to_end(event.graph.value)
        while len(self._events) > self.kept:
            self._events.popitem(last=False)

    def get(self, graph: str) -> tuple[Quad, ...]:
        return self._events.get(graph, ())

    async def on_event_get(self, conn: object, body: EventGet) -> Quads:
        return Quads(self.get(body.graph))
