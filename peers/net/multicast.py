"""Box multicast: running a routed operation on every peer whose zone meets a box, once each.

A multicast first routes to the owner of the box's lowest corner, then follows the parent rule
of `overlay.multicast_children`, so each peer in the box is reached exactly once; replies are
gathered back up the tree. Each peer reports what it covered of the box: covers that do not
tile it mean the multicast crossed a membership change, and it runs again within the retry
window (multicast operations are idempotent). `multicast_each` runs many items, each with its
own box, in one tree over their hull.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Awaitable, Callable, Protocol

import trio

from eventcloud.errors import ErrorCode, EventCloudError, RemoteError, RequestError
from eventcloud.overlay import (
    Box, Neighbour, Zone, disjoint, hull, intersection, lowest_corner, multicast_children, multicast_root,
    subtree_reach, tiles,
)
from eventcloud.wire.codec import box_from_wire, box_to_wire, neighbour_from_wire, neighbour_to_wire, point_to_wire
from eventcloud.wire.messages import Multicast, MulticastEach
from eventcloud.wire.ops import Op
from eventcloud.wire.schema import Body
from peers.net.dispatch import Dispatcher
from peers.net.retry import FAILED, RetryPolicy
from peers.store import PeerState

log = logging.getLogger(__name__)

__all__ = ["BoxMulticast", "Discard", "EACH_AT_ONCE"]

#: Items of one `mcast_each` a peer runs at once (concurrent writes share one fsync).
EACH_AT_ONCE = 64

#: Releases what the results of a multicast attempt that is thrown away hold.
Discard = Callable[[list[Any]], Awaitable[None]]


async def _discarded(discard: Discard | None, answers: list[Any]) -> None:
    """Hand the results of a thrown-away attempt to `discard`, whatever cancels the caller:
    a paged answer's cursors, left open, each held one of a peer's 64 slots for a minute (under
    load a COUNT retried during a takeover filled them, and every paged query there was refused)."""
    if discard is not None and answers:
        with trio.CancelScope(shield=True):
            await discard([r["ok"] for r in answers])


class Unicast(Protocol):
    """What a multicast needs of the router: routing to a point, a call to a neighbour, and
    telling it a neighbour did not answer."""

    async def route(self, point: Any, op: Op, body: Any, hops: int = 0) -> Any: ...

    async def call(self, address: str, op: Op, body: Any) -> dict[str, Any]: ...

    def suspect(self, ident: str, address: str) -> None: ...


class BoxMulticast:
    """The multicasts of one peer, over its router's unicast (routing to a box's root, calls to
    children) and its dispatcher (running the operation here)."""

    def __init__(self, router: Unicast, state: PeerState, dispatcher: Dispatcher, counters: Counter[str], *,
                 retry: RetryPolicy, partial_wait: float) -> None:
        self.router = router
        self.state = state
        self.dispatcher = dispatcher
        self.counters = counters
        self.retry = retry
        self.partial_wait = partial_wait

    def routed(self) -> dict[Op, Any]:
        return {Op.MCAST: self._local_multicast, Op.MCAST_EACH: self._local_multicast_each}

    async def multicast(self, box: Box, op: Op, body: Body | dict[str, Any],
                        discard: Discard | None = None) -> list[Any]:
        """Run routed operation `op` on every peer whose zone meets `box`; their results, one per peer.
        A peer that stays unreachable for the retry window fails the whole multicast, naming it.
        `discard` is given the results of an attempt that is not returned (run again, or failed),
        to release what they hold (an answer's open cursors)."""
        results, down = await self._multicast(box, op, body, partial=False, discard=discard)
        return results

    async def multicast_partial(self, box: Box, op: Op, body: Body | dict[str, Any]
                                ) -> tuple[list[Any], list[tuple[str, Neighbour]]]:
        """As `multicast`, but a peer that does not answer within `partial_wait` is reported as down
        (id, neighbour record) instead (the peers only reachable through it are then missing)."""
        return await self._multicast(box, op, body, partial=True)

    async def _multicast(self, box: Box, op: Op, body: Body | dict[str, Any], partial: bool,
                         discard: Discard | None = None) -> tuple[list[Any], list[tuple[str, Neighbour]]]:
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
                reply = await self.router.route(multicast_root(box), Op.MCAST, request)
            except RemoteError as exc:
                if exc.code is not ErrorCode.UNAVAILABLE:
                    raise
                reply = []  # the root handed its zone over meanwhile: run it again, as for a missed zone
            if not isinstance(reply, list):
                raise RequestError("malformed multicast reply", ErrorCode.INTERNAL)
            errors = [r["error"] for r in reply if isinstance(r, dict) and "error" in r]
            answers = [r for r in reply if isinstance(r, dict) and "ok" in r]
            if errors:
                await _discarded(discard, answers)
                raise RequestError("; ".join(errors), ErrorCode.UNREACHABLE)
            down = [neighbour_from_wire(r["down"]) for r in reply if isinstance(r, dict) and "down" in r]
            if _tiled(box, answers) or (down and _disjoint(box, answers)):  # partial: never a zone twice
                return [r["ok"] for r in answers], down
            await _discarded(discard, answers)
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
                reply = await self.router.call(neighbour.address, Op.ROUTE, {
                    "point": point_to_wire(lowest_corner(neighbour.zone, box)), "op": op.value,
                    "body": forward, "hops": 1, "to": key,
                })
                return list(reply["result"])
            except FAILED as exc:
                self.router.suspect(key, neighbour.address)
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
                reply = await self.router.route(multicast_root(whole), Op.MCAST_EACH, request)
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
