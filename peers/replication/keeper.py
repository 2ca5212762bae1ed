"""Replicated zones, replica side: the copies this peer holds, failure detection and takeover.

For each owner that chose this peer as its replica we hold a copy of its zone (a store of its
own, with its own write-ahead log, in `<data-dir>/replicas/<owner>/`) and of its state. Writes
arrive with the owner's incarnation; a write for a zone we do not hold (or for another
incarnation) is refused.

We also watch each owner: a ping every `heartbeat`; after `failure_timeout` without an answer
we ask up to two of its neighbours to try (an indirect probe, as in SWIM, so that a link
problem between the two of us is not taken for a crash). If nobody reaches it, and none of
them saw it leave, we take its zone over: our copy becomes the store of a stand-in peer
(`peers.process.launcher`) serving the zone under the owner's id and the next incarnation. A restarted
owner asks us first (`replica_status`): if we took over, it rejoins as a new peer and drops
its stale copy; if not, we stop suspecting it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

import trio

from eventcloud.errors import BadRequest, ErrorCode, EventCloudError, RemoteError, RequestError
from eventcloud.net.rpc import RpcConnection
from eventcloud.overlay import TakenOver
from eventcloud.wire.messages import (
    Empty, JoinCommit, Load, Pong, Probe, ProbeResult, ReplicaOf, ReplicaState, ReplicaStatus, ReplicaSync, Replicate,
)
from eventcloud.wire.ops import Op
from peers.process import PeerLauncher
from peers.net import FAILED, Locate, Router, addresses_of
from peers.store import CHECKPOINT_BYTES, Offload, PeerState, PeerStore, save_state

log = logging.getLogger(__name__)

__all__ = ["ReplicaKeeper"]


@dataclass
class _Copy:
    owner: str
    incarnation: int
    store: PeerStore
    state: dict[str, Any]
    directory: Path | None
    complete: bool = False
    last_ok: float = 0.0
    watching: bool = False
    stale_since: float | None = None   # since when the owner names another peer as its replica
    holder: str = ""   # the id of the runtime that took the copy (a peer that rejoined keeps its copies)
    holder_address: str = ""   # and its address then ("" in a copy saved by older code)
    closed: bool = False


#: Seconds the copies' writes under way may take to finish when the runtime ends.
CLOSE_WAIT = 10.0


class ReplicaKeeper:
    def __init__(self, state: PeerState, router: Router, standins: PeerLauncher, counters: Counter[str], *,
                 data_dir: Path | None, durable: bool, offload: Offload, heartbeat: float, failure_timeout: float,
                 departed: Callable[[str], bool], claim: Callable[[str, int, str, str], Awaitable[bool]],
                 refusal: Callable[[str, int, str, str], Awaitable[str]] | None = None,
                 epoch_of: Callable[[str], Awaitable[int | None]] | None = None, locate: Locate | None = None) -> None:
        self.state = state
        self.locate = locate       # where the authority says a peer's zone is served now
        #: the authority's epoch of a zone, None when it holds none (a peer that left retires its
        #: keys; a crashed one's stay) or there is no authority
        self.epoch_of = epoch_of
        self.router = router
        self.standins = standins   # starts a stand-in here when this peer takes a zone over
        self.counters = counters
        self.directory = data_dir / "replicas" if data_dir is not None else None
        self.durable = durable
        self.offload = offload
        self.heartbeat = heartbeat
        self.failure_timeout = failure_timeout
        self.departed = departed
        self.claim = claim   # wins the zone at the ownership authority (peers/authority; True without one)
        self.refusal = refusal   # why a claim was not won (for the log)
        self._copies: dict[str, _Copy] = {}
        self._taken: dict[str, int] = {}   # owners taken over here -> the stand-in's incarnation
        self._locks: dict[str, trio.Lock] = {}  # one change of an owner's copy at a time
        self._closing = False                   # the runtime ends: copies take no more writes
        self._load()

    def handlers(self) -> dict[Op, Any]:
        return {Op.REPLICATE: self._on_replicate, Op.REPLICA_SYNC: self._on_sync, Op.REPLICA_STATE: self._on_state,
                Op.REPLICA_DROP: self._on_drop, Op.REPLICA_STATUS: self._on_status, Op.PROBE: self._on_probe}

    def held(self) -> dict[str, int]:
        """Owner id -> incarnation of every complete copy held here."""
        return {o: c.incarnation for o, c in self._copies.items() if c.complete}

    def silent_owners(self) -> list[str]:
        """Owners of copies held here that have not answered for two heartbeats: this copy may be
        the only one of their zone, to be taken over (a leave now would drop it)."""
        now = trio.current_time()
        return sorted(o for o, c in self._copies.items() if c.complete and now - c.last_ok > self.heartbeat * 2)

    # --- persistence ------------------------------------------------------------------------------

    def _load(self) -> None:
        if self.directory is None or not self.directory.is_dir():
            return
        for directory in sorted(self.directory.iterdir(), key=lambda d: d.stat().st_mtime):
            meta = directory / "owner.json"
            try:
                data = json.loads(meta.read_text())
                if not data["complete"]:
                    raise ValueError("an unfinished copy")
                copy = _Copy(str(data["owner"]), int(data["incarnation"]), PeerStore(directory / "store",
                             durable=self.durable), data["state"], directory, True,
                             holder=str(data.get("holder") or self.state.id),
                             holder_address=str(data.get("holder_address") or
                                                ("" if data.get("holder") else self.state.address)))
            except (OSError, ValueError, KeyError, TypeError, EventCloudError) as exc:
                log.info("peer %s: dropping the replica in %s: %s", self.state.id, directory, exc)
                shutil.rmtree(directory, ignore_errors=True)
                continue
            older = self._copies.pop(copy.owner, None)
            if older is not None:  # a newer copy of the same owner replaces it
                self._discard(older)
            self._copies[copy.owner] = copy

    def _save(self, copy: _Copy) -> None:
        if copy.directory is None:
            return
        copy.directory.mkdir(parents=True, exist_ok=True)
        tmp = copy.directory / "owner.tmp"
        with open(tmp, "w") as handle:
            json.dump({"owner": copy.owner, "incarnation": copy.incarnation, "state": copy.state,
                       "complete": copy.complete, "holder": copy.holder,
                       "holder_address": copy.holder_address}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, copy.directory / "owner.json")

    def _new_copy(self, owner: str, incarnation: int, state: dict[str, Any]) -> _Copy:
        # a directory of its own for every copy, so an old one still closing never locks the new one
        directory = self.directory / f"{owner}-{uuid.uuid4().hex[:8]}" if self.directory is not None else None
        if directory is not None:
            directory.mkdir(parents=True)
        store = PeerStore(directory / "store" if directory is not None else None, durable=self.durable)
        return _Copy(owner, incarnation, store, state, directory, holder=self.state.id,
                     holder_address=self.state.address)

    def _discard(self, copy: _Copy) -> None:
        try:
            copy.store.close()
        except Exception:  # a half-written copy: it goes anyway
            pass
        if copy.directory is not None:
            shutil.rmtree(copy.directory, ignore_errors=True)

    # --- the owner's writes ---------------------------------------------------------------------

    def _copy_of(self, owner: str, incarnation: int) -> _Copy:
        self._refuse_if_closing()
        copy = self._copies.get(owner)
        if copy is None or copy.incarnation != incarnation:
            raise RequestError(f"peer {self.state.id} holds no replica of peer {owner} (incarnation {incarnation}); "
                               f"copy the zone first (replica_sync)", ErrorCode.FORBIDDEN)
        return copy

    def _lock(self, owner: str) -> trio.Lock:
        return self._locks.setdefault(owner, trio.Lock())

    async def _on_replicate(self, conn: RpcConnection, body: Replicate) -> Empty:
        async with self._lock(body.owner):
            copy = self._copy_of(body.owner, body.incarnation)
            await self.offload.run(copy.store.write_many, [list(b) for b in body.batches])
            if copy.store.log_size > CHECKPOINT_BYTES:   # its owner checkpoints at the same size
                await self.offload.run(copy.store.checkpoint)
        copy.last_ok = trio.current_time()
        self.counters["replicated_writes"] += len(body.batches)
        return Empty()

    async def _on_sync(self, conn: RpcConnection, body: ReplicaSync) -> Empty:
        # Refused before waiting for the owner's lock too: a take-over here holds it until its
        # stand-in has started, and that stand-in's first copy may come here, through a stale
        # entry for this address (simulation seed 12: each waited for the other for 300 s).
        self._refuse_sync(body)
        async with self._lock(body.owner):
            return await self._sync(body)

    def _refuse_sync(self, body: ReplicaSync) -> None:
        self._refuse_if_closing()
        if body.owner == self.state.id:
            raise RequestError(f"peer {self.state.id} cannot hold the copy of its own zone (the sender's entry for "
                               f"this address is stale)", ErrorCode.FORBIDDEN)
        if body.owner in self._taken:
            raise RequestError(f"peer {body.owner} was taken over here; it must rejoin", ErrorCode.FORBIDDEN)
        held = self._copies.get(body.owner)
        if body.reset and held is not None and held.incarnation > body.incarnation:
            # A deposed incarnation (cut off, not yet told) copying its zone here would replace
            # the copy of the one serving it now, which then had none (simulation seed 65).
            raise RequestError(f"peer {self.state.id} holds the copy of peer {body.owner}'s incarnation "
                               f"{held.incarnation}, newer than {body.incarnation}", ErrorCode.FORBIDDEN)
        if body.reset and body.to and body.to != self.state.id:
            # The owner's entry for this address is stale: a moved peer's next runtime answers here
            # now (under another id), and a copy it took would go when that runtime ends.
            raise RequestError(f"this is peer {self.state.id}, not {body.to}: the sender's entry for this address "
                               f"is stale", ErrorCode.FORBIDDEN)

    def _refuse_if_closing(self) -> None:
        if self._closing:
            raise RequestError(f"peer {self.state.id} is stopping: it takes no copy now; choose another replica",
                               ErrorCode.UNAVAILABLE)

    async def _sync(self, body: ReplicaSync) -> Empty:
        self._refuse_sync(body)   # again: things changed while it waited for the lock
        if body.reset:
            _check_state(body.owner, body.state)
            old = self._copies.pop(body.owner, None)
            if old is not None:
                await self.offload.run(self._discard, old)
            copy = await self.offload.run(self._new_copy, body.owner, body.incarnation, body.state or {})
            copy.last_ok = trio.current_time()
            self._copies[body.owner] = copy
        copy = self._copy_of(body.owner, body.incarnation)
        if body.batches:
            await self.offload.run(copy.store.write_many, [list(b) for b in body.batches])
        if body.done:
            copy.complete = True
            copy.last_ok = trio.current_time()
            await self.offload.run(self._save, copy)
            self.counters["replicas_held"] = len(self._copies)
        return Empty()

    async def _on_state(self, conn: RpcConnection, body: ReplicaState) -> Empty:
        _check_state(body.owner, body.state)
        copy = self._copy_of(body.owner, body.incarnation)
        copy.state = body.state
        copy.last_ok = trio.current_time()
        await self.offload.run(self._save, copy)
        return Empty()

    async def _on_drop(self, conn: RpcConnection, body: ReplicaOf) -> Empty:
        async with self._lock(body.owner):
            copy = self._copies.get(body.owner)
            if copy is not None and copy.incarnation == body.incarnation:
                del self._copies[body.owner]
                await self.offload.run(self._discard, copy)
                self.counters["replicas_held"] = len(self._copies)
        return Empty()

    async def _on_status(self, conn: RpcConnection, body: ReplicaOf) -> ReplicaStatus:
        standin = self.standins.holds(body.owner)
        if body.owner in self._taken or standin is not None:
            incarnation = standin.state.incarnation if standin is not None else self._taken[body.owner]
            return ReplicaStatus(held=False, taken_over=True, incarnation=incarnation,
                                 address=standin.address if standin is not None else None)
        copy = self._copies.get(body.owner)
        if copy is None:
            return ReplicaStatus(held=False)
        copy.last_ok = trio.current_time()  # it is back: stop suspecting it
        return ReplicaStatus(held=True, incarnation=copy.incarnation)

    async def _on_probe(self, conn: RpcConnection, body: Probe) -> ProbeResult:
        if self.departed(body.id):
            return ProbeResult(reachable=False, departed=True)
        return ProbeResult(reachable=await self._reaches(body.address, self.heartbeat * 2, body.id))

    async def _reaches(self, address: str, within: float, ident: str = "") -> bool:
        return await self._ping(address, within, ident) is not None

    async def _ping(self, address: str, within: float, ident: str = "") -> Pong | None:
        """The answer of the peer at `address` (of peer `ident` only, if given: a moved peer
        rejoins on its old port as another peer, which answers there instead)."""
        try:
            with trio.fail_after(within):
                pong = Pong.from_wire(await self.router.call(address, Op.PING, Empty()))
        except (*FAILED, EventCloudError, trio.TooSlowError):
            return None
        return pong if not ident or pong.id == ident else None

    # --- failure detection and takeover ---------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        now = trio.current_time()
        for copy in self._copies.values():
            copy.last_ok = now
        task_status.started()
        try:
            async with trio.open_nursery() as nursery:
                while True:
                    await trio.sleep(self.heartbeat)
                    for copy in list(self._copies.values()):
                        if copy.complete and not copy.watching:
                            copy.watching = True
                            nursery.start_soon(self._watch, copy)
        finally:
            with trio.CancelScope(shield=True):
                await self._close()

    async def _close(self) -> None:
        """The runtime ends: close every copy's store. Left open, the next runtime of the same
        process (a restart, a moved peer's next attempt) could not open the same directories
        ("lock hold by current process") and dropped the copies as unreadable, and each
        runtime leaked its stores.

        Writes under way finish first (each holds its owner's lock; the thread it runs in cannot
        be cancelled), and none starts after (`_refuse_if_closing`): a copy closed under a
        write would fail that `replica_sync` with "write to closed file", and its checkpoint
        would run beside the write."""
        self._closing = True
        held: list[trio.Lock] = []
        with trio.move_on_after(CLOSE_WAIT):
            for owner in list(self._copies):
                await self._lock(owner).acquire()
                held.append(self._lock(owner))
        try:
            self.close_copies()
        finally:
            for lock in held:
                lock.release()

    def close_copies(self) -> None:
        """Close every copy's store, once: also when the runtime ends before `run` started (a
        rejoin attempt whose join failed opened the copies it loaded, and the next attempt found
        them locked: "lock hold by current process", and dropped them as unreadable)."""
        self._closing = True
        for copy in self._copies.values():
            if copy.closed:
                continue
            copy.closed = True
            try:
                copy.store.close()
            except Exception:  # noqa: BLE001 - closing on the way out: nothing more to do with it
                pass

    async def _watch(self, copy: _Copy) -> None:
        try:
            await self._check(copy)
        finally:
            copy.watching = False

    async def _check(self, copy: _Copy) -> None:
        address = copy.state.get("address", "")
        pong = await self._ping(address, self.heartbeat, copy.owner)
        if pong is not None:
            now = copy.last_ok = trio.current_time()
            if not pong.replica or pong.replica in (self.state.id, copy.holder):
                copy.stale_since = None
                return
            # The owner keeps its zone's copy elsewhere now; its request to drop this one did not
            # arrive. Kept, this stale copy would be taken over once the owner stops answering
            # (even after handing its zone over gracefully): a second owner, with old data.
            # (For a moment a new replica's owner still names the old one: hence the wait.)
            if copy.stale_since is None:
                copy.stale_since = now
            elif now - copy.stale_since >= self.failure_timeout:
                async with self._lock(copy.owner):
                    if self._copies.get(copy.owner) is copy:
                        log.info("peer %s: owner %s keeps its copy on %s now; dropping this stale one",
                                 self.state.id, copy.owner, pong.replica)
                        del self._copies[copy.owner]
                        await self.offload.run(self._discard, copy)
                        self.counters["stale_replicas_dropped"] += 1
                        self.counters["replicas_held"] = len(self._copies)
            return
        if trio.current_time() - copy.last_ok < self.failure_timeout or self._copies.get(copy.owner) is not copy:
            return
        verdict = await self._indirect(copy)
        if verdict == "departed" and self.epoch_of is not None and await self.epoch_of(copy.owner) is not None:
            # A neighbour's word alone dropped the copy of a crashed annex whose zone then went
            # unserved (a chaos run with the authority): a peer that left retires its keys there.
            log.info("peer %s: a neighbour says owner %s left, but the ownership authority still holds its zone: "
                     "its copy is kept", self.state.id, copy.owner)
            verdict = "dead"
        if verdict == "alive":
            copy.last_ok = trio.current_time()
        elif verdict == "departed":
            log.info("peer %s: owner %s left the overlay; dropping its replica", self.state.id, copy.owner)
            if self._copies.get(copy.owner) is copy:
                del self._copies[copy.owner]
                await self.offload.run(self._discard, copy)
        else:
            async with self._lock(copy.owner):
                if self._copies.get(copy.owner) is not copy or trio.current_time() - copy.last_ok < self.failure_timeout:
                    return
                serving = await self._served_by(copy)
                if serving is None and await self._ping(address, self.heartbeat, copy.owner) is not None:
                    # Back just now (restarted on its port while we asked around): it serves its
                    # zone itself. Taken over anyway, the zone had two owners: the restarted one
                    # had found no takeover when it started, and it served beside its stand-in.
                    copy.last_ok = trio.current_time()
                    self.counters["takeovers_owner_back"] += 1
                elif serving is None:
                    decided = await self._join_decided(copy)
                    if decided == "undone":
                        log.info("peer %s: owner %s's join was undone; dropping its replica", self.state.id, copy.owner)
                        del self._copies[copy.owner]
                        await self.offload.run(self._discard, copy)
                        self.counters["replicas_held"] = len(self._copies)
                    elif decided == "stands" and await self._claimed(copy):
                        await self._take_over(copy)
                    else:   # its splitter does not answer, or its owner holds its lease: suspect it again later
                        if decided == "unknown":
                            log.info("peer %s: peer %s stopped answering before its join's commit was answered, and "
                                     "its splitter has not decided it (no answer, or not now): not taken over yet",
                                     self.state.id, copy.owner)
                        copy.last_ok = trio.current_time()
                elif serving != copy.owner:
                    # The owner handed its zone over (a leave, a move) and neither our drop request
                    # nor the news of its departure reached us (the neighbours asked were not those
                    # told): taken over, this copy would be a second owner of a zone someone serves.
                    log.info("peer %s: owner %s's zone is served by %s now; dropping its replica",
                             self.state.id, copy.owner, serving)
                    del self._copies[copy.owner]
                    await self.offload.run(self._discard, copy)
                    self.counters["replicas_dropped_served_elsewhere"] += 1
                    self.counters["replicas_held"] = len(self._copies)
                else:
                    copy.last_ok = trio.current_time()   # it answers for its zone after all

    async def _served_by(self, copy: _Copy) -> str | None:
        """The id of the peer that answers, as routing finds it, for the lowest corner of the
        owner's zone; None if none does within a few heartbeats (the owner crashed). A route
        that fails at once is asked again: while zones move, a dead end or a moment-old table
        says nothing of whether anybody serves the zone."""
        corner = tuple(lo for lo, _ in PeerState.from_json(copy.state).zone.bounds)
        with trio.move_on_after(self.heartbeat * 3):
            while True:
                try:
                    return Load.from_wire(await self.router.route(corner, Op.LOAD_LOCAL, Empty())).id
                except EventCloudError as exc:
                    log.debug("peer %s: who serves %s's zone: %s; asking again", self.state.id, copy.owner, exc)
                    await trio.sleep(self.heartbeat / 2)
        return None

    async def _indirect(self, copy: _Copy) -> str:
        """Ask up to two of the owner's neighbours whether they reach it: alive, departed or dead."""
        neighbours = copy.state.get("neighbours", [])
        asked = 0
        for record in neighbours:
            if record.get("id") in (self.state.id, copy.owner) or asked >= 2:
                continue
            asked += 1
            try:
                with trio.fail_after(self.heartbeat * 3):
                    result = ProbeResult.from_wire(await self.router.call(
                        record["address"], Op.PROBE, Probe(copy.owner, copy.state.get("address", ""))))
            except (*FAILED, EventCloudError, trio.TooSlowError):
                continue
            if result.departed:
                return "departed"
            if result.reachable:
                return "alive"
        return "dead"

    async def _join_decided(self, copy: _Copy) -> str:
        """For a copy made while its owner's join was committing ("stands" for any other): ask
        the splitter to let the split stand, as the owner would have. The copy holds all the
        owner had (it served nothing before its commit), so a split that stands is served from
        it; "undone" if the splitter refuses ("no join in progress": its undo took the half back,
        a stand-in would be a second owner), "unknown" while it does not decide (no answer, a
        fence, not serving yet). (A chaos run lost 13 events: an
        annex died with its host before its commit, its replica took its half over, and the
        splitter took the same half back.)"""
        joining = copy.state.get("joining")
        if not joining:
            return "stands"
        splitter, address = joining
        state = PeerState.from_json(copy.state)
        for where in await addresses_of(self.router, state, splitter, address, self.heartbeat, self.locate):
            if await self._ping(where, self.heartbeat, splitter) is None:   # (another peer on its old port)
                continue
            try:
                with trio.fail_after(self.heartbeat * 3):
                    await self.router.call(where, Op.JOIN_COMMIT, JoinCommit(copy.owner))
                return "stands"
            except RemoteError as exc:
                if exc.code is ErrorCode.NOT_FOUND:   # "no join in progress": undone
                    return "undone"
                continue   # fenced, not serving yet, or another error: it decided nothing
            except (*FAILED, trio.TooSlowError):
                continue
        return "unknown"

    async def _claimed(self, copy: _Copy) -> bool:
        """Whether the ownership authority gave us the zone: only once the owner's lease lapsed,
        and to one claimant. A replica that cannot reach the authority takes nothing over: cut
        off itself, it would depose a healthy owner (docs/reliability.md)."""
        try:
            won = await self.claim(copy.owner, copy.incarnation, copy.holder, copy.holder_address)
        except EventCloudError as exc:
            log.warning("peer %s: peer %s (%s) stopped answering, but its zone cannot be claimed now (%s); "
                        "it is not taken over", self.state.id, copy.owner, copy.state.get("address"), exc)
            self.counters["takeovers_unclaimed"] += 1
            return False
        if not won:
            why = await self.refusal(copy.owner, copy.incarnation, copy.holder, copy.holder_address) \
                if self.refusal else "refused"
            log.info("peer %s: peer %s does not answer us, but its zone is not ours to claim: %s; not taken over",
                     self.state.id, copy.owner, why)
            self.counters["takeovers_refused"] += 1
        return won

    async def _take_over(self, copy: _Copy) -> None:
        """Serve the crashed owner's zone from our copy, as a stand-in peer of the next incarnation."""
        del self._copies[copy.owner]
        incarnation = copy.incarnation + 1
        self._taken[copy.owner] = incarnation
        state = PeerState.from_json(copy.state)
        state.step(TakenOver(incarnation))   # no replica yet; a join committing is decided (`_join_decided`)
        log.warning("peer %s: peer %s (%s) stopped answering; taking its zone over (incarnation %d)",
                    self.state.id, copy.owner, copy.state.get("address"), incarnation)
        self.counters["takeovers"] += 1
        target = self.standins.standin_dir(copy.owner)
        if target is not None and copy.directory is not None:
            await self.offload.run(_move_copy, copy, target, state)
            await self.standins.start(data_dir=target, taking_over=True)
        else:
            await self.standins.start(state=state, store=copy.store, taking_over=True)


def _move_copy(copy: _Copy, target: Path, state: PeerState) -> None:
    """The replica's files become the stand-in's data directory (blocking)."""
    copy.store.close()
    assert copy.directory is not None
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    (copy.directory / "owner.json").unlink(missing_ok=True)
    copy.directory.rename(target)
    save_state(target, state)


def _check_state(owner: str, state: dict[str, Any] | None) -> None:
    """An owner's peer state is what a takeover starts from: junk is refused now, not met then."""
    try:
        parsed = PeerState.from_json(state)
    except (ValueError, KeyError, TypeError, AttributeError, EventCloudError) as exc:
        raise BadRequest(f"invalid peer state of {owner}: {exc}") from None
    if parsed.id != owner:
        raise BadRequest(f"the peer state sent for {owner} is that of {parsed.id}")
