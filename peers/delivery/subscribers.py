"""The entry side of pub/sub: subscribe and unsubscribe, and delivery to subscribers.

Timing rule (docs/pubsub.md, "Timing"): a subscription is stored on the peers of
its indexing box only, and each stamps it with its own clock when it stores it; it then
matches the events whose quads arrive there afterwards. `subscribe` returns once every peer
of the box has stored it, so a publication made after that is matched, and one completed
before it was called is not. `subscribe_many` stores many in one multicast, each on its own
box's peers, with the same rule for each.

Each subscriber connection has a session: its subscriptions, a bounded queue of
notifications pushed by one pump task, and the (subscription, event) pairs already
delivered, so a pair reaches the application once however many copies arrive (this is the
one deduplication point). CSMA notifications of bindings or whole events are completed here
by reconstruction (gathering the event's quads), in tasks of their own, never in a matching
worker.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import uuid
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import trio

from eventcloud.errors import ConnectionLost, ErrorCode, EventCloudError, RemoteError, RequestError
from eventcloud.net.rpc import RpcConnection
from eventcloud.overlay import Box
from eventcloud.sparql.subscription import SubscriptionError
from eventcloud.sparql.filters.operators import NO_OPERATORS, OperatorSet
from eventcloud.sparql.taxonomy import Taxonomy
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import (
    Empty, Leases, MailboxEnd, MailboxOpen, Notification, Notified, Notifies, Notify, StoreSubscription, Subscribe, Subscribed,
    SubscribedMany, SubscribeMany, SubscribeOutcome, SubscriptionId, SubscriptionRecord, Unsubscribe,
)
from eventcloud.wire.parsed import subscription_to_wire
from eventcloud.wire.schema import Body
from eventcloud.wire.ops import Op
from peers.config import LeaseSettings
from peers.delivery.reconstruction import Gatherer, reconstruct
from peers.net import Router
from peers.store import PeerState
from peers.matching import OperatorRunner, Stored, indexing_box, parse_cached
from peers.tasks import TaskStarter

log = logging.getLogger(__name__)

__all__ = ["Subscribers", "Session"]

#: Most notifications pushed to one subscriber in one write.
PUSH_BATCH = 256
#: Subscriptions of closed connections removed per multicast tree; the wait before a retry, and its cap.
REMOVAL_BATCH = 512
REMOVAL_BACKOFF, REMOVAL_BACKOFF_MAX = 0.5, 10.0
#: Durable subscriptions of one `subscribe_many` opened at once (each opens its mailbox first).
DURABLE_AT_ONCE = 16
#: Subscriptions of one `subscribe_many` parsed between two yields to the event loop.
PARSE_RUN = 16


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

    def offer(self, note: Body, op: Op = Op.NOTIFICATION) -> bool:
        """Queue a push (a notification) for the pump; False (dropped) when the queue is full."""
        if self.closed or len(self.queue) >= self.capacity:
            return False
        self.queue.append((op, note))
        self.wakeup.set()
        return True

    def room(self) -> int:
        return 0 if self.closed else self.capacity - len(self.queue)


@dataclass(frozen=True)
class _Reconstruction:
    session: Session
    stored: Stored
    graph: str
    size: int
    published: int
    verify: bool
    origin: str = ""


class Subscribers:
    def __init__(self, state: PeerState, router: Router, gatherer: Gatherer, clock: HybridClock, counters: Counter[str],
                 tasks: TaskStarter, *, physical_ms: Callable[[], int], leases: LeaseSettings, is_admin: Callable[[RpcConnection], bool],
                 retry_window: float, subscriber_buffer: int, seen_limit: int, reconstructors: int,
                 reconstruct_deadline: float, taxonomy: Callable[[], Taxonomy],
                 operators: OperatorSet = NO_OPERATORS, runner: OperatorRunner | None = None) -> None:
        self.tasks = tasks   # sessions' pumps and the reconstructors run there
        self.state = state
        self.taxonomy = taxonomy   # this peer's class taxonomy (rebuilt bindings read it)
        self.operators = operators  # subscriptions may call them; rebuilt bindings evaluate them through runner
        self.runner = runner
        self.router = router
        self.gatherer = gatherer   # whole events for CSMA notifications
        self.clock = clock
        self.counters = counters
        self.physical_ms = physical_ms
        self.leases = leases
        self.is_admin = is_admin
        self.retry_window = retry_window
        self.subscriber_buffer = subscriber_buffer
        self.seen_limit = seen_limit
        self.reconstructors = reconstructors
        self.reconstruct_deadline = reconstruct_deadline
        self._sessions: dict[RpcConnection, Session] = {}
        self._by_id: dict[str, Session] = {}
        self._rebuild_send, self._rebuild_receive = trio.open_memory_channel[_Reconstruction](1024)
        self._removals: dict[str, Box] = {}   # subscriptions of closed connections not yet removed everywhere
        self._removals_waiting = trio.Event()

    @property
    def backlog(self) -> int:
        """CSMA notifications waiting to be completed here (their events gathered)."""
        return self._rebuild_send.statistics().current_buffer_used

    def handlers(self) -> dict[Op, Any]:
        return {Op.SUBSCRIBE: self._on_subscribe, Op.SUBSCRIBE_MANY: self._on_subscribe_many,
                Op.UNSUBSCRIBE: self._on_unsubscribe, Op.NOTIFY: self._on_notify}

    def routed(self) -> dict[Op, Any]:
        return {Op.CLOCK: self._local_clock}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Pumps and reconstructions run here, owned by the runtime's task for this service."""
        for _ in range(self.reconstructors):
            self.tasks.start_soon(self._reconstructor, self._rebuild_receive.clone())
        self.tasks.start_soon(self._remove_closed)
        task_status.started()
        await self.renew_sessions_forever()

    # --- subscribe / unsubscribe --------------------------------------------------------------

    async def _on_subscribe(self, conn: RpcConnection, body: Subscribe) -> Subscribed:
        sub = self._parse(body.sparql)
        ident = uuid.uuid4().hex
        # Stored on the peers of its indexing box only; each stamps it with its own clock, and
        # matches it against the events that arrive there afterwards (docs/pubsub.md, "Timing").
        t = self.clock.now()
        if body.durable:
            return await self._subscribe_durable(ident, body, sub, t)
        record = self._open(conn, ident, body, sub, t)
        try:
            await self._store_everywhere(record, sub)
        except RequestError:
            self._forget(ident)
            raise
        self.counters["subscribe"] += 1
        return Subscribed(ident, record.t, len(sub.patterns))

    async def _on_subscribe_many(self, conn: RpcConnection, body: SubscribeMany) -> SubscribedMany:
        """Each item made or refused on its own, as `subscribe` would; the non-durable ones are
        stored all in one `mcast_each` (one tree for the lot; on each peer their writes share
        an fsync), each on the peers of its own box with the same timing rule."""
        outcomes: list[SubscribeOutcome] = [SubscribeOutcome()] * len(body.items)
        plain: list[tuple[int, SubscriptionRecord, Any]] = []
        durable: list[tuple[int, Subscribe, Any]] = []
        for i, item in enumerate(body.items):
            if i % PARSE_RUN == PARSE_RUN - 1:
                await trio.lowlevel.checkpoint()   # a thousand parses must not hold the event loop
            try:
                sub = self._parse(item.sparql)
            except RequestError as exc:
                outcomes[i] = SubscribeOutcome(code=exc.code.value, message=exc.message)
                continue
            if item.durable:
                durable.append((i, item, sub))
            else:
                plain.append((i, self._open(conn, uuid.uuid4().hex, item, sub, self.clock.now()), sub))

        async def one_durable(i: int, item: Subscribe, sub: Any, limiter: trio.CapacityLimiter) -> None:
            async with limiter:
                try:
                    made = await self._subscribe_durable(uuid.uuid4().hex, item, sub, self.clock.now())
                    outcomes[i] = SubscribeOutcome(made)
                except EventCloudError as exc:
                    outcomes[i] = SubscribeOutcome(code=exc.code.value, message=exc.message)

        async with trio.open_nursery() as nursery:
            limiter = trio.CapacityLimiter(DURABLE_AT_ONCE)
            for i, item, sub in durable:
                nursery.start_soon(one_durable, i, item, sub, limiter)
            if plain:
                stored = await self.router.multicast_each(Op.STORE_SUB, [
                    (self._box(sub), StoreSubscription(replace(record, parsed=subscription_to_wire(sub))))
                    for _, record, sub in plain])
                failed = []
                for (i, record, sub), result in zip(plain, stored):
                    if isinstance(result, EventCloudError):
                        self._forget(record.id)
                        failed.append((record, sub))
                        outcomes[i] = SubscribeOutcome(code=ErrorCode.UNREACHABLE.value, message=(
                            f"subscription not stored on every peer, rolled back: {result.message}"))
                    else:
                        outcomes[i] = SubscribeOutcome(Subscribed(record.id, record.t, len(sub.patterns)))
                        self.counters["subscribe"] += 1
                if failed:
                    with trio.move_on_after(self.retry_window):
                        await self.router.multicast_each(Op.REMOVE_SUB, [
                            (self._box(sub), SubscriptionId(record.id)) for record, sub in failed])
        return SubscribedMany(tuple(outcomes))

    def _parse(self, sparql: str) -> Any:
        try:
            return parse_cached(sparql, self.operators)
        except SubscriptionError as exc:
            raise RequestError(exc.message, ErrorCode.BAD_SUBSCRIPTION) from None

    def _open(self, conn: RpcConnection, ident: str, body: Subscribe, sub: Any, t: int) -> SubscriptionRecord:
        """The record of a new subscription of this connection, in its session (its lease is
        renewed while the connection lives)."""
        record = SubscriptionRecord(ident, body.sparql, body.kind, self.state.address, t,
                                    expires=self.physical_ms() + int(self.leases.session * 1000))
        session = self.session(conn)
        session.subscriptions[ident] = Stored.of(record, sub)
        session.seen[ident] = OrderedDict()
        self._by_id[ident] = session
        return record

    def _box(self, sub: Any) -> Box:
        return self.state.space.pattern_box(sub.pattern_terms(0))

    async def _subscribe_durable(self, ident: str, body: Subscribe, sub: Any, t: int) -> Subscribed:
        """Open its mailbox at its home, then store it on every peer of its box; the ticket is
        returned once and kept only as a hash."""
        from peers.delivery.homes import ticket_hash

        leases = self.leases
        lease_ms = int(min(body.lease or leases.default, leases.maximum) * 1000)
        expires = self.physical_ms() + lease_ms
        ticket = secrets.token_urlsafe(24)
        home = self.state.space.key_point(ident)
        mailbox = {"sparql": body.sparql, "kind": body.kind, "ticket": ticket_hash(ticket), "home": [], "t": t,
                   "expires": expires, "retain_count": leases.retain_count, "retain_bytes": leases.retain_bytes,
                   "seen_ms": leases.seen_ms}
        try:
            await self.router.route(home, Op.MAILBOX_OPEN, MailboxOpen(ident, mailbox))
        except EventCloudError as exc:
            raise RequestError(f"subscription not created: its home is unreachable ({exc.message})",
                               ErrorCode.UNREACHABLE) from None
        record = SubscriptionRecord(ident, body.sparql, body.kind, "", t, home=home, expires=expires)
        try:
            await self._store_everywhere(record, sub)
        except RequestError:
            with trio.move_on_after(self.retry_window):
                try:
                    await self.router.route(home, Op.MAILBOX_END, MailboxEnd(ident, admin=True))
                except EventCloudError:
                    pass  # its lease ends it
            raise
        self.counters["subscribe_durable"] += 1
        return Subscribed(ident, t, len(sub.patterns), durable=True, ticket=ticket, expires=expires)

    async def _store_everywhere(self, record: SubscriptionRecord, sub: Any) -> None:
        """Store a subscription on every peer of its indexing box (with its parsed form: they
        parse nothing); rolled back (and an error) if that cannot be done."""
        box = self._box(sub)
        try:
            await self.router.multicast(box, Op.STORE_SUB,
                                        StoreSubscription(replace(record, parsed=subscription_to_wire(sub))))
        except EventCloudError as exc:
            with trio.move_on_after(self.retry_window):
                try:
                    await self.router.multicast(box, Op.REMOVE_SUB, SubscriptionId(record.id))
                except EventCloudError:
                    pass
            raise RequestError(f"subscription not stored on every peer, rolled back: {exc.message}",
                               ErrorCode.UNREACHABLE) from None

    async def _on_unsubscribe(self, conn: RpcConnection, body: Unsubscribe) -> SubscriptionId:
        """A subscription of this connection; a durable one from anywhere with its ticket; any one
        (e.g. of a subscriber that vanished) with the admin token."""
        session = self._by_id.get(body.id)
        whole = self.state.space.whole_space()
        if session is not None and session.conn is conn:
            stored = session.subscriptions.get(body.id)
            self._forget(body.id)
            box = self.box_of(stored.sparql) if stored is not None else whole
            await self.router.multicast(box, Op.REMOVE_SUB, SubscriptionId(body.id))
            return SubscriptionId(body.id)
        admin = self.is_admin(conn)
        if not body.ticket and not admin:
            raise RequestError(f"no subscription {body.id} on this connection (a durable subscription is cancelled "
                               f"with its ticket)", ErrorCode.NOT_FOUND)
        try:
            await self.router.route(self.state.space.key_point(body.id), Op.MAILBOX_END,
                                    MailboxEnd(body.id, body.ticket, admin=admin and not body.ticket))
        except RemoteError as exc:
            if exc.code is not ErrorCode.NOT_FOUND or not admin:
                raise RequestError(exc.message, exc.code) from None
            # not durable: an admin removes it wherever it is stored
            if session is not None:
                self._forget(body.id)
            removed = await self.router.multicast(whole, Op.REMOVE_SUB, SubscriptionId(body.id))
            if not any(removed):
                raise RequestError(f"no subscription {body.id}", ErrorCode.NOT_FOUND) from None
        return SubscriptionId(body.id)

    async def renew_sessions_forever(self) -> None:
        """Extend the leases of this entry's non-durable subscriptions while their connections
        live (a crashed entry's subscriptions then lapse on every peer by themselves)."""
        while True:
            await trio.sleep(self.leases.session / 3)
            idents = list(self._by_id)
            if not idents:
                continue
            expires = self.physical_ms() + int(self.leases.session * 1000)
            try:
                await self.router.multicast(self.state.space.whole_space(), Op.LEASE_SUB,
                                            Leases(tuple((ident, expires) for ident in idents)))
            except EventCloudError as exc:
                log.warning("peer %s: could not renew its subscribers' leases: %s", self.state.id, exc)

    def box_of(self, sparql: str) -> Box:
        return indexing_box(self.state.space, sparql, self.operators)

    async def _local_clock(self, body: Empty) -> int:
        return self.clock.now()

    def session(self, conn: RpcConnection) -> Session:
        session = self._sessions.get(conn)
        if session is None:
            session = Session(conn, self.subscriber_buffer)
            try:
                self.tasks.start_soon(self._pump, session)
            except RuntimeError:
                raise RequestError("this peer is stopping", ErrorCode.UNAVAILABLE) from None
            self._sessions[conn] = session
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
            # everything queued meanwhile goes out in one write (bounded: a frame each)
            batch = [session.queue.popleft() for _ in range(min(len(session.queue), PUSH_BATCH))]
            try:
                await session.conn.push_all(batch)
                self.counters["notifications_pushed"] += len(batch)
                self.counters["notification_writes"] += 1
            except ConnectionLost:
                break

    def live(self) -> int:
        """Subscriptions that live on this peer's client connections (non-durable: ending the
        connections, as a rebalancer move does, would end them)."""
        return sum(len(session.subscriptions) for session in self._sessions.values() if not session.closed)

    def holds(self, conn: RpcConnection) -> bool:
        """Whether subscriptions live on `conn` (ending it would end them)."""
        session = self._sessions.get(conn)
        return session is not None and bool(session.subscriptions)

    async def connection_closed(self, conn: RpcConnection) -> None:
        """A client connection ended: its subscriptions end with it."""
        session = self._sessions.pop(conn, None)
        if session is None:
            return
        session.closed = True
        session.wakeup.set()
        for ident, stored in list(session.subscriptions.items()):
            self._forget(ident)
            self._removals[ident] = self.box_of(stored.sparql)
        if self._removals:
            self._removals_waiting.set()

    async def _remove_closed(self) -> None:
        """Remove the subscriptions of closed connections from every peer of their boxes, a batch
        per multicast tree, retried (with backoff) until every peer has: one multicast each, cut
        off after a few seconds, left thousands behind for their whole lease."""
        backoff = REMOVAL_BACKOFF
        while True:
            if not self._removals:
                self._removals_waiting = trio.Event()
                await self._removals_waiting.wait()
            batch = list(itertools.islice(self._removals.items(), REMOVAL_BATCH))
            outcome: list[Any] = [None] * len(batch)
            with trio.move_on_after(self.retry_window * 2):
                try:
                    outcome = await self.router.multicast_each(Op.REMOVE_SUB,
                                                               [(box, SubscriptionId(i)) for i, box in batch])
                except EventCloudError as exc:
                    log.info("removing %d subscriptions of closed connections: %s; retrying", len(batch), exc)
            done = [ident for (ident, _), result in zip(batch, outcome)
                    if result is not None and not isinstance(result, EventCloudError)]
            for ident in done:
                del self._removals[ident]
            self.counters["closed_subscriptions_removed"] += len(done)
            if len(done) < len(batch):
                self.counters["closed_subscription_removals_retried"] += len(batch) - len(done)
                await trio.sleep(backoff)
                backoff = min(REMOVAL_BACKOFF_MAX, backoff * 2)
            else:
                backoff = REMOVAL_BACKOFF

    # --- notifications ------------------------------------------------------------------------

    async def _on_notify(self, conn: RpcConnection, body: Notifies) -> Notified:
        unknown = [note.subscription for note in body.items if not await self.accept(note)]
        return Notified(tuple(dict.fromkeys(unknown)))

    async def accept(self, body: Notify) -> bool:
        """A notification for a subscription entered here (from any peer, or this one); False if
        no subscriber here holds that subscription (nothing is pushed: the sender drops it)."""
        ident, graph = body.subscription, body.event
        session = self._by_id.get(ident)
        if session is None or ident not in session.subscriptions:
            self.counters["notifications_unknown_subscription"] += 1
            return False
        seen = session.seen[ident]
        if graph in seen:
            self.counters["duplicates_filtered"] += 1
            return True
        seen[graph] = None
        if len(seen) > self.seen_limit:
            seen.popitem(last=False)
        stored = session.subscriptions[ident]
        kind = stored.kind
        if body.csma and (kind != "signal" or body.verify):
            await self._rebuild_send.send(_Reconstruction(session, stored, graph, body.size, body.published,
                                                          body.verify, body.origin))
            return True
        self._offer(session, Notification(ident, graph, kind, body.published, solutions=body.solutions or (),
                                          quads=body.quads or (), truncated=body.truncated))
        return True

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
        note = await reconstruct(self.gatherer, job.stored, job.graph, job.size, job.published,
                                 deadline=self.reconstruct_deadline, counters=self.counters, taxonomy=self.taxonomy(),
                                 runner=self.runner, verify=job.verify, origin=job.origin)
        if note is not None and job.stored.id in job.session.subscriptions:
            self._offer(job.session, note)
