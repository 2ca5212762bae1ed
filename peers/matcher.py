"""Matching on a peer: OSMA's one-step check and CSMA's chained rewriting.

OSMA: an owner of quads of an event holds the whole event and checks the subscriptions stored
here whose indexing pattern matches one of its quads (it cannot be the notifier of any
other). The shared index decides which match; for each, one decision (`matching.osma.decide`)
says whether this peer is the notifier and with which bindings. The event is indexed once.

CSMA: a stored quad that matches the first pattern of a subscription starts a chain: the
subscription is rewritten (its variables bound, the pattern dropped) and routed to the peers
of its next pattern, which match it against the quads they hold (and those still to come,
for `rewritten_ttl`). When no pattern is left the entry peer is notified.

A subscription that reaches a peer after quads it should have seen (a concurrent
publication) starts CSMA chains from the stored quads: the OSMA fallback and CSMA's own rule.

All matching runs in worker tasks fed by a bounded channel, so publishing returns once quads
are stored. Work a worker produces for this same peer (a chain step whose next pattern is
local) is done by that worker afterwards, never queued behind itself.
"""

from __future__ import annotations

import contextvars
import logging
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Union

import trio

from eventcloud.errors import ErrorCode, EventCloudError, RequestError
from eventcloud.matching.csma import PartialMatch, advance, is_complete, next_pattern, start
from eventcloud.matching.osma import decide
from eventcloud.matching.reference import event_index
from eventcloud.rdf.model import IRI, CompoundEvent, Quad
from eventcloud.wire.messages import CsmaStep, Notify, StoreSubscription, SubscriptionId, SubscriptionRecord
from eventcloud.wire.ops import Op
from peers.router import Router
from peers.state import PeerState
from peers.store import AsyncStore
from peers.subscriptions import Stored, Subscriptions

log = logging.getLogger(__name__)

__all__ = ["Matcher"]

OSMA_CHECKED_LIMIT = 100_000   # recent events whose OSMA candidates this peer remembers


@dataclass(frozen=True, slots=True)
class _Osma:
    event: CompoundEvent
    size: int
    published: int
    candidates: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _First:
    ident: str
    quad: Quad
    size: int
    published: int


@dataclass(frozen=True, slots=True)
class _Next:
    record: SubscriptionRecord
    partial: PartialMatch
    index: int
    quad: Quad
    size: int
    published: int


Work = Union[_Osma, _First, _Next]

#: Set inside a worker: work it produces for this peer goes here, done by that worker next.
_inline: contextvars.ContextVar[deque | None] = contextvars.ContextVar("inline_work", default=None)


class Matcher:
    def __init__(self, state: PeerState, router: Router, store: AsyncStore, subscriptions: Subscriptions,
                 notify_here: Callable[[Notify], Awaitable[None]], counters: Counter[str], *, workers: int,
                 work_queue: int, rewritten_ttl: float, enqueue_timeout: float) -> None:
        self.state = state
        self.router = router
        self.store = store
        self.subscriptions = subscriptions
        self.notify_here = notify_here
        self.counters = counters
        self.workers = workers
        self.rewritten_ttl = rewritten_ttl
        self.enqueue_timeout = enqueue_timeout
        # CSMA rewritten subscriptions waiting here, by event graph then subscription id.
        self._rewritten: dict[str, dict[str, list[tuple[PartialMatch, float]]]] = {}
        self._chain_records: dict[str, SubscriptionRecord] = {}
        self._osma_checked: OrderedDict[str, set[str]] = OrderedDict()
        self._send, self._receive = trio.open_memory_channel[Work](work_queue)

    def routed(self) -> dict[Op, Any]:
        return {Op.STORE_SUB: self._local_store_sub, Op.REMOVE_SUB: self._local_remove_sub,
                Op.CSMA_SUB: self._local_csma_sub}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(self.workers):
                nursery.start_soon(self._worker, self._receive.clone())
            nursery.start_soon(self._expire_loop)
            task_status.started()

    async def _submit(self, work: Work) -> None:
        inline = _inline.get()
        if inline is not None:
            inline.append(work)
            return
        with trio.move_on_after(self.enqueue_timeout):
            await self._send.send(work)
            return
        self.counters["matching_busy"] += 1
        raise RequestError(f"peer {self.state.id} is overloaded: its matching queue stayed full", ErrorCode.BUSY)

    # --- subscriptions arriving and leaving -----------------------------------------------------

    async def _local_store_sub(self, body: StoreSubscription) -> int:
        record = body.record
        if self.subscriptions.removed(record.id):
            return 0
        sub = self.subscriptions.parse(record)
        if not self.state.zone.intersects(self.subscriptions.box(sub)):
            return 0
        stored = await self.subscriptions.add(record)
        if stored is None:
            return 0
        # Quads stored before the subscription arrived but published after it was made.
        for quad in await self.store.find(*sub.pattern_terms(0)):
            info = self.store.event_info(quad.g)
            if info is not None and info[1] >= stored.t:
                await self._submit(_First(stored.id, quad, info[0], info[1]))
        return 1

    async def _local_remove_sub(self, body: SubscriptionId) -> int:
        ident = body.id
        self._chain_records.pop(ident, None)
        for waiting in self._rewritten.values():
            waiting.pop(ident, None)
        return int(await self.subscriptions.remove(ident))

    async def _local_csma_sub(self, body: CsmaStep) -> int:
        record = body.record
        if self.subscriptions.removed(record.id):
            return 0
        sub = self.subscriptions.parse(record)
        self._rewritten.setdefault(body.graph, {}).setdefault(record.id, []).append(
            (body.partial, trio.current_time() + self.rewritten_ttl))
        self._chain_records[record.id] = record
        index = next_pattern(sub, body.partial)
        for quad in await self.store.find(*sub.pattern_terms(index, dict(body.partial.bindings))):
            await self._submit(_Next(record, body.partial, index, quad, body.size, body.published))
        return 1

    # --- quads arriving ---------------------------------------------------------------------------

    async def on_stored(self, graph: IRI, fresh: list[Quad], size: int, published: int,
                        whole: CompoundEvent | None) -> None:
        """Quads of an event were stored here (`whole`: the event, under OSMA)."""
        index = self.subscriptions.index
        if whole is not None and len(self.subscriptions) and fresh:
            # OSMA: this peer can only be the notifier of a subscription whose indexing pattern
            # matches one of the quads it owns, so those quads' candidates are the only ones to
            # check. An event whose quads arrive here in several deliveries is checked once per
            # subscription: `checked` remembers which were already decided for it.
            checked = self._osma_checked.setdefault(graph.value, set())
            if len(self._osma_checked) > OSMA_CHECKED_LIMIT:
                self._osma_checked.popitem(last=False)
            candidates = []
            for quad in fresh:
                for ident in index.first_pattern_candidates(quad):
                    if ident not in checked:
                        checked.add(ident)
                        candidates.append(ident)
            if candidates:
                await self._submit(_Osma(whole, size, published, tuple(candidates)))
        waiting = self._rewritten.get(graph.value, {})
        for quad in fresh:
            if whole is None:
                for ident in index.first_pattern_candidates(quad):
                    stored = self.subscriptions.get(ident)
                    if stored is not None and published >= stored.t:
                        await self._submit(_First(ident, quad, size, published))
            for ident, items in list(waiting.items()):
                record = self._chain_records.get(ident)
                if record is None:
                    continue
                sub = self.subscriptions.parse(record)
                for partial, _ in list(items):
                    await self._submit(_Next(record, partial, next_pattern(sub, partial), quad, size, published))

    # --- the workers ----------------------------------------------------------------------------

    async def _worker(self, receive: trio.MemoryReceiveChannel[Work]) -> None:
        inline: deque[Work] = deque()
        _inline.set(inline)
        async with receive:
            async for item in receive:
                inline.append(item)
                while inline:
                    work = inline.popleft()
                    try:
                        await self._process(work)
                    except EventCloudError as exc:
                        self.counters["matching_errors"] += 1
                        log.warning("peer %s: matching step failed: %s", self.state.id, exc)
                    except Exception:
                        self.counters["matching_errors"] += 1
                        log.exception("peer %s: matching step failed", self.state.id)

    async def _process(self, work: Work) -> None:
        if type(work) is _Osma:
            await self._osma(work)
        elif type(work) is _First:
            stored = self.subscriptions.get(work.ident)
            if stored is None:
                return
            partial = advance(stored.sub, start(stored.sub), 0, work.quad)
            if partial is not None:
                await self._chain(stored.record, partial, work.quad.g.value, work.size, work.published)
        else:
            assert type(work) is _Next
            record = work.record
            if self.subscriptions.removed(record.id) or work.index not in work.partial.remaining:
                return
            advanced = advance(self.subscriptions.parse(record), work.partial, work.index, work.quad)
            if advanced is not None:
                await self._chain(record, advanced, work.quad.g.value, work.size, work.published)

    async def _osma(self, work: _Osma) -> None:
        event, published = work.event, work.published
        view = event_index(event)                       # the event, indexed once for every decision
        matched = set(self.subscriptions.index.match_event(event))  # the shared joins decide the matches
        zone, space = self.state.zone, self.state.space
        for ident in work.candidates:
            stored = self.subscriptions.get(ident)
            if ident not in matched or stored is None or published < stored.t:
                continue
            kind = stored.record.kind
            position, solutions = decide(stored.sub, view, want_solutions=kind == "bindings")
            if position is None or not zone.contains(space.point(event.quads[position])):
                continue
            await self._notify(stored.record, event.graph.value, work.size, published,
                               solutions=tuple(solutions) if kind == "bindings" else None,
                               quads=event.quads if kind == "event" else None)

    async def _chain(self, record: SubscriptionRecord, partial: PartialMatch, graph: str, size: int,
                     published: int) -> None:
        """One CSMA step done: notify if nothing is left, else route the rewritten
        subscription to the peers of its next pattern."""
        self._chain_records[record.id] = record
        if is_complete(partial):
            await self._notify(record, graph, size, published, csma=True)
            return
        sub = self.subscriptions.parse(record)
        index = next_pattern(sub, partial)
        box = self.state.space.pattern_box(sub.pattern_terms(index, dict(partial.bindings)))
        self.counters["csma_rewrites"] += 1
        await self.router.multicast(box, Op.CSMA_SUB, CsmaStep(record, partial, graph, size, published))

    async def _notify(self, record: SubscriptionRecord, graph: str, size: int, published: int, *,
                      csma: bool = False, solutions: Any = None, quads: Any = None) -> None:
        body = Notify(record.id, graph, size, published, csma=csma, solutions=solutions, quads=quads)
        self.counters["notifications_sent"] += 1
        if record.entry == self.state.address:
            await self.notify_here(body)
            return
        try:
            await self.router.call(record.entry, Op.NOTIFY, body)
        except EventCloudError as exc:
            self.counters["notifications_undeliverable"] += 1
            log.warning("peer %s: cannot reach entry %s of subscription %s: %s",
                        self.state.id, record.entry, record.id, exc)

    async def _expire_loop(self) -> None:
        while True:
            await trio.sleep(10)
            now = trio.current_time()
            for graph, waiting in list(self._rewritten.items()):
                for ident, items in list(waiting.items()):
                    kept = [(p, exp) for p, exp in items if exp > now]
                    if kept:
                        waiting[ident] = kept
                    else:
                        del waiting[ident]
                if not waiting:
                    del self._rewritten[graph]
            self.subscriptions.expire_tombstones(now)
