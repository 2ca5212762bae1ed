"""One peer of the overlay: its connections, the dispatch table, routing and multicast.

Unicast is greedy hop by hop (each hop awaits the next, so replies and errors travel back
the same path); a dead next hop is routed around or retried within a bounded window, then
reported, never dropped. Multicast first routes to the owner of the box's lowest corner,
then follows the parent rule of `geometry.multicast_children`, so each peer in the box is
reached exactly once; replies are gathered back up the tree. Membership, queries and
pub/sub live in their own modules and register their operations here.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from pathlib import Path
from typing import Any, Awaitable, Callable

import trio

from eventcloud.overlay.zones import Box, GeometryError, Point, Zone, multicast_children, multicast_root, next_hop
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.frames import ProtocolError, field_of
from eventcloud.net.rpc import ConnectionLost, OperationError, RemoteError, RpcConnection
from eventcloud.net.transport import Transport, Unreachable
from peers.state import Neighbour, PeerState, save_state
from peers.store import PeerStore

log = logging.getLogger(__name__)

Handler = Callable[[RpcConnection, dict[str, Any]], Awaitable[dict[str, Any]]]
LocalOp = Callable[[dict[str, Any]], Awaitable[Any]]


def point_to_wire(point: Point) -> list[str]:
    return [format(c, "x") for c in point]


def point_from_wire(data: Any) -> Point:
    if not isinstance(data, list) or len(data) != 4 or not all(isinstance(x, str) for x in data):
        raise ProtocolError("invalid point: expected 4 hex strings", code="bad-request")
    try:
        return tuple(int(x, 16) for x in data)  # type: ignore[return-value]
    except ValueError:
        raise ProtocolError("invalid point: expected 4 hex strings", code="bad-request") from None


def box_to_wire(box: Box) -> list[list[str]]:
    return [[format(lo, "x"), format(hi, "x")] for lo, hi in box]


def box_from_wire(data: Any) -> Box:
    try:
        box = tuple((int(lo, 16), int(hi, 16)) for lo, hi in data)
    except (TypeError, ValueError):
        raise ProtocolError("invalid box: expected 4 [lo, hi] hex pairs", code="bad-request") from None
    if len(box) != 4:
        raise ProtocolError("invalid box: expected 4 [lo, hi] hex pairs", code="bad-request")
    return box  # type: ignore[return-value]


class Peer:
    """State and plumbing of one peer; the trio runtime (`peers.runtime`) drives it."""

    def __init__(
        self,
        state: PeerState,
        store: PeerStore,
        transport: Transport,
        clock: HybridClock,
        *,
        data_dir: Path | None = None,
        retry_window: float = 5.0,
        max_hops: int = 256,
    ) -> None:
        self.state = state
        self.store = store
        self.transport = transport
        self.clock = clock
        self.data_dir = data_dir
        self.retry_window = retry_window
        self.max_hops = max_hops
        self.counters: Counter[str] = Counter()
        self.handlers: dict[str, Handler] = {"route": self._on_route, "ping": self._on_ping}
        self.local_ops: dict[str, LocalOp] = {"mcast": self._local_multicast}
        self.ready = trio.Event()  # set once the peer owns a zone (after join or restore)
        self.nursery: trio.Nursery | None = None
        self._connections: dict[str, RpcConnection] = {}
        self._connecting: dict[str, trio.Lock] = {}
        self.membership_lock = trio.Lock()
        self.random = random.Random()
        # Hooks the pub/sub engine fills in; membership calls them when zones change hands.
        self.export_subscriptions: Callable[[Zone], list[dict[str, Any]]] = lambda zone: []
        self.prune_subscriptions: Callable[[Zone], None] = lambda zone: None
        self.install_subscription: Callable[[dict[str, Any]], None] = lambda record: None
        self.shutdown: Callable[[], None] = lambda: None  # set by the runtime

    # --- identity -----------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.state.id

    @property
    def address(self) -> str:
        return self.state.address

    @property
    def zone(self) -> Zone:
        assert self.state.zone is not None, "peer has no zone yet"
        return self.state.zone

    @property
    def space(self):
        return self.state.space

    def neighbour_zones(self) -> dict[str, Zone]:
        return {k: n.zone for k, n in self.state.neighbours.items()}

    def persist(self) -> None:
        self.state.clock = self.clock.last
        if self.data_dir is not None:
            save_state(self.data_dir, self.state)

    def retire(self) -> None:
        """After a graceful leave: this peer owns nothing any more, so its state must not
        bring the zone back on a restart (the file is kept, renamed, for inspection)."""
        self.state.zone = None
        if self.data_dir is not None:
            path = self.data_dir / "peer.json"
            if path.exists():
                path.rename(self.data_dir / "peer.json.left")
        self.data_dir = None

    def set_neighbours(self, neighbours: dict[str, Neighbour]) -> None:
        self.state.neighbours = neighbours
        self.persist()

    # --- connections --------------------------------------------------------------------

    async def connection(self, address: str) -> RpcConnection:
        """A pooled connection to another peer, opened on first use."""
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return conn
        lock = self._connecting.setdefault(address, trio.Lock())
        async with lock:
            conn = self._connections.get(address)
            if conn is not None and not conn.closed:
                return conn
            stream = await self.transport.connect(address)
            conn = RpcConnection(stream, self.clock, name=f"{self.address}->{address}", counters=self.counters)
            assert self.nursery is not None
            self.nursery.start_soon(conn.run)
            self._connections[address] = conn
            return conn

    async def call(self, address: str, op: str, body: dict[str, Any]) -> dict[str, Any]:
        """One request to another peer; Unreachable/ConnectionLost if it cannot be done."""
        self.counters[f"out:{op}"] += 1
        conn = await self.connection(address)
        try:
            return await conn.call(op, body)
        except ConnectionLost:
            self._connections.pop(address, None)
            raise

    async def close_connections(self) -> None:
        for conn in list(self._connections.values()):
            await conn.aclose()
        self._connections.clear()

    # --- dispatch -----------------------------------------------------------------------

    async def handle(self, conn: RpcConnection, op: str, body: dict[str, Any]) -> dict[str, Any]:
        self.counters[f"in:{op}"] += 1
        handler = self.handlers.get(op)
        if handler is None:
            raise ProtocolError(f"unknown message type {op!r}", code="unknown-op")
        if op != "ping":  # everything else needs a zone: wait until joined or restored
            await self.ready.wait()
        return await handler(conn, body)

    async def run_local(self, op: str, body: dict[str, Any]) -> Any:
        local = self.local_ops.get(op)
        if local is None:
            raise ProtocolError(f"unknown local operation {op!r}", code="unknown-op")
        return await local(body)

    async def _on_ping(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        return {"id": self.id, "address": self.address}

    # --- unicast ------------------------------------------------------------------------

    async def route(self, point: Point, op: str, body: dict[str, Any], hops: int = 0) -> Any:
        """Run local operation `op` on the owner of `point`, wherever it is."""
        excluded: set[str] = set()
        deadline = trio.current_time() + self.retry_window
        delay = 0.05
        while True:
            try:
                hop = next_hop(self.zone, self.neighbour_zones(), point, excluded)
            except GeometryError:
                excluded.clear()  # every way forward failed: wait and retry from scratch
                if trio.current_time() > deadline:
                    raise OperationError(
                        f"no route from peer {self.id} toward the requested point: every neighbour "
                        f"in that direction is unreachable", code="unreachable"
                    ) from None
                await trio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            if hop is None:
                return await self.run_local(op, body)
            if hops >= self.max_hops:
                raise OperationError(f"routing loop: over {self.max_hops} hops", code="routing")
            neighbour = self.state.neighbours[hop]
            try:
                reply = await self.call(
                    neighbour.address, "route", {"pt": point_to_wire(point), "op": op, "b": body, "h": hops + 1}
                )
                return reply.get("r")
            except (Unreachable, ConnectionLost) as exc:
                log.info("peer %s: next hop %s (%s) failed: %s", self.id, hop, neighbour.address, exc)
                excluded.add(hop)
                if trio.current_time() > deadline:
                    raise OperationError(
                        f"peer {hop} at {neighbour.address} is unreachable ({exc}); retried for "
                        f"{self.retry_window:g} s", code="unreachable"
                    ) from None

    async def _on_route(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        point = point_from_wire(body.get("pt"))
        op = field_of(body, "op", str)
        inner = field_of(body, "b", dict)
        hops = body.get("h", 0)
        if not isinstance(hops, int):
            raise ProtocolError("field 'h' must be int", code="bad-request")
        return {"r": await self.route(point, op, inner, hops)}

    # --- multicast ----------------------------------------------------------------------

    async def multicast(self, box: Box, op: str, body: dict[str, Any]) -> list[Any]:
        """Run `op` on every peer whose zone meets `box`; their results, one per peer."""
        reply = await self.route(multicast_root(box), "mcast", {"box": box_to_wire(box), "op": op, "b": body})
        errors = [r["error"] for r in reply if isinstance(r, dict) and "error" in r and len(r) == 1]
        if errors:
            raise OperationError("; ".join(errors), code="unreachable")
        return [r["ok"] for r in reply]

    async def _local_multicast(self, body: dict[str, Any]) -> list[Any]:
        box = box_from_wire(body.get("box"))
        op = field_of(body, "op", str)
        inner = field_of(body, "b", dict)
        results: list[Any] = []

        async def child(key: str) -> None:
            neighbour = self.state.neighbours.get(key)
            if neighbour is None:
                return
            deadline = trio.current_time() + self.retry_window
            delay = 0.05
            while True:
                try:
                    reply = await self.call(neighbour.address, "route", {
                        "pt": point_to_wire(_corner(neighbour.zone, box)), "op": "mcast", "b": body, "h": 1,
                    })
                    results.extend(reply["r"])
                    return
                except (Unreachable, ConnectionLost) as exc:
                    if trio.current_time() > deadline:
                        results.append({"error": f"peer {key} at {neighbour.address} is unreachable ({exc})"})
                        return
                    await trio.sleep(delay)
                    delay = min(delay * 2, 1.0)
                    neighbour = self.state.neighbours.get(key, neighbour)
                except RemoteError as exc:
                    results.append({"error": f"peer {key}: {exc.message}"})
                    return

        async with trio.open_nursery() as nursery:
            for key in multicast_children(self.zone, self.neighbour_zones(), box):
                nursery.start_soon(child, key)
            mine = await self.run_local(op, inner)
        return [{"ok": mine}, *results]


def _corner(zone: Zone, box: Box) -> Point:
    """The lowest corner of zone ∩ box: a point the child owns, so routing ends there."""
    return tuple(max(z[0], b[0]) for z, b in zip(zone.bounds, box))  # type: ignore[return-value]
