"""Graceful leave, the half of membership that hands a zone over (peers/membership/membership.py is the rest).

A leaving peer hands its zone, quads and subscriptions to a neighbour whose zone merges with its
own into a box (`overlay.heirs`: the sibling of its last split first), which takes it over
(`take_over`, then `leave_data` for what the first chunk lacks) and announces the merged zone.
The rebalancer's moves leave the same way (`step_aside`). `Membership` inherits these methods:
they share its lock, its table and its announcements.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Awaitable, Callable

import trio

from eventcloud.errors import ErrorCode, EventCloudError, RequestError
from eventcloud.net.rpc import RpcConnection
from eventcloud.overlay import Box, Neighbour, heirs, merge_for_leave
from eventcloud.rdf.model import Quad
from eventcloud.wire.messages import Announce, Empty, Handover, Left, NextChunk, PeerId, TakeOver
from eventcloud.wire.ops import Op
from peers.membership.handover import Outgoing, drop_outside, receive
from peers.replication import OwnerReplication
from peers.net import FAILED, Router
from peers.membership.stabiliser import Stabiliser
from peers.store import ForeignQuads, PeerState, ZoneGuard

log = logging.getLogger(__name__)

__all__ = ["Leaving", "DEPARTED_FOR"]

#: How long a peer that left is remembered as departed (not crashed).
DEPARTED_FOR = 600.0
#: Requests of one take-over to an heir that did not answer, before the next heir is asked.
TAKE_OVER_TRIES = 3


class Leaving:
    """The leave's methods of `Membership`, which sets these attributes up and provides
    `announce`, `_apply`, `_handover` and `_install`."""

    state: PeerState
    router: Router
    lock: trio.Lock
    guard: ZoneGuard
    counters: Counter[str]
    replication: OwnerReplication
    stabiliser: Stabiliser
    persist: Callable[[], Awaitable[None]]
    retire: Callable[[RpcConnection], Awaitable[None]]
    leaving: bool
    foreign: ForeignQuads
    _departed: dict[str, float]
    _held: list[Announce]
    _outgoing: Outgoing | None

    async def leave(self, within: Box | None = None, *, tree_only: bool = False) -> str:
        """Hand our zone and data to a neighbour whose zone merges with ours (and lies inside
        `within`, if given; only our sibling with `tree_only`, `heirs`); returns its id."""
        state = self.state
        async with self.lock:
            self._refuse_if_leaving()  # handed over already (a rebalancer's move and a neighbour's request)
            candidates = heirs(state.zone, state.neighbours, within, tree_only=tree_only)
            if not candidates:
                raise RequestError("cannot leave: no neighbour's zone merges with this peer's zone into a box "
                                   f"{'inside the box asked for ' if within else ''}(its sibling is split further); "
                                   "stop another peer first", ErrorCode.CANNOT_LEAVE)
            # From here on this peer takes no neighbour's zone over: two siblings leaving at once
            # would each hand its zone to the other, and both zones would be left to nobody.
            self.leaving = True
            self._held = []
            addresses = {ident: state.neighbours[ident].address for ident in candidates}
            try:
                candidates = await self._answering(candidates, within, tree_only)
            except BaseException:
                self._end_leave(failed=True)
                raise
            # Stores wait from the snapshot on; once an heir holds the zone they never resume
            # (this peer stops, the waiting stores fail and are routed to the heir).
            try:
                await self.guard.acquire_change()
            except BaseException:
                self._end_leave(failed=True)
                raise
            try:
                heir = await self._hand_zone_to(candidates)
            except BaseException:
                self.guard.release_change()
                self._end_leave(failed=True)
                with trio.CancelScope(shield=True):
                    await self.persist()
                raise
        for body in self._end_leave(failed=False):
            await self.announce(body.peers or {}, [addresses[heir]], body.removed)
        return heir

    async def _answering(self, candidates: list[str], within: Box | None, tree_only: bool) -> list[str]:
        """The candidates from the first that answers as itself, with a zone that still merges
        with ours (inside `within`).

        Asked before stores are held off: an entry a moment old (the heir moved, and its port
        is another peer's now, or nobody's) cost a take-over three failed tries and a table
        request while every store into this zone waited (with 8 real peers moving while they
        were published to, publications were refused for not being stored within 15 s)."""
        for at, ident in enumerate(candidates):
            expected = self.state.neighbours.get(ident)
            if expected is None:
                continue
            table = await self.stabiliser.table_of(expected.address)
            if table is not None and table.me[0] == ident and ident in heirs(
                    self.state.zone, {ident: table.me[1]}, within, tree_only=tree_only):
                return candidates[at:]
            self.counters["leave_heirs_not_answering"] += 1
        raise RequestError("cannot leave: no neighbour whose zone merges with this peer's zone into a box "
                           f"{'inside the box asked for ' if within else ''}answers as the peer this peer's "
                           "table names (they moved or are down); retry once tables are repaired",
                           ErrorCode.CANNOT_LEAVE)

    def _end_leave(self, *, failed: bool) -> list[Announce]:
        """The announcements held during a leave: applied to our table either way (a failed
        leave keeps the zone; a moved peer rejoins through its table), returned for the heir."""
        held, self._held = self._held, []
        if failed:
            self.leaving = False
        for body in held:
            self._apply(body)
        return held

    async def _hand_zone_to(self, candidates: list[str]) -> str:
        """The zone's content to the first heir that takes it; its id."""
        state = self.state
        _, data = await self._handover(state.zone)
        outgoing = Outgoing(data)
        first, remaining = outgoing.first()
        request = TakeOver(state.id, state.zone, dict(state.neighbours), first, state.address, remaining)
        self._outgoing = outgoing
        try:
            return await self._take_over_by(candidates, request)
        finally:
            self._outgoing = None

    async def _take_over_by(self, candidates: list[str], request: TakeOver) -> str:
        state = self.state
        last_error: EventCloudError | None = None
        for ident in candidates:
            address = state.neighbours[ident].address
            for attempt in range(TAKE_OVER_TRIES):
                try:
                    await self.router.call(address, Op.TAKE_OVER, request)
                    return ident
                except FAILED as exc:
                    # The answer may be what was lost, with the take-over done or still under way
                    # there: ask the same heir again (it answers a done one as done, and one under
                    # way holds its lock), never another one while this one may hold the zone.
                    last_error = exc
                    await trio.sleep(0.5 * (attempt + 1))
                except EventCloudError as exc:
                    last_error = exc
                    break
            else:
                table = await self.stabiliser.table_of(address)
                if table is not None and table.me[1].zone.covers(state.zone):
                    return ident
        raise RequestError(f"cannot leave: no neighbour could take over ({last_error})", ErrorCode.CANNOT_LEAVE)

    async def step_aside(self, within: Box | None = None) -> list[str]:
        """Leave gracefully to rejoin elsewhere (the rebalancer): the zone and its data go to our
        sibling (inside `within`, if given; any neighbour whose zone merges with ours into a box
        if our zone does not know its place in the split tree), our replica drops its copy; the
        addresses to rejoin through, the heir's first."""
        table = dict(self.state.neighbours)   # the heir's announcement may change ours meanwhile
        heir = await self.leave(within, tree_only=True)
        await self.replication.drop()
        known = {**table, **self.state.neighbours}
        first = [known[heir].address] if heir in known else []
        return first + [a for a in dict.fromkeys(n.address for n in known.values()) if a not in first]

    async def _on_leave(self, conn: RpcConnection, body: Empty) -> Left:
        """Leave the overlay gracefully; the runtime stops this peer once the reply is sent."""
        heir = await self.leave()
        await self.replication.drop()
        await self.retire(conn)
        return Left(heir)

    async def _on_leave_data(self, conn: RpcConnection, body: NextChunk) -> Handover:
        """The next chunk of the quads our leave is handing over (the heir asks, before it merges)."""
        if self._outgoing is None:
            raise RequestError(f"peer {self.state.id} is not handing its zone over (its leave ended)",
                               ErrorCode.NOT_FOUND)
        return self._outgoing.served(body.offset, "leave's handover")

    async def _on_take_over(self, conn: RpcConnection, body: TakeOver) -> PeerId:
        state = self.state
        if state.zone.covers(body.zone):  # a retry whose answer was lost: the zone is ours already
            return PeerId(state.id)
        self._refuse_if_leaving()  # checked before the lock, which our own leave holds while it waits
        self._departed[body.id] = trio.current_time() + DEPARTED_FOR
        try:
            async with self.lock:
                if state.zone.covers(body.zone):  # the attempt we waited behind took it
                    return PeerId(state.id)
                self._refuse_if_leaving()  # began while we waited: its snapshot of our zone is taken already
                plan = merge_for_leave(state.id, state.zone, state.neighbours, body.id, body.zone, body.neighbours)
                if plan is None:
                    raise RequestError("zones do not merge into a box", ErrorCode.CANNOT_LEAVE)
                with self.foreign.writing():   # the leaver still answers for these quads until the zone is ours
                    await self._install_leaving(body)
                    state.zone = plan.merged
                state.neighbours = plan.table
                await self.persist()
        except RequestError:  # refused: that peer keeps its zone, and has not departed
            self._departed.pop(body.id, None)
            raise
        await self.announce({state.id: Neighbour(state.address, plan.merged, state.incarnation)}, plan.announce_to,
                            removed=(body.id,))
        return PeerId(state.id)

    async def _install_leaving(self, body: TakeOver) -> None:
        """A leaving neighbour's zone content, fetching what its first chunk lacks; if that
        fails, nothing of it is left here (the leaver keeps its zone)."""
        installed: list[Quad] = []

        async def fetch(offset: int) -> Handover:
            address = body.address or self.state.neighbours[body.id].address
            return Handover.from_wire(await self.router.call(address, Op.LEAVE_DATA, NextChunk(self.state.id, offset)))

        try:
            await receive(body.data, body.remaining, fetch, self._install, installed)
        except BaseException as exc:
            with trio.CancelScope(shield=True):
                await drop_outside(self.store, self.subscriptions, self.state.zone, installed)
            if isinstance(exc, (EventCloudError, KeyError)):
                raise RequestError(f"cannot take over {body.id}'s zone: {exc}", ErrorCode.CANNOT_LEAVE) from None
            raise

    def _refuse_if_leaving(self) -> None:
        if self.leaving:
            raise RequestError(f"peer {self.state.id} is leaving too; hand the zone to another neighbour or retry",
                               ErrorCode.CANNOT_LEAVE)

