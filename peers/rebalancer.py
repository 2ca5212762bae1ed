"""The background rebalancer: a light peer moves to where the data is.

Balanced joins (docs/overlay.md) split the busiest zone at its data's median, but only when a
peer joins. Peers started before the data was published keep their midpoint zones, and data
published later may pile up anywhere. So, every `every` seconds (with jitter, so that peers do
not all look at once), a peer that can leave gracefully — a neighbour's zone merges with its
own into a box — looks for the busiest peer as a joiner does (random probes, then the climb
to a local maximum of load). If that one holds `ratio` times its own quads and at least
`min_quads` (`eventcloud.overlay.balance.should_move`), the peer hands its zone and data to
that neighbour (the graceful leave), and rejoins as a new peer on the same address through
it, splitting the zone of the busiest peer it found at that zone's median (the balanced
join's cut). This is the original system's remedy (an underloaded peer leaves and rejoins at
the hotspot).

Nothing acknowledged is lost on the way: the leave hands everything over before this peer
stops serving its zone, exactly as `eventcloud leave` does; what arrives meanwhile is routed
to the heir. Clients connected to this peer lose their connection and reconnect (the SDK
tries the other peers it knows); durable subscriptions' mailboxes move with the zone.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from typing import Awaitable, Callable, NoReturn

import trio

from eventcloud.errors import EventCloudError
from eventcloud.overlay import Point, heirs, lowest_corner, should_move
from peers.async_store import AsyncStore
from peers.membership import Membership
from peers.state import PeerState

log = logging.getLogger(__name__)

__all__ = ["Rebalancer"]


class Rebalancer:
    def __init__(self, state: PeerState, membership: Membership, store: AsyncStore, counters: Counter[str], *,
                 every: float, ratio: float, min_quads: int, rng: random.Random, ready: trio.Event,
                 step_down: Callable[[list[str], Point], Awaitable[NoReturn]]) -> None:
        self.state = state
        self.membership = membership
        self.store = store
        self.counters = counters
        self.every = every            # seconds between looks (0: never)
        self.ratio = ratio
        self.min_quads = min_quads
        self.rng = rng
        self.ready = ready            # set once the peer serves its zone
        self.step_down = step_down    # ends this runtime; the peer rejoins through the addresses, at the point

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        if self.every <= 0:
            await trio.sleep_forever()
        await self.ready.wait()
        while True:
            await trio.sleep(self.every * self.rng.uniform(0.5, 1.5))
            try:
                move = await self.once()
            except EventCloudError as exc:  # a probe or the handover failed: look again later
                self.counters["rebalance_failures"] += 1
                log.info("peer %s: rebalancing failed (%s); it stays", self.state.id, exc)
                continue
            if move is not None:
                await self.step_down(*move)

    async def once(self) -> tuple[list[str], Point] | None:
        """Look once; if this peer should move, hand its zone over and return the addresses to
        rejoin through and a point of the busiest zone found (the rejoin splits that zone,
        whoever holds it by then), else None."""
        state = self.state
        if not state.has_zone or not heirs(state.zone, state.neighbours):
            return None
        own = self.store.count()
        busiest = await self.membership.busiest(state.space)
        if busiest is None or busiest.id == state.id or \
                not should_move(own, busiest.quads, ratio=self.ratio, min_quads=self.min_quads):
            return None
        if not heirs(state.zone, state.neighbours):  # the table changed while we probed
            return None
        log.warning("peer %s holds %d quads and peer %s %d: handing its zone to a neighbour and rejoining "
                    "as a new peer at the busiest", state.id, own, busiest.id, busiest.quads)
        rejoin = await self.membership.step_aside()
        self.counters["rebalance_moves"] += 1
        # through the busiest peer first: it owns the point, and it does not move
        rejoin = [busiest.address] + [a for a in rejoin if a != busiest.address]
        return rejoin, lowest_corner(busiest.zone, state.space.whole_space())
