"""The trio runtime of one peer: opens its store, listens, joins or restores, and serves.

Everything runs under one nursery: the listener, one task per connection (the RPC reader,
which owns its request handlers), pooled outgoing connections, the pub/sub workers and the
subscriber pumps. Cancelling that nursery (SIGTERM, Ctrl-C, a test's cancel scope) stops
the peer cleanly; its state and store are on disk, so the same command brings it back.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio

from eventcloud.overlay.zones import CoordinateSpace, Zone
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.frames import DEFAULT_MAX_FRAME
from eventcloud.net.rpc import RpcConnection
from eventcloud.net.transport import TcpTransport, Transport
from peers.membership import Membership
from peers.node import Peer
from peers.pubsub import PubSub
from peers.queries import Queries
from peers.state import ALGORITHMS, PeerState, load_state
from peers.store import PeerStore

log = logging.getLogger(__name__)


@dataclass
class PeerConfig:
    listen: str = "127.0.0.1:0"
    join: str | None = None
    data_dir: Path | None = None          # None: in memory, nothing survives (tests)
    algorithm: str = "osma"               # used only by the first peer of an overlay
    space: CoordinateSpace = field(default_factory=CoordinateSpace)
    retry_window: float = 5.0
    max_frame: int = DEFAULT_MAX_FRAME
    workers: int = 4
    seed: int | None = None               # for the join point; None: random
    advertise: str | None = None          # HOST[:PORT] other peers use to reach this one
    stabilise_every: float = 5.0          # seconds between neighbour-table checks (0: never)


def advertised_address(bound: str, advertise: str | None) -> str:
    """The address other peers should use: --advertise if given; a wildcard bind
    (0.0.0.0, ::) is replaced by this host's name so neighbours can reach it."""
    import socket

    host, _, port = bound.rpartition(":")
    if advertise:
        host_part, sep, port_part = advertise.rpartition(":")
        if not sep:
            return f"{advertise}:{port}"
        return f"{host_part}:{port}" if port_part == "0" else advertise
    if host in ("0.0.0.0", "::", ""):
        return f"{socket.gethostbyname(socket.gethostname())}:{port}"
    return bound

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {self.algorithm!r}: use one of {', '.join(ALGORITHMS)}")


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class RunningPeer:
    peer: Peer
    membership: Membership
    queries: Queries
    pubsub: PubSub
    cancel_scope: trio.CancelScope
    stopped: trio.Event

    @property
    def address(self) -> str:
        return self.peer.address

    def stop(self) -> None:
        self.cancel_scope.cancel()


async def run_peer(
    config: PeerConfig,
    transport: Transport | None = None,
    *,
    physical_ms=wall_clock_ms,
    task_status: trio.TaskStatus[RunningPeer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run one peer until cancelled; `task_status.started` gets a handle once it serves."""
    transport = transport or TcpTransport()
    data_dir = Path(config.data_dir) if config.data_dir is not None else None
    restored = load_state(data_dir) if data_dir is not None else None
    state = restored or PeerState(space=config.space, algorithm=config.algorithm)
    store = PeerStore(data_dir / "store" if data_dir is not None else None)
    clock = HybridClock(physical_ms, state.clock)
    peer = Peer(state, store, transport, clock, data_dir=data_dir, retry_window=config.retry_window)
    if config.seed is not None:
        peer.random.seed(config.seed)
    membership = Membership(peer)
    queries = Queries(peer)
    pubsub = PubSub(peer, queries, workers=config.workers)
    known_ops = frozenset(peer.handlers)

    async def serve_connection(stream: trio.abc.Stream) -> None:
        conn = RpcConnection(stream, clock, on_request=peer.handle, max_frame=config.max_frame,
                             known_ops=known_ops, name=f"{peer.address}<-client", counters=peer.counters)
        try:
            await conn.run()
        finally:
            with trio.CancelScope(shield=True):
                with trio.move_on_after(config.retry_window):
                    await pubsub.connection_closed(conn)

    stopped = trio.Event()
    try:
        with trio.CancelScope() as scope:
            peer.shutdown = scope.cancel
            async with trio.open_nursery() as nursery:
                peer.nursery = nursery
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
                await nursery.start(pubsub.run)
                if restored is not None:
                    peer.persist()
                    peer.ready.set()
                    await membership.announce_self()
                elif config.join:
                    await membership.join(config.join)
                else:
                    state.zone = Zone(state.space.whole_space())
                    peer.persist()
                    peer.ready.set()
                if config.stabilise_every > 0:
                    nursery.start_soon(membership.stabilise_forever, config.stabilise_every)
                task_status.started(RunningPeer(peer, membership, queries, pubsub, scope, stopped))
                await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            await peer.close_connections()
        if state.zone is not None:
            peer.persist()
        store.close()
        stopped.set()
