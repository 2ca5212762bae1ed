"""A peer store's own records, kept apart from its data: events' states and publication decisions.

Kept in named graphs of the data store, they would have to be kept out of every answer: each
pushed-down query would name the visible event graphs as its dataset, a cost (0.13–0.2 s on a
peer of 20,000 events) that grows with every event stored, whatever the query asks. In a store
of their own (`records/` inside the store's folder; in memory beside a store in memory), the
data store holds event graphs only, and a query with nothing pending reads it whole.

A store whose records are still in named graphs of the data store (`urn:eventcloud:meta`,
`urn:eventcloud:decisions`, the first layout) is carried over when opened (`carry_over`): the records are copied
and flushed first, then removed from the data store, so a crash in between leaves both copies
and the next start carries over again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyoxigraph as ox

from peers.store.mutations import DECISIONS_GRAPH, META_GRAPH

__all__ = ["Records", "INFO", "OLD_SIZE", "OLD_PUBLISHED", "holds_any"]

INFO = ox.NamedNode("urn:eventcloud:info")
DECISION = ox.NamedNode("urn:eventcloud:decision")
# the layout of stores written before event states existed (size and publication time)
OLD_SIZE = ox.NamedNode("urn:eventcloud:size")
OLD_PUBLISHED = ox.NamedNode("urn:eventcloud:published")

_META = ox.NamedNode(META_GRAPH)
_DECISIONS = ox.NamedNode(DECISIONS_GRAPH)
_HERE = ox.DefaultGraph()
_TX = "urn:eventcloud:tx:"
_EVENT_STATE = (INFO, OLD_SIZE, OLD_PUBLISHED)


def holds_any(store: ox.Store, subject: ox.NamedNode | None, predicate: ox.NamedNode | None,
              graph: ox.NamedNode | ox.DefaultGraph) -> bool:
    """Whether `store` holds a quad matching (one lookup, none built beyond the first)."""
    return next(iter(store.quads_for_pattern(subject, predicate, None, graph)), None) is not None


class Records:
    def __init__(self, path: Path | None) -> None:
        if path is not None:
            path.mkdir(parents=True, exist_ok=True)
            self._store = ox.Store(str(path))
        else:
            self._store = ox.Store()

    def carry_over(self, data: ox.Store) -> bool:
        """Move records an older version kept in `data`'s reserved graphs here; whether any were."""
        old = [q for graph in (_META, _DECISIONS) for q in data.quads_for_pattern(None, None, None, graph)]
        if not old:
            return False
        # a subject recorded here already was carried over before a crash, then maybe written since:
        # the record here stands
        copies = [ox.Quad(q.subject, DECISION if q.graph_name == _DECISIONS else q.predicate, q.object, _HERE)
                  for q in old]
        self._store.extend([q for q in copies if not self._holds(q.subject, q.predicate == DECISION)])
        self._store.flush()
        for quad in old:
            data.remove(quad)
        data.flush()
        return True

    def _holds(self, subject: ox.NamedNode, decision: bool) -> bool:
        return any(holds_any(self._store, subject, p, _HERE) for p in ((DECISION,) if decision else _EVENT_STATE))

    def event_quads(self) -> Iterator[ox.Quad]:
        """(event graph, INFO | OLD_SIZE | OLD_PUBLISHED, value) of every event recorded."""
        for predicate in _EVENT_STATE:
            yield from self._store.quads_for_pattern(None, predicate, None, _HERE)

    def decisions(self) -> Iterator[tuple[str, str]]:
        """(attempt key, the decision's JSON) of every decision recorded."""
        for quad in self._store.quads_for_pattern(None, DECISION, None, _HERE):
            yield quad.subject.value.removeprefix(_TX), quad.object.value

    def put_event(self, graph: str, state: str | None) -> None:
        """Record an event's state (JSON), or forget the event (None)."""
        node = ox.NamedNode(graph)
        for predicate in _EVENT_STATE:
            for quad in list(self._store.quads_for_pattern(node, predicate, None, _HERE)):
                self._store.remove(quad)
        if state is not None:
            self._store.add(ox.Quad(node, INFO, ox.Literal(state), _HERE))

    def put_decision(self, key: str, decision: str) -> None:
        self._store.add(ox.Quad(ox.NamedNode(_TX + key), DECISION, ox.Literal(decision), _HERE))

    def drop_decision(self, key: str) -> None:
        for quad in list(self._store.quads_for_pattern(ox.NamedNode(_TX + key), DECISION, None, _HERE)):
            self._store.remove(quad)

    def flush(self) -> None:
        self._store.flush()

    def close(self) -> None:
        del self._store
