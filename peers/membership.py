"""Overlay membership: join by splitting the owner of a point, graceful leave by merging
into a neighbour, and announcements that keep neighbour tables exact.

Join (new peer N, owner O of a random point):
  1. N asks any peer to route ``join_split`` to the point; O splits its zone along the
     next dimension at the numeric midpoint, keeps the lower half, gives N the upper half,
     and replies with N's zone, N's neighbours, the overlay settings and the data of N's half.
  2. N stores the data, persists its state and calls ``join_commit`` on O; O then drops
     the handed-over quads and tells every affected neighbour about both zones.
Messages for N's half that reach O meanwhile are forwarded to N, which holds them until it
is ready. Leave is the reverse, toward a neighbour whose zone merges with ours into a box.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from eventcloud.overlay.zones import CoordinateSpace, Zone, neighbours_of
from eventcloud.wire.frames import ProtocolError, field_of, quad_from_wire, quad_to_wire
from eventcloud.net.rpc import ConnectionLost, OperationError, RemoteError, RpcConnection
from eventcloud.net.transport import Unreachable
from peers.node import Peer, point_to_wire
from peers.state import Neighbour

log = logging.getLogger(__name__)


def neighbour_to_wire(ident: str, n: Neighbour) -> dict[str, Any]:
    return {"id": ident, "address": n.address, "zone": n.zone.to_wire()}


def neighbour_from_wire(data: Any) -> tuple[str, Neighbour]:
    if not isinstance(data, dict):
        raise ProtocolError("invalid neighbour record", code="bad-request")
    ident = field_of(data, "id", str)
    address = field_of(data, "address", str)
    try:
        zone = Zone.from_wire(data.get("zone"))
    except ValueError as exc:
        raise ProtocolError(f"invalid zone: {exc}", code="bad-request") from None
    return ident, Neighbour(address, zone)


class Membership:
    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self._handover: dict[str, list[Any]] = {}
        self._pending_announce: dict[str, dict[str, Neighbour]] = {}
        # One join at a time per owner, from split to commit: a second split before the
        # first commit would hand out neighbour tables that are already stale.
        self._join_gate = trio.Semaphore(1)
        self._rollback: dict[str, tuple[Zone, dict[str, Neighbour]]] = {}
        self.join_timeout = 30.0
        peer.local_ops["join_split"] = self._local_join_split
        peer.handlers["join_commit"] = self._on_join_commit
        peer.handlers["neighbours"] = self._on_neighbours
        peer.handlers["take_over"] = self._on_take_over
        peer.handlers["table"] = self._on_table
        peer.handlers["leave"] = self._on_leave

    # --- joining ------------------------------------------------------------------------

    async def join(self, bootstrap: str) -> None:
        """Enter the overlay through `bootstrap` (any live peer)."""
        peer = self.peer
        try:
            stream = await peer.transport.connect(bootstrap)
        except Unreachable as exc:
            raise OperationError(f"cannot join through {bootstrap}: {exc}", code="unreachable") from None
        conn = RpcConnection(stream, peer.clock, name=f"join->{bootstrap}")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.run)
            info = await conn.call("overlay_info", {})
            space = CoordinateSpace.from_dict(info["space"])
            point = tuple(peer.random.randrange(space.top) for _ in range(4))
            reply = await conn.call("route", {"pt": point_to_wire(point), "op": "join_split",
                                               "b": {"id": peer.id, "address": peer.address}})
            grant = reply["r"]
            peer.state.space = space
            peer.state.algorithm = grant["algorithm"]
            peer.state.zone = Zone.from_wire(grant["zone"])
            peer.state.neighbours = dict(neighbour_from_wire(n) for n in grant["neighbours"])
            await self._install(grant["data"])
            peer.persist()
            owner_address = grant["owner"]["address"]
            await conn.aclose()
            nursery.cancel_scope.cancel()
        await peer.call(owner_address, "join_commit", {"id": peer.id})
        peer.ready.set()
        log.info("peer %s joined: zone %s", peer.id, peer.zone)

    async def _install(self, data: dict[str, Any]) -> None:
        peer = self.peer
        events = data.get("events", {})
        by_graph: dict[str, list[Any]] = {}
        for item in data.get("quads", []):
            quad = quad_from_wire(item)
            by_graph.setdefault(quad.g.value, []).append(quad)
        for graph, quads in by_graph.items():
            size, published = events.get(graph, (len(quads), 0))
            peer.store.add_quads(quads[0].g, quads, size, published)
        for record in data.get("subscriptions", []):
            peer.install_subscription(record)

    async def _local_join_split(self, body: dict[str, Any]) -> dict[str, Any]:
        peer = self.peer
        new_id = field_of(body, "id", str)
        new_address = field_of(body, "address", str)
        await self._join_gate.acquire()
        try:
            grant = await self._split_for(new_id, new_address)
        except BaseException:
            self._join_gate.release()
            raise
        assert peer.nursery is not None
        peer.nursery.start_soon(self._expire_join, new_id)
        return grant

    async def _expire_join(self, new_id: str) -> None:
        """Undo a split whose newcomer never committed (it died mid-join)."""
        await trio.sleep(self.join_timeout)
        undo = self._rollback.pop(new_id, None)
        if undo is None:
            return
        peer = self.peer
        log.warning("peer %s: peer %s never committed its join; taking the zone back", peer.id, new_id)
        self._handover.pop(new_id, None)
        self._pending_announce.pop(new_id, None)
        peer.state.zone = undo[0]
        peer.set_neighbours(undo[1])
        self._join_gate.release()

    async def _split_for(self, new_id: str, new_address: str) -> dict[str, Any]:
        peer = self.peer
        async with peer.membership_lock:
            self._rollback[new_id] = (peer.zone, dict(peer.state.neighbours))
            lower, upper = peer.zone.split()
            candidates = peer.neighbour_zones()
            candidates[peer.id] = lower
            new_neighbours = neighbours_of(upper, candidates)
            mine = {k: n for k, n in peer.state.neighbours.items() if k in neighbours_of(lower, peer.neighbour_zones())}
            mine[new_id] = Neighbour(new_address, upper)
            old_neighbours = dict(peer.state.neighbours)
            peer.state.zone = lower
            peer.set_neighbours(mine)
            quads = [q for q in peer.store.find(None, None, None, None) if upper.contains(peer.space.point(q))]
            self._handover[new_id] = quads
            events = {}
            for q in quads:
                info = peer.store.event_info(q.g)
                if info is not None:
                    events[q.g.value] = list(info)
            subscriptions = peer.export_subscriptions(upper)
            self._pending_announce[new_id] = old_neighbours
            def wire(ident: str) -> dict[str, Any]:
                if ident == peer.id:
                    return neighbour_to_wire(peer.id, Neighbour(peer.address, lower))
                return neighbour_to_wire(ident, old_neighbours[ident])
            return {
                "zone": upper.to_wire(),
                "neighbours": [wire(k) for k in new_neighbours],
                "algorithm": peer.state.algorithm,
                "owner": {"id": peer.id, "address": peer.address},
                "data": {"quads": [quad_to_wire(q) for q in quads], "events": events, "subscriptions": subscriptions},
            }

    async def _on_join_commit(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        peer = self.peer
        new_id = field_of(body, "id", str)
        if self._rollback.pop(new_id, None) is None:
            raise OperationError(f"no join in progress for peer {new_id} (it timed out and was undone)",
                                 code="bad-request")
        self._join_gate.release()
        quads = self._handover.pop(new_id, [])
        old_neighbours = self._pending_announce.pop(new_id, {})
        peer.store.remove_quads(quads)
        peer.prune_subscriptions(peer.zone)
        announce = [
            neighbour_to_wire(peer.id, Neighbour(peer.address, peer.zone)),
            neighbour_to_wire(new_id, peer.state.neighbours[new_id]),
        ]
        await self.announce(announce, [n.address for k, n in old_neighbours.items()])
        return {}

    # --- announcements ------------------------------------------------------------------

    async def announce(self, records: list[dict[str, Any]], addresses: list[str], removed: list[str] = ()) -> None:
        """Tell each address about new/changed zones (and departed peers); best effort per
        peer, since an unreachable neighbour re-learns its table when it announces itself."""
        body = {"peers": records, "removed": list(removed)}

        async def one(address: str) -> None:
            try:
                await self.peer.call(address, "neighbours", body)
            except (Unreachable, ConnectionLost, RemoteError) as exc:
                log.warning("peer %s: could not update %s: %s", self.peer.id, address, exc)

        async with trio.open_nursery() as nursery:
            for address in set(addresses):
                if address != self.peer.address:
                    nursery.start_soon(one, address)

    async def _on_neighbours(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        """Update the table from announced zones: keep those that neighbour ours."""
        peer = self.peer
        records = body.get("peers", [])
        removed = body.get("removed", [])
        if not isinstance(records, list) or not isinstance(removed, list):
            raise ProtocolError("invalid neighbour announcement", code="bad-request")
        table = dict(peer.state.neighbours)
        for ident in removed:
            table.pop(ident, None)
        for record in records:
            ident, neighbour = neighbour_from_wire(record)
            if ident == peer.id:
                continue
            if peer.zone.is_neighbour(neighbour.zone):
                table[ident] = neighbour
            else:
                table.pop(ident, None)
        peer.set_neighbours(table)
        return {"id": peer.id}

    async def announce_self(self) -> None:
        """After a restart: tell the neighbours where we are now (the port may differ)."""
        peer = self.peer
        me = neighbour_to_wire(peer.id, Neighbour(peer.address, peer.zone))
        await self.announce([me], [n.address for n in peer.state.neighbours.values()])

    # --- leaving ------------------------------------------------------------------------

    async def leave(self) -> str:
        """Hand our zone and data to a neighbour whose zone merges with ours; returns its id."""
        peer = self.peer
        async with peer.membership_lock:
            candidates = sorted(
                ((k, n) for k, n in peer.state.neighbours.items() if n.zone.merge(peer.zone) is not None),
                key=lambda kn: (kn[1].zone.splits != peer.zone.splits, kn[0]),  # the sibling first
            )
            if not candidates:
                raise OperationError(
                    "cannot leave: no neighbour's zone merges with this peer's zone into a box "
                    "(its sibling is split further); stop another peer first", code="cannot-leave"
                )
            quads = list(peer.store.find(None, None, None, None))
            events = {q.g.value: list(peer.store.event_info(q.g) or (0, 0)) for q in quads}
            subscriptions = peer.export_subscriptions(peer.zone)
            last_error: Exception | None = None
            for ident, neighbour in candidates:
                try:
                    await peer.call(neighbour.address, "take_over", {
                        "id": peer.id,
                        "zone": peer.zone.to_wire(),
                        "neighbours": [neighbour_to_wire(k, n) for k, n in peer.state.neighbours.items()],
                        "data": {"quads": [quad_to_wire(q) for q in quads], "events": events, "subscriptions": subscriptions},
                    })
                    return ident
                except (Unreachable, ConnectionLost, RemoteError) as exc:
                    last_error = exc
            raise OperationError(f"cannot leave: no neighbour could take over ({last_error})", code="cannot-leave")

    async def _on_leave(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        """Leave the overlay gracefully, then stop this peer (after the reply is sent)."""
        heir = await self.leave()
        self.peer.retire()
        assert self.peer.nursery is not None
        self.peer.nursery.start_soon(self._stop_soon)
        return {"heir": heir}

    async def _stop_soon(self) -> None:
        await trio.sleep(0.2)
        self.peer.shutdown()

    async def _on_take_over(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        peer = self.peer
        leaving = field_of(body, "id", str)
        async with peer.membership_lock:
            zone = Zone.from_wire(body.get("zone"))
            merged = peer.zone.merge(zone)
            if merged is None:
                raise OperationError("zones do not merge into a box", code="cannot-leave")
            await self._install(field_of(body, "data", dict))
            their = dict(neighbour_from_wire(n) for n in body.get("neighbours", []))
            pool = {**peer.state.neighbours, **their}
            pool.pop(leaving, None)
            pool.pop(peer.id, None)
            old_addresses = [n.address for n in pool.values()]
            peer.state.zone = merged
            peer.set_neighbours({k: n for k, n in pool.items() if merged.is_neighbour(n.zone)})
        me = neighbour_to_wire(peer.id, Neighbour(peer.address, merged))
        await self.announce([me], old_addresses, removed=[leaving])
        return {"id": peer.id}

    # --- stabilisation --------------------------------------------------------------------

    async def _on_table(self, conn: RpcConnection, body: dict[str, Any]) -> dict[str, Any]:
        peer = self.peer
        return {"self": neighbour_to_wire(peer.id, Neighbour(peer.address, peer.zone)),
                "neighbours": [neighbour_to_wire(k, n) for k, n in peer.state.neighbours.items()]}

    async def stabilise_once(self) -> None:
        """Ask each neighbour for its own zone and its table; fix stale entries and learn
        neighbours we missed (e.g. after concurrent joins), verifying each candidate with the
        candidate itself, the only authority on its zone."""
        peer = self.peer
        authoritative: dict[str, Neighbour] = {}
        candidates: dict[str, Neighbour] = {}
        for ident, neighbour in list(peer.state.neighbours.items()):
            try:
                with trio.fail_after(peer.retry_window):
                    reply = await peer.call(neighbour.address, "table", {})
            except (Unreachable, ConnectionLost, RemoteError, trio.TooSlowError):
                continue  # maybe restarting: keep it, it announces itself when back
            me, theirs = neighbour_from_wire(reply["self"]), reply.get("neighbours", [])
            authoritative[me[0]] = me[1]
            for record in theirs:
                other, info = neighbour_from_wire(record)
                if other != peer.id and other not in peer.state.neighbours and peer.zone.is_neighbour(info.zone):
                    candidates[other] = info
        for ident, info in candidates.items():
            try:
                with trio.fail_after(peer.retry_window):
                    reply = await peer.call(info.address, "table", {})
                authoritative[ident] = neighbour_from_wire(reply["self"])[1]
            except (Unreachable, ConnectionLost, RemoteError, trio.TooSlowError):
                continue
        if not authoritative:
            return
        async with peer.membership_lock:
            table = dict(peer.state.neighbours)
            for ident, info in authoritative.items():
                if peer.zone.is_neighbour(info.zone):
                    table[ident] = info
                else:
                    table.pop(ident, None)
            if table != peer.state.neighbours:
                peer.set_neighbours(table)

    async def stabilise_forever(self, interval: float) -> None:
        while True:
            await trio.sleep(interval * (0.5 + self.peer.random.random()))  # jittered
            await self.stabilise_once()

