"""Reaching other peers: the connection pool, greedy unicast, box multicast, one retry policy.

Unicast is greedy hop by hop (each hop awaits the next, so replies and errors travel back the
same path); a dead next hop is routed around, or retried within the retry window, then
reported with a typed error naming it, never dropped. Multicast first routes to the owner of
the box's lowest corner, then follows the parent rule of `overlay.multicast_children`, so each
peer in the box is reached exactly once; replies are gathered back up the tree.

Every retry in the peer goes through `RetryPolicy` (exponential backoff within a window).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

import trio

from eventcloud.errors import (
    ConnectionLost, ErrorCode, EventCloudError, GeometryError, RemoteError, RequestError, Unreachable,
)
from eventcloud.net.rpc import RpcConnection
from eventcloud.net.transport import Transport
from eventcloud.overlay import (
    Box, Neighbour, Point, Zone, disjoint, hull, intersection, lowest_corner, multicast_children, multicast_root,
    next_hop, subtree_reach, tiles,
)
from eventcloud.wire.codec import box_from_wire, box_to_wire, neighbour_from_wire, neighbour_to_wire, point_to_wire
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import Multicast, MulticastEach, Route, Routed
from eventcloud.wire.ops import Op
from eventcloud.wire.schema import Body
from peers.net.auth import PeerAuth
from peers.net.coalescer import Coalescer
from peers.net.dispatch import Dispatcher
from peers.store import PeerState
from peers.tasks import TaskStarter

log = logging.getLogger(__name__)

__all__ = ["RetryPolicy", "Router", "FAILED"]

#: Errors that mean "that peer cannot be reached now" (as opposed to a refusal it sent).
FAILED = (Unreachable, ConnectionLost)
#: How long a peer that did not answer is routed around before it is tried again.
SUSPECT_FOR = 1.0
#: Items of one `mcast_each` a peer runs at once (concurrent writes share one fsync).
EACH_AT_ONCE = 64


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff from `first_delay` to `max_delay`, for at most `window` seconds."""

    window: float
    first_delay: float = 0.05
    max_delay: float = 1.0

    def start(self) -> "Attempts":
        return Attempts(self)


class Attempts:
    """One retried operation: `await attempts.pause()` between tries; False once the window is over."""

    def __init__(self, policy: RetryPolicy) -> None:
        self._policy = policy
        self.deadline = trio.current_time() + policy.window
        self._delay = policy.first_delay

    @property
    def expired(self) -> bool:
        return trio.current_time() > self.deadline

    async def pause(self) -> bool:
        if self.expired:
            return False
        await trio.sleep(min(self._delay, max(0.0, self.deadline - trio.current_time()) + 0.001))
        self._delay = min(self._delay * 2, self._policy.max_delay)
        return True


class Router:
    """Unicast, multicast and pooled connections of one peer.

    Call `run()` in a task of the runtime: it owns the nursery where pooled connections read.
    """

    def __init__(self, state: PeerState, transport: Transport, clock: HybridClock, dispatcher: Dispatcher,
                 counters: Counter[str], tasks: TaskStarter, *, retry: RetryPolicy, max_hops: int, max_frame: int,
                 partial_wait: float = 1.0, auth: PeerAuth | None = None) -> None:
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

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
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
        return {Op.MCAST: self._local_multicast, Op.MCAST_EACH: self._local_multicast_each}

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
                                 max_frame=self.max_frame)
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

    # --- multicast ----------------------------------------------------------------------------

    async def multicast(self, box: Box, op: Op, body: Body | dict[str, Any]) -> list[Any]:
        """Run routed operation `op` on every peer whose zone meets `box`; their results, one per peer.
        A peer that stays unreachable for the retry window fails the whole multicast, naming it."""
        results, down = await self._multicast(box, op, body, partial=False)
        return results

    async def multicast_partial(self, box: Box, op: Op, body: Body | dict[str, Any]
                                ) -> tuple[list[Any], list[tuple[str, Neighbour]]]:
        """As `multicast`, but a peer that does not answer within `partial_wait` is reported as down
        (id, neighbour record) instead (the peers only reachable through it are then missing)."""
        return await self._multicast(box, op, body, partial=True)

    async def _multicast(self, box: Box, op: Op, body: Body | dict[str, Any], partial: bool
                         ) -> tuple[list[Any], list[tuple[str, Neighbour]]]:
        """Each peer reached reports what it covered of the box (its zone ∩ box when it ran `op`);
        if the reports do not tile the box, the multicast crossed a membership change (a zone
        missed, or reached twice as it split) and is run again, within the retry window.
        Operations sent by multicast are idempotent; a repeated CSMA step only repeats
        notifications, which the entry peer drops."""
        wire = body.to_wire() if isinstance(body, Body) else body
        request = {"box": box_to_wire(box), "op": op.value, "body": wire, "partial": partial}
        attempts = self.retry.start()
        while True:
            try:
                reply = await self.route(multicast_root(box), Op.MCAST, request)
            except RemoteError as exc:
                if exc.code is not ErrorCode.UNAVAILABLE:
                    raise
                reply = []  # the root handed its zone over meanwhile: run it again, as for a missed zone
            if not isinstance(reply, list):
                raise RequestError("malformed multicast reply", ErrorCode.INTERNAL)
            errors = [r["error"] for r in reply if isinstance(r, dict) and "error" in r]
            if errors:
                raise RequestError("; ".join(errors), ErrorCode.UNREACHABLE)
            down = [neighbour_from_wire(r["down"]) for r in reply if isinstance(r, dict) and "down" in r]
            answers = [r for r in reply if isinstance(r, dict) and "ok" in r]
            if _tiled(box, answers) or (down and _disjoint(box, answers)):  # partial: never a zone twice
                return [r["ok"] for r in answers], down
            self.counters["multicast_repeated"] += 1
            if not await attempts.pause():
                raise RequestError(f"a multicast for {op.value} kept missing zones while peers joined or left; "
                                   f"retried for {self.retry.window:g} s", ErrorCode.UNAVAILABLE)
            log.info("peer %s: a multicast for %s crossed a membership change; running it again",
                     self.state.id, op.value)

    async def _local_multicast(self, body: Multicast) -> list[Any]:
        state = self.state
        forward = body.to_wire()
        results: list[Any] = []

        async def child(key: str) -> None:
            results.extend(await self._to_child(key, body.box, Op.MCAST, forward, body.partial))

        mine: Any = None
        failure: Exception | None = None
        zone = state.zone
        async with trio.open_nursery() as nursery:
            for key in multicast_children(state.zone, state.neighbour_zones(), body.box):
                nursery.start_soon(child, key)
            try:
                mine = await self.dispatcher.run_routed(body.op, body.body)
            except Exception as exc:  # raised below, bare (children are told nothing: they run their own)
                failure = exc
        if failure is not None:
            raise failure
        return [{"ok": mine, "cover": _cover(zone, state.zone, body.box)}, *results]

    async def _to_child(self, key: str, box: Box, op: Op, forward: dict[str, Any], partial: bool = False
                        ) -> list[Any]:
        """Send a multicast on to the neighbour `key` (routed to the lowest corner of its part of
        the box); the answers of its subtree, or one `error` (`down` when partial) if it stays
        unreachable."""
        neighbour = self.state.neighbours.get(key)
        if neighbour is None:
            return []
        attempts = (RetryPolicy(self.partial_wait) if partial else self.retry).start()
        while True:
            try:
                reply = await self.call(neighbour.address, Op.ROUTE, {
                    "point": point_to_wire(lowest_corner(neighbour.zone, box)), "op": op.value,
                    "body": forward, "hops": 1, "to": key,
                })
                return list(reply["result"])
            except FAILED as exc:
                self.suspect(key, neighbour.address)
                if key not in self.state.neighbours:  # dropped meanwhile (a ghost): the multicast runs again
                    return []
                if not await attempts.pause():
                    if partial:
                        return [{"down": neighbour_to_wire(key, neighbour)}]
                    return [{"error": f"peer {key} at {neighbour.address} is unreachable ({exc.message})"}]
                neighbour = self.state.neighbours.get(key, neighbour)
            except RemoteError as exc:
                if exc.code is ErrorCode.UNAVAILABLE:
                    # That peer handed its zone over meanwhile (a leave, a move): its part is
                    # missing from the covers, so the whole multicast runs again, through the heir.
                    return []
                return [{"error": f"peer {key}: {exc.message}"}]

    # --- many items, one tree -----------------------------------------------------------------

    async def multicast_each(self, op: Op, items: list[tuple[Box, Body]]) -> list[list[Any] | EventCloudError]:
        """Run routed `op` once per item on every peer whose zone meets that item's box, all items
        in one tree over their hull (`overlay.subtree_reach` prunes what each child is sent).

        Per item, in order: its results (one per peer), or the error that stopped it. An item
        whose answers do not tile its box crossed a membership change and is run again (as
        every multicast operation, `op` is idempotent), within the retry window. The hull's
        tree may pass through a peer that an item's own box does not need: an item cut off by
        an unreachable peer is run again in a tree of its own, and fails only if it needs it."""
        outcome, cut_off = await self._each(op, items)
        if len(items) > 1 and cut_off:
            limiter = trio.CapacityLimiter(EACH_AT_ONCE)

            async def alone(i: int) -> None:
                async with limiter:
                    outcome[i] = (await self._each(op, [items[i]]))[0][0]

            async with trio.open_nursery() as nursery:
                for i in sorted(cut_off):
                    nursery.start_soon(alone, i)
        return outcome

    async def _each(self, op: Op, items: list[tuple[Box, Body]]
                    ) -> tuple[list[list[Any] | EventCloudError], set[int]]:
        outcome: list[list[Any] | EventCloudError | None] = [None] * len(items)
        cut_off: set[int] = set()
        boxes = [box for box, _ in items]
        wires = [body.to_wire() for _, body in items]
        pending = list(range(len(items)))
        attempts = self.retry.start()
        while pending:
            whole = hull([boxes[i] for i in pending])
            request = {"box": box_to_wire(whole), "op": op.value,
                       "items": [{"index": i, "box": box_to_wire(boxes[i]), "body": wires[i]} for i in pending]}
            try:
                reply = await self.route(multicast_root(whole), Op.MCAST_EACH, request)
                results, failed, pieces, unreached = _gathered(reply, pending, boxes)
                cut_off |= unreached
            except EventCloudError as exc:
                for i in pending:
                    outcome[i] = exc
                if exc.transient:   # e.g. the hull's root is down: an item's own tree may not need it
                    cut_off.update(pending)
                break
            missing = []
            for i in pending:
                if i in failed:
                    outcome[i] = failed[i]
                elif pieces[i] is not None and tiles(boxes[i], pieces[i]):
                    outcome[i] = results[i]
                else:
                    missing.append(i)
            pending = missing
            if pending:
                self.counters["multicast_repeated"] += 1
                if not await attempts.pause():
                    for i in pending:
                        outcome[i] = RequestError(f"a multicast for {op.value} kept missing zones while peers joined "
                                                  f"or left; retried for {self.retry.window:g} s", ErrorCode.UNAVAILABLE)
                    break
        return outcome, cut_off  # type: ignore[return-value]

    async def _local_multicast_each(self, body: MulticastEach) -> list[Any]:
        """Run the items whose box meets this zone (at most EACH_AT_ONCE at once), and forward
        each child the items its subtree can need; answers as `_gathered` reads them."""
        state = self.state
        zone = state.zone
        answers: list[Any] = []
        ok: list[Any] = []
        failed: list[Any] = []
        limiter = trio.CapacityLimiter(EACH_AT_ONCE)

        async def child(key: str, sent: list[Any]) -> None:
            forward = MulticastEach(body.box, body.op, tuple(sent)).to_wire()
            got = await self._to_child(key, body.box, Op.MCAST_EACH, forward)
            if len(got) == 1 and "error" in got[0]:
                got[0]["items"] = [item.index for item in sent]
            answers.extend(got)

        async def run(item: Any) -> None:
            async with limiter:
                try:
                    ok.append([item.index, await self.dispatcher.run_routed(body.op, item.body)])
                except EventCloudError as exc:
                    failed.append([item.index, exc.code.value, exc.message])

        async def run_together(items: list[Any]) -> None:
            # one call for all (e.g. subscriptions stored with one log write): a task each costs
            # more than storing a subscription
            try:
                results = await self.dispatcher.run_routed_each(body.op, [item.body for item in items])
            except EventCloudError as exc:
                results = [exc] * len(items)
            for item, result in zip(items, results):
                if isinstance(result, EventCloudError):
                    failed.append([item.index, result.code.value, result.message])
                else:
                    ok.append([item.index, result])

        async with trio.open_nursery() as nursery:
            for key in multicast_children(zone, state.neighbour_zones(), body.box):
                reach = Zone(subtree_reach(state.neighbours[key].zone, body.box))
                sent = [item for item in body.items if reach.intersects(item.box)]
                if sent:
                    nursery.start_soon(child, key, sent)
            here = [item for item in body.items if zone.intersects(item.box)]
            if here and self.dispatcher.batches(body.op):
                nursery.start_soon(run_together, here)
            else:
                for item in here:
                    nursery.start_soon(run, item)
        return [{"ok": ok, "failed": failed, "cover": _cover(zone, state.zone, body.box)}, *answers]


def _cover(zone: Zone, now: Zone, box: Box) -> Any:
    """What a peer reports it covered of a multicast's box: zone ∩ box, or nothing if its zone
    changed while it answered (the sender then runs the multicast again)."""
    piece = intersection(zone, box)
    return box_to_wire(piece) if piece is not None and now == zone else None


def _gathered(reply: Any, pending: list[int], boxes: list[Box]) -> tuple[
        dict[int, list[Any]], dict[int, EventCloudError], dict[int, list[Box] | None], set[int]]:
    """A `mcast_each`'s answers, per item: the results, the failures, the pieces of its box the
    peers that ran it covered (None: one of them changed zone meanwhile); and the items cut
    off by an unreachable peer on the way."""
    if not isinstance(reply, list):
        raise RequestError("malformed multicast reply", ErrorCode.INTERNAL)
    results: dict[int, list[Any]] = {i: [] for i in pending}
    pieces: dict[int, list[Box] | None] = {i: [] for i in pending}
    failed: dict[int, EventCloudError] = {}
    unreached: set[int] = set()
    try:
        for answer in reply:
            if "error" in answer:
                for i in answer["items"]:
                    failed[i] = RequestError(answer["error"], ErrorCode.UNREACHABLE)
                    unreached.add(i)
                continue
            cover = box_from_wire(answer["cover"]) if answer["cover"] is not None else None
            for i, result in answer["ok"]:
                results[i].append(result)
                piece = intersection(Zone(cover), boxes[i]) if cover is not None else None
                if piece is None or pieces[i] is None:
                    pieces[i] = None
                else:
                    pieces[i].append(piece)  # type: ignore[union-attr]
            for i, code, message in answer["failed"]:
                failed[i] = RemoteError(code, message)
    except (KeyError, TypeError, ValueError, EventCloudError) as exc:
        raise RequestError(f"malformed multicast reply ({exc})", ErrorCode.INTERNAL) from None
    return results, failed, pieces, unreached


def _tiled(box: Box, answers: list[dict[str, Any]]) -> bool:
    """Whether the pieces the answering peers covered tile the multicast's box."""
    pieces = _covers(answers)
    return pieces is not None and tiles(box, pieces)


def _disjoint(box: Box, answers: list[dict[str, Any]]) -> bool:
    """Whether the pieces the answering peers covered are inside the box and never overlap."""
    pieces = _covers(answers)
    return pieces is not None and disjoint(box, pieces)


def _covers(answers: list[dict[str, Any]]) -> list[Box] | None:
    try:
        return [box_from_wire(r["cover"]) for r in answers]
    except (KeyError, EventCloudError):  # no cover: that peer's zone changed while it answered
        return None
