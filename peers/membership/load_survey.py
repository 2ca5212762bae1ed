"""How busy peers are: each answers `load` (and `load_local`, routed to a point) with its quad
count, zone and neighbours; a joiner or the rebalancer finds the busiest peer by probing random
points and climbing from there (docs/overlay.md, "Balanced joins")."""

from __future__ import annotations

import logging
import random
from dataclasses import replace
from typing import Any

import trio

from eventcloud.errors import EventCloudError
from eventcloud.net.rpc import RpcConnection
from eventcloud.overlay import CoordinateSpace, Point, climb, evenly, gains_enough, joiner_share
from eventcloud.wire.codec import point_to_wire
from eventcloud.wire.messages import Empty, Load, LoadAsk, Routed
from eventcloud.wire.ops import Op
from peers.store import AsyncStore, PeerState
from peers.process import ProcessPeers
from peers.net import Router

log = logging.getLogger(__name__)

__all__ = ["LoadSurvey"]

#: Random points a joiner probes for the busiest owner, and the most steps it climbs from there.
JOIN_PROBES = 4
CLIMB_STEPS = 16
#: Seconds a zone's cut share (what a joiner would take) is reused while the zone is unchanged.
CUT_KEPT = 10.0
#: Seconds the busiest peer keeps itself for the first mover a join would be worth it for: the
#: others asking meanwhile stay where they are (`Load.promised`), until its zone changes.
PROMISED_FOR = 30.0


class LoadSurvey:
    def __init__(self, state: PeerState, router: Router, store: AsyncStore, rng: random.Random,
                 process: ProcessPeers | None = None) -> None:
        self.state = state
        self.process = process   # the host: joins climb by the load of all the peers a process runs
        self.router = router
        self.store = store
        self.rng = rng
        self._cut: tuple[Any, float, float] | None = None   # (zone, joiner's share, when): `_joiner_share`
        self._promise: tuple[Any, str, float] | None = None  # (zone, mover's address, until): `_on_load`

    def handlers(self) -> dict[Op, Any]:
        return {Op.LOAD: self._on_load}

    def routed(self) -> dict[Op, Any]:
        return {Op.LOAD_LOCAL: self._local_load}

    def load(self) -> Load:
        state = self.state
        held = self.store.held()
        host_quads, host_busiest = self.process.load() if self.process is not None else (held, state.address)
        return Load(state.id, state.address, held, state.zone, tuple(sorted({n.address for n in state.neighbours.values()})),
                    host_quads=host_quads, host_busiest=host_busiest or state.address)

    async def _on_load(self, conn: RpcConnection, body: LoadAsk) -> Load:
        """With `cut`: what a joiner would take, and whether another mover has this peer's
        promise. Light peers decide to move on their own, a few seconds apart: at the start of a
        publication all the empty ones found the same busiest peer, moved together and split it
        one after the other (halves, quarters, eighths), and moved on again, with most of the
        overlay between zones at once (8 real peers, publications refused for seconds)."""
        if not body.cut:
            return self.load()
        held = self.store.held()
        load = replace(self.load(), takes=round(await self._joiner_share() * held))
        if not body.mover or not gains_enough(body.holds, held, load.takes):
            return load
        zone, now = self.state.zone, trio.current_time()
        promise = self._promise
        if promise is not None and promise[0] == zone and now < promise[2]:
            # kept, never extended: a mover that asked at every look and could not come (an
            # empty peer whose rounds of making room failed) held the busiest for minutes while
            # another empty peer was told "promised" at each of its looks (8 real peers)
            return load if promise[1] == body.mover else replace(load, promised=True)
        self._promise = (zone, body.mover, now + PROMISED_FOR)
        return load

    async def _joiner_share(self) -> float:
        """The share of this zone's quads a peer joining here would take: the newcomer's side of
        the cut a join makes now (`Splits._split_for`), on the same sample of the quads.
        It lists the whole store (decoding only the sample), and every light peer's look asks
        the busiest: kept for CUT_KEPT seconds while the zone stays the same."""
        zone, now = self.state.zone, trio.current_time()
        if self._cut is not None and self._cut[0] == zone and now - self._cut[2] < CUT_KEPT:
            return self._cut[1]
        sample = await self.store.sample(evenly)
        share = joiner_share(zone, [self.state.space.point(q) for q in sample])
        self._cut = (zone, share, now)
        return share

    async def joiner_takes(self, address: str, holds: int | None = None) -> Load | None:
        """The peer at `address` with how many quads a peer joining it would take now (`takes`;
        None: no answer). `holds`: this peer's quads, when it would move there: the answer then
        says whether another mover asked first (`promised`), and otherwise keeps that peer for
        this one a while."""
        ask = LoadAsk(cut=True) if holds is None else LoadAsk(cut=True, mover=self.state.address, holds=holds)
        try:
            return Load.from_wire(await self.router.call(address, Op.LOAD, ask))
        except EventCloudError as exc:
            log.info("peer %s: %s did not say what a joiner would take (%s)", self.state.id, address, exc)
            return None

    async def _local_load(self, body: Empty) -> dict[str, Any]:
        return self.load().to_wire()

    async def busiest(self, space: CoordinateSpace, *, via: str | None = None, first: Point | None = None,
                      look_around: bool = False, by_host: bool = False) -> Load | None:
        """The busiest peer found by probing a few random points (routed through `via`, a peer
        of the overlay, when this one is not in it yet) and climbing from the busiest of them
        to a local maximum of load; None if no probe was answered. `look_around`: when every
        probed peer is empty, climb from the busiest of their neighbours. Joiners do (they must
        find the data); the rebalancer does not: one that finds none looks again at its next
        round, and with it on, the empty peers of tests/peers/test_rebalance.py all moved at
        once toward the same peer and 4 of 8 stayed empty in 2 runs of 3 (1.1× without).

        `by_host` (joins): loads are those of the peers' hosts, all the peers one process runs
        (an annex holds nothing, and empty annexes around a zone would stop a climb by zone
        load: the busiest host held 10× the mean in experiments/annex_study.py), and the peer
        returned is the busiest of the host found."""
        def quads(load: Load) -> int:
            return load.host_quads if by_host and load.host_quads >= 0 else load.quads

        points = [first] if first is not None else []
        while len(points) < JOIN_PROBES:
            points.append(tuple(self.rng.randrange(space.top) for _ in range(4)))  # type: ignore[arg-type]
        best: Load | None = None
        probed: list[Load] = []
        for point in points:
            try:
                if via is None:
                    result = await self.router.route(point, Op.LOAD_LOCAL, Empty())
                else:
                    result = Routed.from_wire(await self.router.call(via, Op.ROUTE, {
                        "point": point_to_wire(point), "op": Op.LOAD_LOCAL.value, "body": Empty().to_wire()})).result
                load = Load.from_wire(result)
            except EventCloudError as exc:  # an older peer, or one on the way is down: probe less
                log.info("peer %s: a load probe failed (%s)", self.state.id, exc)
                continue
            probed.append(load)
            if best is None or quads(load) > quads(best):
                best = load
        if best is None:
            return None
        if best.quads == 0 and look_around:
            # Data dense in a small part of the space can leave every probed zone empty (then
            # rejoining movers split at random, making new empty peers): look one step around
            # all of them before giving up, and climb from the busiest found there.
            around = await self.loads(tuple(dict.fromkeys(a for p in probed for a in p.neighbours)))
            best = max(around.values(), key=lambda load: (quads(load), load.id), default=best)
        if quads(best) == 0:
            return best
        for _ in range(CLIMB_STEPS):
            loads = await self.loads(best.neighbours)
            step = climb(best.id, quads(best), {ident: quads(load) for ident, load in loads.items()})
            if step == best.id:
                break
            best = loads[step]
        if by_host and best.host_busiest and best.host_busiest != best.address:
            busiest = await self.loads((best.host_busiest,))
            best = next(iter(busiest.values()), best)
        return best

    async def loads(self, addresses: tuple[str, ...]) -> dict[str, Load]:
        """The load of each peer at `addresses` that answers (in parallel)."""
        found: dict[str, Load] = {}

        async def one(address: str) -> None:
            try:
                load = Load.from_wire(await self.router.call(address, Op.LOAD, Empty()))
            except EventCloudError:
                return
            found[load.id] = load

        async with trio.open_nursery() as nursery:
            for address in addresses:
                nursery.start_soon(one, address)
        return found
