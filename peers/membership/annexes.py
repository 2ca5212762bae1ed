"""Annexes: a peer with too many neighbours hands the empty side of its zone to another host.

With one zone per peer and every zone holding data, real data leaves some zones with hundreds
of neighbours at scale (docs/overlay.md, "Annex zones"). Every `every` seconds (with jitter), a
peer with more than `limit` neighbours:

1. cuts its zone, on paper, where the side it keeps sheds the most neighbours and the other
   side holds none of its data (`overlay.crowd_cut`; none such: it stays as it is);
2. asks the hosts (daemon processes) of that side's neighbours, and of a few random points'
   owners, what taking it would cost them (`annex_offer`: the host's distinct neighbours
   with and without it, over all the peers it runs);
3. asks the cheapest host that stays within `cap` (`overlay.choose_host`) to adopt it
   (`annex_adopt`): that host starts one more peer runtime in its process (peers/process/launcher.py),
   which joins through this peer asking for exactly that side (`join_split` with `annex`).
   The split is an ordinary join: the handover, the commit, the announcements and the
   replica are the same, and the side moves no data. A zone changed meanwhile refuses it.

An annex is a full peer: it routes, stores what is published into its zone and has a replica.
It is marked (`PeerState.annex`) so that the rebalancer does not move it while it is empty
(it would merge back into the zone it was cut from). Annexes run under the process's top-level
peer (whichever of its peers was asked), persist in its `<data-dir>/annexes/` and come back
with it.

A host that ends up over `cap` (cuts around its annexes added neighbours to them) hands its
most crowded empty annex on (`_hand_on`), one at a time: the annex leaves to its sibling, which
cuts it off again for the host it costs least then.
"""

from __future__ import annotations

import logging
import random
import shutil
import uuid
from collections import Counter
from typing import Any, Callable

import trio

from eventcloud.errors import ErrorCode, EventCloudError, RequestError
from eventcloud.net.rpc import RpcConnection
from eventcloud.overlay import (
    HEADROOM, HostOffer, choose_host, crowd_cut, data_ranges, heirs, host_neighbours_after, split_for_join,
)
from eventcloud.wire.messages import AdoptAnnex, AnnexAsk, AnnexOffer, Empty, Load, PeerId
from eventcloud.wire.ops import Op
from peers.store import AsyncStore, Offload, PeerState
from peers.process import PeerLauncher, ProcessPeers
from peers.membership.membership import Membership
from peers.net import Router

log = logging.getLogger(__name__)

__all__ = ["Annexes"]

#: Random points whose owners' hosts are asked too, besides the annex's neighbours' hosts.
RANDOM_HOSTS = 8
#: Annexes one process adopts at most (a bound against a peer asking again and again).
MAX_ANNEXES = 64
#: Seconds an adoption may take (the annex's join) before the peer gives up on it.
ADOPT_TIMEOUT = 60.0
#: After a look that found no cut or no host, the next one waits this many rounds unless the
#: zone or its neighbours change.
FRUITLESS_ROUNDS = 10


class Annexes:
    def __init__(self, state: PeerState, router: Router, store: AsyncStore, membership: Membership,
                 process: ProcessPeers, launcher: PeerLauncher, counters: Counter[str], offload: Offload, *,
                 limit: int, cap: int,
                 every: float, rng: random.Random, ready: trio.Event, retire: Callable[[], None]) -> None:
        self.state = state
        self.router = router
        self.store = store
        self.membership = membership
        self.process = process            # the host: every peer this process runs
        #: where adopted annexes start: the process's top-level peer's launcher (an annex started
        #: under another annex or a stand-in would end with it when that one hands its zone on)
        self.launcher = launcher
        self.offload = offload            # removing a failed adoption's folder, off the event loop
        self.counters = counters
        self.limit = limit                # more neighbours than this: cut (0: never)
        self.cap = cap                    # a host takes an annex only if it stays within this
        self.headroom = HEADROOM          # ... less this much, for the cuts to come
        self.every = every
        self.rng = rng
        self.ready = ready
        self.retire = retire              # ends this runtime once it handed its zone on
        #: the neighbourhood in which the last look found no cut or no host, and until when
        #: that stands (a look reads the whole store: not again every round for nothing)
        self._fruitless: tuple[Any, frozenset[str], float] | None = None

    def handlers(self) -> dict[Op, Any]:
        return {Op.ANNEX_OFFER: self._on_offer, Op.ANNEX_ADOPT: self._on_adopt}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        if self.limit <= 0 or self.every <= 0:
            await trio.sleep_forever()
        await self.ready.wait()
        while True:
            await trio.sleep(self.every * self.rng.uniform(0.5, 1.5))
            try:
                await self.once()
            except EventCloudError as exc:
                self.counters["annex_failures"] += 1
                log.info("peer %s: handing an annex over failed (%s)", self.state.id, exc)

    async def once(self) -> str | None:
        """Cut once if this peer has too many neighbours; the annex's id, or None. An empty
        annex of a host over its cap hands itself on instead (`_hand_on`)."""
        state = self.state
        if not state.has_zone or self.membership.leaving:
            return None
        if state.annex and len(self.process.neighbours()) > self.cap and await self._hand_on():
            return None
        if len(state.neighbours) <= self.limit:
            return None
        zone = state.zone
        if self._fruitless is not None and self._fruitless[:2] == (zone, frozenset(state.neighbours)) \
                and trio.current_time() < self._fruitless[2]:
            return None
        held = await self.store.find(None, None, None, None)
        cut = crowd_cut(zone, state.neighbour_zones(), data_ranges(state.space.point(q) for q in held))
        if cut is None:
            self.counters["annex_no_cut"] += 1
            self._fruitless = (zone, frozenset(state.neighbours), trio.current_time() + FRUITLESS_ROUNDS * self.every)
            return None
        plan = split_for_join(state.id, state.address, zone, state.neighbours, "annex?", "",
                              cut=(cut.dim, cut.at), newcomer_lower=not cut.annex_upper)
        around = set(plan.newcomer_table)
        offers = await self._offers(around, [n.address for k, n in plan.newcomer_table.items() if k != state.id])
        best = choose_host(offers, self.cap, self.headroom)
        if best is None:
            self.counters["annex_no_host"] += 1
            log.info("peer %s has %d neighbours: no host takes the side that would leave it %d (%d asked)",
                     state.id, len(state.neighbours), cut.kept, len(offers))
            self._fruitless = (zone, frozenset(state.neighbours), trio.current_time() + FRUITLESS_ROUNDS * self.every)
            return None
        if state.zone != zone:   # changed while we asked
            return None
        log.info("peer %s has %d neighbours: host %s (%d -> %d neighbours) adopts the side of its zone that "
                 "leaves it %d", state.id, len(state.neighbours), best.host, best.now, best.after, cut.kept)
        reply = None
        with trio.move_on_after(ADOPT_TIMEOUT):
            reply = await self.router.call(best.address, Op.ANNEX_ADOPT, AdoptAnnex(state.address, zone, plan.granted))
        if reply is None:
            raise RequestError(f"host {best.host} did not adopt the annex within {ADOPT_TIMEOUT:.0f} s",
                               ErrorCode.TIMEOUT)
        self.counters["annexes_handed"] += 1
        return PeerId.from_wire(reply).id

    async def _hand_on(self) -> bool:
        """Hand this empty annex on: its host has more than `cap` neighbours (cuts around it
        since it took the annex added some). One annex per host at a time, the one with the
        most neighbours, and only if another host would take it: it leaves to its sibling
        (a graceful leave; it holds no data), and the sibling, crowded again, cuts it off at its
        next look for the host it costs least then (no longer this one, over its cap). Whether
        it did (this runtime then ends)."""
        state, process = self.state, self.process
        if process.most_crowded_empty_annex() != state.id or self.store.held() > 0:
            return False
        if not heirs(state.zone, state.neighbours, tree_only=True):
            self.counters["annex_no_heir"] += 1
            return False
        if not process.begin_hand_on():
            return False
        try:
            offers = await self._offers(set(state.neighbours), [n.address for n in state.neighbours.values()])
            best = choose_host(offers, self.cap, self.headroom)
            if best is None:
                self.counters["annex_no_host"] += 1
                return False
            log.info("peer %s: its host has %d neighbours, over %d: this empty annex hands its zone back to its "
                     "sibling, for host %s (%d -> %d)", state.id, len(process.neighbours()), self.cap, best.host,
                     best.now, best.after)
            await self.membership.leave(tree_only=True)
            await self.membership.replication.drop()
            self.counters["annexes_handed_on"] += 1
        finally:
            process.end_hand_on()
        self.retire()
        return True

    async def _offers(self, around: set[str], addresses: list[str]) -> list[HostOffer]:
        """Offers of the hosts at `addresses` and of a few random points' owners, one per host,
        this one's excepted."""
        addresses = list(dict.fromkeys(addresses))
        space = self.state.space
        for _ in range(RANDOM_HOSTS):
            point = tuple(self.rng.randrange(space.top) for _ in range(4))
            try:
                load = Load.from_wire(await self.router.route(point, Op.LOAD_LOCAL, Empty()))  # type: ignore[arg-type]
            except EventCloudError:
                continue
            if load.address not in addresses:
                addresses.append(load.address)
        found: dict[str, HostOffer] = {}

        async def one(address: str) -> None:
            try:
                offer = AnnexOffer.from_wire(await self.router.call(address, Op.ANNEX_OFFER,
                                                                    AnnexAsk(tuple(sorted(around)))))
            except EventCloudError:
                return
            if offer.host != self.process.process_id:
                found.setdefault(offer.host, HostOffer(offer.host, address, offer.now, offer.after, offer.zones))

        async with trio.open_nursery() as nursery:
            for address in addresses:
                nursery.start_soon(one, address)
        return sorted(found.values(), key=lambda o: o.host)

    async def _on_offer(self, conn: RpcConnection, body: AnnexAsk) -> AnnexOffer:
        process = self.process
        now = process.neighbours()
        after = host_neighbours_after(now, process.ids, body.neighbours, None)
        return AnnexOffer(process.process_id, len(now), after, len(process.ids))

    async def _on_adopt(self, conn: RpcConnection, body: AdoptAnnex) -> PeerId:
        host = self.launcher
        if len(host.running) >= MAX_ANNEXES:
            raise RequestError(f"the process of peer {self.state.id} runs {MAX_ANNEXES} annexes already",
                               ErrorCode.BUSY)
        async with self.process.adopting:
            directory = host.data_dir / uuid.uuid4().hex[:12] if host.data_dir is not None else None
            try:
                running = await host.start(data_dir=directory, annex=(body.owner, body.of, body.annex))
            except BaseException:
                if directory is not None:   # a join that failed leaves no peer to restore
                    with trio.CancelScope(shield=True):
                        await self.offload.run(shutil.rmtree, directory, True)
                raise
        log.info("peer %s started annex %s for the peer at %s", self.state.id, running.id, body.owner)
        return PeerId(running.id)
