"""The owner's side of a join: a split granted to a newcomer, from the split to its commit, or
to its undo when the newcomer never commits (peers/membership/membership.py has the joiner's
side and the steps in order).

One join at a time per owner (`_gate`, from split to commit or undo). While a split is
pending the store still holds the newcomer's quads (`ForeignQuads` says so to readers); the
commit drops them and announces both zones; a split whose newcomer is gone, or never commits
within `join_timeout`, is undone and what was matched meanwhile is matched again.

The split under way is saved with the state (`PeerState.splitting`), so it outlives this
runtime: whoever serves the state next (this peer restarted, or its stand-in, from the
replica's copy) `resume`s it, and the newcomer, its commit unanswered, commits there.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable

import trio

from eventcloud.errors import EventCloudError, GeometryError, ErrorCode, RequestError
from eventcloud.net.rpc import RpcConnection
from eventcloud.overlay import (
    Neighbour, SplitCommitted, SplitGranted, SplitUndone, SplitUnderWay, cut_between, cut_for, evenly, split_for_join,
)
from eventcloud.sparql.filters.operators import NO_OPERATORS, OperatorSet
from eventcloud.wire.messages import Empty, Handover, JoinCommit, JoinGrant, JoinRequest, NextChunk, Pong, Table
from eventcloud.wire.ops import Op
from peers.matching import Subscriptions, check_same_operators
from peers.membership.decisions import DecidedAlone, Decisions, decided
from peers.membership.handover import Outgoing, drop_outside, zone_content
from peers.net import Locate, Router, addresses_of
from peers.replication import OwnerReplication
from peers.store import AsyncStore, ForeignQuads, PeerState, ZoneGuard
from peers.tasks import TaskStarter

log = logging.getLogger(__name__)

__all__ = ["Splits"]


class _PendingJoin:
    """A split granted to a newcomer, until it commits (or the timer undoes it)."""

    def __init__(self, record: SplitUnderWay):
        self.record = record              # as saved: the zone and table before the split (to undo it)
        self.outgoing = Outgoing()        # handed over (its quads dropped here at commit)
        self.timer = trio.CancelScope()


class Splits:
    """Splits this peer grants to joining peers (the `join_split`, `join_data` and
    `join_commit` operations). Zone changes share membership's `lock`; announcing both zones
    after a commit is membership's `announce`."""

    def __init__(self, state: PeerState, router: Router, store: AsyncStore, subscriptions: Subscriptions,
                 tasks: TaskStarter, *, lock: trio.Lock, guard: ZoneGuard, foreign: ForeignQuads,
                 replication: OwnerReplication, persist: Callable[[], Awaitable[None]],
                 announce: Callable[[dict[str, Neighbour], Any], Awaitable[None]], join_timeout: float,
                 retry_window: float, operators: OperatorSet = NO_OPERATORS,
                 rematch: Callable[[list[str]], Awaitable[None]] | None = None, locate: Locate | None = None,
                 decisions: Decisions | None = None) -> None:
        self.state = state
        #: where a split is decided (commit or undo): the ownership authority, or this peer alone
        self.decisions: Decisions = decisions if decisions is not None else DecidedAlone()
        self.locate = locate             # where the authority says a peer's zone is served now
        self.router = router
        self.store = store
        self.subscriptions = subscriptions
        self.tasks = tasks               # join timers run there
        self.lock = lock                 # membership's: serialises zone changes on this peer
        self.guard = guard               # zone changes wait for the stores decided from the zone
        self.foreign = foreign           # the pending splits: quads held here that the newcomer answers for
        self.replication = replication
        self.persist = persist
        self.announce = announce
        self.join_timeout = join_timeout
        self.retry_window = retry_window
        self.operators = operators       # a joiner must have exactly these (checked on both sides)
        self.rematch = rematch           # match events again after a split is undone (the matcher's)
        self._gate = trio.Semaphore(1)   # one join at a time, from split to commit or undo

    def handlers(self) -> dict[Op, Any]:
        return {Op.JOIN_COMMIT: self._on_join_commit, Op.JOIN_DATA: self._on_join_data}

    def routed(self) -> dict[Op, Any]:
        return {Op.JOIN_SPLIT: self._local_join_split}

    async def _local_join_split(self, body: JoinRequest) -> dict[str, Any]:
        check_same_operators(body.operators, self.operators.names, f"peer {self.state.id}")
        await self._gate.acquire()
        try:
            grant, pending = await self._split_for(body.id, body.address, body if body.annex is not None else None)
        except BaseException:
            cut_off = self.foreign.join_ended(body.id)
            with trio.CancelScope(shield=True):
                if cut_off is not None and self.state.zone != cut_off.record.before:  # split, then cut off: undone whole
                    await self._undo_split(cut_off)
                with trio.move_on_after(self.retry_window):   # the grant never left: nobody can commit it
                    try:
                        await self.decisions.undo_split(body.id)
                    except EventCloudError:
                        pass
            self._gate.release()
            raise
        # Until it commits, the newcomer serves nothing: this peer must not pick it as its replica
        # (a copy sent there would wait for the join, and the join for the copy).
        self.replication.joining_began(body.id)
        if self.tasks.open:
            self.tasks.start_soon(self._expire_join, body.id, body.address, pending)
        return grant.to_wire()

    def _annex_cut(self, body: JoinRequest) -> tuple[int, int, bool]:
        """The cut an annex asks for: (dim, at, the annex takes the lower side), if the zone
        it was offered is still this peer's."""
        assert body.annex is not None
        if body.of != self.state.zone:
            raise RequestError(f"peer {self.state.id}'s zone changed since the annex was offered",
                               ErrorCode.NOT_FOUND)
        cut = cut_between(self.state.zone, body.annex)
        if cut is None:
            raise RequestError(f"the annex asked for is not one side of a cut of peer {self.state.id}'s zone",
                               ErrorCode.BAD_REQUEST)
        return cut

    async def _split_for(self, new_id: str, new_address: str, annex: JoinRequest | None = None
                         ) -> tuple[JoinGrant, _PendingJoin]:
        state = self.state
        async with self.lock, self.guard.change():
            if state.merging is not None:   # a leaver's zone awaits the authority's word here
                raise RequestError(f"peer {state.id} is taking over peer {state.merging.leaver}'s zone; retry the "
                                   "join in a moment", ErrorCode.BUSY)
            held = await self.store.find(None, None, None, None)
            try:
                if annex is not None:
                    dim, at, newcomer_lower = self._annex_cut(annex)
                    cut = (dim, at)
                else:
                    cut, newcomer_lower = cut_for(state.zone, [state.space.point(q) for q in evenly(held)]), False
                plan = split_for_join(state.id, state.address, state.zone, state.neighbours, new_id, new_address,
                                      state.incarnation, cut=cut, newcomer_lower=newcomer_lower)
            except GeometryError as exc:
                raise RequestError(f"cannot split zone for a join: {exc.message}", ErrorCode.UNAVAILABLE) from None
            await self.decisions.begin_split(new_id)   # recorded at the authority before the zone shrinks
            record = SplitUnderWay(new_id, new_address, plan.granted, state.zone, state.neighbours, plan.announce_to)
            pending = _PendingJoin(record)
            # From the moment the zone shrinks, the store holds the newcomer's quads outside it:
            # readers count this zone's own only (`ForeignQuads`). Registered after the persist
            # below, a status reaching this peer meanwhile counted all of them against the smaller
            # zone, and the newcomer's answer, once joined, tiled with it: 53,492 of 42,000.
            self.foreign.join_began(new_id, pending)
            # What the newcomer takes, events' states included, is read before the zone shrinks
            # (nothing awaited in between): an event matched here after it skips the quads this
            # peer no longer owns and is marked notified; that mark must not reach the newcomer,
            # or nobody notifies for those quads (a lost notification).
            quads, data = zone_content(self.store, self.subscriptions, state.space, plan.granted, held)
            log.info("peer %s: split for %s along dimension %d, %d of its %d quads go", state.id, new_id, cut[0],
                     len(quads), len(held))
            state.step(SplitGranted(record, plan.kept, plan.owner_table))
            # From here the split completes (the newcomer commits, or `_expire_join` undoes it) or
            # is undone now: cancelled in this persist (the joiner's request was cut off when the
            # peer it came through moved), the zone would stay split with no newcomer, its other
            # half owned by nobody and refused for good.
            try:
                with trio.CancelScope(shield=True):
                    await self.persist()
            except BaseException:
                state.step(SplitUndone(new_id))
                raise
            pending.outgoing = Outgoing(data)
            first, remaining = pending.outgoing.first()
            grant = JoinGrant(plan.granted, plan.newcomer_table, state.algorithm, state.id, state.address, first,
                              state.overlay, state.replicas, remaining=remaining)
            return grant, pending

    async def resume(self) -> None:
        """The state this runtime starts from has a split under way (this peer restarted, or it
        stands in for the splitter): wait for the newcomer's commit again, or undo the split as
        the splitter would have. Called before the zone is served."""
        record = self.state.splitting
        if record is None:
            return
        await self._gate.acquire()
        pending = _PendingJoin(record)
        held = await self.store.find(None, None, None, None)
        pending.outgoing = Outgoing(zone_content(self.store, self.subscriptions, self.state.space, record.granted,
                                                 held)[1])
        self.foreign.join_began(record.newcomer, pending)
        self.replication.joining_began(record.newcomer)
        try:
            committed = await self.decisions.split_committed(record.newcomer)
        except EventCloudError:
            committed = False   # asked again when the timer ends (`_expire_join`)
        if committed:   # its commit won at the authority before this state was saved: it stands
            log.info("peer %s: the split for %s was committed at the authority; it stands", self.state.id,
                     record.newcomer)
            await self._commit(record.newcomer)
            return
        log.info("peer %s: the split for %s was under way; waiting for its commit again", self.state.id,
                 record.newcomer)
        self.tasks.start_soon(self._expire_join, record.newcomer, record.address, pending)

    async def _on_join_data(self, conn: RpcConnection, body: NextChunk) -> Handover:
        """The next chunk of a pending join's quads; each one gives the newcomer another
        `join_timeout` before the split is undone."""
        pending = self.foreign.join(body.id)
        if pending is None:
            raise RequestError(f"no join in progress for peer {body.id} (it timed out and was undone)",
                               ErrorCode.NOT_FOUND)
        pending.timer.deadline = trio.current_time() + self.join_timeout
        return pending.outgoing.served(body.offset, "join's handover")

    async def _expire_join(self, new_id: str, address: str, pending: _PendingJoin) -> None:
        """Undo a split whose newcomer never committed: it died mid-join, or gave up before the
        grant reached it (on 8 real peers a joiner's request was cut off on its way, the joiner
        tried elsewhere under a new id, and the split was granted to nobody: the zone's upper
        half was refused until `join_timeout`). So the newcomer is asked every `retry_window`
        whether it is still there; gone (another id answers at its address, or nothing twice
        in a row), the split is undone at once."""
        pending.timer.deadline = trio.current_time() + self.join_timeout  # pushed on by each chunk served
        with pending.timer:
            silent = 0
            while True:
                await trio.sleep(self.retry_window)
                answer = await self._who_answers(address)
                silent = silent + 1 if answer is None else 0
                if silent >= 2 or answer not in (None, new_id):
                    break
        if self.foreign.join(new_id) is not pending:  # committed (the commit cancelled the timer)
            return
        decision = await decided(lambda: self.decisions.undo_split(new_id), f"the split for {new_id}", self.state.id)
        if decision == "committed":
            # its commit won at the authority; the answer reached a runtime of ours that ended
            # before it saved the split (or is on its way here now): the split stands
            log.info("peer %s: the ownership authority says peer %s's split stands", self.state.id, new_id)
            await self._commit(new_id)
            return
        if decision is None and await self._serves(new_id, address):   # no authority: the splitter looks
            # (or its replica took its half over: a newcomer's copy is made before its commit)
            # Its commit reached a runtime of ours that ended before saving it (or its answer was
            # lost), and the newcomer serves its half: the split stands.
            log.info("peer %s: peer %s serves the zone it joined for; its split stands", self.state.id, new_id)
            await self._commit(new_id)
            return
        if self.foreign.join(new_id) is not pending:   # committed while `_serves` asked around: it stands
            return
        self.foreign.join_ended(new_id)
        self.replication.joining_ended(new_id)
        log.warning("peer %s: peer %s never committed its join; taking the zone back", self.state.id, new_id)
        await self._undo_split(pending)
        self._gate.release()

    async def _who_answers(self, address: str) -> str | None:
        """The id of the peer answering at `address` (a joining one answers pings), or None."""
        try:
            with trio.move_on_after(self.retry_window):
                return Pong.from_wire(await self.router.call(address, Op.PING, Empty())).id
        except EventCloudError:
            pass
        return None

    async def _serves(self, new_id: str, address: str) -> bool:
        """Does peer `new_id` serve (part of) zone `granted` anywhere: at `address`, or where the
        peers around say (its stand-in's)? Its id is new to this join, so whatever serves under
        it serves the granted half or what became of it (a stand-in, a later split), and a
        peer still joining answers no table. (A stand-in's zone compared with `granted` missed
        one that had split for an annex since: the splitter's stand-in took the half back, and
        two peers served it: 13 events lost in a chaos run.)"""
        for where in await addresses_of(self.router, self.state, new_id, address, self.retry_window, self.locate):
            try:
                with trio.move_on_after(self.retry_window):
                    table = Table.from_wire(await self.router.call(where, Op.TABLE, Empty()))
                    if table.me[0] == new_id:
                        return True
            except EventCloudError:
                continue
        return False

    async def _undo_split(self, pending: _PendingJoin) -> None:
        state = self.state
        async with self.lock:
            state.step(SplitUndone(pending.record.newcomer))
            await self.persist()
        # The kept half may have been announced meanwhile (a restarted splitter, a stand-in):
        # the neighbours learn the whole zone again.
        await self.announce({state.id: Neighbour(state.address, state.zone, state.incarnation)},
                            tuple(n.address for n in state.neighbours.values()))
        if self.rematch is not None:  # what was matched meanwhile skipped the half that is ours again
            await self.rematch(sorted(pending.outgoing.events))

    async def _on_join_commit(self, conn: RpcConnection, body: JoinCommit) -> Empty:
        """The newcomer holds its half: the split stands. Refused (and later undone) only before
        it stands; once it does, the answer is success whatever follows, or the newcomer would
        give its half up while this peer had dropped it (simulation seed 56: a zone served by
        nobody, its quads gone, after the drop below was fenced). A commit asked again (its
        answer was lost, or the newcomer's replica asks) is answered from the newcomers whose
        splits committed here (`PeerState.granted`, saved and copied with the state)."""
        pending = self.foreign.join(body.id)
        if pending is None:
            if body.id in self.state.granted or await self.decisions.split_committed(body.id):
                return Empty()
            raise RequestError(f"no join in progress for peer {body.id} (it timed out and was undone)",
                               ErrorCode.NOT_FOUND)
        self.store.fence()   # a deposed or cut-off owner commits no split (`_expire_join` undoes it)
        # decided at the authority: our commit, or the undo of a timer that fired meanwhile
        if await self.decisions.commit_split(body.id, self.state.zone, pending.record.granted) != "committed":
            raise RequestError(f"no join in progress for peer {body.id} (it timed out and was undone)",
                               ErrorCode.NOT_FOUND)
        await self._commit(body.id)
        return Empty()

    async def _commit(self, new_id: str) -> None:
        state = self.state
        pending = self.foreign.join_ended(new_id)
        if pending is None:
            return
        pending.timer.cancel()
        self._gate.release()
        try:
            with self.foreign.writing():   # until the drop applies, the store still holds the newcomer's quads
                await drop_outside(self.store, self.subscriptions, state.zone, pending.outgoing.quads)
        except EventCloudError as exc:
            log.warning("peer %s: dropping the quads peer %s took over: %s (the split stands)", state.id, new_id, exc)
        finally:
            self.replication.joining_ended(new_id)
        state.step(SplitCommitted(new_id))
        with trio.CancelScope(shield=True):
            try:
                await self.persist()
            except (OSError, EventCloudError) as exc:   # saved at the next change; a restart
                log.warning("peer %s: saving its state after the split for %s: %s",   # asks the newcomer
                            state.id, new_id, exc)
        records = {state.id: Neighbour(state.address, state.zone, state.incarnation)}
        if new_id in state.neighbours:
            records[new_id] = state.neighbours[new_id]
        await self.announce(records, pending.record.announce_to)
