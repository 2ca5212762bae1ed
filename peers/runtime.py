"""The trio runtime of one peer: builds its services, owns every nursery, listens, joins and serves.

Construction is the wiring diagram (each service receives what it calls):

    store ─ state ─ clock
    router(state, transport, clock, dispatcher)
    subscriptions(state, store)                  the registry and its shared index
    queries(state, router, store, subscriptions)
    delivery(state, router, queries, clock)      entry side: sessions, dedup, reconstruction
    matcher(state, router, store, subscriptions, delivery.accept)
    storage(state, router, store, matcher, clock)
    membership(state, router, store, subscriptions, transport, clock)

Everything runs under one nursery opened here: the listener, one task per connection (its
RPC reader owns its request handlers), and each service's `run()` (the router's pooled
connections, matching workers, delivery pumps and reconstructions, membership timers).
Cancelling it (SIGTERM, Ctrl-C, a test's cancel scope) stops the peer cleanly; its state and
store are on disk, so the same command brings it back.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from eventcloud.errors import EventCloudError
from eventcloud.net.rpc import RpcConnection
from eventcloud.net.transport import TcpTransport, Transport
from eventcloud.overlay import Zone
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import Empty, Pong
from eventcloud.wire.ops import Op
from peers.config import PeerConfig, advertised_address
from peers.commits import Commits
from peers.delivery import Delivery
from peers.dispatch import Dispatcher
from peers.matcher import Matcher
from peers.membership import Membership
from peers.queries import Queries
from peers.router import RetryPolicy, Router
from peers.state import PeerState, load_state, save_state
from peers.storage import Storage
from peers.store import AsyncStore, Offload, PeerStore
from peers.subscriptions import Subscriptions

log = logging.getLogger(__name__)

__all__ = ["PeerConfig", "RunningPeer", "run_peer", "wall_clock_ms"]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class RunningPeer:
    """A handle on a serving peer (what `run_peer` reports once it serves)."""

    state: PeerState
    counters: Counter[str]
    router: Router
    subscriptions: Subscriptions
    queries: Queries
    delivery: Delivery
    matcher: Matcher
    storage: Storage
    membership: Membership
    cancel_scope: trio.CancelScope
    stopped: trio.Event

    @property
    def id(self) -> str:
        return self.state.id

    @property
    def address(self) -> str:
        return self.state.address

    def stop(self) -> None:
        self.cancel_scope.cancel()


class _Persistence:
    """Saves the peer's state (offloaded: it fsyncs) and retires it after a graceful leave."""

    def __init__(self, state: PeerState, clock: HybridClock, data_dir: Path | None, offload: Offload) -> None:
        self.state = state
        self.clock = clock
        self.data_dir = data_dir
        self.offload = offload

    async def save(self) -> None:
        self.state.clock = self.clock.last
        if self.data_dir is not None:
            await self.offload.run(save_state, self.data_dir, self.state)

    def retire(self) -> None:
        """This peer owns nothing any more: its state must not bring the zone back on a
        restart (the file is kept, renamed, for inspection)."""
        self.state.zone = None
        if self.data_dir is not None:
            path = self.data_dir / "peer.json"
            if path.exists():
                path.rename(self.data_dir / "peer.json.left")
        self.data_dir = None


async def run_peer(
    config: PeerConfig,
    transport: Transport | None = None,
    *,
    physical_ms=wall_clock_ms,
    task_status: trio.TaskStatus[RunningPeer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run one peer until cancelled; `task_status.started` gets a handle once it serves."""
    transport = transport or TcpTransport()
    data_dir = config.data_dir
    restored = load_state(data_dir) if data_dir is not None else None
    state = restored or PeerState(space=config.space, algorithm=config.algorithm)
    offload = Offload(config.offloaded, 1)
    store = AsyncStore(PeerStore(data_dir / "store" if data_dir is not None else None, durable=config.fsync),
                       config.offloaded)
    clock = HybridClock(physical_ms, state.clock)
    counters: Counter[str] = Counter()
    rng = random.Random(config.seed)
    persistence = _Persistence(state, clock, data_dir, offload)
    dispatcher = Dispatcher(counters)

    router = Router(state, transport, clock, dispatcher, counters, retry=RetryPolicy(config.retry_window),
                    max_hops=config.max_hops, max_frame=config.max_frame)
    subscriptions = Subscriptions(state, store, counters, tombstone_ttl=config.tombstone_ttl)
    commits = Commits(state, router, store, counters)
    queries = Queries(state, router, store, subscriptions, commits, counters, offload=Offload(config.offloaded, 2))
    delivery = Delivery(state, router, queries, clock, counters, retry_window=config.retry_window,
                        subscriber_buffer=config.subscriber_buffer, seen_limit=config.seen_limit,
                        reconstructors=config.reconstructors, reconstruct_deadline=config.reconstruct_deadline)
    matcher = Matcher(state, router, store, subscriptions, delivery.accept, clock, counters, workers=config.workers,
                      work_queue=config.work_queue, enqueue_timeout=config.retry_window,
                      outbox_every=config.outbox_every, give_up_after=config.give_up_after)
    storage = Storage(state, router, store, commits, matcher, clock, counters, retry_window=config.retry_window,
                      resolve_after=config.resolve_after, abort_after=config.abort_after)

    stopped = trio.Event()
    scope = trio.CancelScope()

    async def retire(conn: RpcConnection) -> None:
        persistence.retire()
        nursery.start_soon(_stop_after_reply, conn, scope)

    membership = Membership(state, router, store, subscriptions, transport, clock, counters,
                            persist=persistence.save, retire=retire, rng=rng, join_timeout=config.join_timeout,
                            retry_window=config.retry_window)

    async def ping(conn: RpcConnection, body: Empty) -> Pong:
        return Pong(state.id, state.address)

    dispatcher.register({Op.PING: ping})
    for service in (router, queries, delivery, storage, membership):
        dispatcher.register(service.handlers(), getattr(service, "routed", dict)())
    dispatcher.register(routed={**matcher.routed(), **commits.routed()})
    accepted = dispatcher.request_ops

    async def serve_connection(stream: trio.abc.Stream) -> None:
        conn = RpcConnection(stream, clock, on_request=dispatcher.handle, max_frame=config.max_frame,
                             accepted_ops=accepted, max_inflight=config.max_inflight, max_outbox=config.max_outbox,
                             name=f"{state.address}<-client", counters=counters)
        try:
            await conn.run()
        finally:
            with trio.CancelScope(shield=True):
                with trio.move_on_after(config.retry_window):
                    await delivery.connection_closed(conn)

    try:
        with scope:
            async with trio.open_nursery() as nursery:
                bound = None
                if restored is not None and restored.address and config.listen.endswith(":0"):
                    # Come back on the same port if it is free, so clients' addresses stay
                    # valid; otherwise any port will do: neighbours learn it below.
                    previous = config.listen.rpartition(":")[0] + ":" + restored.address.rpartition(":")[2]
                    try:
                        bound = await nursery.start(transport.serve, previous, serve_connection)
                    except OSError:
                        bound = None
                if bound is None:
                    bound = await nursery.start(transport.serve, config.listen, serve_connection)
                state.address = advertised_address(bound, config.advertise)
                await nursery.start(router.run)
                await nursery.start(matcher.run)
                await nursery.start(delivery.run)
                if restored is not None:
                    await persistence.save()
                    dispatcher.ready.set()
                    await membership.announce_self()
                elif config.join:
                    await membership.join(config.join)
                    dispatcher.ready.set()
                else:
                    state.zone = Zone(state.space.whole_space())
                    await persistence.save()
                    dispatcher.ready.set()
                await nursery.start(_run_membership, membership, config.stabilise_every)
                await nursery.start(storage.run)
                task_status.started(RunningPeer(state, counters, router, subscriptions, queries, delivery, matcher,
                                                storage, membership, scope, stopped))
                await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            if state.has_zone:
                try:
                    await persistence.save()
                except (OSError, EventCloudError) as exc:
                    log.warning("peer %s: could not save its state on the way out: %s", state.id, exc)
            store.sync.close()
        stopped.set()


async def _run_membership(membership: Membership, stabilise_every: float, *, task_status: Any) -> None:
    await membership.run(stabilise_every=stabilise_every, task_status=task_status)


async def _stop_after_reply(conn: RpcConnection, scope: trio.CancelScope) -> None:
    """After a graceful leave: stop once the client has the reply (it closes), within 2 s."""
    with trio.move_on_after(2):
        await conn.wait_closed()
    scope.cancel()
