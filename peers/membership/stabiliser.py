"""Stabilisation: neighbour tables kept true by asking the neighbours themselves.

Announcements are best effort (a neighbour may be down, restarting or busy leaving when one is
sent), so every peer periodically asks each neighbour for its own zone and its table, fixes
stale entries, learns neighbours it missed (e.g. after concurrent joins) and drops ghosts: an
entry whose address another peer answers now (a peer that moved and rejoined there) or whose
zone a live peer reports as its own. Each candidate is verified with the candidate itself, the
only authority on its zone.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Awaitable, Callable

import trio

from eventcloud.errors import EventCloudError, Unavailable
from eventcloud.overlay import Neighbour, NeighboursLearned, Zone, verified
from eventcloud.wire.messages import Empty, Table
from eventcloud.wire.ops import Op
from peers.net import FAILED, Locate, Router
from peers.store import PeerState

__all__ = ["Stabiliser"]

#: After a stale entry shows (a request meant for another peer reached this one, or a peer
#: refused as not serving), the round waits this long (seconds) for the burst of them to pass.
STALE_PAUSE = 1.0


class Stabiliser:
    def __init__(self, state: PeerState, router: Router, lock: trio.Lock, counters: Counter[str], *,
                 persist: Callable[[], Awaitable[None]], departed: Callable[[str], bool], retry_window: float,
                 rng: random.Random, leaving: Callable[[], bool] = lambda: False,
                 announce: Callable[..., Awaitable[None]] | None = None,
                 superseded: Callable[[str], None] = lambda address: None,
                 locate: Locate | None = None) -> None:
        self.state = state
        self.router = router
        self.lock = lock                  # the membership's: zone changes and table rewrites in turn
        self.counters = counters
        self.persist = persist
        self.departed = departed          # did this peer leave gracefully (not crash)?
        self.leaving = leaving            # is this peer handing its zone over? (it tells nobody then)
        self.announce = announce          # the membership's: records to addresses, bounded, best effort
        self.superseded = superseded      # another peer serves our zone under our id, newer (at that address)
        self.locate = locate              # the ownership authority's word: where a zone is served now
        self.retry_window = retry_window
        self.rng = rng

    async def run(self, interval: float) -> None:
        while True:
            with trio.move_on_after(interval * (0.5 + self.rng.random())):  # jittered
                # sooner when a request meant for another peer reached this one (a stale entry at
                # its address), or a peer refused one as not serving
                await self.router.wait_stale()
                await trio.sleep(STALE_PAUSE)
            self.router.stale_seen()
            if self.state.has_zone:
                try:
                    await self.drop_gone()
                    await self.once()
                except Unavailable:  # the zone was handed over during the round (a leave): nothing to keep
                    if self.state.has_zone:
                        raise

    async def drop_gone(self) -> None:
        """Drop the entries known wrong (`Router.gone`: a request meant for that peer reached
        another one at the address they give, such as this peer itself after it rejoined on its
        old port): that peer is not there, wherever it went; the owner of its zone is learnt
        from the other neighbours' tables (`once`), and routing goes around it meanwhile."""
        gone = self.router.take_gone()
        async with self.lock:
            stale = [k for k, address in gone.items()
                     if k in self.state.neighbours and self.state.neighbours[k].address == address]
            if not stale:
                return
            self.state.step(NeighboursLearned({k: n for k, n in self.state.neighbours.items() if k not in stale}))
            self.counters["ghost_neighbours_dropped"] += len(stale)
            await self.persist()

    async def once(self) -> None:
        """Ask each neighbour for its own zone and its table; fix stale entries and learn
        neighbours we missed, verifying each candidate with the candidate itself."""
        state = self.state
        authoritative: dict[str, Neighbour] = {}
        candidates: dict[str, Neighbour] = {}
        silent: list[str] = []
        # neighbour address -> (departed, stale) entries it holds in our zone
        behind: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        for ident, neighbour in list(state.neighbours.items()):
            table = await self.table_of(neighbour.address)
            if table is None:
                silent.append(ident)  # maybe restarting or being taken over: decided below
                continue
            me_id, me = table.me
            authoritative[me_id] = me
            if me_id != ident:
                # Another peer answers at its address now (it left and a peer rejoined there, as
                # the rebalancer's moves do): the one we knew is a ghost unless shown otherwise.
                silent.append(ident)
            elif state.has_zone:
                ghosts = _ghosts_of(state.id, state.zone, table.neighbours)
                held = table.neighbours.get(state.id)
                if held is not None and held.incarnation > state.incarnation:
                    # Our replica took our zone over (a stand-in serves it under our id, one
                    # incarnation on) while we were away, and we came back before its news: a
                    # peer restarted in that second served beside its stand-in, and the durable
                    # notifications its mailbox took were lost when it learnt (durable_chaos).
                    self.counters["stabilise_found_superseded"] += 1
                    self.superseded(held.address)
                    return
                if any(ghosts) or held is None or held.zone != state.zone or held.address != state.address:
                    behind[neighbour.address] = ghosts
            for other, info in table.neighbours.items():
                held = state.neighbours.get(other)
                # one we lack, or one the neighbour knows at a newer incarnation (its zone moved
                # again, to a stand-in of a stand-in, while our entry's address went silent)
                if other != state.id and state.zone.is_neighbour(info.zone) and (
                        held is None or info.incarnation > held.incarnation):
                    candidates[other] = info
        await self._located(silent, candidates)
        for ident, info in candidates.items():
            table = await self.table_of(info.address)
            if table is not None and table.me[0] == ident:
                authoritative[ident] = table.me[1]
        if not authoritative:
            return
        async with self.lock:
            table = verified(state.zone, state.neighbours, authoritative)
            for ident in silent:
                # A silent neighbour (or one another peer answers for) whose zone a live peer now
                # reports as its own, or that left, is a ghost: drop it (a crashed one is kept:
                # its replica takes it over).
                held = table.get(ident)
                if held is not None and (self.departed(ident) or any(
                        other != ident and info.zone.intersects(held.zone.bounds)
                        for other, info in authoritative.items())):
                    del table[ident]
                    self.counters["ghost_neighbours_dropped"] += 1
            if table != state.neighbours:
                state.step(NeighboursLearned(table))
                await self.persist()
        if behind and state.has_zone:
            await self._tell(behind)

    async def learn_served(self, ident: str, address: str, incarnation: int) -> None:
        """The watched zone map says `ident`'s zone is served at `address` now (a stand-in took it
        over, or its owner came back on another port). If our table holds it elsewhere or at an
        older incarnation, ask the peer there (the only authority on its zone) and take its own
        record at once, rather than at the next round or after requests time out at the old
        address. A hint: a peer that does not answer, or answers for another id, changes nothing."""
        held = self.state.neighbours.get(ident)
        if held is None or not self.state.has_zone or (held.address == address and held.incarnation >= incarnation):
            return
        table = await self.table_of(address)
        if table is None or table.me[0] != ident:
            return
        async with self.lock:
            if not self.state.has_zone or ident not in self.state.neighbours:
                return
            table_now = verified(self.state.zone, self.state.neighbours, {ident: table.me[1]})
            if table_now != self.state.neighbours:
                self.state.step(NeighboursLearned(table_now))
                self.counters["neighbours_learned_from_zone_map"] += 1
                await self.persist()

    async def _located(self, silent: list[str], candidates: dict[str, Neighbour]) -> None:
        """Silent neighbours that the ownership authority says are served elsewhere now (a
        stand-in of a stand-in, at a new address, that no neighbour's table names yet: simulation
        seed 65 routed to a dead address for minutes) become candidates, verified like the rest."""
        if self.locate is None:
            return
        for ident in silent:
            held = self.state.neighbours.get(ident)
            if held is None or ident in candidates:
                continue
            found = await self.locate(ident)
            if found is not None and (found[0] != held.address or found[1] > held.incarnation):
                candidates[ident] = Neighbour(found[0], held.zone, found[1])
                self.counters["stabilise_located_at_authority"] += 1

    async def _tell(self, behind: dict[str, tuple[str, ...]]) -> None:
        """Announce this peer to neighbours whose tables are behind about it: they lack it, hold
        an old zone or address of it, or hold other peers in its zone (ghosts). Repairing only a
        peer's own table is not enough: a neighbour that learns a zone's owner only from its
        neighbours' tables can, after a move whose announcements were lost, find every table
        around the zone naming the peer that left it, and requests for that zone wait for
        minutes. The heir knows; it says so."""
        state = self.state
        if self.announce is None or self.leaving() or not state.has_zone:  # leaving: its heir's zone covers ours
            return
        record = {state.id: Neighbour(state.address, state.zone, state.incarnation)}
        by_ghosts: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
        for address, ghosts in behind.items():
            by_ghosts.setdefault(ghosts, []).append(address)
        for (departed, stale), addresses in by_ghosts.items():
            self.counters["stabilise_told_behind"] += len(addresses)
            self.counters["stabilise_ghosts_removed_elsewhere"] += (len(departed) + len(stale)) * len(addresses)
            await self.announce(record, addresses, departed, stale)

    async def table_of(self, address: str) -> Table | None:
        """The peer at `address`: its own zone and its table; None if it does not answer in time."""
        try:
            with trio.fail_after(self.retry_window):
                return Table.from_wire(await self.router.call(address, Op.TABLE, Empty()))
        except (*FAILED, EventCloudError, trio.TooSlowError):
            return None


def _ghosts_of(own_id: str, zone: Zone, table: dict[str, Neighbour]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The entries of a neighbour's table that overlap our zone: in a partition no other peer's
    zone overlaps ours, so each is out of date. Those inside our zone are peers that left it
    (moved, or handed it to us): announced as departed. The others (an entry from before a
    split: the splitter's whole zone, ours included) are only stale: their peers did not leave.
    Announced as departed, a crashed splitter's replica believed it and dropped the only copy of
    its zone (chaos runs with the authority)."""
    overlapping = [(k, n) for k, n in table.items() if k != own_id and n.zone.intersects(zone.bounds)]
    return (tuple(sorted(k for k, n in overlapping if zone.covers(n.zone))),
            tuple(sorted(k for k, n in overlapping if not zone.covers(n.zone))))
