"""Matching on a peer: OSMA's one-step check and CSMA's chained rewriting, once per committed event.

An event is matched by each peer holding some of its quads when it commits there (never
while pending, so an event that is not acknowledged is never notified):

* OSMA: the peer checks the subscriptions stored here whose indexing pattern matches one of
  its quads (it cannot be the notifier of any other). The shared index decides which match
  the whole event; for each, one decision (`matching.osma.decide`) says whether this peer is
  the notifier and with which bindings. The event is indexed once.
* CSMA: each quad here matching a subscription's first pattern rewrites it and the
  rewritten subscription is multicast to the peers of its next pattern, which match it
  against their quads of the same event (all are stored before an event commits) and go on;
  the last one notifies the entry peer. Each step returns once its whole chain is done.

When every notification of an event was accepted by the entry peers, the event is marked
*notified* in the store. A committed event not marked notified (a crash, an unreachable
entry) is matched again by the outbox loop, here or on whichever peer took this zone over;
the entry peer drops what it already delivered, so a subscriber sees each pair once.

A subscription that reaches a peer after quads it should have seen (a concurrent publication)
starts CSMA chains from the stored quads: the OSMA fallback and CSMA's own rule.

Matching runs in the workers of a bounded queue (peers/matching/work_queue.py), and reads the
events it matches from memory while they are recent (peers/matching/held_events.py).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Awaitable, Callable, Union

import trio

from eventcloud.errors import BadRequest, ErrorCode, EventCloudError, RequestError
from eventcloud.matching.chains import ChainGrouper
from eventcloud.matching.csma import PartialMatch, advance, is_complete, next_pattern, start
from eventcloud.matching.osma import decide, in_notifier_order
from eventcloud.matching.reference import event_index, matches, solution_limit
from eventcloud.rdf.model import IRI, CompoundEvent, Quad
from eventcloud.wire.codec import quad_from_wire, trusted_iri
from eventcloud.wire.hlc import HybridClock, unpack
from eventcloud.wire.messages import (
    ChainMember, CsmaStep, Find, Notified, Notifies, Notify, StoreSubscription, SubscriptionId, SubscriptionRecord,
)
from eventcloud.wire.ops import Op
from peers.matching.operators import OperatorRunner
from peers.net import Router
from peers.store import AsyncStore, PeerState, ZoneGuard, notified
from peers.matching.held_events import HeldEvents
from peers.matching.registry import Stored, Subscriptions
from peers.matching.work_queue import WorkQueue
from peers.tasks import gather

log = logging.getLogger(__name__)

__all__ = ["Matcher"]

CHAINS_AT_ONCE = 64            # CSMA chains of one event started concurrently


@dataclass(frozen=True, slots=True)
class _Committed:
    graph: str
    whole: CompoundEvent | None
    again: bool = False   # match even if marked notified (the zone it was matched with was undone)


@dataclass(frozen=True, slots=True)
class _First:
    ident: str
    quad: Quad
    size: int
    published: int
    members: tuple[ChainMember, ...] = ()   # identical and contained subscriptions riding the chain
    origin: str = ""                         # the peer the event was published at


Work = Union[_Committed, _First]


class Matcher:
    def __init__(self, state: PeerState, router: Router, store: AsyncStore, subscriptions: Subscriptions,
                 notify_here: Callable[[Notify], Awaitable[bool]], clock: HybridClock, counters: Counter[str],
                 runner: OperatorRunner, *, workers: int, work_queue: int, enqueue_timeout: float,
                 outbox_every: float, give_up_after: float, guard: ZoneGuard,
                 contained_chains: bool = True) -> None:
        self.state = state
        #: subscription writes against zone changes: one stored here after a leave's snapshot
        #: would stay behind, and its heir would never match it
        self.guard = guard
        self.router = router
        self.store = store
        self.subscriptions = subscriptions
        self.notify_here = notify_here
        self.clock = clock
        self.counters = counters
        self.runner = runner   # operator calls: once per event here, expensive ones off the loop
        self.workers = workers
        self.enqueue_timeout = enqueue_timeout
        self.outbox_every = outbox_every
        self.give_up_after = give_up_after
        self.events = HeldEvents(store)   # recent events held here: matching reads no store for them
        self._busy: set[str] = set()   # events being matched right now
        self._steps_here = 0           # CSMA steps from other peers being run here
        # which CSMA chains share a first step (identical subscriptions always; contained ones unless off)
        self._grouper = ChainGrouper() if contained_chains else ChainGrouper(max_groups=0)
        self.queue = WorkQueue[Work](self._process, counters, workers=workers, size=work_queue,
                                     enqueue_timeout=enqueue_timeout, name=state.id if state is not None else "")

    @property
    def backlog(self) -> int:
        """Matching work waiting here: steps queued and not yet taken by a worker, plus the CSMA
        chain steps that arrived from other peers and are being run (admission control reads it)."""
        return self.queue.queued + self._steps_here

    def routed(self) -> dict[Op, Any]:
        return {Op.STORE_SUB: self._local_store_sub, Op.REMOVE_SUB: self._local_remove_sub,
                Op.CSMA_SUB: self._local_csma_sub}

    def routed_batches(self) -> dict[Op, Any]:
        return {Op.STORE_SUB: self._local_store_subs, Op.REMOVE_SUB: self._local_remove_subs}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.queue.run)
            nursery.start_soon(self._outbox_loop)
            task_status.started()

    # --- events ---------------------------------------------------------------------------------

    def may_start(self, own: list[Quad]) -> bool:
        """Whether committing an event of which this peer holds `own` may start matching work
        here: only a quad fitting a stored subscription's indexing pattern starts a CSMA chain
        or makes this peer an OSMA notifier (`_firsts`, `_osma`). False: the commit can wait."""
        return self.subscriptions.index.indexes_any(own)

    def remember(self, graph: str, whole: CompoundEvent | None, held: list[Quad], origin: str = "") -> None:
        """Keep the whole event of a pending delivery until it commits (OSMA matches it then),
        and the quads of it held here (for matching and CSMA steps without a store read)."""
        self.events.remember(graph, whole, held, origin)

    def held(self, graph: str, quads: list[Quad], origin: str = "") -> None:
        self.events.held(graph, quads, origin)

    def forget(self, graph: str) -> None:
        self.events.forget(graph)
        self.runner.forget(graph)

    async def on_committed(self, graph: str, whole: CompoundEvent | None = None) -> None:
        """An event committed here: match it."""
        kept = self.events.take_whole(graph)
        await self.queue.submit(_Committed(graph, whole or kept))

    async def rematch(self, graphs: list[str]) -> None:
        """Match these committed events again, even those marked notified: a split that was undone
        gave the zone back, and an event matched meanwhile skipped the quads then outside it (the
        entry drops the notifications already made)."""
        for graph in graphs:
            info = self.store.event_info(graph)
            if info is not None and info.committed:
                self.counters["rematched_after_undone_join"] += 1
                await self.queue.submit(_Committed(graph, None, again=True))

    async def _outbox_loop(self) -> None:
        """Match again the committed events whose notifications are not all done.

        How long an event has been owed is measured on this peer's own monotonic clock, from
        when this loop first saw it owed, not from its publication stamp: hybrid clocks jump
        forward when a message carries a later time (up to an hour ahead), and measured with
        them an owed event was either abandoned at once or not retried for that hour. An event
        whose stamp is already old when first seen (owed before a restart) is retried at once."""
        await trio.sleep(self.outbox_every / 4)
        owed_since: dict[str, float] = {}
        while True:
            now = trio.current_time()
            now_ms = unpack(self.clock.now())[0]
            owed: dict[str, float] = {}
            for graph, info in self.store.events().items():
                if not info.committed or info.notified or graph in self._busy:
                    continue
                since = owed[graph] = owed_since.get(graph, now)
                if now - since > self.give_up_after:  # an entry peer gone for good: stop owing it
                    self.counters["notifications_abandoned"] += 1
                    await self.store.write([notified(graph)])
                elif now - since >= self.outbox_every or (now_ms - unpack(info.published)[0]) / 1000 > self.outbox_every:
                    self.counters["outbox_retries"] += 1
                    await self.queue.submit(_Committed(graph, None))
            owed_since = owed
            await trio.sleep(self.outbox_every)

    # --- subscriptions arriving and leaving -----------------------------------------------------

    async def _local_store_sub(self, body: StoreSubscription) -> int:
        result = (await self._local_store_subs([body]))[0]
        if isinstance(result, EventCloudError):
            raise result
        return result

    async def _local_store_subs(self, bodies: list[StoreSubscription]) -> list[int | EventCloudError]:
        """Store subscriptions whose box meets this zone (1 each, 0 if not stored here), in one
        log write: a multicast_each's items for this peer (a subscribe_many's)."""
        results: list[int | EventCloudError] = [0] * len(bodies)
        parsed: list[tuple[int, Any, Any]] = []
        for i, body in enumerate(bodies):
            if i % 64 == 63:
                await trio.lowlevel.checkpoint()
            if self.subscriptions.removed(body.record.id):
                continue
            try:
                parsed.append((i, body.record, self.subscriptions.parse(body.record)))
            except EventCloudError as exc:  # this one's parsed form is refused: the others go on
                results[i] = exc
        if not parsed:
            return results
        try:
            async with self.guard.store():  # Unavailable once the zone was handed over: the sender retries
                zone = self.state.zone
                kept = []
                for i, record, sub in parsed:
                    if not zone.intersects(self.subscriptions.box(sub)):
                        continue
                    known = self.subscriptions.get(record.id)
                    # Stamped with this peer's clock when first stored here: it matches the events whose
                    # quads arrive here after it (their stamps are larger), and none that arrived before.
                    kept.append((i, replace(record, t=known.t if known is not None else self.clock.now()), sub))
                stored = await self.subscriptions.add_many([(record, sub) for _, record, sub in kept])
        except EventCloudError as exc:
            for i, _, _ in parsed:
                results[i] = exc
            return results
        for (i, _, sub), made in zip(kept, stored):
            if made is None:
                continue
            results[i] = 1
            # Committed quads stored before the subscription arrived but published after it was made
            # (none when no event held here arrived after its stamp: no store scan then).
            if self.store.sync.latest_published < made.t:
                continue
            for quad in await self.store.find(*sub.pattern_terms(0), committed_only=True):
                info = self.store.event_info(quad.g)
                if info is not None and info.published >= made.t:
                    await self.queue.submit(_First(made.id, quad, info.size, info.published))
        return results

    async def _local_remove_sub(self, body: SubscriptionId) -> int:
        async with self.guard.store():
            return int(await self.subscriptions.remove(body.id))

    async def _local_remove_subs(self, bodies: list[SubscriptionId]) -> list[int]:
        """Remove many (a multicast_each's items for this peer: a closed connection's), in one log write."""
        async with self.guard.store():
            return [int(found) for found in await self.subscriptions.remove_many([b.id for b in bodies])]

    async def _local_csma_sub(self, body: CsmaStep) -> int:
        """A rewritten subscription for one event: match it against the quads of that event held
        here and go on with its chain; returns once the chain is done (1) or nothing matched (0)."""
        self._steps_here += 1
        try:
            return await self._csma_step(body)
        finally:
            self._steps_here -= 1

    async def _csma_step(self, body: CsmaStep) -> int:
        record = body.record
        members = body.members or ()
        if self.subscriptions.removed(record.id) and not members:
            return 0
        IRI(body.graph)  # a ModelError (bad-request) for anything but an event's graph IRI
        sub = self.subscriptions.parse(record)
        if not body.partial.remaining or max(body.partial.remaining) >= len(sub.patterns):
            raise BadRequest(f"rewritten subscription {record.id}: its remaining patterns do not fit it")
        index = next_pattern(sub, body.partial)
        done = 0
        for quad in await self.events.quads(body.graph, sub.pattern_terms(index, dict(body.partial.bindings))):
            advanced = await self._advance(sub, body.partial, index, quad, body.graph)
            if advanced is not None:
                await self._chain(record, advanced, body.graph, body.size, body.published, members, body.origin)
                done = 1
        return done

    # --- one piece of work (run by a worker of the queue) ------------------------------------

    async def _process(self, work: Work) -> None:
        if type(work) is _Committed:
            if work.graph in self._busy:
                return
            self._busy.add(work.graph)
            try:
                await self._match(work)
            finally:
                self._busy.discard(work.graph)
            return
        assert type(work) is _First
        stored = self.subscriptions.get(work.ident)
        # CSMA's first step decides the pair by the stamps here, as OSMA's notifier does: a quad
        # that arrived before the subscription was stored here belongs to an event it must not
        # see (acknowledged before subscribe was called, its commit sent after)
        if stored is not None and work.published >= stored.t:
            partial = await self._advance(stored.sub, start(stored.sub), 0, work.quad, work.quad.g.value)
            if partial is not None:
                await self._chain(stored.record, partial, work.quad.g.value, work.size, work.published,
                                  work.members, work.origin)
        else:  # the chain's subscription went meanwhile: its riders start chains of their own
            for member in work.members:
                await self._process(_First(member.id, work.quad, work.size, work.published, origin=work.origin))

    async def _advance(self, sub: Any, partial: PartialMatch, index: int, quad: Quad, graph: str) -> PartialMatch | None:
        """One CSMA rewriting step; FILTERs calling operators share the event's call table."""
        if not sub.uses_operators:
            return advance(sub, partial, index, quad)
        return await self.runner.run(graph, lambda: advance(sub, partial, index, quad))

    async def _match(self, work: _Committed) -> None:
        """All the notifications this peer owes for one committed event, then the mark."""
        graph = work.graph
        info = self.store.event_info(graph)
        if info is None or not info.committed or (info.notified and not work.again):
            return
        if len(self.subscriptions):
            here = await self.events.quads(graph)
            if self.state.algorithm == "osma":
                await self._osma(graph, here, info.size, info.published, work.whole)
            else:  # the chains of one event run at once (their notifications to an entry merge)
                steps = [partial(self._process, first) for quad in here for first in self._firsts(quad, info)]
                for at in range(0, len(steps), CHAINS_AT_ONCE):
                    await gather(steps[at:at + CHAINS_AT_ONCE])
        # not durable: a lost mark only means matching again, and the entry drops the repeats
        await self.store.write([notified(graph)], durable=False)

    def _firsts(self, quad: Quad, info: Any) -> list[_First]:
        """CSMA's first steps from one quad, for the subscriptions whose stamps here let them
        see the event: one chain per set of identical ones, and contained ones ride the chain of
        one containing them (`eventcloud.matching.chains`)."""
        candidates = []
        for ident in self.subscriptions.index.first_pattern_candidates(quad):
            stored = self.subscriptions.get(ident)
            if stored is not None and info.published >= stored.t:
                candidates.append(stored)
        firsts = []
        origin = self.events.origin(quad.g.value)
        for plan in self._grouper.plan(candidates, lambda stored: stored.sub, lambda stored: stored.id):
            members = (*(ChainMember(s.id, s.entry, s.home) for s in plan.identical),
                       *(ChainMember(s.id, s.entry, s.home, contained=True) for s in plan.contained))
            self.counters["csma_chains_shared"] += len(plan.identical)
            self.counters["csma_chains_contained"] += len(plan.contained)
            firsts.append(_First(plan.leader.id, quad, info.size, info.published, members, origin))
        return firsts

    async def _osma(self, graph: str, here: list[Quad], size: int, published: int,
                    whole: CompoundEvent | None) -> None:
        # This peer can only be the notifier of a subscription whose indexing pattern matches
        # one of the quads it holds: those are the only candidates.
        index = self.subscriptions.index
        candidates = list(dict.fromkeys(ident for quad in here for ident in index.first_pattern_candidates(quad)))
        if not candidates:
            return
        # every holder decides on the same quad order (`in_notifier_order`): one of them notifies
        event = in_notifier_order(whole if whole is not None else await self._gather(graph, size))
        view = event_index(event)                       # the event, indexed once for every decision
        # the shared joins decide the matches; residual operator predicates are settled after them
        matched = set(await self.runner.settle(graph, index.match(event), lambda member: matches(member.sub, view)))
        zone, space = self.state.zone, self.state.space
        owed: list[Callable[[], Awaitable[None]]] = []
        memo: dict = {}  # identical subscriptions share one decision; each is projected on its own
        for ident in candidates:
            stored = self.subscriptions.get(ident)
            if ident not in matched or stored is None or published < stored.t:
                continue
            kind = stored.kind
            limit = solution_limit(stored.sub)
            if stored.sub.uses_operators:
                position, solutions = await self.runner.run(
                    graph, lambda: decide(stored.sub, view, want_solutions=kind == "bindings", limit=limit, memo=memo))
            else:
                position, solutions = decide(stored.sub, view, want_solutions=kind == "bindings", limit=limit,
                                             memo=memo)
            if position is None or not zone.contains(space.point(event.quads[position])):
                continue
            owed.append(partial(self._notify, stored, graph, size, published,
                                solutions=tuple(solutions) if kind == "bindings" else None,
                                quads=event.quads if kind == "event" else None,
                                truncated=kind == "bindings" and len(solutions) >= limit))
        if owed:  # all at once: the notifications for one entry peer travel in one request
            await gather(owed)

    async def _gather(self, graph: str, size: int) -> CompoundEvent:
        """The whole event from its owners (after a restart or a takeover lost the copy in memory)."""
        iri = trusted_iri(graph)
        box = self.state.space.pattern_box((iri, None, None, None))
        chunks = await self.router.multicast(box, Op.FIND_LOCAL, Find((iri, None, None, None), pending=True))
        quads = tuple(dict.fromkeys(quad_from_wire(q, trusted=True) for chunk in chunks for q in chunk))
        if len(quads) < size:
            raise RequestError(f"event {graph}: {len(quads)} of {size} quads found", ErrorCode.UNAVAILABLE)
        self.counters["events_gathered"] += 1
        return CompoundEvent(iri, quads)

    async def _chain(self, record: SubscriptionRecord, partial: PartialMatch, graph: str, size: int,
                     published: int, members: tuple[ChainMember, ...] = (), origin: str = "") -> None:
        """One CSMA step done: notify if nothing is left (the chain's subscription and every
        member), else hand the rewritten subscription to the peers of its next pattern (and
        wait for the rest of the chain)."""
        if is_complete(partial):
            owed = [(lambda who=who: self._notify(who, graph, size, published, csma=True, origin=origin,
                                                  verify=isinstance(who, ChainMember) and who.contained))
                    for who in (record, *members) if not self.subscriptions.removed(who.id)]
            await gather(owed)
            return
        sub = self.subscriptions.parse(record)
        index = next_pattern(sub, partial)
        box = self.state.space.pattern_box(sub.pattern_terms(index, dict(partial.bindings)))
        self.counters["csma_rewrites"] += 1
        await self.router.multicast(box, Op.CSMA_SUB, CsmaStep(record, partial, graph, size, published,
                                                                members or None, origin))

    async def _notify(self, record: Stored | SubscriptionRecord | ChainMember, graph: str, size: int,
                      published: int, *,
                      csma: bool = False, solutions: Any = None, quads: Any = None, truncated: bool = False,
                      verify: bool = False, origin: str = "") -> None:
        """Hand one notification to the subscription's entry peer; raises if it cannot be done
        (the event stays in the outbox and is matched again)."""
        body = Notify(record.id, graph, size, published, csma=csma, solutions=solutions, quads=quads,
                      truncated=truncated, verify=verify, origin=origin)
        self.counters["notifications_sent"] += 1
        if record.home is not None:
            await self._notify_home(record, body)
            return
        if record.entry == self.state.address:
            held = await self.notify_here(body)
        else:
            try:  # merged with the notifications other tasks send the same entry peer meanwhile
                reply = Notified.from_wire(await self.router.call_merged(record.entry, Op.NOTIFY, [body], Notifies),
                                           trusted=True)
            except EventCloudError as exc:
                self.counters["notifications_undeliverable"] += 1
                if self.subscriptions.get(record.id) is None:
                    return  # the subscription is gone meanwhile: nothing is owed any more
                raise RequestError(f"cannot reach entry {record.entry} of subscription {record.id}: {exc.message}",
                                   ErrorCode.UNREACHABLE) from None
            held = record.id not in reply.unknown
        if not held and self.subscriptions.get(record.id) is not None:
            # Its entry holds no such subscription (the subscriber's connection closed, the entry
            # restarted): a ghost, dropped here at once rather than matched until its lease ends.
            self.counters["ghost_subscriptions_dropped"] += 1
            await self.subscriptions.remove(record.id)

    async def _notify_home(self, record: Stored | SubscriptionRecord | ChainMember, body: Notify) -> None:
        """A durable subscription's notification goes to its home, which keeps it (numbered,
        durably) before answering; a home that no longer knows it means it ended: forget it."""
        assert record.home is not None
        try:
            kept = await self.router.route(record.home, Op.MAILBOX_NOTIFY, body)
        except EventCloudError as exc:
            self.counters["notifications_undeliverable"] += 1
            raise RequestError(f"cannot reach the home of subscription {record.id}: {exc.message}",
                               ErrorCode.UNREACHABLE) from None
        if kept == 0:
            await self.subscriptions.remove(record.id)
