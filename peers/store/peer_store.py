"""A peer's on-disk store: its quads, per-event metadata, subscriptions and commit decisions.

Quads live in their own named graph (the event's graph IRI), so one-time SPARQL and deletion
by event are native (pyoxigraph). Reserved graphs hold what the overlay needs besides the
data: per event its size, publication time, whether it is committed (visible) or still
pending, whether its notifications were done here, and the quads held here; the
subscriptions indexed on this peer; and the commit decisions this peer took as an entry
peer. Nothing here knows about zones or the network.

Every change is a *mutation* (a msgpack-able list, see `Mutation`), written first to the
write-ahead log (fsynced) and then applied; mutations are idempotent, so the log replays
safely after a crash, and the same lists are what a replica receives. Reads of event
metadata are in memory.

`PeerStore` is synchronous (pyoxigraph on RocksDB blocks); services reach it through
`peers.store.async_store.AsyncStore`, which runs calls in a worker thread, one at a time, groups
concurrent writes into one fsync, and checkpoints the log.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import msgpack
import pyoxigraph as ox

from eventcloud.errors import ErrorCode, EventCloudError
from eventcloud.rdf.model import IRI, Literal, Quad, Term
from eventcloud.rdf.oxigraph import quad_from_ox, quad_to_ox, to_ox
from eventcloud.wire.codec import triple_from_wire, trusted_iri
from peers.store import mailboxes as mb
from peers.store.mutations import (
    RESERVED_GRAPHS, SUBSCRIPTIONS_GRAPH, Attempt, Mutation, abort, add, attempts_of,
    check_mutation, commit, decide, delete, drop_subscription, notified, put_subscription, remove, with_attempts,
)
from peers.store.sparql_rows import iter_rows, query_rows
from peers.store.records import INFO, OLD_PUBLISHED, OLD_SIZE, Records, holds_any
from peers.store.wal import WriteAheadLog

__all__ = ["EventInfo", "PeerStore", "StoreError", "write_atomically", "query_rows", "Mutation", "add", "commit",
           "notified", "abort", "delete", "remove", "put_subscription", "drop_subscription", "decide"]

_RECORD = ox.NamedNode("urn:eventcloud:record")
#: The key prefix of a graph IRI's claim among the decisions (peers/publish/claims.py).
CLAIM_PREFIX = "claim:"
_SUBS = ox.NamedNode(SUBSCRIPTIONS_GRAPH)

#: Mutations that change only in-memory metadata (the store gets it at the next checkpoint).
MEMORY_ONLY = frozenset({"commit", "notified"})


class StoreError(EventCloudError):
    """The store cannot take a write (disk full, I/O error): nothing of that write is acknowledged."""

    default_code = ErrorCode.UNAVAILABLE


@dataclass(frozen=True, slots=True)
class EventInfo:
    """What a peer knows of an event some of whose quads it holds."""

    size: int                          # quads in the whole event
    published: int                     # publication time (hybrid clock)
    committed: bool = True             # visible to queries and matched (else pending)
    notified: bool = False             # matching and notifications done by this peer
    tx: tuple[Attempt, ...] | None = None  # while pending: the attempts it waits on (`attempts_of`)
    held: int = 0                      # quads of it stored here

    def to_json(self) -> list[Any]:
        return [self.size, self.published, self.committed, self.notified,
                [[key, list(point)] for key, point in self.tx] if self.tx else None, self.held]

    @classmethod
    def from_json(cls, data: list[Any]) -> "EventInfo":
        size, published, committed, notified, tx, held = data
        return cls(size, published, committed, notified, attempts_of(tx) or None, held)


#: Mutations that change how many quads an event holds here.
_COUNTED = frozenset({"add", "remove", "abort", "delete"})


class PeerStore:
    """The persistent part of one peer. `path=None` keeps everything in memory (tests)."""

    def __init__(self, path: str | Path | None, *, durable: bool = True) -> None:
        self.path = Path(path) if path is not None else None
        #: does a write wait for the disk (an fsync)? If not, a write is memory work: the log's
        #: append goes to the page cache, the store's to its memtable
        self.syncs = durable and self.path is not None
        self._wal: WriteAheadLog | None = None
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            self._store = ox.Store(str(self.path))
        else:
            self._store = ox.Store()
        self._records = Records(self.path / "records" if self.path is not None else None)
        self._events: dict[str, EventInfo] = {}
        self._dirty: set[str] = set()   # events whose metadata the store does not have yet
        self._decisions: dict[str, tuple[str, list[str]]] = {}
        self.claims = 0   # of the decisions, graph IRIs' claims (peers/publish/claims.py)
        self.mailboxes = mb.Mailboxes()  # of durable subscriptions homed here; a file at checkpoints
        # subscription records stored here (id -> record): a file at checkpoints, the log between
        self._subs: dict[str, dict[str, Any]] = {}
        self._subs_dirty = False
        self._legacy_subs = False   # records in the store's subscription graph (an older layout)
        self.committed_quads = 0
        self.pending_quads = 0
        #: the largest arrival stamp of an event held here (a subscription stamped later has
        #: nothing stored here to catch up on)
        self.latest_published = 0
        self._load()
        if self.path is not None:
            self._wal = WriteAheadLog(self.path / "wal", durable=durable)
            replayed: set[str] = set()
            for batch in self._wal.replay():  # changes acknowledged but maybe not in the store yet
                for mutation in batch:
                    self._apply(mutation)
                    if mutation[0] in _COUNTED:
                        replayed.add(mutation[1])
            self._recount(replayed)
            self.checkpoint()

    def _load(self) -> None:
        old: dict[str, list[int]] = {}
        self._records.carry_over(self._store)
        for quad in self._records.event_quads():
            graph = quad.subject.value
            if quad.predicate == INFO:
                info = self._events[graph] = EventInfo.from_json(json.loads(quad.object.value))
                self.latest_published = max(self.latest_published, info.published)
            else:
                slot = old.setdefault(graph, [0, 0])
                slot[0 if quad.predicate == OLD_SIZE else 1] = int(quad.object.value)
        for graph, (size, published) in old.items():
            if graph not in self._events:
                held = sum(1 for _ in self._store.quads_for_pattern(None, None, None, ox.NamedNode(graph)))
                self._put_info(graph, EventInfo(size, published, held=held))
        for key, recorded in self._records.decisions():
            decision, point = json.loads(recorded)
            self._decisions[key] = (decision, point)
        self.claims = sum(1 for key in self._decisions if key.startswith(CLAIM_PREFIX))
        for quad in self._store.quads_for_pattern(None, _RECORD, None, _SUBS):
            self._subs[quad.subject.value.rsplit(":", 1)[1]] = json.loads(quad.object.value)
            self._legacy_subs = self._subs_dirty = True
        if self.path is not None and (self.path / _SUBSCRIPTIONS).exists():
            try:
                records = msgpack.unpackb((self.path / _SUBSCRIPTIONS).read_bytes(), raw=False)
                if not isinstance(records, dict):
                    raise ValueError("not a map of subscription records")
            except (ValueError, TypeError, msgpack.ExtraData) as exc:
                raise StoreError(f"corrupt subscription file {self.path / _SUBSCRIPTIONS}: {exc}; move it away") from None
            self._subs.update(records)
        if self.path is not None and (self.path / _MAILBOXES).exists():
            try:
                self.mailboxes.load((self.path / _MAILBOXES).read_bytes())
            except (ValueError, TypeError) as exc:
                raise StoreError(f"corrupt mailbox file {self.path / _MAILBOXES}: {exc}; move it away") from None
        self._count_all()

    def _count_all(self) -> None:
        self.committed_quads = sum(i.held for i in self._events.values() if i.committed)
        self.pending_quads = sum(i.held for i in self._events.values() if not i.committed)

    def _recount(self, graphs: set[str]) -> None:
        """After a crash, the events the log's replay touched hold what the store holds. The log
        replays writes the store may have applied already (its data survives a kill, the events'
        counts are written at checkpoints): an add found its quads there and counted none of
        them, a removal found them gone, and the peer came back counting short: count() and
        status off by what the replay missed."""
        for graph in graphs:
            info = self._events.get(graph)
            if info is None:
                continue
            held = sum(1 for _ in self._store.quads_for_pattern(None, None, None, ox.NamedNode(graph)))
            if held == 0:
                self._forget(graph)
            elif held != info.held:
                self._put_info(graph, replace(info, held=held))
        self._count_all()

    # --- reads ------------------------------------------------------------------------------

    def event_info(self, graph: IRI | str) -> EventInfo | None:
        return self._events.get(graph if type(graph) is str else graph.value)  # type: ignore[union-attr]

    def events(self) -> dict[str, EventInfo]:
        return dict(self._events)

    def pending(self) -> dict[str, EventInfo]:
        # dict() copies in one step of the interpreter: a write running in a worker thread may
        # change the events meanwhile (iterating the live dict would fail)
        return {g: i for g, i in dict(self._events).items() if not i.committed}

    def decision(self, key: str) -> str | None:
        found = self._decisions.get(key)
        return found[0] if found else None

    def decisions(self) -> dict[str, tuple[str, list[str]]]:
        return dict(self._decisions)

    def find(self, g: Term | None, s: Term | None, p: Term | None, o: Term | None, *,
             committed_only: bool = False) -> Iterator[Quad]:
        """Stored data quads matching a pattern (None = any); never the reserved graphs.
        `committed_only`: only quads of committed events (what queries may see)."""
        events = self._events
        for quad in self._matching(g, s, p, o):
            if committed_only:
                info = events.get(quad.graph_name.value)
                if info is None or not info.committed:
                    continue
            yield quad_from_ox(quad)

    def _matching(self, g: Term | None, s: Term | None, p: Term | None, o: Term | None) -> Iterator[ox.Quad]:
        """The store's quads matching a pattern, but those of the reserved graphs."""
        if any(t is not None and type(t) is not IRI for t in (g, s, p)):
            return  # only IRIs can be graphs, subjects or predicates: nothing matches
        graph = ox.NamedNode(g.value) if g is not None else None
        if g is not None and g.value in RESERVED_GRAPHS:
            return
        for quad in self._store.quads_for_pattern(
            to_ox(s) if s is not None else None,
            ox.NamedNode(p.value) if p is not None else None,
            to_ox(o) if o is not None else None,
            graph,
        ):
            if quad.graph_name.value not in RESERVED_GRAPHS:
                yield quad

    def estimate(self, g: Term | None, s: Term | None, p: Term | None, o: Term | None) -> int:
        """How many quads the store holds matching a pattern, pending ones included (a query
        planner's guess, counted in the store without building a quad per match)."""
        if any(t is not None and type(t) is not IRI for t in (g, s, p)):
            return 0
        # a SPARQL count runs in the store's own code: a third of the time of iterating matches
        terms = [t.n3() if t is not None else f"?{name}" for t, name in zip((g, s, p, o), "gspo")]
        result = self._store.query(f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH {terms[0]} {{ {' '.join(terms[1:])} }} }}")
        return int(next(iter(result))["n"].value)  # type: ignore[index, union-attr]

    def find_list(self, g: Term | None, s: Term | None, p: Term | None, o: Term | None,
                  committed_only: bool = False) -> list[Quad]:
        return list(self.find(g, s, p, o, committed_only=committed_only))

    def sample(self, pick: Callable[[list[Any]], Sequence[Any]]) -> list[Quad]:
        """The data quads `pick` chooses among all of them (e.g. `overlay.balance.evenly`): the
        store's own quads are listed, and only those picked become model quads (a survey of the
        zone's data cut read every quad held, at each light peer's look)."""
        return [quad_from_ox(quad) for quad in pick(list(self._matching(None, None, None, None)))]

    def count(self) -> int:
        """Quads of committed events held here (a counter, not a scan)."""
        return self.committed_quads

    def held(self) -> int:
        """Every quad held here, of committed events and of events still pending (the load a
        split or a move takes into account: an owner no subscription needed commits later)."""
        return self.committed_quads + self.pending_quads

    def iter_rows(self, text: str, visible: list[str] | None, limit: int | None,
                  functions: Any = None) -> Iterator[dict[str, Any]]:
        """`iter_rows` over this store's event graphs (see there: one thread, start to end)."""
        return iter_rows(self._store, text, visible, limit, functions)

    def iter_wire_quads(self, pattern: tuple[Any, Any, Any, Any], keep: Callable[[list[Any]], bool]
                        ) -> Iterator[list[Any]]:
        """The data quads matching `pattern` that `keep` keeps, in `find`'s wire form, one at a
        time, written straight from the store's terms (building and checking a model quad per
        match cost 29 µs; blocking; one thread, start to end, as `iter_rows`)."""
        for quad in self._matching(*pattern):
            wire = [quad.graph_name.value, _wire_term(quad.subject), quad.predicate.value, _wire_term(quad.object)]
            if keep(wire):
                yield wire

    def wire_triples(self, graph: str) -> list[list[Any]]:
        """The triples of one event graph held here, in the wire form (a copy's: decoding them
        into model terms to encode them again cost most of a zone copy)."""
        if graph in RESERVED_GRAPHS:
            return []
        return [[_wire_term(q.subject), q.predicate.value, _wire_term(q.object)]
                for q in self._store.quads_for_pattern(None, None, None, ox.NamedNode(graph))]

    def query_rows(self, text: str, visible: list[str] | None, limit: int | None, max_rows: int,
                   functions: Any = None) -> list[Any] | bool:
        """Run a SPARQL SELECT or ASK over the event graphs `visible` only, or every one (None; see
        `query_rows`)."""
        return query_rows(self._store, text, visible, limit, max_rows, functions)

    def subscriptions(self) -> dict[str, dict[str, Any]]:
        """The subscription records stored here, by id (read them, do not change them)."""
        return dict(self._subs)

    # --- writes -----------------------------------------------------------------------------

    def write(self, mutations: list[Mutation]) -> list[Any]:
        """Log the mutations durably, then apply them; the result of each."""
        return self.write_many([mutations])[0]

    def write_many(self, batches: list[list[Mutation]], durable: bool = True,
                   defer_mailboxes: bool = False) -> list[list[Any]]:
        """Several writers' batches with one fsync (group commit); `durable=False` leaves the log
        unsynced (for marks that can be derived again, such as commit and notified). A malformed
        mutation (from a replica request) is refused before anything is logged or applied.
        `defer_mailboxes`: log mailbox mutations but leave applying them to the caller (the event
        loop, which reads mailboxes, while this runs in a worker thread)."""
        for batch in batches:
            for mutation in batch:
                check_mutation(mutation)
        if self._wal is not None:
            try:
                self._wal.append(batches, sync=durable)
            except OSError as exc:
                raise StoreError(f"cannot write the log of {self.path}: {_why(exc)}") from None
        try:
            if defer_mailboxes:
                return [[None if m[0] in mb.SHAPES else self._apply(m) for m in batch] for batch in batches]
            return [[self._apply(m) for m in batch] for batch in batches]
        except OSError as exc:
            # Logged already: the log is replayed at the next start, so nothing it holds is lost;
            # this write's caller is told, typed (it was an `internal` error with a traceback).
            raise StoreError(f"cannot write the store of {self.path}: {_why(exc)} (the write is in its log, "
                             f"applied again at the next start)") from None

    def apply_mailboxes(self, batches: list[list[Mutation]], results: list[list[Any]]) -> None:
        """Apply the mailbox mutations `write_many(defer_mailboxes=True)` logged, filling `results`."""
        for batch, result in zip(batches, results):
            for index, mutation in enumerate(batch):
                if mutation[0] in mb.SHAPES:
                    result[index] = self.mailboxes.apply(mutation)

    def checkpoint(self) -> None:
        """Make everything in the store durable and empty the log."""
        self._persist_meta()
        if self._wal is not None:
            self._records.flush()
            self._store.flush()
            if self.mailboxes.dirty:
                write_atomically(self.path / _MAILBOXES, self.mailboxes.dump())  # type: ignore[operator]
                self.mailboxes.dirty = False
            if self._subs_dirty:
                write_atomically(self.path / _SUBSCRIPTIONS, msgpack.packb(self._subs))  # type: ignore[operator]
                self._subs_dirty = False
                if self._legacy_subs:   # now in the file: the older layout's copy goes
                    for quad in list(self._store.quads_for_pattern(None, _RECORD, None, _SUBS)):
                        self._store.remove(quad)
                    self._store.flush()
                    self._legacy_subs = False
            self._wal.truncate()

    @property
    def log_size(self) -> int:
        return self._wal.size if self._wal is not None else 0

    def _apply(self, mutation: Mutation) -> Any:
        kind = mutation[0]
        if kind == "add":
            _, graph, triples, size, published, committed, tx = mutation
            iri = trusted_iri(graph)
            return self._add(graph, [triple_from_wire(iri, t, trusted=True) for t in triples], size, published,
                             committed, attempts_of(tx))
        if kind == "commit":
            info = self._events.get(mutation[1])
            if info is None or info.committed:
                return False
            self._put_info(mutation[1], replace(info, committed=True, tx=None))
            self.pending_quads -= info.held
            self.committed_quads += info.held
            return True
        if kind == "notified":
            info = self._events.get(mutation[1])
            if info is not None and not info.notified:
                self._put_info(mutation[1], replace(info, notified=True))
            return info is not None
        if kind == "abort":
            info = self._events.get(mutation[1])
            if info is None or info.committed:
                return 0
            if len(mutation) > 2 and any(key not in mutation[2] for key, _ in info.tx or ()):
                return 0   # a new attempt joined meanwhile: it decides
            return self._drop_event(mutation[1])
        if kind == "delete":
            return self._drop_event(mutation[1])
        if kind == "remove":
            return self._remove(mutation[1], mutation[2])
        if kind == "sub":
            self._subs[mutation[1]] = mutation[2]
            self._subs_dirty = True
            return True
        if kind == "unsub":
            found = self._subs.pop(mutation[1], None) is not None
            self._subs_dirty |= found
            return found
        if kind in mb.SHAPES:
            return self.mailboxes.apply(mutation)
        if kind == "decide":
            _, key, decision, point = mutation
            if key in self._decisions:
                return self._decisions[key][0]  # the first decision stands
            self._decisions[key] = (decision, point)
            self.claims += key.startswith(CLAIM_PREFIX)
            self._records.put_decision(key, json.dumps([decision, point]))
            return decision
        if kind == "release":
            found = self._decisions.pop(mutation[1], None) is not None
            if found:
                self._records.drop_decision(mutation[1])
                self.claims -= mutation[1].startswith(CLAIM_PREFIX)
            return found
        raise ValueError(f"unknown store mutation {kind!r}")

    def _add(self, graph: str, quads: list[Quad], size: int, published: int, committed: bool,
             tx: tuple[Attempt, ...]) -> tuple[list[Quad], bool]:
        """(quads not held here before, whether the event is new here)."""
        info = known = self._events.get(graph)
        node = ox.NamedNode(graph)
        # Quads of an event unknown here may be held all the same (metadata lost by an older
        # version): found with one lookup, they are counted, never taken for new. And a quad
        # named twice is one quad.
        held = self._store_graph(node) if info is not None or holds_any(self._store, None, None, node) else set()
        fresh, seen = [], set()
        for quad in quads:
            stored = quad_to_ox(quad)
            if stored not in held and stored not in seen:
                seen.add(stored)
                fresh.append(quad)
        self._store.extend(seen)
        if info is None:
            # what was held before is counted as the event's state says (committed or not)
            info = EventInfo(size, published, committed, False, None if committed else (tx or None), len(fresh))
            if held:
                info = replace(info, held=len(fresh) + len(held))
                if committed:
                    self.committed_quads += len(held)
                else:
                    self.pending_quads += len(held)
        else:
            became = committed and not info.committed
            info = replace(info, held=info.held + len(fresh), committed=info.committed or committed,
                           # a retry's attempt joins those known: any of them may be the one that commits
                           tx=None if (info.committed or committed) else (with_attempts(info.tx or (), tx) or None))
            if became:
                self.pending_quads -= info.held - len(fresh)
                self.committed_quads += info.held - len(fresh)
        if info.committed:
            self.committed_quads += len(fresh)
        else:
            self.pending_quads += len(fresh)
        self._put_info(graph, info)
        return fresh, known is None or info.held == len(fresh)

    def _store_graph(self, node: ox.NamedNode) -> set[ox.Quad]:
        return set(self._store.quads_for_pattern(None, None, None, node))

    def _remove(self, graph: str, triples: list[Any]) -> int:
        info = self._events.get(graph)
        iri = trusted_iri(graph)
        present = self._store_graph(ox.NamedNode(graph))
        gone = 0
        for triple in triples:
            quad = quad_to_ox(triple_from_wire(iri, triple, trusted=True))
            if quad in present:
                self._store.remove(quad)
                present.discard(quad)   # named twice, removed once
                gone += 1
        if info is None:
            # Quads without their event's metadata (an older version lost it) are removed all the
            # same when named: left, they stayed outside their peer's zone after a handover.
            return gone
        if info.committed:
            self.committed_quads -= gone
        else:
            self.pending_quads -= gone
        # What is left is counted from the store, not from the event's count: an event whose
        # count had fallen below the quads held (seen: 1 of 10) was forgotten here with quads
        # left, and after a restart its peer counted them nowhere (9,770 quads on one peer).
        if not present:
            self._forget(graph)
        elif len(present) != info.held or gone:
            self._put_info(graph, replace(info, held=len(present)))
        return gone

    def _drop_event(self, graph: str) -> int:
        info = self._events.get(graph)
        node = ox.NamedNode(graph)
        quads = list(self._store.quads_for_pattern(None, None, None, node))
        for quad in quads:
            self._store.remove(quad)
        if info is not None:
            if info.committed:
                self.committed_quads -= info.held
            else:
                self.pending_quads -= info.held
            self._forget(graph)
        return len(quads)

    def _put_info(self, graph: str, info: EventInfo) -> None:
        # In memory; the log makes it durable, a checkpoint writes it to the store.
        self._events[graph] = info
        self._dirty.add(graph)
        if info.published > self.latest_published:
            self.latest_published = info.published

    def _forget(self, graph: str) -> None:
        if self._events.pop(graph, None) is not None:
            self._dirty.add(graph)

    def _persist_meta(self) -> None:
        """Write the metadata of the events changed since the last checkpoint into the store."""
        for graph in self._dirty:
            info = self._events.get(graph)
            self._records.put_event(graph, json.dumps(info.to_json()) if info is not None else None)
        self._dirty.clear()

    def close(self) -> None:
        try:
            self.checkpoint()
        finally:
            if self._wal is not None:
                self._wal.close()
            self._records.close()
            del self._store

    # --- conveniences for tests and tools (each one durable write) ---------------------------------

    def add_quads(self, graph: IRI, quads: Iterable[Quad], size: int, published: int) -> bool:
        """Store quads of one committed event; False if the event was already known here."""
        return self.write([add(graph.value, list(quads), size, published, committed=True)])[0][1]

    def store_quads(self, graph: IRI, quads: list[Quad], size: int, published: int) -> tuple[list[Quad], bool]:
        return self.write([add(graph.value, quads, size, published, committed=True)])[0]

    def remove_quads(self, quads: Iterable[Quad]) -> None:
        by_graph: dict[str, list[Quad]] = {}
        for quad in quads:
            by_graph.setdefault(quad.g.value, []).append(quad)
        self.write([remove(g, qs) for g, qs in by_graph.items()])

    def delete_event(self, graph: IRI) -> int:
        return self.write([delete(graph.value)])[0]

    def put_subscription(self, ident: str, record: dict[str, Any]) -> None:
        self.write([put_subscription(ident, record)])

    def remove_subscription(self, ident: str) -> bool:
        return self.write([drop_subscription(ident)])[0]


_MAILBOXES = "mailboxes.msgpack"
_SUBSCRIPTIONS = "subscriptions.msgpack"


_LANG_STRING = Literal("x", language="en").datatype   # the datatype the model gives a language-tagged literal


def _wire_term(term: Any) -> Any:
    """A stored term as `wire.codec.term_to_wire` writes the model's (the store holds IRIs and
    literals only: blank nodes are skolem IRIs)."""
    if type(term) is ox.NamedNode:
        return term.value
    if term.language:
        return [term.value, _LANG_STRING, term.language]
    return [term.value, term.datatype.value]


def _why(exc: OSError) -> str:
    full = exc.errno == errno.ENOSPC or "No space left on device" in str(exc)   # oxigraph's IO errors carry no errno
    return "the disk is full" if full else (exc.strerror or str(exc))


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data`: a crash leaves the old file or the new one, never half of one."""
    partial = path.with_suffix(".partial")
    with open(partial, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
