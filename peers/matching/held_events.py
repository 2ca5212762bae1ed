"""Recent events as this peer holds them, kept in memory so that matching reads no store.

Between an event's two phases its whole compound event waits here (OSMA matches it at commit:
the owners need not gather it); the quads of recent events held here serve matching and CSMA
steps; and where each recent event was published (its *origin*) goes along CSMA chains, so the
peer completing a notification asks there first. All three are bounded (least recently used
out): what fell out is read from the store, or gathered from the owners, instead.
"""

from __future__ import annotations

from collections import OrderedDict

from eventcloud.rdf.model import CompoundEvent, Quad
from eventcloud.wire.codec import trusted_iri
from peers.store import AsyncStore

__all__ = ["HeldEvents", "RECENT_LIMIT", "WAITING_LIMIT"]

WAITING_LIMIT = 100_000        # whole events kept in memory between their two phases
RECENT_LIMIT = 50_000          # recent events whose quads held here are kept in memory for matching


class HeldEvents:
    def __init__(self, store: AsyncStore) -> None:
        self.store = store
        self._waiting: OrderedDict[str, CompoundEvent | None] = OrderedDict()
        self._recent: OrderedDict[str, list[Quad]] = OrderedDict()
        self._origins: OrderedDict[str, str] = OrderedDict()

    def remember(self, graph: str, whole: CompoundEvent | None, held: list[Quad], origin: str = "") -> None:
        """Keep the whole event of a pending delivery until it commits, and the quads of it held here."""
        if whole is not None or graph not in self._waiting:  # quads of it may arrive in two parts
            self._waiting[graph] = whole
        self._waiting.move_to_end(graph)
        if len(self._waiting) > WAITING_LIMIT:
            self._waiting.popitem(last=False)  # it will be gathered from the owners instead
        self.held(graph, held, origin)

    def held(self, graph: str, quads: list[Quad], origin: str = "") -> None:
        if origin:
            self._origins[graph] = origin
            if len(self._origins) > RECENT_LIMIT:
                self._origins.popitem(last=False)
        known = self._recent.get(graph)
        if known is None:
            self._recent[graph] = list(quads)
        else:
            known.extend(q for q in quads if q not in known)
            self._recent.move_to_end(graph)
        if len(self._recent) > RECENT_LIMIT:
            self._recent.popitem(last=False)

    def forget(self, graph: str) -> None:
        self._waiting.pop(graph, None)
        self._recent.pop(graph, None)
        self._origins.pop(graph, None)

    def take_whole(self, graph: str) -> CompoundEvent | None:
        """The whole event kept since its delivery (None: not kept), forgotten here."""
        return self._waiting.pop(graph, None)

    def origin(self, graph: str) -> str:
        """The peer the event was published at, if known here."""
        return self._origins.get(graph, "")

    async def quads(self, graph: str, pattern: tuple | None = None) -> list[Quad]:
        """Quads of one event held here (matching `pattern`): from memory for recent events."""
        info = self.store.event_info(graph)
        known = self._recent.get(graph)
        if known is None or info is None or len(known) != info.held:
            known = await self.store.find(trusted_iri(graph), None, None, None)
            self._recent[graph] = known
            if len(self._recent) > RECENT_LIMIT:
                self._recent.popitem(last=False)
        if pattern is None:
            return known
        _, s, p, o = pattern
        return [q for q in known if (s is None or q.s == s) and (p is None or q.p == p) and (o is None or q.o == o)]
