"""Replicated zones, owner side: every write is durable on this peer and on its replica.

With R = 2 (the overlay's setting, fixed by its first peer) each peer picks one other peer as
the replica of its zone: a live neighbour, not hosted in this process, on another host when
there is one. Every store write (quads, event states, subscriptions, decisions) goes to the
local log and to the replica's log at once (`ReplicatedStore`), and is acknowledged only when
both are durable. The replica also holds this peer's state (zone, neighbours), so that it can
take the zone over when this peer crashes (`peers.replication.keeper`).

When the replica stops answering, this peer picks another and copies its whole zone there
(`sync_to`, in chunks, writes waiting meanwhile) before it acknowledges anything more: an
acknowledged write is on two peers at every moment. Writes and copies exclude each other
(`AsyncStore.writes_paused`): a write sent to the old replica while the copy for the new one
was taken held neither place but this one once the old replica was dropped (the fault
simulation's seed 50 lost two quads of an acknowledged event so). A peer alone in its overlay has nobody
to copy to; its writes are acknowledged with one copy and counted as such.
"""

from __future__ import annotations

import logging
from collections import Counter
from functools import partial
from typing import Any, Awaitable, Callable

import trio

from eventcloud.errors import ErrorCode, EventCloudError, RemoteError
from eventcloud.overlay import ReplicaNamed
from eventcloud.wire.messages import ReplicaOf, ReplicaState, ReplicaStatus, ReplicaSync, Replicate
from eventcloud.wire.ops import Op
from peers.store import mailboxes as mb
from peers.net import FAILED, Router
from peers.store import AsyncStore, Mutation, PeerState, PeerStore, StoreError, add_triples, decide, notified, put_subscription
from peers.tasks import gather

log = logging.getLogger(__name__)

__all__ = ["OwnerReplication", "ReplicatedStore", "snapshot"]

#: Quads per chunk of a full copy (a chunk stays far below the frame limit).
CHUNK_QUADS = 2000
#: Non-durable writes wait at most this long for a durable one to carry them to the replica.
LATER_EVERY = 0.2


def snapshot(store: PeerStore) -> list[list[Mutation]]:
    """The whole content of a store as batches of mutations that rebuild it elsewhere."""
    batches: list[list[Mutation]] = []
    batch: list[Mutation] = []
    size = 0
    for graph, info in store.events().items():
        quads = store.wire_triples(graph)
        batch.append(add_triples(graph, quads, info.size, info.published, committed=info.committed, tx=info.tx))
        if info.notified:
            batch.append(notified(graph))
        size += len(quads)
        if size >= CHUNK_QUADS:
            batches.append(batch)
            batch, size = [], 0
    # decisions are kept for good (one per publication attempt), so they are batched too: all
    # in one message, a long-running zone's would outgrow the frame
    others = [put_subscription(ident, record) for ident, record in store.subscriptions().items()]
    others += [decide(key, decision, point) for key, (decision, point) in store.decisions().items()]
    others += [mb.install(box.pack()) for box in store.mailboxes.all()]
    for mutation in others:
        batch.append(mutation)
        size += 1
        if size >= CHUNK_QUADS:
            batches.append(batch)
            batch, size = [], 0
    if batch:
        batches.append(batch)
    return batches


class OwnerReplication:
    def __init__(self, state: PeerState, router: Router, counters: Counter[str], store: AsyncStore, *,
                 local_peers: Callable[[], set[str]], retry_window: float, heartbeat: float,
                 record: Callable[[str, str], Awaitable[None]]) -> None:
        self.state = state
        self.record = record   # names a new replica at the ownership authority (peers/authority)
        self.router = router
        self.counters = counters
        self.local_peers = local_peers      # ids of the peers this process runs (never a replica)
        self.retry_window = retry_window
        self.heartbeat = heartbeat
        self.store = store                    # the zone's store, copied whole to a new replica
        self._lock = trio.Lock()              # one full copy at a time
        self._later: list[list[Mutation]] = []  # non-durable writes, sent with the next batch
        #: Peers still joining through this one: they serve nothing until their join commits, so
        #: copying our zone to one of them would wait for the very commit we are handling.
        self._joining: set[str] = set()
        self._pending_later = trio.Event()
        #: Set when this peer learns a replica took its zone over (it was frozen or cut off past
        #: the failure timeout): the runtime then stops serving the zone and rejoins.
        self.superseded = trio.Event()
        self.taken_over_at: str | None = None   # the stand-in's address, when the replica says it
        self.left = False                        # handed the zone over (`drop`): no replica any more
        #: The state (zone, neighbours) is numbered at each change; the replica's copy is known to
        #: hold `_state_at_replica`. A change made while a new replica is being filled, or whose
        #: message failed, is sent again until the copy holds it: a takeover starts from that copy.
        self._state_version = 0
        self._state_at_replica = -1
        self._state_lock = trio.Lock()   # one state message at a time: they arrive in order
        self._copy_missing: tuple[str, str] | None = None   # a replica that said it holds no copy of ours

    def joining_began(self, ident: str) -> None:
        """Peer `ident` joins through this one: never its replica until `joining_ended`."""
        self._joining.add(ident)

    def joining_ended(self, ident: str) -> None:
        self._joining.discard(ident)

    @property
    def enabled(self) -> bool:
        return self.state.replicas >= 2

    def later(self, batches: list[list[Mutation]]) -> None:
        """Non-durable writes (marks a crash can derive again): to the replica soon, not now."""
        if batches and self.enabled:
            self._later.extend(batches)
            self._pending_later.set()

    async def _flush_later(self) -> None:
        """Send what is waiting, with no other write to carry it, every LATER_EVERY seconds."""
        while True:
            await self._pending_later.wait()
            await trio.sleep(LATER_EVERY)
            self._pending_later = trio.Event()
            if self._later and self.state.replica is not None:
                try:
                    await self.replicate([])
                except EventCloudError as exc:
                    log.info("peer %s: sending marks to the replica: %s", self.state.id, exc)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep a live replica: check it every heartbeat, replace it when it is gone."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._flush_later)
            task_status.started()
            await self._watch_replica()

    async def _watch_replica(self) -> None:
        while True:
            await trio.sleep(self.heartbeat * 2)
            if not self.enabled or self.left or not self.state.has_zone:
                continue
            try:
                if self.state.replica is None or self._copy_missing == self.state.replica or \
                        not await self._answers(*self.state.replica):
                    await self.ensure(replace=True)
                await self._send_state()
            except EventCloudError as exc:
                log.info("peer %s: replica check: %s", self.state.id, exc)

    async def _answers(self, ident: str, address: str) -> bool:
        """Does the replica answer? (It may answer that it took the zone over: see `superseded`.)"""
        status = await self._status(address)
        self._superseded_by(status)
        return status is not None

    async def _status(self, address: str) -> ReplicaStatus | None:
        try:
            with trio.fail_after(self.retry_window):
                return ReplicaStatus.from_wire(await self.router.call(
                    address, Op.REPLICA_STATUS, ReplicaOf(self.state.id, self.state.incarnation)))
        except (*FAILED, EventCloudError, trio.TooSlowError):
            return None

    def _superseded_by(self, status: ReplicaStatus | None) -> bool:
        """Whether the replica's answer says it took this zone over (then `superseded` is set)."""
        if status is None or not status.taken_over or status.incarnation <= self.state.incarnation:
            return False
        self.taken_over(status.address)
        return True

    def taken_over(self, address: str | None) -> None:
        """Another peer serves this zone under this peer's id, a newer incarnation (at `address`):
        this runtime steps down (`superseded`) and the peer rejoins as a new one."""
        if not self.superseded.is_set():
            log.warning("peer %s: its replica took its zone over (it was unreachable for too long); "
                        "it stops serving the zone and rejoins", self.state.id)
            self.counters["superseded"] += 1
            self.taken_over_at = address
            self.superseded.set()

    def _refuse_if_superseded(self) -> None:
        if self.superseded.is_set():
            raise StoreError(f"peer {self.state.id}'s zone was taken over by its replica; it is rejoining: retry",
                             ErrorCode.UNAVAILABLE)

    # --- choosing and filling a replica -------------------------------------------------------

    def candidates(self) -> list[tuple[str, str]]:
        """Neighbours that may hold this zone's copy, best first: other processes, other hosts."""
        mine = self.local_peers()
        host = self.state.address.rpartition(":")[0]
        # (an entry at our own address is a stale one for the peer that listened here before:
        # copying the zone there copied it to ourselves, one copy in all)
        found = [(k, n.address) for k, n in self.state.neighbours.items()
                 if k not in mine and k not in self._joining and n.address != self.state.address
                 and not self.router.suspected(k, n.address)]
        found.sort(key=lambda kv: (kv[1].rpartition(":")[0] == host, kv[0]))
        return found

    async def ensure(self, *, replace: bool = False, failed: str | None = None) -> bool:
        """A live replica holding this whole zone (copying it to a new one if needed); False when
        there is nobody to copy to (a peer alone in its overlay). `failed`: replace the replica
        only if it is still this peer (writes that failed together replace it once: the copy
        made for the first holds the others, applied here before it was taken)."""
        if not self.enabled or self.left:
            return False
        async with self.store.writes_paused(), self._lock:
            if self.state.replica is not None and (not replace or failed not in (None, self.state.replica[0])):
                return True
            old = self.state.replica
            for ident, address in self.candidates():
                if old is not None and ident == old[0]:
                    continue
                if self.superseded.is_set():
                    return False
                try:
                    copied = await self.sync_to(ident, address)
                except EventCloudError as exc:
                    log.info("peer %s: %s cannot hold its replica: %s", self.state.id, ident, exc)
                    if isinstance(exc, RemoteError) and exc.code is ErrorCode.FORBIDDEN and \
                            self._superseded_by(await self._status(address)):
                        # It serves this zone as our stand-in: copying it elsewhere made two
                        # owners of one zone (a peer restarted as its replica took it over went
                        # on serving with a new replica; 38–98 of 297 durable notifications
                        # went to its mailbox and were lost when it stepped down at last).
                        return False
                    continue
                try:   # before any write only this copy holds is acknowledged
                    await self.record(ident, address)
                except EventCloudError as exc:
                    log.info("peer %s: cannot name %s its replica at the ownership authority: %s",
                             self.state.id, ident, exc)
                    await self._drop_at(ident, address)
                    self.state.step(ReplicaNamed(None if old is None or replace else old))
                    return False
                self.state.step(ReplicaNamed((ident, address)))
                self._state_at_replica = copied
                self.counters["replicas_chosen"] += 1
                log.info("peer %s: zone replicated on %s", self.state.id, ident)
                if old is not None:
                    await self._drop_at(*old)
                break
            else:
                self.state.step(ReplicaNamed(None if old is None or replace else old))
                return False
        # A split or a neighbour's news while the copy travelled (or the authority named it) is
        # not in the copy's state: sent now. Stale, a takeover would serve the zone from before
        # the split over the newcomer's (the frozen-entry run: 9 of 72 quads unreadable).
        await self._send_state()
        return True

    async def sync_to(self, ident: str, address: str) -> int:
        """Copy this whole zone (and this peer's state) to `address`, in chunks; the number of the
        state copied."""
        state = self.state
        batches = await self.store.run(snapshot, self.store.sync)
        version = self._state_version
        first = ReplicaSync(state.id, state.incarnation, state=_state_json(state), reset=True, done=not batches,
                            to=ident)
        await self.router.call(address, Op.REPLICA_SYNC, first)
        for i, batch in enumerate(batches):
            await self.router.call(address, Op.REPLICA_SYNC, ReplicaSync(
                state.id, state.incarnation, batches=(batch,), done=i == len(batches) - 1))
        self.counters["replica_syncs"] += 1
        return version

    async def _drop_at(self, ident: str, address: str) -> None:
        try:
            await self.router.call(address, Op.REPLICA_DROP, ReplicaOf(self.state.id, self.state.incarnation))
        except EventCloudError:
            pass  # it will notice: the owner tells it "not my replica" when it probes

    async def drop(self) -> None:
        """This peer left the overlay: its replica must not take anything over, and no replica is
        chosen again (the heartbeat found none and copied the zone it had handed over to a new
        one, which took that zone over once this peer stopped: a second owner, unknown to all)."""
        self.left = True
        if self.state.replica is not None:
            await self._drop_at(*self.state.replica)
            self.state.step(ReplicaNamed(None))

    # --- keeping it in step ---------------------------------------------------------------------

    async def replicate(self, batches: list[list[Mutation]]) -> None:
        """Send writes to the replica; replace a replica that fails (copying everything to the new
        one, which then holds these writes too: they are applied here already)."""
        failure = await self.send(batches)
        if failure is not None:
            await self.recover(failure)

    async def send(self, batches: list[list[Mutation]]) -> "_Unsent | None":
        """Send writes to the replica; what went wrong, for `recover` once they are applied here
        (a copy made before would miss them), or None."""
        if not self.enabled or not self.state.has_zone:
            return None
        if self.left:
            raise StoreError(f"peer {self.state.id} handed its zone over: retry (routing finds the new owner)",
                             ErrorCode.UNAVAILABLE)
        if self.state.replica is None:
            return _Unsent(None, "no replica")
        ident, address = self.state.replica
        carried, self._later = self._later, []
        failure: BaseException | str = f"no answer within {self.retry_window:g} s"
        # Shielded (and bounded): these writes are applied here whatever happens to the task
        # carrying them, so they reach the replica, or the replica is replaced, even if that
        # task is cancelled meanwhile (a subscriber's connection closing mid-acknowledgement).
        # Cut short, they would be here and not there, and a takeover would serve the gap.
        with trio.CancelScope(shield=True), trio.move_on_after(self.retry_window):
            try:
                await self.router.call(address, Op.REPLICATE, Replicate(self.state.id, self.state.incarnation,
                                                                        tuple(carried + batches)))
                return None
            except (*FAILED, RemoteError) as exc:
                failure = exc
        return _Unsent((ident, address), failure)

    async def recover(self, unsent: "_Unsent") -> None:
        """Writes applied here did not reach a replica: copy the zone to a (new) one, or refuse
        them if another peer serves the zone now."""
        if unsent.replica is None:
            if not await self.ensure():
                self._refuse_if_superseded()
                self.counters["writes_unreplicated"] += 1
            return
        ident, address = unsent.replica
        failure = unsent.why
        if isinstance(failure, RemoteError) and failure.code is ErrorCode.FORBIDDEN:
            # Another peer serves this zone now: a write here must not be acknowledged (a
            # new replica would make it look durable, and it would be lost when we rejoin).
            self._superseded_by(await self._status(address))
            self._refuse_if_superseded()
        log.info("peer %s: replica %s failed (%s); replacing it", self.state.id, ident, failure)
        self.router.suspect(ident, address)
        try:
            ensured = await self.ensure(replace=True, failed=ident)
        except BaseException:
            # interrupted before a new copy was made: the next write (or the replica watch)
            # copies the whole zone to one, so nothing written here stays without its copy
            if self.state.replica is not None and self.state.replica[0] == ident:
                self.state.step(ReplicaNamed(None))
            raise
        self._refuse_if_superseded()
        if not ensured:
            if self.candidates():
                raise StoreError(f"peer {self.state.id} cannot keep a second copy of its zone: no replica answers",
                                 ErrorCode.UNAVAILABLE)
            self.counters["writes_unreplicated"] += 1

    async def state_changed(self) -> None:
        """The zone or the neighbours changed: the replica's copy of the state follows."""
        self._state_version += 1
        await self._send_state()

    async def _send_state(self) -> None:
        """Bring the replica's copy of the state up to date, if it is behind (a failure is tried
        again at the next replica check)."""
        if not self.enabled:
            return
        async with self._state_lock:
            replica, version = self.state.replica, self._state_version
            if replica is None or self._state_at_replica >= version:
                return
            try:
                await self.router.call(replica[1], Op.REPLICA_STATE,
                                       ReplicaState(self.state.id, self.state.incarnation, _state_json(self.state)))
            except EventCloudError as exc:
                log.info("peer %s: replica state update failed (sent again at the next check): %s",
                         self.state.id, exc)
                if isinstance(exc, RemoteError) and exc.code is ErrorCode.FORBIDDEN:
                    self._copy_missing = replica   # it lost our copy: the next check copies the zone anew
                return
            if self.state.replica == replica:
                self._state_at_replica = max(self._state_at_replica, version)


class _Unsent:
    """Writes that did not reach the replica: which one it was (None: there was none), and why."""

    __slots__ = ("replica", "why")

    def __init__(self, replica: tuple[str, str] | None, why: BaseException | str) -> None:
        self.replica, self.why = replica, why


def _state_json(state: PeerState) -> dict[str, Any]:
    return state.to_json()


class ReplicatedStore(AsyncStore):
    """The store services write to: each group of writes is durable locally and on the replica
    before any of them is acknowledged. It builds the owner side of replication (`replication`)
    for itself: each needs the other, the store to send its writes, replication to copy the store."""

    def __init__(self, store: PeerStore, offload: bool, *, state: PeerState, router: Router, counters: Counter[str],
                 local_peers: Callable[[], set[str]], retry_window: float, heartbeat: float,
                 fence: Callable[[], None], record: Callable[[str, str], Awaitable[None]], **options: Any) -> None:
        super().__init__(store, offload, **options)
        self.fence = fence   # raises unless this runtime surely owns its zone now (peers/authority)
        self.replication = OwnerReplication(state, router, counters, self, local_peers=local_peers,
                                            retry_window=retry_window, heartbeat=heartbeat, record=record)

    def _applies_now(self, mutations: list[Mutation], durable: bool) -> bool:
        return (not durable or not self.replication.enabled) and super()._applies_now(mutations, durable)

    def _apply_now(self, batches: list[list[Mutation]], durable: bool) -> list[list[Any]]:
        if not durable:
            self.replication.later(batches)
        return super()._apply_now(batches, durable)

    async def _commit(self, jobs: list[tuple[list[Mutation], bool]]) -> list[list[Any]]:
        durable = [m for m, d in jobs if d]
        self.replication.later([m for m, d in jobs if not d])
        if not durable or not self.replication.enabled:
            return await AsyncStore._commit(self, jobs)
        local, unsent = await gather([partial(AsyncStore._commit, self, jobs),  # both copies at once
                                      partial(self.replication.send, durable)])
        if unsent is not None:   # applied here now: a new replica's copy holds them
            await self.replication.recover(unsent)
        # Durable on both copies; acknowledged only if this runtime still holds the zone's lease:
        # a deposed owner acknowledges nothing (its replica, which took over, holds these writes).
        self.fence()
        return local
