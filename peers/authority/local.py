"""The local ownership authority: etcd's semantics (linearizable transactions, leases expiring on
the authority's own clock) held in one process.

It serves the embedded default, where one machine fails as a whole anyway (`eventcloud cluster`
runs it in the supervising process and serves it over HTTP, peers/authority/server.py), and the
in-process tests, where every peer of an overlay is handed the same instance. One process holds
the only copy: it is exactly as available as that process, which is its documented limit
(docs/reliability.md); a deployment that needs more runs etcd.

Every call runs to its end without a checkpoint in between, so calls are atomic and ordered as
they arrive: a linearizable history. Leases expire lazily, at the next call that could observe
them, which no caller can tell apart from expiring on time.

Hosted by a peer (a lone `eventcloud peer` started without `--authority`, peers/authority/hosted.py)
it is saved to a file at each change of keys or leases, within the call (a few hundred bytes per
peer, written rarely: renewals change nothing saved), and restored with every lease given its
whole TTL again: a restart must not expire a live owner, and a dead one's lease lapses a TTL
later. Time the process spent stopped (SIGSTOP, a stalled machine) is `credit`ed to every lease
by its server, as etcd's leader does after an election: nobody could renew meanwhile.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import trio

from eventcloud.errors import BadRequest, LeaseExpired
from peers.authority.base import Change, Delete, Entry, Listing, Put, Same, WatchCompacted

__all__ = ["LocalAuthority"]

#: Changes kept for watches that start in the past (etcd keeps its history until compacted).
HISTORY = 4096
#: Batches a watcher may fall behind before it is dropped (it lists again: `WatchCompacted`).
WATCHER_BUFFER = 1024


@dataclass
class _Watcher:
    prefix: str
    send: trio.MemorySendChannel[list[Change]]


@dataclass
class _Lease:
    ttl: int
    deadline: float
    keys: set[str] = field(default_factory=set)


class LocalAuthority:
    def __init__(self, clock: Callable[[], float] = trio.current_time, *,
                 saved: dict[str, Any] | None = None, save: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._clock = clock
        self._entries: dict[str, Entry] = {}
        self._leases: dict[int, _Lease] = {}
        self._ids = itertools.count(1)
        self._issued = 0   # the last lease id handed out: never handed out again, restarts included
        self.revision = 0
        self._save = save   # called with `snapshot()` after each change of keys or leases
        self._history: deque[Change] = deque()
        self._forgotten = 0   # the last revision whose changes left the history
        self._pending: list[Change] = []   # the changes of the revision being applied
        self._watchers: list[_Watcher] = []
        if saved is not None:
            self._restore(saved)

    def snapshot(self) -> dict[str, Any]:
        """What a restart needs: the keys, their leases (with their TTLs), the revision."""
        return {"revision": self.revision, "next_lease": self._issued + 1,
                "leases": {str(k): lease.ttl for k, lease in self._leases.items()},
                "entries": [[e.key, e.value, e.revision, e.lease] for e in self._entries.values()]}

    def _restore(self, saved: dict[str, Any]) -> None:
        now = self._clock()
        self.revision = int(saved["revision"])
        self._issued = max(int(saved.get("next_lease", 1)), 1) - 1
        self._ids = itertools.count(self._issued + 1)
        self._forgotten = self.revision   # no history survives a restart
        self._leases = {int(k): _Lease(int(ttl), now + int(ttl)) for k, ttl in saved["leases"].items()}
        for key, value, revision, lease in saved["entries"]:
            self._entries[key] = Entry(key, value, int(revision), int(lease))
            if lease in self._leases:
                self._leases[lease].keys.add(key)

    def credit(self, seconds: float) -> None:
        """This process was stopped for `seconds`: no lease could be renewed meanwhile."""
        for lease in self._leases.values():
            lease.deadline += seconds

    def _changed(self) -> None:
        if self._save is not None:
            self._save(self.snapshot())

    # --- the interface ---------------------------------------------------------------------------

    async def grant(self, ttl: int) -> int:
        await trio.lowlevel.checkpoint()
        if ttl < 1:
            raise BadRequest(f"a lease's TTL is at least 1 s, not {ttl}")
        self._expire()
        lease = self._issued = next(self._ids)
        self._leases[lease] = _Lease(ttl, self._clock() + ttl)
        self._changed()
        return lease

    async def keep_alive(self, lease: int) -> int:
        await trio.lowlevel.checkpoint()
        self._expire()
        held = self._leases.get(lease)
        if held is None:
            raise LeaseExpired(f"lease {lease:x} expired (or was revoked): the authority no longer knows it")
        held.deadline = self._clock() + held.ttl
        return held.ttl

    async def revoke(self, lease: int) -> None:
        await trio.lowlevel.checkpoint()
        self._expire()
        held = self._leases.pop(lease, None)
        if held is not None:
            if held.keys:
                self.revision += 1
                self._drop(held.keys)
                self._published()
            self._changed()

    async def get(self, key: str) -> Entry | None:
        await trio.lowlevel.checkpoint()
        self._expire()
        return self._entries.get(key)

    async def scan(self, prefix: str) -> list[Entry]:
        await trio.lowlevel.checkpoint()
        self._expire()
        return [self._entries[k] for k in sorted(self._entries) if k.startswith(prefix)]

    async def listing(self, prefix: str) -> Listing:
        await trio.lowlevel.checkpoint()
        self._expire()
        return Listing([self._entries[k] for k in sorted(self._entries) if k.startswith(prefix)], self.revision)

    async def watch(self, prefix: str, start: int, changed: Callable[[list[Change]], None], *,
                    quiet: float) -> None:
        self._expire()
        if start <= self._forgotten:
            raise WatchCompacted(f"the changes up to revision {self._forgotten} are no longer held; "
                                 f"a watch from {start} must list again")
        send, receive = trio.open_memory_channel[list[Change]](WATCHER_BUFFER)
        watcher = _Watcher(prefix, send)
        self._watchers.append(watcher)
        try:
            past = [c for c in self._history if c.entry.revision >= start and c.entry.key.startswith(prefix)]
            for _, batch in itertools.groupby(past, key=lambda c: c.entry.revision):
                changed(list(batch))
            with receive:
                while True:
                    with trio.move_on_after(quiet) as waited:
                        try:
                            batch = await receive.receive()
                        except trio.EndOfChannel:
                            raise WatchCompacted(f"this watch of {prefix!r} fell {WATCHER_BUFFER} changes behind "
                                                 "and was dropped") from None
                    if waited.cancelled_caught:
                        return
                    changed(batch)
        finally:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

    async def transact(self, when: Sequence[Same], then: Sequence[Put | Delete]) -> bool:
        await trio.lowlevel.checkpoint()
        self._expire()
        for put in then:
            if isinstance(put, Put) and put.lease and put.lease not in self._leases:
                raise LeaseExpired(f"lease {put.lease:x} expired (or was revoked): nothing can be attached to it")
        if not all(self._holds(condition) for condition in when):
            return False
        self.revision += 1
        for change in then:
            if isinstance(change, Delete):
                self._drop({change.key})
                continue
            old = self._entries.get(change.key)
            if old is not None and old.lease in self._leases:
                self._leases[old.lease].keys.discard(change.key)
            self._entries[change.key] = Entry(change.key, change.value, self.revision, change.lease)
            self._pending.append(Change(self._entries[change.key]))
            if change.lease:
                self._leases[change.lease].keys.add(change.key)
        self._published()
        self._changed()
        return True

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()

    # --- what the HTTP server needs besides -------------------------------------------------------

    def expire_due(self) -> None:
        """Expire the leases due now (the server's ticker calls it, so that a watch reports a lapse
        when it happens rather than at the next call)."""
        self._expire()

    def remaining(self, lease: int) -> int:
        """Whole seconds left on a lease (-1: unknown), as etcd's TimeToLive reports them."""
        self._expire()
        held = self._leases.get(lease)
        return -1 if held is None else max(0, int(held.deadline - self._clock()))

    # --- inside ----------------------------------------------------------------------------------

    def _holds(self, condition: Same) -> bool:
        entry = self._entries.get(condition.key)
        return entry is None if condition.value is None else entry is not None and entry.value == condition.value

    def _expire(self) -> None:
        now = self._clock()
        expired = False
        for lease, held in list(self._leases.items()):
            if held.deadline <= now:
                del self._leases[lease]
                expired = True
                if held.keys:
                    self.revision += 1
                    self._drop(held.keys)
                    self._published()
        if expired:
            self._changed()

    def _drop(self, keys: set[str]) -> None:
        for key in list(keys):
            entry = self._entries.pop(key, None)
            if entry is not None and entry.lease in self._leases:
                self._leases[entry.lease].keys.discard(key)
            if entry is not None:
                self._pending.append(Change(Entry(key, "", self.revision, 0), deleted=True))

    def _published(self) -> None:
        """The changes of this revision go to the history and to every watcher of their keys; a
        watcher too far behind is dropped (its watch ends, and it lists again)."""
        changes, self._pending = self._pending, []
        if not changes:
            return
        self._history.extend(changes)
        while len(self._history) > HISTORY:
            self._forgotten = self._history.popleft().entry.revision
        for watcher in list(self._watchers):
            mine = [c for c in changes if c.entry.key.startswith(watcher.prefix)]
            if not mine:
                continue
            try:
                watcher.send.send_nowait(mine)
            except (trio.WouldBlock, trio.BrokenResourceError):   # behind, or its watch ended
                watcher.send.close()
                self._watchers.remove(watcher)
