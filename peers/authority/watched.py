"""The zone map as the ownership authority holds it, cached in each runtime and kept by a watch.

The data plane never waits on the authority (docs/reliability.md): where a zone is served now
(`Ownership.server_of`, which routing asks when a neighbour goes silent, a hand-over's heir, a
splitter's newcomer) is answered from this cache while its watch is live, and a zone that moves
(a stand-in took it over, its owner restarted on another port) is told to the runtime at once
(`moves`), which checks it with the peer itself and repoints its table, rather than waiting for
the next stabilisation round or for a request to time out at the old address.

It lists the overlay's keys once (`Authority.listing`), then watches from the revision after:
every change in order, nothing missed. A stream that breaks, or stays quiet for `quiet` seconds
(a connection lost without a word looks like that), is watched again from the revision reached;
a history no longer held (`WatchCompacted`) is listed again. Until it has listed, and while it
cannot reach the authority, it is not `synced` and callers read the authority as before.
Decisions (claims, splits, leaves) never read this cache: they are transactions.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Callable

import trio

from eventcloud.errors import AuthorityUnreachable
from peers.authority.base import Authority, Change, Entry, WatchCompacted

__all__ = ["Moved", "WatchedZoneMap", "served_at"]

log = logging.getLogger(__name__)

#: Seconds a watch may stay silent before it is opened again (etcd sends nothing while nothing changes).
QUIET = 30.0
#: Zone moves told to the runtime and not yet taken: past this, the oldest are left to stabilisation.
MOVES_BUFFER = 64

Moved = tuple[str, str, int]   # (zone id, the address serving it now, its incarnation there)


class WatchedZoneMap:
    def __init__(self, authority: Authority | None, overlay: Callable[[], str], counters: Counter[str], *,
                 quiet: float = QUIET, retry: float = 1.0) -> None:
        self.authority = authority
        self.overlay = overlay        # the overlay's name: its keys' prefix (known once joined or founded)
        self.counters = counters
        self.quiet = quiet
        self.retry = retry
        self.synced = False           # the cache holds the authority's map as of `revision`
        self.revision = 0
        self._entries: dict[str, Entry] = {}
        self._send_moves, self._moves = trio.open_memory_channel[Moved](MOVES_BUFFER)

    def _prefix(self) -> str:
        return f"eventcloud/{self.overlay()}/"

    # --- what the runtime reads ----------------------------------------------------------------

    def server_of(self, ident: str) -> tuple[str, int] | None:
        """Where `ident`'s zone is served, as its server registered it (address, incarnation);
        None if nobody holds it now (or the record is not one). Meaningful only while `synced`."""
        entry = self._entries.get(f"{self._prefix()}owner/{ident}")
        return _served(entry) if entry is not None else None

    def epoch_of(self, ident: str) -> int | None:
        entry = self._entries.get(f"{self._prefix()}epoch/{ident}")
        try:
            return int(entry.value) if entry is not None else None
        except ValueError:
            return None

    def boxes(self) -> dict[str, str]:
        """Each zone's box as the authority's zone map records it (zone id -> its box, as stored)."""
        start = f"{self._prefix()}zone/"
        return {key[len(start):]: entry.value for key, entry in self._entries.items() if key.startswith(start)}

    @property
    def moves(self) -> trio.MemoryReceiveChannel[Moved]:
        """Zones whose server changed (to an address where it serves): hints to verify."""
        return self._moves

    # --- keeping it ----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        if self.authority is None:
            await trio.sleep_forever()
        assert self.authority is not None
        listed = False
        while True:
            try:
                if not listed:
                    await self._list()
                    listed = True
                await self.authority.watch(self._prefix(), self.revision + 1, self._apply, quiet=self.quiet)
                self.counters["zone_map_watches_renewed"] += 1   # quiet: opened again from where it was
            except WatchCompacted as exc:
                log.info("the zone map's watch lost its history (%s): listed again", exc)
                self.counters["zone_map_listed_again"] += 1
                listed = self.synced = False
            except AuthorityUnreachable:
                self.counters["zone_map_watch_broken"] += 1
                self.synced = False
                await trio.sleep(self.retry)

    async def _list(self) -> None:
        assert self.authority is not None
        listing = await self.authority.listing(self._prefix())
        before = self._entries
        self._entries = {entry.key: entry for entry in listing.entries}
        self.revision = listing.revision
        self.synced = True
        if before:   # listed again after a lost history: what changed meanwhile is told as changes are
            for key, entry in self._entries.items():
                old = before.get(key)
                if old is None or old.value != entry.value:
                    self._told(key, entry)

    def _apply(self, changes: list[Change]) -> None:
        for change in changes:   # each past `revision`: a watch starts at the revision after it
            key, entry = change.entry.key, change.entry
            if change.deleted:
                self._entries.pop(key, None)
            else:
                self._entries[key] = entry
                self._told(key, entry)
            self.revision = max(self.revision, entry.revision)
        self.synced = True
        self.counters["zone_map_changes"] += len(changes)

    def _told(self, key: str, entry: Entry) -> None:
        """An owner record that names an address: a zone served there now, for the runtime to check."""
        start = f"{self._prefix()}owner/"
        if not key.startswith(start):
            return
        served = _served(entry)
        if served is None:
            return
        try:
            self._send_moves.send_nowait((key[len(start):], *served))
        except trio.WouldBlock:
            self.counters["zone_map_moves_left_to_stabilisation"] += 1


def served_at(entry: Entry) -> tuple[str, int] | None:
    """An owner record's (address, incarnation); None while claimed (its stand-in is not serving
    yet). `ValueError` if the record is not one."""
    try:
        record = json.loads(entry.value)
        address, incarnation = str(record["address"]), int(record["incarnation"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not an owner record: {exc}") from None
    return (address, incarnation) if address else None


def _served(entry: Entry) -> tuple[str, int] | None:
    try:
        return served_at(entry)
    except ValueError:
        return None
