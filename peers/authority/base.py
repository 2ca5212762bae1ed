"""The ownership authority's interface: a linearizable key-value store with leases, in etcd's shape.

Who owns a zone is decided here, never by a peer alone (docs/reliability.md). The interface is
the part of etcd's v3 API that ownership needs, so that etcd itself serves real deployments and
`LocalAuthority` (the same semantics in one process) serves the embedded default and the tests:

* a **lease** is granted for a TTL and kept alive; when the authority has not heard of it for
  its TTL (on the authority's clock: no peer compares its clock with another's), it expires and
  every key attached to it is deleted;
* a **transaction** applies its writes only if every condition holds, atomically, against the
  one linearizable history: the compare-and-set every change of ownership goes through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from eventcloud.errors import AuthorityUnreachable

__all__ = ["Authority", "Change", "Delete", "Entry", "Listing", "Put", "Same", "WatchCompacted"]


@dataclass(frozen=True)
class Entry:
    key: str
    value: str
    revision: int   # the authority's revision of its last change (etcd's mod_revision)
    lease: int      # the lease it is attached to; 0: none


@dataclass(frozen=True)
class Listing:
    """Every entry under a prefix, as of one revision of the authority: a watch from the revision
    after it misses nothing and repeats nothing."""

    entries: list[Entry]
    revision: int


@dataclass(frozen=True)
class Change:
    """One change a watch reports: the key's new entry, or (`deleted`) its removal, whose
    `entry.revision` is the deleting revision and whose value is empty."""

    entry: Entry
    deleted: bool = False


class WatchCompacted(AuthorityUnreachable):
    """A watch asked to start at a revision the authority no longer holds the history of (etcd
    compacted it, or a local watcher fell too far behind): list again, then watch from there."""


@dataclass(frozen=True)
class Same:
    """Condition: the key holds exactly `value` (None: the key is absent)."""

    key: str
    value: str | None


@dataclass(frozen=True)
class Put:
    key: str
    value: str
    lease: int = 0   # attached to this lease: deleted when it expires


@dataclass(frozen=True)
class Delete:
    key: str


class Authority(Protocol):
    """Every call may raise `AuthorityUnreachable` (nothing known of its outcome, as with any
    request whose reply was lost: callers re-read before they conclude)."""

    async def grant(self, ttl: int) -> int:
        """A new lease of `ttl` seconds; its id."""

    async def keep_alive(self, lease: int) -> int:
        """Renew a lease; its TTL again. `LeaseExpired` if the authority no longer knows it."""

    async def revoke(self, lease: int) -> None:
        """End a lease now (its keys go with it); one already gone is no error."""

    async def get(self, key: str) -> Entry | None: ...

    async def scan(self, prefix: str) -> list[Entry]:
        """Every entry whose key starts with `prefix`, in key order."""

    async def listing(self, prefix: str) -> Listing:
        """`scan(prefix)` with the revision it was read at."""

    async def watch(self, prefix: str, start: int, changed: Callable[[list[Change]], None], *,
                    quiet: float) -> None:
        """Call `changed` with each batch of changes to keys under `prefix` from revision `start`
        on (one batch per revision), in order, until nothing came for `quiet` seconds (then it
        returns: the caller watches again from the revision after the last it saw, so a stream
        silently lost is noticed). `AuthorityUnreachable` when the stream breaks; `WatchCompacted`
        when `start`'s history is gone."""

    async def transact(self, when: Sequence[Same], then: Sequence[Put | Delete]) -> bool:
        """Apply `then` if every condition of `when` holds, atomically; whether it did."""

    async def aclose(self) -> None: ...
