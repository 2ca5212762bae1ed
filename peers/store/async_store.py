"""The peer store as services use it: off the event loop, concurrent writes sharing one fsync.

`PeerStore` blocks (pyoxigraph on RocksDB, the log's fsync); `AsyncStore` runs its calls in one
worker thread at a time, groups the writes that queue meanwhile into one log append and fsync
(group commit), applies writes that need no disk wait right away, and checkpoints the log once
it grows past `checkpoint_bytes`. A checkpoint writes RocksDB's memtables to its files and
empties our log (RocksDB's own log is deleted only when the store is reopened: pyoxigraph 0.5.13).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, Sequence

import trio

from eventcloud.errors import ErrorCode
from eventcloud.rdf.model import IRI, Quad, Term
from peers.store.mutations import Mutation
from peers.store.offload import Offload
from peers.store.peer_store import MEMORY_ONLY, EventInfo, PeerStore, StoreError

__all__ = ["AsyncStore", "CHECKPOINT_BYTES"]

#: Bytes of log after which a store is checkpointed.
CHECKPOINT_BYTES = 32 * 1024 * 1024


class _Write:
    __slots__ = ("mutations", "durable", "result", "error", "done", "finished")

    def __init__(self, mutations: list[Mutation], durable: bool) -> None:
        self.mutations = mutations
        self.durable = durable
        self.result: list[Any] = []
        self.error: BaseException | None = None
        self.done = False
        self.finished = trio.Event()

    def end(self, result: list[Any], error: BaseException | None = None) -> None:
        self.result, self.error, self.done = result, error, True
        self.finished.set()


class AsyncStore:
    """A PeerStore whose blocking calls run in a worker thread (one at a time), off the event loop.
    Concurrent writes share one fsync; the log is checkpointed once it passes `checkpoint_bytes`."""

    def __init__(self, store: PeerStore, offload: bool, *, checkpoint_bytes: int = CHECKPOINT_BYTES) -> None:
        self.sync = store
        self._offload = Offload(offload, 1)
        self._queue: list[_Write] = []
        self._writing = trio.Lock()
        self.checkpoint_bytes = checkpoint_bytes

    async def run(self, fn: Any, *args: Any) -> Any:
        return await self._offload.run(fn, *args)

    async def write(self, mutations: list[Mutation], *, durable: bool = True) -> list[Any]:
        """Apply mutations, logged (and fsynced, and on the replica, when `durable`) before this
        returns; their results. Non-durable writes are for marks a crash can derive again."""
        if not self._queue and not self._writing.locked() and self._applies_now(mutations, durable):
            # Nothing queued or being written, and nothing to wait for: applied here and now,
            # without the lock's checkpoint and the group's bookkeeping (most writes at R = 1
            # without fsync, and the commit and notified marks always).
            result = self._apply_now([mutations], durable)[0]
            if self.sync.log_size > self.checkpoint_bytes:
                await self.checkpoint()
            return result
        job = _Write(mutations, durable)
        self._queue.append(job)
        try:
            await self._writing.acquire()
        except BaseException:
            # Cancelled while waiting its turn: never applied, or applied before this returns.
            # Left queued, the next group applied it after this caller had gone (past the zone
            # guard it held, so past a split's snapshot: a quad stored twice, one copy outside its
            # peer's zone, for good). Taken into another task's group, it is under way: waited for.
            if job in self._queue:
                self._queue.remove(job)
            elif not job.done:
                with trio.CancelScope(shield=True):
                    await job.finished.wait()
            raise
        try:
            if not job.done:
                jobs, self._queue = self._queue, []
                try:
                    results = await self._commit([(j.mutations, j.durable) for j in jobs])
                except Exception as exc:  # shared by every write of the group
                    for j in jobs:
                        j.end([], exc)
                except BaseException:
                    # This task was cancelled while it carried the others' writes: they get a typed
                    # error of their own. Handing them its Cancelled would cancel tasks nobody
                    # cancelled, and a nursery ends quietly on a Cancelled (a matcher whose workers
                    # all stopped so, while the peer went on serving, notified nothing more).
                    for j in jobs:
                        j.end([], StoreError("the write carrying this one was interrupted: it may or may not be "
                                             "durable; retry", ErrorCode.UNAVAILABLE) if j is not job else None)
                    raise
                else:
                    for j, result in zip(jobs, results):
                        j.end(result)
                if self.sync.log_size > self.checkpoint_bytes:
                    await self.run(self.sync.checkpoint)
        finally:
            self._writing.release()
        if job.error is not None:
            raise job.error
        return job.result

    def fence(self) -> None:
        """Raise `Fenced` unless this peer may acknowledge writes to its zone now (always, here: a
        replicated store asks the ownership authority's lease, peers/replication/owner.py)."""

    @asynccontextmanager
    async def writes_paused(self) -> AsyncIterator[None]:
        """No group of writes is under way while this is held (writes queue meanwhile): a copy of
        the store taken inside holds every write applied before, and none is half-applied. The
        task carrying a group of writes holds it already."""
        if self._writing.statistics().owner is trio.lowlevel.current_task():
            yield
            return
        async with self._writing:
            yield

    async def _commit(self, jobs: list[tuple[list[Mutation], bool]]) -> list[list[Any]]:
        """Where a group of writes goes (here: the local log and store). A group of marks only
        (commit, notified: in-memory metadata and an unsynced append), or any group when the
        store does not fsync, is applied right here: without a wait for the disk, a thread hop
        costs more than the work (the GIL changes hands twice; +37% publications/s at R = 1
        without fsync)."""
        batches = [m for m, _ in jobs]
        durable = any(d for _, d in jobs)
        if all(AsyncStore._applies_now(self, b, durable) for b in batches):
            return self.sync.write_many(batches, durable)
        results = await self.run(self.sync.write_many, batches, durable, True)
        self.sync.apply_mailboxes(batches, results)  # here, in the event loop that reads them
        return results

    def _applies_now(self, mutations: list[Mutation], durable: bool) -> bool:
        """Whether a write waits for nothing (no fsync: the store does not sync, or it is marks
        only, which are never synced), so that it is applied in the event loop."""
        return not self.sync.syncs or (not durable and all(m[0] in MEMORY_ONLY for m in mutations))

    def _apply_now(self, batches: list[list[Mutation]], durable: bool) -> list[list[Any]]:
        return self.sync.write_many(batches, durable)

    # cheap in-memory reads stay synchronous
    def event_info(self, graph: IRI | str) -> EventInfo | None:
        return self.sync.event_info(graph)

    def events(self) -> dict[str, EventInfo]:
        return self.sync.events()

    def count(self) -> int:
        return self.sync.count()

    def held(self) -> int:
        return self.sync.held()

    async def find(self, g: Term | None, s: Term | None, p: Term | None, o: Term | None, *,
                   committed_only: bool = False) -> list[Quad]:
        return await self.run(self.sync.find_list, g, s, p, o, committed_only)

    async def sample(self, pick: Callable[[list[Any]], Sequence[Any]]) -> list[Quad]:
        return await self.run(self.sync.sample, pick)

    async def checkpoint(self) -> None:
        async with self._writing:
            await self.run(self.sync.checkpoint)
