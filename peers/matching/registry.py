"""The subscriptions stored on one peer: their records, parsed forms and the shared index.

A subscription is stored on every peer whose zone meets the box of its indexing pattern. The
registry keeps, in one place, what the other services ask about them: the record (id, text,
kind, entry peer, indexation time), the parsed `Subscription`, the shared
`SubscriptionIndex` that answers which of them an event or a quad concerns, and tombstones of
removed ids (so a late store for a removed subscription is ignored). Records persist in the
store, so they survive a restart.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import trio

from eventcloud.matching.index import SubscriptionIndex
from eventcloud.matching.ordering import SUBORDER
from eventcloud.matching.statistics import Statistics
from eventcloud.overlay import Box, CoordinateSpace, Point, Zone
from eventcloud.sparql.filters.operators import NO_OPERATORS, OperatorSet
from eventcloud.sparql.subscription import Subscription
from eventcloud.sparql.taxonomy import Taxonomy
from eventcloud.sparql.texts import pack, unpack
from eventcloud.wire.messages import SubscriptionRecord
from eventcloud.wire.parsed import subscription_from_wire, subscription_to_wire
from peers.store import AsyncStore, PeerState, drop_subscription, put_subscription
from peers.matching.parsing import parse_subscription_locked

__all__ = ["Stored", "Subscriptions", "parse_cached", "indexing_box"]


@lru_cache(maxsize=4096)
def parse_cached(text: str, operators: OperatorSet = NO_OPERATORS) -> Subscription:
    """A Subscription is immutable, so identical texts
    (popular subscriptions, or many peers in one test process) share one parse. FILTERs may
    call the peer's `operators` (every peer of an overlay has the same set)."""
    return parse_subscription_locked(text, operators)


def indexing_box(space: CoordinateSpace, sparql: str, operators: OperatorSet = NO_OPERATORS) -> Box:
    """The box of a subscription's indexing pattern: where it is stored (the peers whose zone meets it)."""
    return space.pattern_box(parse_cached(sparql, operators).pattern_terms(0))


@dataclass(frozen=True, slots=True)
class Stored:
    """One stored subscription: the fields of its record that delivery reads, its parsed form,
    and its text, compressed (`sparql.texts`: matching never reads it, and it was the largest
    part of a stored subscription). `record` rebuilds the whole record where the text is needed
    (a CSMA step, a hand-over, a listing)."""

    id: str
    kind: str
    entry: str
    t: int
    home: Point | None
    expires: int
    packed: bytes
    sub: Subscription

    @classmethod
    def of(cls, record: SubscriptionRecord, sub: Subscription, packed: bytes | None = None) -> "Stored":
        return cls(record.id, record.kind, record.entry, record.t, record.home, record.expires,
                   pack(record.sparql) if packed is None else packed, sub)

    @property
    def sparql(self) -> str:
        return unpack(self.packed)

    @property
    def record(self) -> SubscriptionRecord:
        return self.to_record()

    def to_record(self, parsed: Any = None) -> SubscriptionRecord:
        """The whole record again, text unpacked (and with `parsed`, its parsed form)."""
        return SubscriptionRecord(self.id, self.sparql, self.kind, self.entry, self.t, self.home, self.expires,
                                  parsed=parsed)


class Subscriptions:
    def __init__(self, state: PeerState, store: AsyncStore, counters: Counter[str], *, tombstone_ttl: float,
                 taxonomy: Taxonomy | None = None, operators: OperatorSet = NO_OPERATORS,
                 order: str = SUBORDER, statistics: Statistics | None = None) -> None:
        self.state = state
        self.store = store
        self.counters = counters
        self.tombstone_ttl = tombstone_ttl
        self.operators = operators
        self.index = SubscriptionIndex(taxonomy=taxonomy, order=order, statistics=statistics)
        self._stored: dict[str, Stored] = {}
        self._tombstones: dict[str, float] = {}
        for record in store.sync.subscriptions().values():
            try:
                self._put(SubscriptionRecord.from_wire(record))
            except Exception:  # an unreadable record from an older version: skip it, say so
                counters["subscriptions_unreadable"] += 1

    def __len__(self) -> int:
        return len(self._stored)

    def get(self, ident: str) -> Stored | None:
        return self._stored.get(ident)

    def __iter__(self):
        return iter(list(self._stored.values()))

    def box(self, sub: Subscription) -> Box:
        return self.state.space.pattern_box(sub.pattern_terms(0))

    def removed(self, ident: str) -> bool:
        return ident in self._tombstones

    @property
    def taxonomy(self) -> Taxonomy:
        """The class taxonomy this peer matches with (peers.matching.schema keeps it current)."""
        return self.index.taxonomy

    def set_taxonomy(self, taxonomy: Taxonomy) -> list[str]:
        """Match with `taxonomy` from now on: the subscriptions that read it are re-bound (their ids)."""
        rebound = self.index.set_taxonomy(taxonomy)
        for ident in rebound:
            stored = self._stored.get(ident)
            if stored is not None:  # its own text and projection, re-bound, sharing the rest again
                rebound_sub = stored.sub.with_taxonomy(taxonomy)
                self._stored[ident] = replace(stored, sub=self._share(rebound_sub, self.index.twin(rebound_sub)))
        return rebound

    def parse(self, record: SubscriptionRecord) -> Subscription:
        """The subscription, reading this peer's taxonomy: built from its parsed form when the
        record carries one (nothing parsed; without its text, which the record has and matching
        never reads), else parsed from its text (cached)."""
        if record.parsed is not None:
            self.counters["subscriptions_built"] += 1
            return subscription_from_wire(record.parsed, "", taxonomy=self.index.taxonomy, operators=self.operators)
        self.counters["subscriptions_parsed"] += 1
        return parse_cached(record.sparql, self.operators).with_taxonomy(self.index.taxonomy)

    def _put(self, record: SubscriptionRecord, sub: Subscription | None = None) -> Stored:
        # kept without its parsed form (the Subscription is what is used; `export` re-adds it),
        # with the strings many records repeat shared, and its text packed (one packed copy for
        # identical texts)
        sub = sub if sub is not None else self.parse(record)
        twin = self.index.twin(sub)
        sub = self._share(sub, twin)
        leader = self._stored.get(twin[0]) if twin is not None else None
        packed = leader.packed if leader is not None and leader.sparql == record.sparql else None
        stored = Stored.of(replace(record, kind=sys.intern(record.kind), entry=sys.intern(record.entry)), sub, packed)
        self._stored[record.id] = stored
        self.index.add(record.id, stored.sub)
        self.counters["subscriptions"] = len(self._stored)
        return stored

    def _share(self, sub: Subscription, twin: tuple[str, Subscription] | None) -> Subscription:
        """Identical subscriptions (popular queries: same graph term, patterns and FILTERs) held
        here share the patterns and compiled FILTERs of the one the index keeps their shared
        entry for (and `_put` its packed text when it is the same): each keeps only its own
        record and projection. (Shared objects also let OSMA decide once for all of them.)
        `twin`: what `SubscriptionIndex.twin` says of `sub`."""
        if twin is None or twin[1] is sub or (twin[1].patterns is sub.patterns and twin[1].filters is sub.filters):
            return sub
        return replace(sub, patterns=twin[1].patterns, filters=twin[1].filters)

    async def add(self, record: SubscriptionRecord, sub: Subscription | None = None) -> Stored | None:
        """Store a subscription here (persisted with its parsed form); None if it was removed meanwhile."""
        return (await self.add_many([(record, sub)]))[0]

    async def add_many(self, items: list[tuple[SubscriptionRecord, Subscription | None]]) -> list[Stored | None]:
        """`add` for each (record, parsed subscription or None), persisted in one write. A record
        that arrived with its parsed form is persisted as it came (what a restart builds from is
        what was built from here), not serialised again."""
        stored: list[Stored | None] = []
        writes = []
        for n, (record, sub) in enumerate(items):
            if n % 64 == 63:
                await trio.lowlevel.checkpoint()  # a multicast's thousand items must not hold the event loop
            if record.id in self._tombstones:
                stored.append(None)
                continue
            kept = self._put(record, sub)
            stored.append(kept)
            writes.append(put_subscription(record.id, (record if record.parsed is not None
                                                       else self.with_parsed(kept)).to_wire()))
        if writes:
            await self.store.write(writes)
        return stored

    @staticmethod
    def with_parsed(stored: Stored) -> SubscriptionRecord:
        """Its record with its parsed form: what is persisted and handed over."""
        return stored.to_record(subscription_to_wire(stored.sub))

    async def remove(self, ident: str) -> bool:
        """Forget a subscription (a tombstone keeps late copies of it out for `tombstone_ttl`)."""
        return (await self.remove_many([ident]))[0]

    async def remove_many(self, idents: list[str]) -> list[bool]:
        """Forget subscriptions, in one log write; whether each was held here."""
        now = trio.current_time()
        self._expire_tombstones(now)
        found = []
        for ident in idents:
            self._tombstones.pop(ident, None)   # re-added last: the dict stays in the order tombstones expire
            self._tombstones[ident] = now + self.tombstone_ttl
            found.append(self._stored.pop(ident, None) is not None)
            self.index.remove(ident)
        dropped = [drop_subscription(ident) for ident, held in zip(idents, found) if held]
        if dropped:
            await self.store.write(dropped)
            self.counters["subscriptions"] = len(self._stored)
        return found

    def homed_in(self, zone: Zone) -> int:
        """Subscriptions whose box's lowest corner `zone` holds: each is stored on every peer of
        its box but homed at exactly one, so these add up to the overlay's total."""
        return sum(1 for s in self._stored.values() if zone.contains(tuple(lo for lo, _ in self.box(s.sub))))

    def export(self, zone: Zone) -> list[SubscriptionRecord]:
        """Records of the subscriptions whose box meets `zone` (to hand over with it)."""
        return [self.with_parsed(s) for s in self._stored.values() if zone.intersects(self.box(s.sub))]

    async def prune(self, zone: Zone) -> None:
        """Drop the subscriptions whose box no longer meets this peer's `zone`."""
        gone = [s for s in self._stored.values() if not zone.intersects(self.box(s.sub))]
        for stored in gone:
            del self._stored[stored.id]
            self.index.remove(stored.id)
        if gone:
            await self.store.write([drop_subscription(s.id) for s in gone])
        self.counters["subscriptions"] = len(self._stored)

    async def install(self, records: tuple[SubscriptionRecord, ...] | list[SubscriptionRecord]) -> None:
        """Subscriptions handed over with a zone."""
        fresh = [self._put(r) for r in records if r.id not in self._tombstones]
        if fresh:
            await self.store.write([put_subscription(s.id, self.with_parsed(s).to_wire()) for s in fresh])

    async def renew(self, ident: str, expires: int) -> int:
        """A subscription's lease was extended (or set): 1 if stored here."""
        stored = self._stored.get(ident)
        if stored is None or stored.expires == expires:
            return 0
        renewed = self._put(replace(stored.record, expires=expires), stored.sub)
        await self.store.write([put_subscription(ident, self.with_parsed(renewed).to_wire())])
        return 1

    def lapsed_before(self, cutoff_ms: int) -> bool:
        """Whether a subscription's lease ended before `cutoff_ms` (what `expire` would drop)."""
        return any(0 < s.expires < cutoff_ms for s in self._stored.values())

    async def expire(self, cutoff_ms: int) -> int:
        """Drop the subscriptions whose lease ended before `cutoff_ms` (Unix ms): nobody renewed
        or removed them (their subscriber, entry peer or home is gone for good)."""
        gone = [s.id for s in self._stored.values() if 0 < s.expires < cutoff_ms]
        for ident in gone:
            await self.remove(ident)
        self.counters["subscriptions_lapsed"] += len(gone)
        return len(gone)

    def regex_timeouts(self) -> int:
        """How often stored subscriptions' REGEX patterns ran past their time budget."""
        return sum(r.timeouts for s in self._stored.values() for f in s.sub.filters for r in f.regexes)

    def _expire_tombstones(self, now: float) -> None:
        """Drop the tombstones past their time, oldest first: every removal adds one, so expiring
        as they are added keeps them to the removals of the last `tombstone_ttl` seconds, at O(1)
        per removal (they are kept in expiry order: one ttl, a clock that only goes forward)."""
        while self._tombstones:
            ident, until = next(iter(self._tombstones.items()))
            if until > now:
                return
            del self._tombstones[ident]
