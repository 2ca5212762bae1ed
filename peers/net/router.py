"""Reaching other peers: the connection pool and greedy unicast; box multicast over them.

Unicast is greedy hop by hop (each hop awaits the next, so replies and errors travel back the
same path); a dead next hop is routed around, or retried within the retry window, then
reported with a typed error naming it, never dropped. The multicasts (peers/net/multicast.py)
run over this unicast; `Router` offers them too, so that a service reaches other peers through
one object. Every retry in the peer goes through `RetryPolicy` (peers/net/retry.py).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Callable

import trio

from eventcloud.errors import (
    ConnectionLost, ErrorCode, EventCloudError, GeometryError, RemoteError, RequestError, Unreachable,
)
from eventcloud.net.rpc import RpcConnection
from eventcloud.net.transport import Transport
from eventcloud.overlay import Box, Neighbour, Point, next_hop
from eventcloud.wire.codec import point_to_wire
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import Route, Routed
from eventcloud.wire.ops import Op
from eventcloud.wire.schema import Body
from peers.net.auth import PeerAuth
from peers.net.coalescer import Coalescer
from peers.net.dispatch import Dispatcher
from peers.net.multicast import BoxMulticast, Discard
from peers.net.retry import FAILED, RetryPolicy
from peers.store import PeerState
from peers.tasks import TaskStarter

log = logging.getLogger(__name__)

__all__ = ["Router"]

#: How long a peer that did not answer is routed around before it is tried again.
SUSPECT_FOR = 1.0


class Router:
    """Pooled connections and unicast of one peer, and its multicasts (`boxes`).

    Call `run()` in a task of the runtime: it owns the nursery where pooled connections read.
    """

    def __init__(self, state: PeerState, transport: Transport, clock: HybridClock, dispatcher: Dispatcher,
                 counters: Counter[str], tasks: TaskStarter, *, retry: RetryPolicy, max_hops: int, max_frame: int,
                 partial_wait: float = 1.0, liveness: float | None = None, auth: PeerAuth | None = None) -> None:
        self.state = state
        self.tasks = tasks   # pooled connections' readers run there
        self.transport = transport
        self.clock = clock
        self.dispatcher = dispatcher
        self.counters = counters
        self.retry = retry
        self.max_hops = max_hops
        self.max_frame = max_frame
        self.partial_wait = partial_wait
        self.liveness = liveness   # a peer our calls hear nothing from this long is dead to them (RpcConnection)
        self.auth = auth
        self._connections: dict[str, RpcConnection] = {}
        self._connecting: dict[str, trio.Lock] = {}
        self._suspects: dict[tuple[str, str], float] = {}
        #: set when a peer refused a request as not serving (joining), or a request meant for
        #: another peer reached this one (a stale entry): stabilisation then runs at once
        self.stale_found = trio.Event()
        #: neighbour entries known wrong (id -> the address they give): a request meant for that
        #: id reached another peer there. Routing never takes them for an owner, and
        #: stabilisation drops them from our table (peers.membership.stabiliser)
        self.gone: dict[str, str] = {}
        self._coalescer = Coalescer(self.call, counters, push=self.push)
        self.boxes = BoxMulticast(self, state, dispatcher, counters, retry=retry, partial_wait=partial_wait)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the pooled connections' readers (`tasks`) for the peer's lifetime, then close the
        connections once every reader has ended: closed under a reader still unwinding (a TLS
        stream mid-send), a socket fails that reader with ClosedResourceError instead of a quiet
        cancellation."""
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.tasks.serve)
                task_status.started()
                await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await self.close_connections()

    async def wait_stale(self) -> None:
        """Until a request meant for another peer reached this one, or a peer refused one as not
        serving: a neighbour entry is stale (the stabiliser then looks sooner). Each call waits
        for a new sign."""
        await self.stale_found.wait()

    def stale_seen(self) -> None:
        """The stabiliser took the last sign into account: wait for a new one from now on."""
        self.stale_found = trio.Event()

    def take_gone(self) -> dict[str, str]:
        """The entries known wrong since the last call (id -> the address that answered for another peer)."""
        gone, self.gone = self.gone, {}
        return gone

    def handlers(self) -> dict[Op, Any]:
        return {Op.ROUTE: self._on_route}

    def routed(self) -> dict[Op, Any]:
        return self.boxes.routed()

    # --- multicast (peers/net/multicast.py) ---------------------------------------------------

    async def multicast(self, box: Box, op: Op, body: Body | dict[str, Any], discard: Discard | None = None
                        ) -> list[Any]:
        """Run routed operation `op` on every peer whose zone meets `box`; their results, one per peer
        (`discard`: releases the results of an attempt thrown away, see BoxMulticast)."""
        return await self.boxes.multicast(box, op, body, discard)

    async def multicast_partial(self, box: Box, op: Op, body: Body | dict[str, Any]
                                ) -> tuple[list[Any], list[tuple[str, Neighbour]]]:
        """As `multicast`, with the peers that did not answer within `partial_wait` reported as down."""
        return await self.boxes.multicast_partial(box, op, body)

    async def multicast_each(self, op: Op, items: list[tuple[Box, Body]]) -> list[list[Any] | EventCloudError]:
        """Run routed `op` once per item on the peers of that item's box, all in one tree."""
        return await self.boxes.multicast_each(op, items)

    # --- connections --------------------------------------------------------------------------

    async def connection(self, address: str) -> RpcConnection:
        """A pooled connection to another peer, opened on first use (Unreachable if it cannot be)."""
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return conn
        lock = self._connecting.setdefault(address, trio.Lock())
        async with lock:
            conn = self._connections.get(address)
            if conn is not None and not conn.closed:
                return conn
            stream = await self.transport.connect(address)
            conn = RpcConnection(stream, self.clock, name=f"{self.state.address}->{address}", counters=self.counters,
                                 max_frame=self.max_frame, liveness=self.liveness)
            try:
                self.tasks.start_soon(conn.run)
            except RuntimeError:  # this peer is stopping: no new connection may start
                await stream.aclose()
                raise Unreachable(f"cannot reach {address}: peer {self.state.id} is stopping") from None
            if self.auth is not None:
                try:
                    await self.auth.prove(conn)  # a peer connection: both sides prove the cluster secret
                except ConnectionLost:
                    raise
                except EventCloudError:
                    await conn.aclose()
                    raise
            self._connections[address] = conn
            return conn

    async def call(self, address: str, op: Op, body: Body | dict[str, Any]) -> dict[str, Any]:
        """One request to another peer; Unreachable/ConnectionLost if it cannot be done."""
        self.counters[f"out:{op.value}"] += 1
        conn = await self.connection(address)
        try:
            return await conn.call(op, body)
        except ConnectionLost:
            if self._connections.get(address) is conn:
                del self._connections[address]
            if conn.reused:  # a pooled connection the other side may have closed while idle: once more
                return await (await self.connection(address)).call(op, body)
            raise
        except RemoteError as exc:
            if exc.code is ErrorCode.NOT_SERVING:
                # The peer we knew there is gone; the one answering (e.g. a peer that moved and is
                # rejoining on its old address) serves no zone yet: for routing, it is down.
                self.stale_found.set()
                raise Unreachable(f"cannot reach {address}: {exc.message}") from None
            raise

    async def push(self, address: str, op: Op, body: Body | dict[str, Any]) -> None:
        """One message without a reply to another peer (written, not known to be served);
        Unreachable/ConnectionLost if it cannot be written."""
        self.counters[f"out:{op.value}"] += 1
        conn = await self.connection(address)
        try:
            await conn.push(op, body)
        except ConnectionLost:
            if self._connections.get(address) is conn:
                del self._connections[address]
            if conn.reused:  # a pooled connection the other side may have closed while idle: once more
                await (await self.connection(address)).push(op, body)
                return
            raise

    async def push_merged(self, address: str, op: Op, items: list[Any] | tuple[Any, ...],
                          body: Callable[[tuple[Any, ...]], Body]) -> None:
        """A push whose body is a list of items, merged with concurrent ones to the same peer."""
        await self._coalescer.push(address, op, items, body)

    async def call_merged(self, address: str, op: Op, items: list[Any] | tuple[Any, ...],
                          body: Callable[[tuple[Any, ...]], Body]) -> dict[str, Any]:
        """A call whose body is a list of items, merged with concurrent ones to the same peer
        (`peers.net.coalescer`); the shared reply."""
        return await self._coalescer.call(address, op, items, body)

    async def close_connections(self) -> None:
        for conn in list(self._connections.values()):
            await conn.aclose()
        self._connections.clear()

    # --- unicast ------------------------------------------------------------------------------

    async def route(self, point: Point, op: Op, body: Body | dict[str, Any], hops: int = 0) -> Any:
        """Run routed operation `op` on the owner of `point`, wherever it is; its result."""
        wire = body.to_wire() if isinstance(body, Body) else body
        return await self._route(point, op.value, wire, hops, (), ())

    def suspect(self, ident: str, address: str) -> None:
        """`ident` at `address` did not answer: route around it for a moment (a new address,
        after a restart or a takeover, is tried at once)."""
        self._suspects[(ident, address)] = trio.current_time() + SUSPECT_FOR

    def suspected(self, ident: str, address: str) -> bool:
        until = self._suspects.get((ident, address))
        if until is None:
            return False
        if until < trio.current_time():
            del self._suspects[(ident, address)]
            return False
        return True

    async def _route(self, point: Point, op: str, body: dict[str, Any], hops: int, avoid: tuple[str, ...],
                     visited: tuple[str, ...]) -> Any:
        """Greedy routing that goes around peers that do not answer and never back to a peer the
        request already passed (a dead end answers `routing` and the previous hop tries another
        way). When the point's own owner does not answer, nothing can route around it: wait
        (bounded by the retry window) for it to come back or be taken over."""
        state = self.state
        attempts = self.retry.start()
        dead: set[str] = set(avoid)
        dead_ends: set[str] = set()
        while True:
            zone = state.zone
            if zone.contains(point):
                return await self.dispatcher.run_routed(op, body)
            if hops >= self.max_hops:
                raise RequestError(f"routing loop: over {self.max_hops} hops", ErrorCode.ROUTING)
            neighbours = state.neighbours
            # an entry gone from its address owns nothing: greedy routing finds the zone's owner now
            owner = next((k for k, n in neighbours.items()
                          if n.zone.contains(point) and self.gone.get(k) != n.address), None)
            dead.update(k for k, address in self.gone.items() if k in neighbours and neighbours[k].address == address)
            for key, neighbour in neighbours.items():
                if self.suspected(key, neighbour.address):
                    dead.add(key)
            if owner is not None and (owner in dead or owner in visited):
                # The owner itself is down: no detour can reach its zone. Or the request came
                # through it, so its table and ours disagree on who owns the point (one of them is
                # a moment old): sending it back would bounce it between us, each hop a request
                # waiting on the next, until both connections' in-flight limits stopped them all.
                hop = None
            else:
                excluded = dead | dead_ends | set(visited)
                try:
                    hop = owner if owner is not None else next_hop(zone, state.neighbour_zones(), point, excluded)
                except GeometryError:
                    hop = None
            if hop is None:
                if owner is None and not dead:
                    raise RequestError(f"no route from peer {state.id} toward the point: every way forward is a "
                                       f"dead end", ErrorCode.ROUTING)
                if not await attempts.pause():
                    if owner in visited and owner not in dead:
                        raise RequestError(f"peers {owner} and {state.id} each found the other owns the point "
                                           f"(neighbour tables a moment old) for {self.retry.window:g} s; retry",
                                           ErrorCode.UNAVAILABLE)
                    who = f"peer {owner} at {neighbours[owner].address}" if owner in neighbours else \
                        f"peers {', '.join(sorted(dead))}"
                    raise RequestError(f"{who} unreachable from peer {state.id}; retried for "
                                       f"{self.retry.window:g} s", ErrorCode.UNREACHABLE)
                dead = {k for k in dead if k in neighbours and self.suspected(k, neighbours[k].address)}
                dead_ends.clear()
                continue
            neighbour = neighbours[hop]
            try:
                reply = await self.call(neighbour.address, Op.ROUTE, {
                    "point": point_to_wire(point), "op": op, "body": body, "hops": hops + 1,
                    "avoid": sorted(dead), "visited": [*visited, state.id], "to": hop})
                return reply.get("result")
            except FAILED as exc:
                log.info("peer %s: next hop %s (%s) failed: %s", state.id, hop, neighbour.address, exc)
                self.suspect(hop, neighbour.address)
                dead.add(hop)
            except RemoteError as exc:
                if exc.code is not ErrorCode.ROUTING or hop == owner:
                    raise
                dead_ends.add(hop)  # no way on from there: try another neighbour

    async def _on_route(self, conn: RpcConnection, body: Route) -> Routed:
        avoid = body.avoid
        if body.to and body.to != self.state.id:
            # The sender's entry is stale: that peer left, and this one listens at its address now
            # (a moved peer rejoins on its old port). We route the request on from here, never to
            # that peer: when the entry is in our own table too, it names us, and the request went
            # back to ourselves, hop after hop, until the connection's in-flight limit stopped its
            # reader and every request through it hung. Stabilisation drops such an entry of ours.
            avoid = (*avoid, body.to)
            self.gone[body.to] = self.state.address
            self.stale_found.set()
        return Routed(await self._route(body.point, body.op, body.body, body.hops, avoid, body.visited))
