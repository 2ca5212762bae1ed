"""The entry side of pub/sub: subscribe and unsubscribe, and delivery to subscribers.

Timing rule (MISSION §3): the entry peer first reads every peer's hybrid clock (a
whole-space multicast) and stamps the subscription t_S above all of them, so every
publication that completed before `subscribe` was called has t_P < t_S. It then stores the
subscription with a second whole-space multicast (peers outside the indexing box only merge
the clock), so once `subscribe` returns every peer's clock is past t_S and any later
publication, from any client, gets t_P > t_S. A pair counts only when t_P >= t_S.

Each subscriber connection has a session: its subscriptions, a bounded queue of
notifications pushed by one pump task, and the (subscription, event) pairs already
delivered, so a pair reaches the application once however many copies arrive (this is the
one deduplication point). CSMA notifications of bindings or whole events are completed here
by reconstruction (gathering the event's quads), in tasks of their own, never in a matching
worker.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Callable

import trio

from eventcloud.errors import ConnectionLost, ErrorCode, EventCloudError, RequestError
from eventcloud.matching.reference import MAX_SOLUTIONS, project, solutions
from eventcloud.net.rpc import RpcConnection
from eventcloud.rdf.model import IRI, CompoundEvent
from eventcloud.sparql.subscription import SubscriptionError
from eventcloud.wire.codec import solutions_to_wire, quad_to_wire
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import (
    Empty, Notification, Notify, StoreSubscription, Subscribe, Subscribed, SubscriptionId, SubscriptionRecord,
    Unsubscribe,
)
from eventcloud.wire.ops import Op
from peers.queries import Queries
from peers.router import Router
from peers.state import PeerState
from peers.subscriptions import Stored, parse_cached

log = logging.getLogger(__name__)

__all__ = ["Delivery", "Session"]


@dataclass
class Session:
    """Entry-side state of one subscriber connection."""

    conn: RpcConnection
    capacity: int
    subscriptions: dict[str, Stored] = field(default_factory=dict)
    seen: dict[str, OrderedDict] = field(default_factory=dict)
    queue: deque = field(default_factory=deque)
    wakeup: trio.Event = field(default_factory=trio.Event)
    closed: bool = False

    def offer(self, note: Notification) -> bool:
        """Queue a notification for the pump; False (dropped) when the queue is full."""
        if self.closed or len(self.queue) >= self.capacity:
            return False
        self.queue.append(note)
        self.wakeup.set()
        return True


@dataclass(frozen=True)
class _Reconstruction:
    session: Session
    stored: Stored
    graph: str
    size: int
    published: int


class Delivery:
    def __init__(self, state: PeerState, router: Router, queries: Queries, clock: HybridClock, counters: Counter[str],
                 *, retry_window: float, subscriber_buffer: int, seen_limit: int, reconstructors: int,
                 reconstruct_deadline: float, find_timeout: Callable[[], float] | None = None) -> None:
        self.state = state
        self.router = router
        self.queries = queries
        self.clock = clock
        self.counters = counters
        self.retry_window = retry_window
        self.subscriber_buffer = subscriber_buffer
        self.seen_limit = seen_limit
        self.reconstructors = reconstructors
        self.reconstruct_deadline = reconstruct_deadline
        self._sessions: dict[RpcConnection, Session] = {}
        self._by_id: dict[str, Session] = {}
        self._rebuild_send, self._rebuild_receive = trio.open_memory_channel[_Reconstruction](1024)
        self._nursery: trio.Nursery | None = None

    def handlers(self) -> dict[Op, Any]:
        return {Op.SUBSCRIBE: self._on_subscribe, Op.UNSUBSCRIBE: self._on_unsubscribe, Op.NOTIFY: self._on_notify}

    def routed(self) -> dict[Op, Any]:
        return {Op.CLOCK: self._local_clock}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Pumps and reconstructions run here, owned by the runtime's task for this service."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for _ in range(self.reconstructors):
                nursery.start_soon(self._reconstructor, self._rebuild_receive.clone())
            task_status.started()
            await trio.sleep_forever()

    # --- subscribe / unsubscribe --------------------------------------------------------------

    async def _on_subscribe(self, conn: RpcConnection, body: Subscribe) -> Subscribed:
        router, space = self.router, self.state.space
        try:
            sub = parse_cached(body.sparql)
        except SubscriptionError as exc:
            raise RequestError(exc.message, ErrorCode.BAD_SUBSCRIPTION) from None
        ident = uuid.uuid4().hex
        # Phase 1: read every peer's clock, so t_S exceeds the publication time of every
        # publication that completed before this call (whichever entry peer stamped it).
        clocks = await router.multicast(space.whole_space(), Op.CLOCK, Empty())
        self.clock.observe(max(clocks))
        record = SubscriptionRecord(ident, body.sparql, body.kind, self.state.address, self.clock.now())
        session = self._session(conn)
        session.subscriptions[ident] = Stored(record, sub)
        session.seen[ident] = OrderedDict()
        self._by_id[ident] = session
        try:
            await router.multicast(space.whole_space(), Op.STORE_SUB, StoreSubscription(record))
        except EventCloudError as exc:
            self._forget(ident)
            with trio.move_on_after(self.retry_window):
                try:
                    await router.multicast(space.whole_space(), Op.REMOVE_SUB, SubscriptionId(ident))
                except EventCloudError:
                    pass
            raise RequestError(f"subscription not stored on every peer, rolled back: {exc.message}",
                               ErrorCode.UNREACHABLE) from None
        self.counters["subscribe"] += 1
        return Subscribed(ident, record.t, len(sub.patterns))

    async def _on_unsubscribe(self, conn: RpcConnection, body: Unsubscribe) -> SubscriptionId:
        session = self._by_id.get(body.id)
        if session is None or session.conn is not conn:
            raise RequestError(f"no subscription {body.id} on this connection", ErrorCode.NOT_FOUND)
        self._forget(body.id)
        await self.router.multicast(self.state.space.whole_space(), Op.REMOVE_SUB, SubscriptionId(body.id))
        return SubscriptionId(body.id)

    async def _local_clock(self, body: Empty) -> int:
        return self.clock.now()

    def _session(self, conn: RpcConnection) -> Session:
        session = self._sessions.get(conn)
        if session is None:
            session = Session(conn, self.subscriber_buffer)
            self._sessions[conn] = session
            if self._nursery is None:
                raise RequestError("this peer is stopping", ErrorCode.UNAVAILABLE)
            self._nursery.start_soon(self._pump, session)
        return session

    def _forget(self, ident: str) -> None:
        session = self._by_id.pop(ident, None)
        if session is not None:
            session.subscriptions.pop(ident, None)
            session.seen.pop(ident, None)

    async def _pump(self, session: Session) -> None:
        """Push queued notifications to one subscriber; ends with its connection."""
        while not session.closed:
            if not session.queue:
                await session.wakeup.wait()
                session.wakeup = trio.Event()
                continue
            note = session.queue.popleft()
            try:
                await session.conn.push(Op.NOTIFICATION, note)
                self.counters["notifications_pushed"] += 1
            except ConnectionLost:
                break

    async def connection_closed(self, conn: RpcConnection) -> None:
        """A client connection ended: its subscriptions end with it."""
        session = self._sessions.pop(conn, None)
        if session is None:
            return
        session.closed = True
        session.wakeup.set()
        for ident in list(session.subscriptions):
            self._forget(ident)
            with trio.move_on_after(self.retry_window * 2):
                try:
                    await self.router.multicast(self.state.space.whole_space(), Op.REMOVE_SUB, SubscriptionId(ident))
                except EventCloudError as exc:
                    log.warning("could not remove subscription %s of a closed connection: %s", ident, exc)

    # --- notifications ------------------------------------------------------------------------

    async def _on_notify(self, conn: RpcConnection, body: Notify) -> Empty:
        await self.accept(body)
        return Empty()

    async def accept(self, body: Notify) -> None:
        """A notification for a subscription entered here (from any peer, or this one)."""
        ident, graph = body.subscription, body.event
        session = self._by_id.get(ident)
        if session is None or ident not in session.subscriptions:
            self.counters["notifications_unknown_subscription"] += 1
            return
        seen = session.seen[ident]
        if graph in seen:
            self.counters["duplicates_filtered"] += 1
            return
        seen[graph] = None
        if len(seen) > self.seen_limit:
            seen.popitem(last=False)
        stored = session.subscriptions[ident]
        kind = stored.record.kind
        if body.csma and kind != "signal":
            await self._rebuild_send.send(_Reconstruction(session, stored, graph, body.size, body.published))
            return
        self._offer(session, Notification(ident, graph, kind, body.published, solutions=body.solutions or (),
                                          quads=body.quads or (), truncated=body.truncated))

    def _offer(self, session: Session, note: Notification) -> None:
        if not session.offer(note):
            self.counters["notifications_dropped"] += 1

    async def _reconstructor(self, receive: trio.MemoryReceiveChannel[_Reconstruction]) -> None:
        async with receive:
            async for job in receive:
                try:
                    await self._reconstruct(job)
                except EventCloudError as exc:
                    self.counters["reconstruction_failures"] += 1
                    log.warning("reconstruction of %s failed: %s", job.graph, exc)

    async def _reconstruct(self, job: _Reconstruction) -> None:
        """CSMA: gather the event's quads (g, ?, ?, ?) until all `size` are there, then
        evaluate the subscription on the whole event for exact solutions."""
        deadline = trio.current_time() + self.reconstruct_deadline
        delay = 0.02
        quads: list = []
        while True:
            quads = await self.queries.find((IRI(job.graph), None, None, None))
            if len(quads) >= job.size or trio.current_time() > deadline:
                break
            await trio.sleep(delay)
            delay = min(delay * 2, 0.5)
        stored, kind = job.stored, job.stored.record.kind
        note = Notification(stored.id, job.graph, kind, job.published)
        if len(quads) < job.size:
            note = Notification(stored.id, job.graph, kind, job.published,
                                error=f"could not reconstruct event {job.graph}: {len(quads)} of {job.size} quads "
                                      f"found after {self.reconstruct_deadline:g} s")
            self.counters["reconstruction_failures"] += 1
        else:
            event = CompoundEvent(IRI(job.graph), tuple(quads))
            if kind == "bindings":
                found = solutions(stored.sub, event, MAX_SOLUTIONS)
                if not found:
                    self.counters["reconstruction_mismatch"] += 1
                    return
                note = Notification(stored.id, job.graph, kind, job.published,
                                    solutions=tuple(project(stored.sub, found)),
                                    truncated=len(found) >= MAX_SOLUTIONS)
            else:
                note = Notification(stored.id, job.graph, kind, job.published, quads=event.quads)
        if stored.id in job.session.subscriptions:
            self._offer(job.session, note)
