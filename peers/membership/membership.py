"""Overlay membership: join by splitting the owner of a point, graceful leave by merging into a
neighbour, and the announcements that keep neighbour tables exact (stabilisation, which repairs
what they miss, is peers/membership/stabiliser.py).

Join (new peer N; docs/overlay.md, "Balanced joins"):
  0. N picks whom to split (peers/membership/load_survey.py): it probes the load of a few random points'
     owners, keeps the busiest and climbs to a busier neighbour while there is one (from the
     probed peers' neighbours when all of them are empty). With no data found it keeps the
     first random point.
  1. N asks any peer to route ``join_split`` to a point of the chosen zone; its owner O cuts
     its zone at the median of its quads (`overlay.cut_for`: the dimension split least often
     among those that cut the data evenly; the midpoint when O holds no data), keeps the
     lower part, grants N the upper part with N's neighbour table, the overlay settings and
     the data of N's part.
  2. N stores the data, persists its state and calls ``join_commit`` on O; O then drops the
     handed-over quads and subscriptions and tells its old neighbours about both zones.
An annex (peers/membership/annexes.py) joins the same way, but names the side of O's zone it takes (the
one O found empty and crowded), which may be the lower one; O refuses if its zone changed.
One join at a time per owner, from split to commit; a split whose newcomer never commits is
undone after `join_timeout`. The owner's side (split, data, commit, undo) is
peers/membership/splits.py.

Leave is the reverse: a leaving peer hands its zone, quads and subscriptions to a neighbour
whose zone merges with its own into a box (`overlay.heirs`: the sibling of its last split
first), which takes it over (`take_over`, then `leave_data` for what the first chunk lacks) and
announces the merged zone. The rebalancer's moves and annexes handed on leave the same way
(`step_aside`). Joins, leaves and announcements are one concept in one module: they share the
zone lock, the neighbour table, the announcements held while a leave is under way and the
record of departed peers. The decisions are pure plans; this service does the talking.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from typing import Any, Awaitable, Callable

import trio

from eventcloud.errors import (
    TRANSIENT, AuthorityUnreachable, ConnectionLost, ErrorCode, EventCloudError, Fenced, OperatorMismatch, RemoteError,
    RequestError, Unreachable,
)
from eventcloud.sparql.filters.operators import NO_OPERATORS, OperatorSet
from eventcloud.net.rpc import RpcConnection
from eventcloud.net.transport import Transport
from eventcloud.overlay import (
    Box, CoordinateSpace, Granted, JoinCommitted, Neighbour, NeighboursLearned, Outcome, Point, Stopped, Zone,
    announced, heirs, lowest_corner,
)
from eventcloud.overlay import Left as HandedOver
from eventcloud.rdf.model import Quad
from eventcloud.wire.codec import point_to_wire
from eventcloud.wire.hlc import HybridClock
from eventcloud.wire.messages import (
    Announce, Empty, Handover, JoinCommit, JoinGrant, JoinRequest, Left, NextChunk,
    OverlayInfo, PeerId, Routed, Table, TakeOver,
)
from eventcloud.wire.ops import Op
from peers.matching import Subscriptions, check_same_operators
from peers.replication import OwnerReplication
from peers.net import FAILED, Locate, RetryPolicy, Router, addresses_of
from peers.membership.stabiliser import Stabiliser
from peers.store import AsyncStore, ForeignQuads, PeerState, ZoneGuard
from peers.membership.handover import Outgoing, install, receive, zone_content
from peers.membership.load_survey import LoadSurvey
from peers.membership.decisions import DecidedAlone, Decisions, decided
from peers.membership.merges import DEPARTED_FOR, Merges
from peers.membership.splits import Splits
from peers.tasks import TaskStarter

log = logging.getLogger(__name__)

#: Requests of one take-over to an heir that did not answer, before the next heir is asked.
TAKE_OVER_TRIES = 3

__all__ = ["Membership"]



class Membership:
    def __init__(self, state: PeerState, router: Router, store: AsyncStore, subscriptions: Subscriptions,
                 transport: Transport, clock: HybridClock, counters: Counter[str], tasks: TaskStarter, *,
                 replication: OwnerReplication, persist: Callable[[], Awaitable[None]],
                 retire: Callable[[RpcConnection], Awaitable[None]], rng: random.Random, join_timeout: float,
                 retry_window: float, guard: ZoneGuard, foreign: ForeignQuads, operators: OperatorSet = NO_OPERATORS,
                 rematch: Callable[[list[str]], Awaitable[None]] | None = None, survey: LoadSurvey,
                 locate: Locate | None = None,
                 authority_url: Callable[[], str] = lambda: "",
                 decisions: Decisions | None = None,
                 silent_owners: Callable[[], list[str]] = lambda: [],
                 end: Callable[[Outcome], None] = lambda outcome: None) -> None:
        self.state = state
        self.end = end                   # end this runtime (the runtime's `_end`)
        #: owners of copies held here that stopped answering (the keeper's): no leave meanwhile
        self.silent_owners = silent_owners
        self.authority_url = authority_url   # told to joiners: the overlay's authority (ownership's)
        #: where joins and leaves are decided: the ownership authority (ownership's), or the peers alone
        self.decisions: Decisions = decisions if decisions is not None else DecidedAlone()
        self.locate = locate             # where the authority says a peer's zone is served now
        self.tasks = tasks               # join timers run there
        self.survey = survey             # whom a join splits: the busiest peer it finds
        self.rematch = rematch           # match events again after a split is undone (the matcher's)
        self.guard = guard               # zone changes wait for the stores decided from the zone
        self.operators = operators      # a joiner must have exactly these (checked on both sides)
        self.router = router
        self.store = store
        self.subscriptions = subscriptions
        self.transport = transport
        self.clock = clock
        self.counters = counters
        self.replication = replication
        self.persist = persist
        self._departed: dict[str, float] = {}   # peers that left gracefully (their replicas must not take over)
        self.retire = retire            # after a graceful leave: drop the zone, stop once `conn` has the reply
        self.rng = rng
        self.join_timeout = join_timeout
        self.retry_window = retry_window
        self.lock = trio.Lock()          # serialises zone changes on this peer
        #: how this runtime's own join went: "" (none), "started", "committing" (the commit is sent:
        #: unknown until answered), "refused" (the splitter said no), "committed"
        self.join_outcome = ""
        self.foreign = foreign           # quads held here that another peer answers for (queries read it)
        self.leaving = False             # handing our zone over: take no neighbour's zone meanwhile
        self.stabiliser = Stabiliser(state, router, self.lock, counters, persist=persist, departed=self.departed,
                                     retry_window=retry_window, rng=rng, leaving=lambda: self.leaving,
                                     announce=self.announce, superseded=replication.taken_over, locate=locate)
        #: announcements that arrived while our leave held the lock: the heir's, once it took over
        self._held: list[Announce] = []
        #: while our leave hands the zone over: what the heir fetches with `leave_data`
        self._outgoing: Outgoing | None = None
        #: the owner's side of joins: splits granted to newcomers
        # `persist` looked up at each call: one state save for joins, splits and leaves alike
        self.splits = Splits(state, router, store, subscriptions, tasks, lock=self.lock, guard=guard,
                             foreign=foreign, replication=replication, persist=lambda: self.persist(),
                             announce=self.announce,
                             join_timeout=join_timeout, retry_window=retry_window, operators=operators,
                             rematch=rematch, locate=locate, decisions=self.decisions)
        #: the heir's side of leaves: neighbours' zones merged into ours
        self.merges = Merges(state, router, store, subscriptions, counters, tasks, lock=self.lock, foreign=foreign,
                             decisions=self.decisions, persist=lambda: self.persist(), announce=self.announce,
                             install=lambda data: self._install(data), leaving=lambda: self.leaving,
                             departed=self._departed)

    def handlers(self) -> dict[Op, Any]:
        return {Op.OVERLAY_INFO: self._on_info, Op.NEIGHBOURS: self._on_neighbours, Op.TAKE_OVER: self.merges.on_take_over,
                Op.TABLE: self._on_table, Op.LEAVE: self._on_leave, Op.LEAVE_DATA: self._on_leave_data,
                **self.splits.handlers()}

    def routed(self) -> dict[Op, Any]:
        return self.splits.routed()

    async def run(self, *, stabilise_every: float, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Join timers and periodic stabilisation run here."""
        task_status.started()
        if stabilise_every > 0:
            await self.stabiliser.run(stabilise_every)
        else:
            await trio.sleep_forever()

    async def _on_info(self, conn: RpcConnection, body: Empty) -> OverlayInfo:
        state = self.state
        return OverlayInfo(state.id, state.address, state.space, state.algorithm, state.overlay, state.replicas,
                           tuple(sorted({n.address for n in state.neighbours.values()})), self.operators.names,
                           self.authority_url())

    # --- joining ------------------------------------------------------------------------------

    async def join(self, bootstrap: str, *, at: Point | None = None, annex: tuple[Zone, Zone] | None = None) -> None:
        """Enter the overlay through `bootstrap` (any live peer), splitting the zone of the
        busiest peer found, or the one holding `at` if given; an annex takes side `annex[1]` of
        zone `annex[0]` (peers/membership/annexes.py), refused if that zone changed meanwhile."""
        state = self.state
        try:
            info = OverlayInfo.from_wire(await self.router.call(bootstrap, Op.OVERLAY_INFO, Empty()))
            check_same_operators(self.operators.names, info.operators, bootstrap)
            space: CoordinateSpace = info.space
            if annex is not None:
                point = lowest_corner(annex[1], space.whole_space())
            else:
                point = at if at is not None else await self._join_point(bootstrap, space)
            of, side = annex if annex is not None else (None, None)
            reply = Routed.from_wire(await self.router.call(bootstrap, Op.ROUTE, {
                "point": point_to_wire(point), "op": Op.JOIN_SPLIT.value,
                "body": JoinRequest(state.id, state.address, self.operators.names, of, side).to_wire()}))
        except (Unreachable, ConnectionLost) as exc:
            raise RequestError(f"cannot join through {bootstrap}: {exc.message}", ErrorCode.UNREACHABLE) from None
        except RemoteError as exc:
            if exc.code is ErrorCode.INCOMPATIBLE:
                raise OperatorMismatch(exc.message) from None
            raise
        grant = JoinGrant.from_wire(reply.result)
        state.space = space
        state.algorithm = grant.algorithm
        state.overlay = grant.overlay
        state.replicas = grant.replicas
        state.step(Granted(grant.zone, grant.neighbours, (grant.owner_id, grant.owner_address)))

        async def fetch(offset: int) -> Handover:
            return Handover.from_wire(await self.router.call(grant.owner_address, Op.JOIN_DATA,
                                                             NextChunk(state.id, offset)))

        await receive(grant.data, grant.remaining, fetch, self._install)
        await self.replication.ensure()  # the zone on two peers before its old owner drops it
        await self.persist()
        self.join_outcome = "committing"
        await self._commit(grant.owner_id, grant.owner_address)
        self.join_outcome = "committed"
        await self.joined()
        log.info("peer %s joined: zone %s", state.id, state.zone)

    async def joined(self) -> None:
        """The split stands: this zone is ours for good (the replica's copy says so too)."""
        self.state.step(JoinCommitted())
        await self.persist()

    async def commit_again(self) -> None:
        """A restart from a state saved while its join committed: asked again before serving;
        refused (the split was undone while it was down), the peer rejoins as a new one."""
        if self.state.joining is not None:
            await self._commit(*self.state.joining)
            await self.joined()

    async def _commit(self, owner: str, address: str) -> None:
        """Ask the splitter to let the split stand. Only its answers (each from its transaction
        at the authority, when there is one) decide: success, or "no join in progress"
        (`not-found`: the split was undone, its keys then go); or the authority's record of the
        split committed, read when an answer does not come. Anything else decides
        nothing and is asked again: no answer (it died, or the reply was lost: the split under
        way is saved with its state, so it is asked wherever its id serves next, its restart or
        its stand-in), "not serving yet", or a fence (its lease lapsed: taken for a refusal, the
        newcomer retired its keys while the splitter, its lease back, committed for the
        newcomer's replica, and nobody could claim the zone; the fault harness's minority
        scenario). Asked for a little longer than the splitter waits before undoing the split
        (`join_timeout`, then it looks around for the newcomer), so that one that stays fenced is
        heard undoing it. An error of another kind ends the join undecided: the keys stay, and
        the replica asks the splitter on this peer's behalf."""
        attempts = RetryPolicy(self.join_timeout + 4 * self.retry_window).start()
        while True:
            try:
                await self.router.call(address, Op.JOIN_COMMIT, JoinCommit(self.state.id))
                return
            except RemoteError as exc:
                if exc.code is ErrorCode.NOT_FOUND:
                    self.join_outcome = "refused"   # the splitter's answer: it keeps (or takes back) the zone
                    raise
                if exc.code not in TRANSIENT:
                    raise
                failure: EventCloudError = exc
            except FAILED as exc:
                failure = exc
            if await self._committed_at_the_authority():   # the splitter's answer was what got lost
                return
            log.info("peer %s: its commit to %s at %s is undecided (%s); asking again", self.state.id, owner,
                     address, failure.message)
            if not await attempts.pause():
                raise failure
            if isinstance(failure, RemoteError) and failure.code is not ErrorCode.NOT_SERVING:
                continue   # the splitter answered from there: it serves there still
            elsewhere = await addresses_of(self.router, self.state, owner, address, self.retry_window, self.locate)
            address = elsewhere[1] if len(elsewhere) > 1 else address   # where it serves now, if it moved

    async def _committed_at_the_authority(self) -> bool:
        try:
            return await self.decisions.split_committed(self.state.id)
        except EventCloudError:
            return False

    async def _join_point(self, bootstrap: str, space: CoordinateSpace) -> Point:
        """A point of the zone to split: the busiest of a few random owners, then the busiest
        neighbour while there is a busier one (the first random point if no peer holds data)."""
        first: Point = tuple(self.rng.randrange(space.top) for _ in range(4))  # type: ignore[assignment]
        best = await self.survey.busiest(space, via=bootstrap, first=first, look_around=True, by_host=True)
        if best is None or best.quads == 0:
            log.info("peer %s: %s, joining at a random point", self.state.id,
                     "no load probe was answered" if best is None else "no peer found holds data")
            return first
        return lowest_corner(best.zone, space.whole_space())

    async def _install(self, data: Handover) -> None:
        await install(self.store, self.subscriptions, self.clock, data)

    async def _handover(self, zone: Zone) -> tuple[list[Quad], Handover]:
        return zone_content(self.store, self.subscriptions, self.state.space, zone,
                            await self.store.find(None, None, None, None))

    # --- announcements --------------------------------------------------------------------------

    async def announce(self, records: dict[str, Neighbour], addresses: Any, removed: tuple[str, ...] = (),
                       stale: tuple[str, ...] = ()) -> None:
        """Tell each address about new/changed zones (and departed peers, and stale entries);
        best effort per peer, since an unreachable neighbour re-learns its table when it
        announces itself."""
        body = Announce(records, removed, stale)

        async def one(address: str) -> None:
            # Bounded: the caller may hold a zone change up (a take-over answers a leaving peer
            # only after this), and the neighbour may itself be busy handing its zone over.
            with trio.move_on_after(self.retry_window) as bound:
                try:
                    await self.router.call(address, Op.NEIGHBOURS, body)
                except EventCloudError as exc:
                    log.warning("peer %s: could not update %s: %s", self.state.id, address, exc)
            if bound.cancelled_caught:
                log.warning("peer %s: %s did not take the update within %g s; stabilisation will",
                            self.state.id, address, self.retry_window)

        async with trio.open_nursery() as nursery:
            for address in set(addresses):
                if address != self.state.address:
                    nursery.start_soon(one, address)

    def departed(self, ident: str) -> bool:
        """Did `ident` leave the overlay gracefully (recently)?"""
        until = self._departed.get(ident)
        return until is not None and until > trio.current_time()

    async def _on_neighbours(self, conn: RpcConnection, body: Announce) -> PeerId:
        """Update the table from announced zones: keep those that neighbour ours."""
        state = self.state
        for ident in body.removed:
            self._departed[ident] = trio.current_time() + DEPARTED_FOR
        if self.leaving:
            # Our leave holds the lock until an heir took our zone over, and that heir may be
            # announcing to us right now: waiting here would wait for ourselves. The update is
            # the zone's, so it goes to the heir once it holds the zone (or to us if the leave fails).
            self._held.append(body)
            return PeerId(state.id)
        async with self.lock:
            self._apply(body)
            await self.persist()
        return PeerId(state.id)

    def _apply(self, body: Announce) -> None:
        state = self.state
        state.step(NeighboursLearned(announced(state.id, state.zone, state.neighbours, (body.peers or {}).items(),
                                               (*body.removed, *body.stale))))

    async def announce_self(self) -> None:
        """After a restart: tell the neighbours where we are now (the port may differ)."""
        state = self.state
        await self.announce({state.id: Neighbour(state.address, state.zone, state.incarnation)},
                            [n.address for n in state.neighbours.values()])

    # --- stabilisation --------------------------------------------------------------------------

    async def _on_table(self, conn: RpcConnection, body: Empty) -> Table:
        state = self.state
        return Table((state.id, Neighbour(state.address, state.zone, state.incarnation)), dict(state.neighbours))

    # --- leaving ----------------------------------------------------------------------------

    async def leave(self, within: Box | None = None, *, tree_only: bool = False) -> str:
        """Hand our zone and data to a neighbour whose zone merges with ours (and lies inside
        `within`, if given; only our sibling with `tree_only`, `heirs`); returns its id."""
        state = self.state
        async with self.lock:
            self._refuse_if_leaving()  # handed over already (a rebalancer's move and a neighbour's request)
            if state.merging is not None:
                raise RequestError(f"cannot leave now: peer {state.merging.leaver}'s zone is merging into this "
                                   "peer's, awaiting the ownership authority's word; retry in a moment",
                                   ErrorCode.CANNOT_LEAVE)
            silent = self.silent_owners()
            if silent:
                # A leave ends this runtime and the copies it holds: for an owner that stopped
                # answering, the one its zone is taken over from (an annex handed on right after
                # its host was killed dropped the only copy of a dead annex's zone: served by
                # nobody, for good).
                raise RequestError(f"cannot leave now: this peer holds the copy of {', '.join(silent)}, which stopped "
                                   "answering and may have to be taken over from it; retry once it answers or is "
                                   "taken over", ErrorCode.CANNOT_LEAVE)
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
                token = await self.decisions.begin_leave()   # the attempt the authority decides
                await self.guard.acquire_change()
            except BaseException as exc:
                self._end_leave(failed=True)
                if isinstance(exc, (Fenced, AuthorityUnreachable)):
                    raise RequestError(f"cannot leave now: {exc}", ErrorCode.CANNOT_LEAVE) from None
                raise
            try:
                heir = await self._hand_zone_to(candidates, token)
            except BaseException as exc:
                heir = await self._after_a_failed_handover(token, exc)
        for body in self._end_leave(failed=False):
            if heir in addresses:
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

    async def _after_a_failed_handover(self, token: str, exc: BaseException) -> str:
        """No heir answered, our caller went away (its connection closed, cancelling this
        handler), or the runtime stops. The attempt is decided at the authority before the zone
        is served again: withdrawn (we keep the zone, and no heir can take it from then on: `exc`
        is raised again) or taken (the heir's answer was lost: its id, the leave is done). Left
        undecided, the runtime stops and its restart decides (`withdraw_leave`), rather than
        serve a zone a late heir may still take. Called with the zone lock held."""
        state = self.state
        with trio.CancelScope(shield=True):
            taker, known = await self._settle_briefly(token)
        if not known and not isinstance(exc, trio.Cancelled):
            try:   # no hurry: wait for the authority (the fence holds writes meanwhile)
                taker = await decided(lambda: self.decisions.settle_leave(token), "its leave", state.id)
                known = True
            except trio.Cancelled:
                pass
        if not known:
            log.warning("peer %s: its leave was cut short and the ownership authority did not say whether an "
                        "heir took the zone: it stops, and its restart decides", state.id)
            self.end(Stopped("a leave left undecided"))
            raise exc
        if taker is None:
            self.guard.release_change()
            self._end_leave(failed=True)
            with trio.CancelScope(shield=True):
                await self.persist()
            raise exc
        self.counters["leaves_decided_by_authority"] += 1
        if isinstance(exc, trio.Cancelled):
            log.warning("peer %s: its leave was cut short, but peer %s took its zone over: it ends", state.id, taker)
            self.end(HandedOver())
            raise exc
        log.warning("peer %s: its heir never answered, but the ownership authority says peer %s took its zone "
                    "over: the leave is done", state.id, taker)
        return taker

    async def _settle_briefly(self, token: str) -> tuple[str | None, bool]:
        """`settle_leave`, asked for a few seconds: (the heir or None, whether it was decided)."""
        with trio.move_on_after(2 * self.retry_window):
            try:
                return await self.decisions.settle_leave(token), True
            except AuthorityUnreachable:
                pass
        return None, False

    async def _hand_zone_to(self, candidates: list[str], token: str) -> str:
        """The zone's content to the first heir that takes it; its id."""
        state = self.state
        _, data = await self._handover(state.zone)
        outgoing = Outgoing(data)
        first, remaining = outgoing.first()
        request = TakeOver(state.id, state.zone, dict(state.neighbours), first, state.address, remaining,
                           state.incarnation, token)
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

    def _refuse_if_leaving(self) -> None:
        if self.leaving:
            raise RequestError(f"peer {self.state.id} is leaving too; hand the zone to another neighbour or retry",
                               ErrorCode.CANNOT_LEAVE)

