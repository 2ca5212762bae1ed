"""Completing a CSMA notification: the chain's last peer knows *that* an event matched, not its
bindings nor all its quads. Whoever delivers it (the entry peer, or a durable subscription's
home) gathers the event's quads, then evaluates the subscription on the whole event for the exact
solutions. A subscription that rode the chain of one containing it (`verify`) is evaluated
whatever its kind: the chain proved its container matched, not it. An event that matched
several subscriptions delivered here is gathered once.

Gathering first asks the peer the event was published at (its *origin*, carried along the
chain): it keeps its recent publications whole (`RecentPublications`), so one request
replaces a multicast over the event's graph, and that multicast's retries while some owners
have not committed yet. When the origin no longer keeps it (restarted, or the event is older
than what it keeps) or cannot be reached, the entry gathers (g, ?, ?, ?) from the owners until
all `size` quads are there."""

from __future__ import annotations

from collections import Counter, OrderedDict

import trio

from eventcloud.errors import EventCloudError
from eventcloud.matching.reference import project, solution_limit, solutions
from eventcloud.rdf.model import IRI, CompoundEvent, Quad
from eventcloud.sparql.taxonomy import Taxonomy
from eventcloud.wire.messages import EventGet, Notification, Quads
from peers.publish import RecentPublications
from eventcloud.wire.ops import Op
from peers.matching import OperatorRunner, Stored
from peers.queries import Queries
from peers.net import Router
from peers.store import PeerState

__all__ = ["Gatherer", "reconstruct"]

#: Whole events kept after a gather (one event usually completes several subscriptions here).
KEPT_EVENTS = 2048
#: How long an entry waits for the peer an event was published at before asking the owners.
ORIGIN_WAIT = 2.0


class Gatherer:
    """Gathers the whole events CSMA notifications need, once per event however many of the
    subscriptions delivered here it matched (concurrent requests for one event share a gather)."""

    def __init__(self, queries: Queries, counters: Counter[str], *, state: PeerState, router: Router,
                 published: RecentPublications, kept: int = KEPT_EVENTS) -> None:
        self.queries = queries
        self.counters = counters
        self.state = state
        self.router = router
        self.published = published
        self.kept = kept
        self._whole: OrderedDict[str, tuple[Quad, ...]] = OrderedDict()
        self._gathering: dict[str, trio.Event] = {}

    async def quads(self, graph: str, size: int, deadline: float, origin: str = "") -> tuple[Quad, ...]:
        """The event's quads: all `size` of them, or what could be found within `deadline` seconds.
        `origin`: the peer it was published at, asked first."""
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
            quads = await self._from_origin(origin, graph, size) or await self._gather(graph, size, deadline)
            if len(quads) >= size:
                self._whole[graph] = quads
                if len(self._whole) > self.kept:
                    self._whole.popitem(last=False)
            return quads
        finally:
            del self._gathering[graph]
            done.set()

    async def _from_origin(self, origin: str, graph: str, size: int) -> tuple[Quad, ...]:
        """The event from the peer it was published at; () when that peer does not keep it."""
        if not origin:
            return ()
        if origin == self.state.address:
            quads = self.published.get(graph)
        else:
            quads = ()
            with trio.move_on_after(ORIGIN_WAIT):  # gone or unreachable: the owners have it
                try:
                    quads = Quads.from_wire(await self.router.call(origin, Op.EVENT_GET, EventGet(graph))).quads
                except EventCloudError:
                    pass
        if len(quads) < size:
            self.counters["events_not_at_origin"] += 1
            return ()
        self.counters["events_from_origin"] += 1
        return tuple(quads)

    async def _gather(self, graph: str, size: int, deadline: float) -> tuple[Quad, ...]:
        give_up = trio.current_time() + deadline
        delay = 0.02
        while True:
            try:
                quads = await self.queries.find((IRI(graph), None, None, None))
            except EventCloudError as exc:  # a zone changing owner (a join, a move): ask again
                if not exc.transient or trio.current_time() > give_up:
                    raise
                self.counters["reconstruction_retries"] += 1
                quads = []
            if len(quads) >= size or trio.current_time() > give_up:
                return tuple(quads)
            await trio.sleep(delay)
            delay = min(delay * 2, 0.5)


async def reconstruct(gatherer: Gatherer, stored: Stored, graph: str, size: int, published: int, *,
                      deadline: float, counters: Counter[str], taxonomy: Taxonomy,
                      runner: OperatorRunner | None = None, verify: bool = False,
                      origin: str = "") -> Notification | None:
    """The complete notification; one carrying an error if the quads did not all appear within
    `deadline` seconds; None when the whole event does not match after all. Is-a tests read
    `taxonomy` (this peer's); operator calls go through `runner` (this peer's, once per event);
    `origin` is the peer the event was published at."""
    quads = await gatherer.quads(graph, size, deadline, origin)
    kind = stored.kind
    if len(quads) < size:
        counters["reconstruction_failures"] += 1
        return Notification(stored.id, graph, kind, published,
                            error=f"could not reconstruct event {graph}: {len(quads)} of {size} quads found "
                                  f"after {deadline:g} s")
    event = CompoundEvent(IRI(graph), tuple(quads))
    if kind == "bindings" or verify:
        sub = stored.sub.with_taxonomy(taxonomy)
        limit = solution_limit(sub) if kind == "bindings" else 1
        if runner is not None and sub.uses_operators:
            found = await runner.run(graph, lambda: solutions(sub, event, limit))
        else:
            found = solutions(sub, event, limit)
        if not found:
            counters["contained_rejected" if verify else "reconstruction_mismatch"] += 1
            return None
        if kind == "bindings":
            return Notification(stored.id, graph, kind, published, solutions=tuple(project(sub, found)),
                                truncated=len(found) >= limit)
    return Notification(stored.id, graph, kind, published, quads=event.quads if kind == "event" else ())
