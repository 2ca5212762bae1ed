"""The mailboxes of durable subscriptions: what a subscription's home peer keeps for it.

A durable subscription has a *home*: the owner of a point derived from its id. The home keeps
its mailbox: the subscription's record (text, kind, a hash of its ticket, lease expiry,
retention limits), and the notifications not yet acknowledged, each with a sequence number
1, 2, 3, … assigned in the order the home accepted them. A mailbox changes only by store
mutations (`box`, `put`, `ack`, `lease`, `end`, `forget`, `install`), so it is logged, replayed,
replicated and handed over like any other data of a zone; this module applies them and does
no I/O.

Rules, for every copy alike (they depend only on the mutations):

* `put` carries its sequence number (chosen by the home before writing), so a replica and a
  replay number notifications the same way; a graph already in the mailbox (a retried
  notification) or a number already used is ignored.
* Retention is bounded in count and bytes: past either, the oldest unacknowledged
  notifications are dropped and `dropped_until` remembers the highest number dropped, so a
  subscriber that resumes before it gets a *gap* notice instead of silence.
* `ack` drops what the subscriber acknowledged. Graphs of delivered notifications are
  remembered (for duplicates) for `seen_ms` of publication time, and at most SEEN_LIMIT.
* `end` (lease expired, cancelled) drops the notifications and keeps a tombstone with the
  reason, so a late resume is told why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack

__all__ = ["Mailbox", "Mailboxes", "Fetched", "SEEN_LIMIT", "box", "put", "ack", "lease", "end", "forget", "install"]

#: Graphs remembered per mailbox to recognise a retried notification (the oldest go first).
SEEN_LIMIT = 200_000


# --- mutations (msgpack-able lists, checked by peers.store.peer_store.check_mutation) ----------------------

def box(ident: str, record: dict[str, Any]) -> list:
    """Open a mailbox (or update the record of an open one)."""
    return ["box", ident, record]


def put(ident: str, seq: int, graph: str, published_ms: int, note: bytes) -> list:
    return ["put", ident, seq, graph, published_ms, note]


def ack(ident: str, seq: int) -> list:
    return ["ack", ident, seq]


def lease(ident: str, expires_ms: int) -> list:
    return ["lease", ident, expires_ms]


def end(ident: str, reason: str, at_ms: int) -> list:
    return ["end", ident, reason, at_ms]


def forget(ident: str) -> list:
    return ["forget", ident]


def install(packed: bytes) -> list:
    """A whole mailbox handed over with a zone (or copied to a replica)."""
    return ["install", packed]


SHAPES: dict[str, tuple[type, ...]] = {
    "box": (str, dict), "put": (str, int, str, int, bytes), "ack": (str, int), "lease": (str, int),
    "end": (str, str, int), "forget": (str,), "install": (bytes,),
}


@dataclass
class Mailbox:
    id: str
    record: dict[str, Any]                 # sparql, kind, ticket (hash), home, t, expires, limits
    next_seq: int = 1
    acked: int = 0
    dropped_until: int = 0                 # highest number dropped unacknowledged (retention)
    dropped: int = 0                       # how many were dropped so
    size: int = 0                          # bytes retained
    retained: dict[int, tuple[str, int, bytes]] = field(default_factory=dict)  # seq -> (graph, ms, note)
    seen: dict[str, int] = field(default_factory=dict)                       # graph -> published ms
    ended: str = ""                        # why it ended ("" while active)
    ended_at: int = 0

    @property
    def expires(self) -> int:
        return int(self.record.get("expires", 0))

    @property
    def last(self) -> int:
        """The number of the newest notification accepted."""
        return self.next_seq - 1

    def to_wire(self) -> list[Any]:
        return [self.id, self.record, self.next_seq, self.acked, self.dropped_until, self.dropped,
                [[seq, *entry] for seq, entry in self.retained.items()], list(self.seen.items()), self.ended,
                self.ended_at]

    @classmethod
    def from_wire(cls, data: list[Any]) -> "Mailbox":
        ident, record, next_seq, acked, dropped_until, dropped, retained, seen, ended, ended_at = data
        mailbox = cls(ident, dict(record), next_seq, acked, dropped_until, dropped, ended=ended, ended_at=ended_at)
        for seq, graph, ms, note in retained:
            mailbox.retained[seq] = (graph, ms, note)
            mailbox.size += len(note)
        mailbox.seen = {graph: ms for graph, ms in seen}
        return mailbox

    def pack(self) -> bytes:
        return msgpack.packb(self.to_wire(), use_bin_type=True)

    @classmethod
    def unpack(cls, data: bytes) -> "Mailbox":
        return cls.from_wire(msgpack.unpackb(data, raw=False))


@dataclass(frozen=True)
class Fetched:
    """Notifications after a sequence number: a gap first when some were dropped."""

    notes: list[tuple[int, bytes]]
    gap: tuple[int, int] | None   # (first, last) numbers dropped before delivery
    more: bool                    # the byte budget ended the batch early


class Mailboxes:
    """Every mailbox a store holds, changed by mutations only."""

    def __init__(self) -> None:
        self._boxes: dict[str, Mailbox] = {}
        self.dirty = False

    def __len__(self) -> int:
        return len(self._boxes)

    def __contains__(self, ident: object) -> bool:
        return ident in self._boxes

    def get(self, ident: str) -> Mailbox | None:
        return self._boxes.get(ident)

    def all(self) -> list[Mailbox]:
        return list(self._boxes.values())

    def apply(self, mutation: list) -> Any:
        kind, args = mutation[0], mutation[1:]
        self.dirty = True
        return self._appliers[kind](*args)

    @property
    def _appliers(self) -> dict[str, Any]:
        """Each mutation kind (the constructors above) and the method applying it."""
        return {"box": self._box, "put": self._put, "ack": self._ack, "lease": self._lease, "end": self._end,
                "forget": self._forget, "install": self._install}

    def _box(self, ident: str, record: dict[str, Any]) -> bool:
        found = self._boxes.get(ident)
        if found is None:
            self._boxes[ident] = Mailbox(ident, dict(record))
            return True
        if found.ended:
            return False
        found.record = dict(record)
        return True

    def _put(self, ident: str, seq: int, graph: str, published_ms: int, note: bytes) -> bool:
        found = self._boxes.get(ident)
        if found is None or found.ended or graph in found.seen or seq < found.next_seq:
            return False
        found.retained[seq] = (graph, published_ms, note)
        found.size += len(note)
        found.next_seq = seq + 1
        found.seen[graph] = published_ms
        self._retain(found)
        self._forget_old_graphs(found, published_ms)
        return True

    @staticmethod
    def _retain(found: Mailbox) -> None:
        count = int(found.record.get("retain_count", 10_000))
        limit = int(found.record.get("retain_bytes", 16 * 1024 * 1024))
        while len(found.retained) > 1 and (len(found.retained) > count or found.size > limit):
            seq = next(iter(found.retained))
            _, _, note = found.retained.pop(seq)
            found.size -= len(note)
            found.dropped_until = seq
            found.dropped += 1

    @staticmethod
    def _forget_old_graphs(found: Mailbox, newest_ms: int) -> None:
        horizon = newest_ms - int(found.record.get("seen_ms", 1_200_000))
        seen = found.seen
        while seen:
            graph, ms = next(iter(seen.items()))
            if ms >= horizon and len(seen) <= SEEN_LIMIT:
                break
            del seen[graph]

    def _ack(self, ident: str, seq: int) -> int:
        found = self._boxes.get(ident)
        if found is None or found.ended:
            return 0
        found.acked = max(found.acked, min(seq, found.last))
        while found.retained:
            first = next(iter(found.retained))
            if first > found.acked:
                break
            found.size -= len(found.retained.pop(first)[2])
        return found.acked

    def _lease(self, ident: str, expires_ms: int) -> bool:
        found = self._boxes.get(ident)
        if found is None or found.ended:
            return False
        found.record["expires"] = expires_ms
        return True

    def _end(self, ident: str, reason: str, at_ms: int) -> bool:
        found = self._boxes.get(ident)
        if found is None or found.ended:
            return False
        found.ended, found.ended_at = reason, at_ms
        found.retained.clear()
        found.seen.clear()
        found.size = 0
        return True

    def _forget(self, ident: str) -> bool:
        return self._boxes.pop(ident, None) is not None

    def _install(self, packed: bytes) -> bool:
        incoming = Mailbox.unpack(packed)
        found = self._boxes.get(incoming.id)
        if found is not None and (found.ended or found.next_seq > incoming.next_seq):
            return False  # what we hold is as far along (a replayed or repeated handover)
        self._boxes[incoming.id] = incoming
        return True

    # --- reads ----------------------------------------------------------------------------------

    def fetch(self, ident: str, after: int, budget: int) -> Fetched:
        """Notifications numbered above `after`, in order, up to about `budget` bytes (at least one)."""
        found = self._boxes[ident]
        gap = (after + 1, found.dropped_until) if after < found.dropped_until else None
        notes: list[tuple[int, bytes]] = []
        used = 0
        more = False
        for seq, (_, _, note) in found.retained.items():
            if seq <= after:
                continue
            if notes and used + len(note) > budget:
                more = True
                break
            notes.append((seq, note))
            used += len(note)
        return Fetched(notes, gap, more)

    def dump(self) -> bytes:
        return msgpack.packb([b.to_wire() for b in self._boxes.values()], use_bin_type=True)

    def load(self, data: bytes) -> None:
        self._boxes = {b.id: b for b in (Mailbox.from_wire(item) for item in msgpack.unpackb(data, raw=False))}
        self.dirty = False
