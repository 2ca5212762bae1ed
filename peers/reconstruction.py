"""Completing a CSMA notification: the chain's last peer knows *that* an event matched, not its
bindings nor all its quads. Whoever delivers it (the entry peer, or a durable subscription's
home) gathers the event's quads (g, ?, ?, ?) until all `size` are there, then evaluates the
subscription on the whole event for the exact solutions. A subscription that rode the chain of
one containing it (`verify`) is evaluated whatever its kind: the chain proved its container
matched, not it. An event that matched several subscriptions delivered here is gathered once."""

from __future__ import annotations

from collections import Counter, OrderedDict

import trio

from eventcloud.matching.reference import MAX_SOLUTIONS, project, solutions
from eventcloud.rdf.model import IRI, CompoundEvent, Quad
from eventcloud.sparql.taxonomy import Taxonomy
from eventcloud.wire.messages import Notification
from peers.operators import OperatorRunner
from peers.queries import Queries
from peers.subscriptions import Stored

__all__ = ["Gatherer", "reconstruct"]

#: Whole events kept after a gather (one event usually completes several subscriptions here).
KEPT_EVENTS = 2048


class Gatherer:
    """Gathers the whole events CSMA notifications need, once per event however many of the
    subscriptions delivered here it matched (concurrent requests for one event share a gather)."""

    def __init__(self, queries: Queries, counters: Counter[str], kept: int = KEPT_EVENTS) -> None:
        self.queries = queries
        self.counters = counters
        self.kept = kept
        self._whole: OrderedDict[str, tuple[Quad, ...]] = OrderedDict()
        self._gathering: dict[str, trio.Event] = {}

    async def quads(self, graph: str, size: int, deadline: float) -> tuple[Quad, ...]:
        """The event's quads: all `size` of them, or what could be found within `deadline` seconds."""
        while True:
            whole = self._whole.get(graph)
            if whole is not None and len(whole) >= size:
                self.counters["reconstructions_shared"] += 1
                return whole
            running = self._gathering.get(graph)
            if running is None:
                break
            await running.wait()  # another reconstruction is gathering this event: share it
            if graph not in self._whole:
                break  # it did not complete: try ourselves
        done = self._gathering[graph] = trio.Event()
        try:
            quads = await self._gather(graph, size, deadline)
            if len(quads) >= size:
                self._whole[graph] = quads
                if len(self._whole) > self.kept:
                    self._whole.popitem(last=False)
            return quads
        finally:
            del self._gathering[graph]
            done.set()

    async def _gather(self, graph: str, size: int, deadline: float) -> tuple[Quad, ...]:
        give_up = trio.current_time() + deadline
        delay = 0.02
        while True:
            quads = await self.queries.find((IRI(graph), None, None, None))
            if len(quads) >= size or trio.current_time() > give_up:
                return tuple(quads)
            await trio.sleep(delay)
            delay = min(delay * 2, 0.5)


async def reconstruct(gatherer: Gatherer, stored: Stored, graph: str, size: int, published: int, *,
                      deadline: float, counters: Counter[str], taxonomy: Taxonomy,
                      runner: OperatorRunner | None = None, verify: bool = False) -> Notification | None:
    """The complete notification; one carrying an error if the quads did not all appear within
    `deadline` seconds; None when the whole event does not match after all. Is-a tests read
    `taxonomy` (this peer's); operator calls go through `runner` (this peer's, once per event)."""
    quads = await gatherer.quads(graph, size, deadline)
    kind = stored.record.kind
    if len(quads) < size:
        counters["reconstruction_failures"] += 1
        return Notification(stored.id, graph, kind, published,
                            error=f"could not reconstruct event {graph}: {len(quads)} of {size} quads found "
                                  f"after {deadline:g} s")
    event = CompoundEvent(IRI(graph), tuple(quads))
    if kind == "bindings" or verify:
        sub = stored.sub.with_taxonomy(taxonomy)
        limit = MAX_SOLUTIONS if kind == "bindings" else 1
        if runner is not None and sub.uses_operators:
            found = await runner.run(graph, lambda: solutions(sub, event, limit))
        else:
            found = solutions(sub, event, limit)
        if not found:
            counters["contained_rejected" if verify else "reconstruction_mismatch"] += 1
            return None
        if kind == "bindings":
            return Notification(stored.id, graph, kind, published, solutions=tuple(project(sub, found)),
                                truncated=len(found) >= MAX_SOLUTIONS)
    return Notification(stored.id, graph, kind, published, quads=event.quads if kind == "event" else ())
