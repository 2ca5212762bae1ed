"""The heir's side of a leave: a leaving neighbour's zone merged into ours, as the ownership
authority decides.

A leave is decided by one transaction at the authority (peers/authority/ownership.py): the
leaver records the attempt (`begin_leave`, a token the heir is sent), then either the heir
takes the zone (`absorb`) or the leaver, its heir silent, withdraws the attempt
(`settle_leave`), whichever comes first. Before, the two peers decided between them, and a
lost answer split them: an heir that saved its merge and crashed before answering came back
serving the leaver's zone, which the leaver, taking the unanswered leave for a failed one, kept
serving too (two owners, each acknowledging writes the other never saw).

So the heir, once it holds the leaver's content, saves the merge under way (`MergeBegun`,
copied to its replica) before it asks; whoever serves that state next (the heir restarted, or
its stand-in) asks again (`resume`) and merges, or drops the content if the leaver kept it.
Without an authority (`DecidedAlone`) the heir merges whatever it received, as before.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Awaitable, Callable

import trio

from eventcloud.errors import ErrorCode, EventCloudError, Fenced, RequestError
from eventcloud.net.rpc import RpcConnection
from eventcloud.overlay import MergeBegun, MergeDropped, Merged, MergePlan, MergeUnderWay, Neighbour, merge_for_leave
from eventcloud.rdf.model import Quad
from eventcloud.wire.messages import Handover, NextChunk, PeerId, TakeOver
from eventcloud.wire.ops import Op
from peers.membership.decisions import Decisions, decided
from peers.membership.handover import drop_outside, receive
from peers.net import Router
from peers.store import AsyncStore, ForeignQuads, PeerState
from peers.matching import Subscriptions
from peers.tasks import TaskStarter

log = logging.getLogger(__name__)

__all__ = ["DEPARTED_FOR", "Merges"]

#: How long a peer that left is remembered as departed (not crashed).
DEPARTED_FOR = 600.0
class Merges:
    """Take-overs of leaving neighbours' zones (`take_over`), and merges saved under way."""

    def __init__(self, state: PeerState, router: Router, store: AsyncStore, subscriptions: Subscriptions,
                 counters: Counter[str], tasks: TaskStarter, *, lock: trio.Lock, foreign: ForeignQuads,
                 decisions: Decisions, persist: Callable[[], Awaitable[None]],
                 announce: Callable[..., Awaitable[None]], install: Callable[[Handover], Awaitable[None]],
                 leaving: Callable[[], bool], departed: dict[str, float]) -> None:
        self.state = state
        self.router = router
        self.store = store
        self.subscriptions = subscriptions
        self.counters = counters
        self.tasks = tasks
        self.lock = lock                 # the zone lock (membership's)
        self.foreign = foreign
        self.decisions = decisions
        self.persist = persist
        self.announce = announce
        self.install = install
        self.leaving = leaving           # our own leave is under way: we take no zone meanwhile
        self.departed = departed         # peers that left gracefully (membership's record)

    async def on_take_over(self, conn: RpcConnection | None, body: TakeOver) -> PeerId:
        state = self.state
        if state.zone.covers(body.zone):  # a retry whose answer was lost: the zone is ours already
            return PeerId(state.id)
        self._refuse_if_leaving()  # checked before the lock, which our own leave holds while it waits
        self.departed[body.id] = trio.current_time() + DEPARTED_FOR
        try:
            async with self.lock:
                if state.zone.covers(body.zone):  # the attempt we waited behind took it
                    return PeerId(state.id)
                self._refuse_if_leaving()  # began while we waited: its snapshot of our zone is taken already
                self._refuse_while_busy()
                if merge_for_leave(state.id, state.zone, state.neighbours, body.id, body.zone, body.neighbours) is None:
                    raise RequestError("zones do not merge into a box", ErrorCode.CANNOT_LEAVE)
                with self.foreign.writing():   # the leaver still answers for these quads until the zone is ours
                    installed = await self._install_leaving(body)
                    held = state.neighbours.get(body.id)
                    incarnation = body.incarnation if body.incarnation is not None else held.incarnation if held else 0
                    state.step(MergeBegun(MergeUnderWay(body.id, incarnation, body.leave, body.zone,
                                                        dict(body.neighbours))))
                    try:
                        await self.persist()   # before the authority is asked: whoever serves us next asks again
                        plan = await self._decide(installed)
                    except BaseException:
                        # The leaver went away (its request's connection closed), this runtime
                        # stops, or the save failed: the merge is decided in the background, or by
                        # the next runtime.
                        if state.merging is not None and self.tasks.open:
                            self.tasks.start_soon(self._resume, state.merging)
                        raise
        except RequestError:  # refused: that peer keeps its zone, and has not departed
            self.departed.pop(body.id, None)
            raise
        await self._announce(plan, body.id)
        return PeerId(state.id)

    async def resume(self) -> None:
        """The state this runtime starts from has a merge under way (this peer restarted, or it
        stands in for the heir): the authority's answer is asked again, in the background (the
        zone held is served meanwhile; the leaver's stays the leaver's until it is decided)."""
        merge = self.state.merging
        if merge is None:
            return
        log.info("peer %s: its merge of peer %s's zone was under way; asking the ownership authority again",
                 self.state.id, merge.leaver)
        self.tasks.start_soon(self._resume, merge)

    async def _resume(self, merge: MergeUnderWay) -> None:
        space = self.state.space
        async with self.lock:
            if self.state.merging != merge:   # decided meanwhile
                return
            with self.foreign.writing():
                held = [q for q in await self.store.find(None, None, None, None) if merge.zone.contains(space.point(q))]
                try:
                    plan = await self._decide(held)
                except RequestError as exc:
                    log.warning("peer %s: %s", self.state.id, exc.message)
                    return
        await self._announce(plan, merge.leaver)

    async def _decide(self, installed: list[Quad]) -> MergePlan:
        """The merge under way, as the authority decides it: merged (the plan), or its content
        dropped and a `RequestError` saying why."""
        state = self.state
        merge = state.merging
        assert merge is not None
        merged = state.zone.merge(merge.zone)
        assert merged is not None, "a zone under merge changed"   # the lifecycle allows no other change while merging
        try:
            await decided(lambda: self.decisions.absorb(merge.leaver, merge.incarnation, merge.token, merged),
                          f"its merge of peer {merge.leaver}'s zone", state.id)
        except Fenced as refused:
            with trio.CancelScope(shield=True):
                await drop_outside(self.store, self.subscriptions, state.zone, installed)
                state.step(MergeDropped(merge.leaver))
                await self.persist()
            self.counters["merges_refused"] += 1
            raise RequestError(f"cannot take over {merge.leaver}'s zone: {refused}", ErrorCode.CANNOT_LEAVE) from None
        plan = merge_for_leave(state.id, state.zone, state.neighbours, merge.leaver, merge.zone, merge.table)
        assert plan is not None and plan.merged == merged
        state.step(Merged(plan.merged, plan.table))
        # The leave record stays at the authority: this state's copy at our replica is sent best
        # effort, and a stand-in restoring a copy still merging learns from the record that the
        # zone is ours (the leaver's keys are gone by then).
        await self.persist()
        return plan

    async def _announce(self, plan: MergePlan, leaver: str) -> None:
        state = self.state
        await self.announce({state.id: Neighbour(state.address, plan.merged, state.incarnation)}, plan.announce_to,
                            removed=(leaver,))

    async def _install_leaving(self, body: TakeOver) -> list[Quad]:
        """A leaving neighbour's zone content, fetching what its first chunk lacks; if that
        fails, nothing of it is left here (the leaver keeps its zone)."""
        installed: list[Quad] = []

        async def fetch(offset: int) -> Handover:
            address = body.address or self.state.neighbours[body.id].address
            return Handover.from_wire(await self.router.call(address, Op.LEAVE_DATA, NextChunk(self.state.id, offset)))

        try:
            await receive(body.data, body.remaining, fetch, self.install, installed)
        except BaseException as exc:
            with trio.CancelScope(shield=True):
                await drop_outside(self.store, self.subscriptions, self.state.zone, installed)
            if isinstance(exc, (EventCloudError, KeyError)):
                raise RequestError(f"cannot take over {body.id}'s zone: {exc}", ErrorCode.CANNOT_LEAVE) from None
            raise
        return installed

    def _refuse_while_busy(self) -> None:
        """A zone split for a newcomer grows by no merge until the split stands or is undone (an
        undo restores the zone from before the split, and would drop the merged part); nor does
        a zone with another merge under way."""
        split, merge = self.state.splitting, self.state.merging
        if split is not None:
            raise RequestError(f"peer {self.state.id} is splitting its zone for {split.newcomer}; hand the zone "
                               "to another neighbour or retry once that join is decided", ErrorCode.BUSY)
        if merge is not None:
            raise RequestError(f"peer {self.state.id} is taking over peer {merge.leaver}'s zone; hand the zone to "
                               "another neighbour or retry once that is decided", ErrorCode.BUSY)

    def _refuse_if_leaving(self) -> None:
        if self.leaving():
            raise RequestError(f"peer {self.state.id} is leaving too; hand the zone to another neighbour or retry",
                               ErrorCode.CANNOT_LEAVE)
