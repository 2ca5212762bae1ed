"""Publishing, storage side: an event's quads travel to their owners, pending, then commit.

The entry peer stamps each event with its publication time and routes its quads toward their
owners in one pass: each peer keeps the quads it owns and forwards the others grouped by next
hop, all events of a batch together, so a quad is stored exactly once and each hop costs one
message. Under OSMA every owner needs the whole event to match it, so the whole event travels
once, with the indexes of the quads each subtree stores; under CSMA only the routed quads do.

Quads are stored *pending* (durable, invisible); once every owner has them the entry decides
the attempt (`peers.publish.commits`) and acknowledges the client once the decision is durable, so an
acknowledged event is whole and will be matched, and a failed one is invisible; republishing
the same graph completes it. Then (in the background) it tells the owners, which commit
(visible) and hand the event to the matcher; a reader that meets a pending event asks for its
decision, and an owner left with a pending event resolves it itself.
"""

from __future__ import annotations

import logging
from collections import Counter
from functools import partial
from typing import Any, Callable

import trio

from eventcloud.errors import BadRequest, ErrorCode, EventCloudError, RequestError, Unavailable
from eventcloud.net.rpc import RpcConnection
from eventcloud.overlay import Zone, next_hop
from eventcloud.rdf.model import IRI, CompoundEvent, Quad
from eventcloud.sparql.filters.values import canonical_term
from eventcloud.wire.codec import iri_from_wire, point_from_wire, triple_from_wire, triple_to_wire, trusted_iri
from eventcloud.wire.hlc import HybridClock, unpack
from eventcloud.wire.messages import Commit, Deliver, Delivered, Delivery, Publish, Published, Receipt
from eventcloud.wire.ops import Op
from peers.publish.claims import GraphClaims, conflict, digest_of
from peers.publish.commits import ABORT, COMMIT, Commits, UNKNOWN
from peers.matching import Matcher
from peers.publish.owner_cache import OwnerCache
from peers.publish.recent import RecentPublications
from peers.net import FAILED, Router
from peers.store import AsyncStore, EventInfo, PeerState, RESERVED_GRAPHS, ZoneGuard, abort, add, commit
from peers.tasks import gather

log = logging.getLogger(__name__)

__all__ = ["Publishing", "canonical_event"]

#: Commit messages of acknowledged publications waiting to be sent, and tasks sending them.
COMMITS_QUEUED = 1024
COMMIT_SENDERS = 8
#: Commits owed to one owner that go out at once without waiting for `commit_later`.
LATER_MAX = 512

#: Quads this peer owns of one event: (graph, those quads, the delivery, its quads decoded so far:
#: None for those not routed here, decoded by `_whole_event` if the event is kept for matching).
_Mine = tuple[IRI, list[Quad], Delivery, list[Quad | None]]


def canonical_event(event: CompoundEvent) -> CompoundEvent:
    """Literals of known datatypes in canonical form ("01"^^xsd:integer is stored as "1"),
    so that what the matchers see is exactly what the stores hold and return."""
    quads = tuple(Quad(q.g, canonical_term(q.s), q.p, canonical_term(q.o)) for q in event.quads)
    return event if quads == event.quads else CompoundEvent(event.graph, quads)


class Publishing:
    def __init__(self, state: PeerState, router: Router, store: AsyncStore, commits: Commits, matcher: Matcher,
                 clock: HybridClock, counters: Counter[str], guard: ZoneGuard, *, retry_window: float,
                 resolve_after: float, commit_later: float = 1.0, abort_after: float, admit_backlog: int = 0,
                 backlog: Callable[[], int] | None = None, published: RecentPublications | None = None,
                 peers_proven: bool = True, claims: GraphClaims,
                 may_publish: Callable[[RpcConnection, list[str]], str | None] = lambda conn, graphs: None) -> None:
        self.state = state
        self.claims = claims   # event identity: a graph IRI holds one content
        self.may_publish = may_publish   # the publish policy: why a connection may not publish these (None: it may)
        self.peers_proven = peers_proven   # False in an open cluster: deliveries are checked like a client's
        self.guard = guard
        self.router = router
        self.store = store
        self.commits = commits
        self.matcher = matcher
        self.clock = clock
        self.counters = counters
        self.retry_window = retry_window
        self.resolve_after = resolve_after
        self.commit_later = commit_later
        #: commits owed to owners that need them only eventually: address -> graphs (sent merged)
        self._later: dict[str, dict[str, None]] = {}
        #: the owners recent deliveries reached, by zone (this peer's publications go straight there)
        self.owners = OwnerCache()
        self.abort_after = abort_after
        self.admit_backlog = admit_backlog   # 0: no admission control
        # CSMA: events published here, whole, for the entries that complete their notifications
        self.published = published if published is not None else RecentPublications()
        self._backlog = 0                    # longest matching queue the last deliveries met
        # this peer's queued work (matching; the runtime adds CSMA reconstructions)
        self.backlog = backlog if backlog is not None else (lambda: matcher.backlog)
        self._commits_send, self._commits_receive = trio.open_memory_channel[
            tuple[set[str], tuple[str, ...]]](COMMITS_QUEUED)

    def handlers(self) -> dict[Op, Any]:
        return {Op.PUBLISH: self._on_publish, Op.DELIVER: self._on_deliver, Op.EVENT_GET: self.published.on_event_get}

    def routed(self) -> dict[Op, Any]:
        return {Op.DELIVER_LOCAL: self._local_deliver}

    def pushes(self) -> dict[Op, Any]:
        return {Op.COMMIT: self._on_commit}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Send the commits of acknowledged publications; resolve pending events left behind (an
        entry that died between the phases, a commit message lost)."""
        async with trio.open_nursery() as nursery:
            for _ in range(COMMIT_SENDERS):
                nursery.start_soon(self._commit_sender, self._commits_receive.clone())
            nursery.start_soon(self._commit_later_loop)
            task_status.started()
            while True:
                await trio.sleep(max(0.5, self.resolve_after / 2))
                try:
                    await self.resolve_pending()
                except EventCloudError as exc:
                    log.info("peer %s: resolving pending events: %s", self.state.id, exc)

    async def _commit_later_loop(self) -> None:
        """Send the commits owed to owners that needed them only eventually, one message each."""
        while True:
            await trio.sleep(self.commit_later)
            later, self._later = self._later, {}
            for address, graphs in later.items():  # fewer than LATER_MAX each (publish sends those)
                await self._commits_send.send(({address}, tuple(graphs)))

    async def _commit_sender(self, receive: trio.MemoryReceiveChannel[tuple[set[str], tuple[str, ...]]]) -> None:
        async with receive:
            async for owners, graphs in receive:
                await self._send_commits(owners, graphs)

    # --- the entry peer -----------------------------------------------------------------------

    async def _on_publish(self, conn: RpcConnection, body: Publish) -> Published:
        """Store events; each stays atomic and idempotent on its own (a batch only shares messages)."""
        if not body.events:
            raise BadRequest("empty batch: give at least one event")
        for event in body.events:
            if event.graph.value in RESERVED_GRAPHS:  # checked here, where clients' events enter
                raise BadRequest(f"graph {event.graph.value} is reserved for the peers' own records")
        refusal = self.may_publish(conn, [e.graph.value for e in body.events])
        if refusal is not None:
            self.counters["publications_refused_by_policy"] += len(body.events)
            raise RequestError(refusal, ErrorCode.FORBIDDEN)
        events = [canonical_event(e) for e in body.events]
        await self._admit()
        stamped = [(event, self.clock.now()) for event in events]
        self.counters["events_published"] += len(events)
        # Shielded: a publisher that disconnects mid-request must not leave the attempt half done
        # (every step inside is bounded in time).
        with trio.CancelScope(shield=True):
            await self.publish(stamped)
        return Published(tuple(Receipt(e.graph.value, t, len(e)) for e, t in stamped))

    async def _admit(self) -> None:
        """Admission control: when the owners' matching queues run long, new publications wait
        (before anything of them is stored) for the queues to drain, so that what is accepted is
        matched and notified soon after instead of queueing behind a growing backlog. The wait
        is proportional to the longest queue the last deliveries met, at most a second."""
        backlog = max(self._backlog, self.backlog())
        if self.admit_backlog and backlog > self.admit_backlog:
            self.counters["publications_held"] += 1
            self._backlog = 0  # measured again by the deliveries made after the wait
            await trio.sleep(min(1.0, backlog / (4 * self.admit_backlog)))

    async def publish(self, stamped: list[tuple[CompoundEvent, int]]) -> None:
        """Claim each event's graph IRI for its content, then both phases for the events whose
        claim stands: pending at the owners, the decision here, then the commits. Events whose
        IRI holds other content are refused (`conflict`) after the others are published."""
        try:
            ours = await self.claims.claim([(e.graph.value, digest_of(e)) for e, _ in stamped])
        except EventCloudError as exc:
            raise RequestError(f"publication not stored, nothing of it is visible (its graph IRIs could not be "
                               f"claimed); retry it (same graph IRIs): {exc.message}",
                               exc.code if exc.transient else ErrorCode.UNAVAILABLE) from None
        conflicting = [e.graph.value for (e, _), mine in zip(stamped, ours) if not mine]
        stamped = [pair for pair, mine in zip(stamped, ours) if mine]
        if stamped:
            await self._both_phases(stamped)
        if conflicting:
            raise conflict(conflicting)

    async def _both_phases(self, stamped: list[tuple[CompoundEvent, int]]) -> None:
        attempts = [self.commits.attempt(t) for _, t in stamped]
        whole = self.state.algorithm == "osma"
        origin = "" if whole else self.state.address  # CSMA: chains carry it, entries ask it for the event
        deliveries = [Delivery(event.graph.value, len(event), published, tuple(triple_to_wire(q) for q in event.quads),
                               whole=whole, tx=(key, point), origin=origin)
                      for (event, published), (key, point) in zip(stamped, attempts)]
        failure: EventCloudError | None = None
        with trio.move_on_after(self.retry_window * 3) as phase:
            try:
                owners, prompt, backlog, zones = await self._deliver(deliveries, shortcuts=True)
                self._backlog = max(self._backlog, backlog)
                self.owners.learn(zones, self.state.address)
            except EventCloudError as exc:
                failure = exc
        if phase.cancelled_caught:
            failure = RequestError(f"its quads were not all stored within {self.retry_window * 3:g} s",
                                   ErrorCode.TIMEOUT)
        decisions = await self._decide(attempts, COMMIT) if failure is None else None
        if decisions is None:
            if failure is None:
                failure = Unavailable("this peer handed its zone over (it is leaving or moving) before it "
                                      "could record the decision")
            await self._decide(attempts, ABORT)  # nothing of it will ever be visible
            self.counters["publish_failures"] += len(stamped)
            raise RequestError(f"publication not stored, nothing of it is visible; retry it (same graph IRIs): "
                               f"{failure.message}", failure.code if failure.transient else ErrorCode.UNAVAILABLE)
        refused = [e.graph.value for (e, _), d in zip(stamped, decisions) if d != COMMIT]
        graphs = tuple(e.graph.value for (e, _), d in zip(stamped, decisions) if d == COMMIT)
        if origin:
            for (event, _), decision in zip(stamped, decisions):
                if decision == COMMIT:
                    self.published.add(event)
        if graphs:
            # Acknowledged once the decision is durable: readers that meet a pending event ask
            # for its decision, so the commit messages need not delay the publisher (one round
            # trip less per publication). Only the owners that may start matching work need the
            # commit now (`Delivered.prompt`); the others get theirs merged, every `commit_later`
            # seconds (a few messages per second instead of one per event and owner), and any
            # owner that misses one resolves its pending events in bulk (`resolve_pending`).
            now = prompt | (owners & {self.state.address})
            await self._commits_send.send((now, graphs))
            for address in owners - now:
                owed = self._later.setdefault(address, {})
                owed.update(dict.fromkeys(graphs))
                if len(owed) >= LATER_MAX:  # enough for a message of its own now
                    del self._later[address]
                    await self._commits_send.send(({address}, tuple(owed)))
        if refused:
            raise RequestError(f"publication of {', '.join(refused[:3])} took too long and was aborted; retry it",
                               ErrorCode.TIMEOUT)

    async def _decide(self, attempts: list[tuple[str, list[str]]], decision: str) -> list[str] | None:
        """Record decisions here, where their point is, while the zone holds it (the decision
        that stands for each); None if the zone went to an heir first. A zone change waits for
        the write; a leave hands the decisions made before it over, so one written here after
        it would be lost, and owners would resolve an acknowledged event as unknown, then
        abort it (found with 8 real peers moving while a batch was published)."""
        if not await self.guard.store_within(self.retry_window):  # bounds the wait, not the write
            return None
        try:
            zone = self.state.zone
            points = {tuple(point) for _, point in attempts}  # one per batch (the entry's corner then)
            if all(zone.contains(point_from_wire(list(point))) for point in points):
                return await self.commits.decide(attempts, decision)
            return None
        finally:
            self.guard.release_store()

    async def _send_commits(self, owners: set[str], graphs: tuple[str, ...]) -> None:
        """Tell the owners (best effort, bounded: an owner that misses it resolves the event)."""
        if not graphs:
            return

        async def one(address: str) -> None:
            try:
                if address == self.state.address:
                    await self.commit_here(graphs)
                else:
                    # a push: the owner answers nothing (one frame less per owner and event)
                    await self.router.push_merged(address, Op.COMMIT, graphs, Commit)
            except EventCloudError as exc:
                self.counters["commits_unsent"] += 1
                log.info("peer %s: commit to %s failed (%s); it will resolve", self.state.id, address, exc)

        with trio.move_on_after(self.retry_window):
            if len(owners) == 1:  # the common case: no nursery, no task
                await one(next(iter(owners)))
                return
            async with trio.open_nursery() as nursery:
                for address in owners:
                    nursery.start_soon(one, address)

    # --- owners -------------------------------------------------------------------------------

    async def _on_commit(self, conn: RpcConnection, body: Commit) -> None:
        await self.commit_here(body.graphs)

    async def commit_here(self, graphs: tuple[str, ...] | list[str]) -> None:
        """Make events visible here and match them (once: a second commit changes nothing)."""
        known = [g for g in graphs if self.store.event_info(g) is not None]
        if not known:
            return
        # not durable: a lost commit mark is derived again from the entry's decision
        flipped = await self.store.write([commit(g) for g in known], durable=False)
        for graph, changed in zip(known, flipped):
            if changed:
                self.counters["events_committed"] += 1
                await self.matcher.on_committed(graph)

    async def resolve_pending(self) -> None:
        """Pending events older than `resolve_after`: learn their decisions (one request per
        entry peer for all of its events) and act on them. This is how an owner that did not
        need its commit at once (`Delivered.prompt`) makes the event visible, and how one whose
        entry died between the phases, or whose commit message was lost, settles it."""
        now_ms = unpack(self.clock.now())[0]
        late: list[tuple[str, EventInfo]] = []
        old: list[tuple[str, EventInfo]] = []
        for graph, info in self.store.sync.pending().items():
            age = (now_ms - unpack(info.published)[0]) / 1000
            if age >= self.resolve_after:
                (old if age > self.abort_after else late).append((graph, info))
        for batch, abort_if_unknown in ((late, False), (old, True)):
            if not batch:
                continue
            decisions = await self.commits.resolve_many([info for _, info in batch], abort_if_unknown=abort_if_unknown)
            committed = [graph for (graph, _), decision in zip(batch, decisions) if decision == COMMIT]
            self.counters["pending_resolved_commit"] += len(committed)
            if committed:
                await self.commit_here(committed)
            for (graph, info), decision in zip(batch, decisions):
                if decision != ABORT:
                    continue
                current = self.store.event_info(graph)
                if current is not None and not current.committed and current.tx == info.tx:
                    keys = [key for key, _ in info.tx or ()]
                    # conditional: a retry stored here while this write waits for the disk keeps the event
                    if await self.store.write([abort(graph, keys)]) != [0]:
                        self.counters["pending_resolved_abort"] += 1
                        log.info("peer %s: %s aborted (attempts %s), its pending quads dropped", self.state.id,
                                 graph, ", ".join(keys))
                        self.matcher.forget(graph)

    # --- delivery -----------------------------------------------------------------------------

    async def _on_deliver(self, conn: RpcConnection, body: Deliver) -> Delivered:
        if not self.peers_proven:
            for delivery in body.deliveries:
                _check(delivery)
        owners, prompt, backlog, zones = await self._deliver(list(body.deliveries))
        ordered = sorted(owners)
        return Delivered(tuple(ordered), backlog, tuple(sorted(prompt)),
                         tuple(zones[a] for a in ordered) if all(a in zones for a in ordered) else ())

    async def _deliver(self, deliveries: list[Delivery], shortcuts: bool = False
                       ) -> tuple[set[str], set[str], int, dict[str, Zone]]:
        """Keep the quads this peer owns; forward the others, all events together, one message per
        hop. Returns the addresses of every peer that stored some, of those that need the commit
        at once (`Delivered`), the longest matching queue among them, and their zones.

        `shortcuts` (the entry peer only): quads in the zone of an owner a recent delivery
        reported go straight to it (`OwnerCache`). Peers on the way route greedily, so a stale
        zone costs a hop more, never a loop."""
        state = self.state
        await self.guard.acquire_store()  # the quads decided ours below are written before the zone may shrink
        try:
            mine, groups, stray = self._sort(deliveries, self.owners if shortcuts else None)
        except BaseException:
            self.guard.release_store()
            raise
        owners: set[str] = set()
        prompt: set[str] = set()
        zones: dict[str, Zone] = {}
        backlog = [self.backlog()]

        async def forward(address: str, part: list[Delivery]) -> None:
            try:
                reply = Delivered.from_wire(await self.router.call_merged(address, Op.DELIVER, part, Deliver))
                owners.update(reply.owners)
                prompt.update(reply.prompt)
                zones.update(zip(reply.owners, reply.zones))
                backlog.append(reply.backlog)
            except FAILED as exc:
                self.owners.forget(address)
                log.info("peer %s: delivery via %s failed (%s); routing quads one by one", state.id, address, exc)
                await route_each(part)

        async def route_each(part: list[Delivery]) -> None:
            """One quad at a time, by routed requests (which go around peers down or passed)."""
            for delivery in part:
                graph = trusted_iri(delivery.graph)
                for i in _taken(delivery):
                    quad = triple_from_wire(graph, delivery.quads[i], trusted=True)
                    result = await self.router.route(state.space.point(quad), Op.DELIVER_LOCAL, _part(delivery, [i]))
                    owners.update(result or ())
                    prompt.update(result or ())  # not known: the commit goes at once

        async def store_mine() -> None:
            try:
                results = await self._write(mine) if mine else []
            finally:
                self.guard.release_store()
            if mine:
                owners.add(state.address)
                zones[state.address] = state.zone
                starts = [self.matcher.may_start(own) for _, own, _, _ in mine]
                if any(starts):
                    prompt.add(state.address)
                await self._stored(mine, results, starts)  # every event of the batch in one durable write

        if stray:
            self.counters["deliveries_around_passed_peers"] += 1
        await gather([store_mine, *(partial(forward, address, part) for address, part in groups.items()),
                      *([partial(route_each, stray)] if stray else [])])
        return owners, prompt, max(backlog), zones

    def _sort(self, deliveries: list[Delivery], cache: OwnerCache | None = None
              ) -> tuple[list[_Mine], dict[str, list[Delivery]], list[Delivery]]:
        """The quads this peer owns, the rest grouped by the address of the next hop (an owner
        from `cache`, else the greedy next hop), and those with no way on but back through a
        peer they passed (tables a moment old while peers move: sent back, a delivery went to
        and fro, each hop a request waiting on the next, until in-flight limits stopped both)."""
        state = self.state
        zone, zones, space = state.zone, state.neighbour_zones(), state.space
        neighbours = state.neighbours
        mine: list[_Mine] = []
        groups: dict[str, list[Delivery]] = {}
        stray: list[Delivery] = []
        for delivery in deliveries:
            graph = trusted_iri(delivery.graph)
            passed = delivery.passed
            # the quads routed from here are decoded once; the others of a whole event only if
            # this peer keeps the event for matching (`_stored`)
            quads: list[Quad | None] = [None] * len(delivery.quads)
            own: list[Quad] = []
            by_hop: dict[str, list[int]] = {}
            back: list[int] = []
            for i in _taken(delivery):
                try:
                    quad = quads[i] = triple_from_wire(graph, delivery.quads[i], trusted=True)
                except (IndexError, TypeError):
                    raise BadRequest(f"delivery of {delivery.graph}: quad index {i!r} out of range") from None
                point = space.point(quad)
                hop = next_hop(zone, zones, point)
                if hop is None:
                    own.append(quad)
                    continue
                if passed and hop in passed:
                    back.append(i)
                    continue
                address = cache.owner_of(point) if cache is not None else None
                by_hop.setdefault(address or neighbours[hop].address, []).append(i)
            if own:
                mine.append((graph, own, delivery, quads))
            onward = (*passed, state.id)
            for hop, taken in by_hop.items():
                groups.setdefault(hop, []).append(_part(delivery, taken, onward))
            if back:
                stray.append(_part(delivery, back))
        return mine, groups, stray

    async def _local_deliver(self, body: Delivery) -> list[str]:
        if not self.peers_proven:
            _check(body)
        graph = trusted_iri(body.graph)
        quads = [triple_from_wire(graph, q, trusted=True) for q in body.quads]
        taken = _taken(body)
        if any(not 0 <= i < len(quads) for i in taken):
            raise BadRequest(f"delivery of {body.graph}: a quad index is out of range")
        space = self.state.space
        async with self.guard.store():
            zone = self.state.zone
            ours = [i for i in taken if zone.contains(space.point(quads[i]))]
            mine: list[_Mine] = [(graph, [quads[i] for i in ours], body, quads)] if ours else []
            results = await self._write(mine) if mine else []
        owners = [self.state.address] if mine else []
        if mine:
            await self._stored(mine, results)
        # routed here before this zone split for a newcomer: on to the owner now
        kept = set(ours)
        moved = [i for i in taken if i not in kept]
        if moved:
            self.counters["deliveries_rerouted"] += 1
            for i in moved:
                owners.extend(await self.router.route(space.point(quads[i]), Op.DELIVER_LOCAL, _part(body, [i])) or ())
        return owners

    async def _write(self, mine: list[_Mine]) -> list[tuple[Any, Any]]:
        """Store the quads this peer owns of several events, in one durable write."""
        await self._settle_earlier(mine)
        # Each owner stamps an event with its own clock as it arrives (a retry keeps the first
        # stamp): a subscription stored here earlier has a smaller stamp, one stored later a larger
        # one, which is all matching compares (docs/pubsub.md, "Timing").
        return await self.store.write([add(graph.value, own, d.size, self.clock.now(), committed=d.tx is None,
                                           tx=d.tx) for graph, own, d, _ in mine])

    async def _settle_earlier(self, mine: list[_Mine]) -> None:
        """A new attempt for an event held here pending under earlier ones (a retry, or a late
        copy of an earlier attempt) joins them (`attempts_of`): the event is visible once any
        of them is decided commit. Learn the earlier ones' fate first: one decided commit
        commits the event here now, instead of at every later reader's and resolution's ask."""
        earlier = []
        for graph, _, delivery, _ in mine:
            info = self.store.event_info(graph.value)
            if (info is not None and not info.committed and info.tx and delivery.tx
                    and all(key != delivery.tx[0] for key, _ in info.tx)):
                earlier.append((graph.value, info))
        if not earlier:
            return
        decisions = await self.commits.resolve_many([info for _, info in earlier])
        committed = [graph for (graph, _), decision in zip(earlier, decisions) if decision == COMMIT]
        unknown = [graph for (graph, _), decision in zip(earlier, decisions) if decision == UNKNOWN]
        if unknown:  # kept beside the new attempt: either may be the one that commits
            self.counters["earlier_attempts_undecided"] += len(unknown)
            log.info("peer %s: %d events held pending under attempts not decided as far as known meet a new "
                     "attempt: %s", self.state.id, len(unknown), ", ".join(unknown[:5]))
        if committed:
            self.counters["earlier_attempts_committed"] += len(committed)
            await self.commit_here(committed)

    async def _stored(self, mine: list[_Mine], results: list[tuple[Any, Any]],
                      starts: list[bool] | None = None) -> None:
        """Hand what was just stored to the matcher (the whole event is kept for matching at
        the commit only where it may start matching work: `starts`, per event)."""
        for i, ((graph, own, delivery, quads), (fresh, _)) in enumerate(zip(mine, results)):
            self.counters["quads_stored"] += len(fresh)
            if delivery.tx is not None:
                keep = starts is None or starts[i]
                self.matcher.remember(graph.value, _whole_event(graph, delivery, quads) if keep else None, own,
                                      delivery.origin)
            elif fresh:  # data arriving already committed (no attempt): match it now
                self.matcher.held(graph.value, own, delivery.origin)
                await self.matcher.on_committed(graph.value, _whole_event(graph, delivery, quads))


def _taken(delivery: Delivery) -> range | tuple[int, ...]:
    return range(len(delivery.quads)) if delivery.take is None else delivery.take


def _part(delivery: Delivery, taken: list[int], passed: tuple[str, ...] = ()) -> Delivery:
    """The same event, for a subtree: OSMA keeps every quad (and says which to store), CSMA only the
    taken; `passed`: the peers it went through, this one included when it is forwarded on."""
    d = delivery  # built field by field: dataclasses.replace cost a tenth of the sort, per event and hop
    if d.whole:
        return Delivery(d.graph, d.size, d.published, d.quads, tuple(taken), True, d.tx, d.origin, passed)
    return Delivery(d.graph, d.size, d.published, tuple(d.quads[i] for i in taken), None, False, d.tx, d.origin,
                    passed)


def _check(delivery: Delivery) -> None:
    """A delivery's graph and quads as a client's publication is checked (BadRequest naming what
    is wrong): from a peer of an open cluster, that may be anyone."""
    graph = iri_from_wire(delivery.graph, "the graph of a delivery")
    for quad in delivery.quads:
        triple_from_wire(graph, quad)


def _whole_event(graph: IRI, delivery: Delivery, quads: list[Quad | None]) -> CompoundEvent | None:
    """The event as the entry peer validated it (no re-validation on the hot path), when the
    delivery carries it whole (OSMA); `quads` holds those decoded already."""
    if not delivery.whole:
        return None
    event = object.__new__(CompoundEvent)
    object.__setattr__(event, "graph", graph)
    object.__setattr__(event, "quads", tuple(q if q is not None else triple_from_wire(graph, t, trusted=True)
                                             for q, t in zip(quads, delivery.quads)))
    return event
