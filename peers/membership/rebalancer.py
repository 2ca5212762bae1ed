"""The background rebalancer: a light peer moves to where the data is.

Balanced joins (docs/overlay.md) split the busiest zone at its data's median, but only when a
peer joins. Peers started before the data was published keep their midpoint zones, and data
published later may pile up anywhere. So, every `every` seconds (with jitter, so that peers do
not all look at once), a peer that can leave gracefully — a neighbour's zone merges with its
own into a box — looks for the busiest peer as a joiner does (random probes, then the climb
to a local maximum of load). If that one holds `ratio` times its own quads and at least
`min_quads` (`eventcloud.overlay.balance.should_move`), and if the cut a join there would make
leaves each side at least twice the mover's quads (`gains_enough`: that peer answers `load`
with `cut`; a lopsided cut would only move a hot spot around), the peer hands its zone and data to that neighbour (the graceful leave), and rejoins as a new peer on the same address through
it, splitting the zone of the busiest peer it found at that zone's median (the balanced
join's cut). This is the original system's remedy (an underloaded peer leaves and rejoins at
the hotspot).

Nothing acknowledged is lost on the way: the leave hands everything over before this peer
stops serving its zone, exactly as `eventcloud leave` does; what arrives meanwhile is routed
to the heir. Clients connected to this peer lose their connection and reconnect (the SDK
tries the other peers it knows); durable subscriptions' mailboxes move with the zone.

Moves and step-asides merge a zone with its sibling in the split tree only (`heirs` with
`tree_only`): merging cousins that happened to make a box left zones no plane cuts in two,
where empty peers could never leave. An empty peer that cannot leave (its sibling was split
further) *makes room*: it asks a neighbour across the face its sibling subtree tiles
(`room_faces`) to step aside, that is to hand its zone to its own sibling inside the tube
beyond that face (`step_aside`), or, when none there can, a peer across such a neighbour's
room face, a few levels down; and repeats until its sibling is a single zone; then it moves
as above. Those that stepped aside rejoin `park` seconds later at the busiest peer they find then,
so that the empty peer has left first and the tube they emptied is not split again before it.

A round can fail: every neighbour across the face stepped aside or refused, and still no zone
merges with this one (a refuser, e.g. another empty peer, sits in the tube). Each round moves
loaded neighbours and their data for nothing, and on real clusters two such peers kept
doing it for minutes. So after a failed round a peer makes room again only once its zone or
its neighbours have changed (a round that failed against the same neighbourhood fails
again), and only after a back-off that grows fourfold per failed round (`every`, 4×, 16×…,
an hour at most); a move resets both. A round after which the peer's own leave is refused
counts as failed too (its neighbours moved for nothing).
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from typing import Any, Awaitable, Callable, NoReturn

import trio

from eventcloud.errors import ErrorCode, EventCloudError, RequestError
from eventcloud.net.rpc import RpcConnection
from eventcloud.overlay import Box, Neighbour, Point, Zone, gains_enough, heirs, lowest_corner, room_faces, should_move
from eventcloud.wire.messages import PeerId, StepAside, Table
from eventcloud.wire.ops import Op
from peers.store import AsyncStore, PeerState
from peers.membership.load_survey import LoadSurvey
from peers.membership.membership import Membership
from peers.net import FAILED, Router

log = logging.getLogger(__name__)

__all__ = ["Rebalancer"]


#: At most this many neighbours step aside for one look of an empty peer that cannot leave.
MAX_ROOM_STEPS = 8
#: How many levels down its sibling subtree an empty peer looks for one that can step aside:
#: 3 finds one in every random split tree of tests/overlay/test_plans.py (1 in 84% of them).
MAX_ROOM_DEPTH = 3
#: Longest wait (seconds) between make-room rounds after failed ones.
MAX_ROOM_BACKOFF = 3600.0


class Rebalancer:
    def __init__(self, state: PeerState, membership: Membership, survey: LoadSurvey, router: Router, store: AsyncStore,
                 counters: Counter[str], *, every: float, ratio: float, min_quads: int, make_room: bool,
                 rng: random.Random, table_of: Callable[[str], Awaitable[Table | None]],
                 ready: trio.Event, step_down: Callable[[list[str], Point | None, float], Awaitable[NoReturn]],
                 live_subscriptions: Callable[[], int] = lambda: 0) -> None:
        self.state = state
        self.membership = membership
        self.survey = survey          # the busiest peer, and neighbours' loads
        self.router = router
        self.store = store
        self.counters = counters
        self.every = every            # seconds between looks (0: never)
        self.ratio = ratio
        self.min_quads = min_quads
        self.make_room = make_room    # an empty peer that cannot leave asks neighbours to step aside
        self.rng = rng
        self.table_of = table_of      # a peer's zone and table, by address (None if it does not answer)
        self.ready = ready            # set once the peer serves its zone
        self.step_down = step_down    # ends this runtime; the peer rejoins through the addresses, at the point, later
        self.live_subscriptions = live_subscriptions   # non-durable subscriptions of this peer's clients
        #: how long a peer that stepped aside for another waits before it rejoins
        self.park = min(max(2 * every, 5.0), 60.0)
        self._stepped: tuple[list[str], float] | None = None   # this peer stepped aside: rejoin through, after
        self._asker: RpcConnection | None = None   # who asked it to: its answer goes out before this peer stops
        self._wake = trio.Event()
        self._room_failures = 0        # make-room rounds that ended without room, since the last move
        self._no_room: tuple[Any, frozenset[str]] | None = None  # the neighbourhood the last one failed in
        self._room_not_before = 0.0    # trio time before which no make-room round starts
        self._refused_for_now = False  # a peer asked to step aside in this round was only busy

    def handlers(self) -> dict[Op, Any]:
        return {Op.STEP_ASIDE: self._on_step_aside}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        if self.every <= 0:
            await trio.sleep_forever()
        await self.ready.wait()
        while True:
            with trio.move_on_after(self.every * self.rng.uniform(0.5, 1.5)):
                await self._wake.wait()
            if self._stepped is not None:
                await self.step_down(*await self._stepped_down())
            try:
                move = await self.once()
            except EventCloudError as exc:  # a probe or the handover failed: look again later
                self.counters["rebalance_failures"] += 1
                log.info("peer %s: rebalancing failed (%s); it stays", self.state.id, exc)
                continue
            if self._stepped is not None:  # asked to step aside while it looked
                await self.step_down(*await self._stepped_down())
            if move is not None:
                await self.step_down(*move, 0.0)

    async def _stepped_down(self) -> tuple[list[str], None, float]:
        """Where and when to rejoin, once the peer that asked has its answer (the connection
        closes after it), 2 s at most."""
        assert self._stepped is not None
        if self._asker is not None:
            with trio.move_on_after(2):
                await self._asker.wait_closed()
        rejoin, after = self._stepped
        return rejoin, None, after

    async def once(self) -> tuple[list[str], Point] | None:
        """Look once; if this peer should move, hand its zone over and return the addresses to
        rejoin through and a point of the busiest zone found (the rejoin splits that zone,
        whoever holds it by then), else None. An empty peer that cannot leave makes room first."""
        state = self.state
        if not state.has_zone or self._stepped is not None:
            return None
        own = self.store.held()
        if state.annex and own == 0:   # an empty annex would merge back into the crowded zone it left
            return None
        if not self._heirs() and (own > 0 or not self.make_room):
            return None
        busiest = await self.survey.busiest(state.space)
        if busiest is None or busiest.id == state.id or \
                not should_move(own, busiest.quads, ratio=self.ratio, min_quads=self.min_quads):
            return None
        if self._keeps_subscribers():   # (before asking the busiest: its answer would keep it for us)
            return None
        if not self._heirs() and self._room_held_off():
            # not asking the busiest: its answer would keep it for a mover that cannot come now
            self.counters["rebalance_room_skipped"] += 1
            return None
        answer = await self.survey.joiner_takes(busiest.address, own)
        takes = None if answer is None else answer.takes
        if takes is None or not gains_enough(own, busiest.quads, takes):
            self.counters["rebalance_not_worth"] += 1
            log.info("peer %s holds %d quads; a join at the busiest, %s (%d), would hand it %s: it stays",
                     state.id, own, busiest.id, busiest.quads, "?" if takes is None else takes)
            return None
        if answer is not None and answer.promised:
            self.counters["rebalance_busiest_promised"] += 1
            log.info("peer %s holds %d quads; another peer is moving to the busiest, %s (%d): it stays for now",
                     state.id, own, busiest.id, busiest.quads)
            return None
        made_room = not self._heirs()
        if made_room and not await self._make_room_once(busiest.id):
            return None
        if self._stepped is not None or not self._heirs():  # the table changed meanwhile
            return None
        log.warning("peer %s holds %d quads and peer %s %d: handing its zone to a neighbour and rejoining "
                    "as a new peer at the busiest", state.id, own, busiest.id, busiest.quads)
        rejoin = await self._leave(made_room)
        self.counters["rebalance_moves"] += 1
        # through the busiest peer first: it owns the point, and it does not move
        rejoin = [busiest.address] + [a for a in rejoin if a != busiest.address]
        return rejoin, lowest_corner(busiest.zone, state.space.whole_space())

    async def _leave(self, made_room: bool) -> list[str]:
        """Step aside; when that fails after neighbours moved to make room for it, the round is
        counted as failed (the back-off below). Seen on 8 real peers: an empty peer made room,
        its leave was refused, and at its next look it made room again, round after round,
        its neighbours stepping aside dozens of times in two minutes."""
        try:
            return await self.membership.step_aside()
        except EventCloudError:
            if made_room:
                self._room_failed()
            raise

    def _keeps_subscribers(self) -> bool:
        """A move ends this peer's client connections, and a non-durable subscription ends with
        its connection (the SDK says so; nothing can replay what it missed meanwhile): a peer
        serving such subscribers stays put. Durable ones are resumed through another peer."""
        if self.live_subscriptions() == 0:
            return False
        self.counters["rebalance_kept_for_subscribers"] += 1
        return True

    def _heirs(self) -> list[str]:
        """Whom this peer may hand its zone to: its sibling (`heirs` with `tree_only`)."""
        return heirs(self.state.zone, self.state.neighbours, tree_only=True)

    def _neighbourhood(self) -> tuple[Any, frozenset[str]]:
        return self.state.zone, frozenset(self.state.neighbours)

    async def _make_room_once(self, busiest: str) -> bool:
        """`_make_room`, unless a round failed in this same neighbourhood or the back-off after
        failed rounds has not passed (module docstring)."""
        if self._room_held_off():
            self.counters["rebalance_room_skipped"] += 1
            return False
        self._refused_for_now = False
        if await self._make_room(busiest):
            self._room_failures, self._no_room = 0, None
            return True
        self._room_failed(for_now=self._refused_for_now)
        return False

    def _room_held_off(self) -> bool:
        """A round failed in this same neighbourhood, or the back-off after failed rounds has not passed."""
        return self._no_room == self._neighbourhood() or trio.current_time() < self._room_not_before

    def _room_failed(self, *, for_now: bool = False) -> None:
        """Not again before the neighbourhood changes and the back-off has passed. `for_now`: a
        peer across refused only for now (`busy`: its subscribers would end with a move), so the
        same neighbourhood may do next time: a few rounds later, neither held off for good nor
        backed off further."""
        if not self.state.has_zone:
            return
        if for_now:
            self._room_not_before = trio.current_time() + 4 * self.every
            self.counters["rebalance_room_refused_for_now"] += 1
            return
        self._room_failures += 1
        self._no_room = self._neighbourhood()
        wait = min(self.every * 4 ** (self._room_failures - 1), MAX_ROOM_BACKOFF)
        self._room_not_before = trio.current_time() + wait
        self.counters["rebalance_room_failed"] += 1
        log.info("peer %s: making room failed (%d in a row); not again before its neighbourhood changes "
                 "and %.0f s have passed", self.state.id, self._room_failures, wait)

    async def _make_room(self, busiest: str) -> bool:
        """Ask neighbours across a face that `room_faces` finds to step aside, the lightest first,
        one at a time, until a neighbour's zone merges with ours (True) or none will (False). The
        busiest peer found (id `busiest`) is not asked: the peers that move rejoin through it,
        splitting it. Any other is, however loaded: each step hands a zone and its data to a peer
        that stays in the tube, so the last neighbours across the face are the ones that took the
        others' data, and a round that skipped them as heavy failed after moving the light ones
        (the in-process rebalance test stuck with an empty peer in 9 runs of 12)."""
        state = self.state
        for _ in range(MAX_ROOM_STEPS):
            if self._stepped is not None or not state.has_zone:
                return False
            if self._heirs():
                return True
            if not await self._one_steps_aside(busiest):
                return False
        return bool(self._heirs())

    async def _one_steps_aside(self, busiest: str) -> bool:
        """One peer of our sibling subtree stepped aside into its own sibling (or may have: its
        answer was lost). First the neighbours across our room face, lightest first; a neighbour
        there whose own sibling was split further cannot, and then the peers across *its* room
        face are asked (they lie in our sibling subtree too), `MAX_ROOM_DEPTH` levels at most.
        With neighbours alone, 16% of the zones of random split trees could not be freed."""
        state = self.state
        level: list[tuple[Zone, dict[str, Neighbour]]] = [(state.zone, dict(state.neighbours))]
        asked = {state.id, busiest}
        for depth in range(MAX_ROOM_DEPTH):
            refused: list[str] = []
            for zone, table in level:
                for face in room_faces(zone, table, state.space.whole_space()):
                    across = {k: table[k] for k in face.neighbours if k in table and k not in asked}
                    if await self._asked_one_of(across, face.tube, refused, asked):
                        return True
            if depth + 1 < MAX_ROOM_DEPTH:
                tables = [await self.table_of(address) for address in refused]
                level = [(t.me[1].zone, t.neighbours) for t in tables if t is not None]
        log.info("peer %s: no peer across a face it could merge over, nor %d levels down, stepped aside",
                 state.id, MAX_ROOM_DEPTH)
        return False

    async def _asked_one_of(self, across: dict[str, Neighbour], tube: Box, refused: list[str],
                            asked: set[str]) -> bool:
        """Ask the peers `across`, lightest first, to step aside inside `tube` until one does;
        the addresses of those that could not go to `refused`."""
        loads = await self.survey.loads(tuple(n.address for n in across.values()))
        for ident in sorted((k for k in across if k in loads), key=lambda k: (loads[k].quads, k)):
            asked.add(ident)
            try:
                await self.router.call(across[ident].address, Op.STEP_ASIDE, StepAside(tube, int(self.park * 1000)))
            except FAILED:  # it may have stepped aside before its answer was lost: look at the table again
                pass
            except EventCloudError as exc:  # it cannot (its sibling was split further, or it is moving itself)
                log.info("peer %s: %s did not step aside (%s)", self.state.id, ident, exc)
                refused.append(across[ident].address)
                self._refused_for_now |= exc.code is ErrorCode.BUSY
                continue
            self.counters["rebalance_made_room"] += 1
            return True
        return False

    async def _on_step_aside(self, conn: RpcConnection, body: StepAside) -> PeerId:
        """A neighbour that cannot leave asked this peer to make room: hand the zone to a neighbour
        inside `within`, then (the run loop) step down and rejoin `rejoin_after_ms` later."""
        state = self.state
        if self.every <= 0:
            raise RequestError(f"peer {state.id} does not rebalance (started with --rebalance-every 0)",
                               ErrorCode.CANNOT_LEAVE)
        if self._stepped is not None or not state.has_zone:
            raise RequestError(f"peer {state.id} is moving already", ErrorCode.CANNOT_LEAVE)
        if self._keeps_subscribers():   # busy: for now only (the asker may ask again later)
            raise RequestError(f"peer {state.id} serves subscribers whose subscriptions would end with their "
                               f"connections", ErrorCode.BUSY)
        after = min(max(body.rejoin_after_ms, 0) / 1000, 60.0)
        rejoin = await self.membership.step_aside(body.within)
        self.counters["rebalance_stepped_aside"] += 1
        log.warning("peer %s stepped aside for a neighbour that could not leave; rejoining in %.0f s",
                    state.id, after)
        self._stepped, self._asker = (rejoin, after), conn
        conn.end_after_reply = True
        self._wake.set()
        return PeerId(state.id)
